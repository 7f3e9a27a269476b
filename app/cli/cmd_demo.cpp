// `ragraph demo`: the short headless tour run.sh gives on a machine without a display. It opens
// the default corpus through the engine facade, looks up test questions of every type on the
// worker pool, prints each with its gold passages and answers; when the shipped model, embedder
// and passage index are there, serves those questions through every built-in workflow (hedra
// policy; --model and --method choose the model and every retrieval node's method) and prints
// each request's stages and each workflow's accuracy (HyDE's, Multistep's and RECOMP's prompts
// are outside what the default model was trained on: the opt-in role model answers them, issue
// 21); and exports the engine's trace as Chrome-trace JSON (open it in Perfetto).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "rag/corpus.h"
#include "rag/engine.h"
#include "rag/workflow.h"
#include "serve_run.h"
#include "telemetry/chrome_trace.h"
#include "workload/driver.h"

namespace rag::cli {

int cmdDemo(Args& args) {
  EngineParams params = defaultEngineParams();
  if (auto c = args.get("corpus")) params.corpus = *c;
  auto perType = args.getInt("requests", 2);
  std::string traceOut = args.getOr("trace-out", (defaultDataDir() / "demo-trace.json").string());
  const std::filesystem::path modelDir = args.getOr("model", defaultModelDirectory().string());
  const bool modelGiven = args.get("model").has_value();
  const Result<std::optional<RetrievalMethod>> methodArg = retrievalMethodArg(args);
  if (!methodArg) return fail(methodArg.status());
  const std::optional<RetrievalMethod> method = *methodArg;
  if (!perType) return fail(perType.status());
  if (*perType < 1 || *perType > 1000) return fail(Status::invalidArgument("--requests must be between 1 and 1000"));
  if (Status s = args.finish(); !s) return fail(s);

  // Serving when everything it needs is present; the lookups run either way.
  std::error_code ec;
  if (modelGiven && !std::filesystem::exists(modelDir / "config.json", ec))
    return fail(Status::notFound("--model: no model at " + modelDir.string() +
                                 " (its config.json is missing); give a model directory such as datasets/models/rag-llama-roles"));
  const bool canServe = std::filesystem::exists(modelDir / "config.json", ec) &&
                        std::filesystem::exists(defaultEmbedderDirectory() / "config.json", ec) &&
                        std::filesystem::exists(params.corpus.string() + ".index.ivf", ec);
  std::vector<WorkflowGraph> graphs;  // what the demo serves, kAllWorkflows' (--method: every retrieval node)
  for (Workflow w : kAllWorkflows) {
    graphs.push_back(*builtinWorkflow(w));  // compiled in and tested: always parses
    if (method) graphs.back().setRetrievalMethod(*method);
  }
  if (canServe) {
    std::vector<const WorkflowGraph*> served;
    for (const WorkflowGraph& g : graphs) served.push_back(&g);
    if (Status s = prepareLexicalIndex(params.corpus, served); !s) return fail(s);
    params.serving.modelDir = modelDir;
    params.serving.embedderDir = defaultEmbedderDirectory();
    params.serving.policy = *parseServePolicy("hedra");
  }
  auto engine = Engine::create(params);
  if (!engine && canServe) {
    std::fprintf(stderr, "serving is off (%s); showing lookups only\n", engine.status().message().c_str());
    params.serving = ServingParams{};
    engine = Engine::create(params);
  }
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
  std::vector<QaItem> items;
  for (auto& f : lookups) {
    Result<QaItem> item = f.get();
    if (!item) return fail(item.status());
    items.push_back(*item);
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

  if (e.serving()) {
    std::printf("Serving the same questions through every built-in workflow (hedra: sub-stage retrieval, "
                "speculation, cluster reordering):\n\n");
    std::vector<std::pair<Workflow, int>> scores;
    for (size_t wi = 0; wi < std::size(kAllWorkflows); ++wi) {
      const Workflow w = kAllWorkflows[wi];
      const WorkflowGraph* graph = &graphs[wi];
      // Through the one workload driver, every question arriving at once (a closed batch).
      std::vector<workload::TraceRequest> trace;
      for (const QaItem& item : items)
        trace.push_back({.id = static_cast<int64_t>(trace.size()), .arrivalS = 0, .workflow = w, .qaId = item.id,
                         .question = item.question, .answers = item.answers,
                         .type = item.type});
      std::vector<RequestHandle> handles;
      for (workload::Submission& s : workload::replayTrace(trace, [&](const workload::TraceRequest& r) {
             return e.submit(r.question, *graph);
           })) {
        if (!s.handle) return fail(s.handle.status());
        handles.push_back(*s.handle);
      }
      int correct = 0;
      for (size_t i = 0; i < handles.size(); ++i) {
        Result<RequestResult> r = handles[i].wait();
        if (!r) return fail(r.status());
        const bool ok = answerContainsGold(r->answer, items[i].answers);
        correct += ok;
        std::string stages;
        for (const StageTiming& t : r->stages)
          stages += (stages.empty() ? "" : " -> ") + t.node + " " + std::to_string(static_cast<int>((t.endSeconds - t.beginSeconds) * 1e3)) +
                    " ms" + (t.speculative ? " (spec)" : "");
        std::printf("[%s #%u] %s\n    answer: %s %s\n    %s; %.0f ms\n", std::string(workflowName(w)).c_str(),
                    handles[i].id(), items[i].question.c_str(), r->answer.c_str(), ok ? "(correct)" : "(wrong)",
                    stages.c_str(), r->latencySeconds * 1e3);
      }
      std::printf("%s: %d of %zu correct\n\n", std::string(workflowName(w)).c_str(), correct, handles.size());
      scores.emplace_back(w, correct);
    }
    std::printf("Accuracy on these %zu questions:", items.size());
    for (const auto& [w, correct] : scores)
      std::printf("  %s %d/%zu", std::string(workflowName(w)).c_str(), correct, items.size());
    std::printf("\n(`ragraph eval workflow --builtin NAME` measures it on the whole test split.)\n");
    if (!modelGiven && !method)
      std::printf("(The default model, datasets/models/rag-llama-roles-wide, on 1,000 test questions: "
                  "One-shot 0.615, IRG 0.617, Multistep 0.593, HyDE 0.600, RECOMP 0.675.)\n");
    std::printf("\n");
  } else {
    std::printf("(Serving needs a model (%s), an embedder (%s) and the passage index: "
                "`ragraph index build`.)\n\n",
                modelDir.string().c_str(), defaultEmbedderDirectory().string().c_str());
  }
  e.shutdown();

  std::vector<TraceEvent> spans;
  e.drainTrace(spans);
  if (Status s = saveChromeTrace(traceOut, spans, e.traceLanes()); !s) return fail(s);
  std::printf("%zu lookups on the worker pool in %.1f ms; %zu trace spans written to %s "
              "(open it in Perfetto or chrome://tracing)\n",
              lookups.size(), secs * 1e3, spans.size(), traceOut.c_str());
  return 0;
}

}  // namespace rag::cli
