// `ragraph demo`: the short headless tour run.sh gives on a machine without a display. It opens
// the default corpus through the engine facade, looks up test questions of every type on the
// worker pool, prints each with its gold passages and answers, and exports the workers' trace
// as Chrome-trace JSON (open it in Perfetto).
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "rag/engine.h"
#include "telemetry/chrome_trace.h"

namespace rag::cli {

int cmdDemo(Args& args) {
  EngineParams params = defaultEngineParams();
  if (auto c = args.get("corpus")) params.corpus = *c;
  auto perType = args.getInt("requests", 2);
  std::string traceOut = args.getOr("trace-out", (defaultDataDir() / "demo-trace.json").string());
  if (!perType) return fail(perType.status());
  if (*perType < 1 || *perType > 1000) return fail(Status::invalidArgument("--requests must be between 1 and 1000"));
  if (Status s = args.finish(); !s) return fail(s);

  auto engine = Engine::create(params);
  if (!engine) return fail(engine.status());
  Engine& e = **engine;
  const CorpusStats& st = e.corpusStats();
  std::printf("RAGraph Workbench demo\n");
  std::printf("corpus %s: %lld passages, %lld entities, %lld relations, %lld test questions\n\n",
              st.path.c_str(), static_cast<long long>(st.passages), static_cast<long long>(st.entities),
              static_cast<long long>(st.relations), static_cast<long long>(st.qaTotal("test")));

  // Spread the picks over each question type's id range, so the demo shows every kind.
  Stopwatch wall;
  std::vector<std::future<Result<QaItem>>> lookups;
  uint32_t requestId = 0;
  auto testTypes = st.qa.find("test");
  if (testTypes == st.qa.end()) return fail(Status::notFound("the corpus has no test questions; rebuild it with `ragraph corpus build`"));
  for (const auto& [type, count] : testTypes->second) {
    auto ids = e.listQa("test", type).get();
    if (!ids) return fail(ids.status());
    if (ids->empty()) continue;
    const size_t n = std::min<size_t>(static_cast<size_t>(*perType), ids->size());
    for (size_t i = 0; i < n; ++i)
      lookups.push_back(e.lookupQa((*ids)[(i * 7919 + 17) % ids->size()], ++requestId));
  }
  std::map<std::string, int> shown;
  for (auto& f : lookups) {
    Result<QaItem> item = f.get();
    if (!item) return fail(item.status());
    ++shown[item->type];
    std::printf("[%s] Q: %s\n", item->type.c_str(), item->question.c_str());
    for (const Passage& p : item->goldPassages) {
      std::string text = p.text.size() > 110 ? p.text.substr(0, 107) + "..." : p.text;
      std::printf("    gold passage %lld (%s@%lld): %s\n", static_cast<long long>(p.id), p.sourceFile.c_str(),
                  static_cast<long long>(p.sourceOffset), text.c_str());
    }
    std::string answers;
    for (const std::string& a : item->answers) answers += (answers.empty() ? "" : " | ") + a;
    std::printf("    answers: %s\n    kg path: %s\n\n", answers.c_str(), item->kgPath.c_str());
  }
  const double secs = wall.elapsedSeconds();
  e.shutdown();

  std::vector<TraceEvent> spans;
  e.drainTrace(spans);
  if (Status s = saveChromeTrace(traceOut, spans, e.traceLaneNames()); !s) return fail(s);
  std::printf("%zu lookups on the worker pool in %.1f ms; %zu trace spans written to %s "
              "(open it in Perfetto or chrome://tracing)\n",
              lookups.size(), secs * 1e3, spans.size(), traceOut.c_str());
  return 0;
}

}  // namespace rag::cli
