// `ragraph eval workflow`: how well a RAGraph workflow answers, through the serving engine.
//
// The split's questions (--limit of them, spread over its question types) are submitted at once
// to one engine serving the workflow (a built-in or a file) under --mode, and every answer is
// scored with the accuracy rule of every evaluation (a gold answer string in the answer). Reports
// accuracy overall and per question type, and per request the retrievals run and the tokens
// generated (the workflow's cost), JSON with --json. --answers FILE writes every question's
// answer and variables (JSON Lines, in the questions' order), to see where a workflow goes wrong.
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/qa_prompt.h"
#include "serve_run.h"
#include "workload/workload_trace.h"

namespace rag::cli {

namespace {

namespace fs = std::filesystem;

// One --answers line: the question, its gold answers, what the workflow answered (or why it
// failed), whether that counts as correct, every variable the workflow set (their last values)
// and every node run in order with what it wrote ("steps": a loop's earlier rounds too).
std::string answerLine(const workload::TraceRequest& q, const Result<RequestResult>& r, bool correct) {
  std::ostringstream out;
  JsonWriter w(out, false);
  w.beginObject();
  w.key("qa_id").value(q.qaId).key("type").value(q.type).key("question").value(q.question);
  w.key("gold").beginArray();
  for (const std::string& a : q.answers) w.value(a);
  w.endArray();
  if (r) {
    w.key("answer").value(r->answer).key("correct").value(correct);
    w.key("variables").beginObject();
    for (const auto& [name, value] : r->variables) w.key(name).value(value);
    w.endObject();
    w.key("steps").beginArray();
    for (const StageTiming& s : r->stages) w.beginObject().key("node").value(s.node).key("output").value(s.output).endObject();
    w.endArray();
  } else {
    w.key("error").value(r.status().message()).key("correct").value(false);
  }
  w.endObject();
  return out.str();
}

struct TypeTally {
  int64_t questions = 0, correct = 0, failed = 0;
  double accuracy() const { return questions > 0 ? static_cast<double>(correct) / static_cast<double>(questions) : 0.0; }
};

}  // namespace

int cmdEvalWorkflow(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const std::optional<std::string> builtin = args.get("builtin");
  const std::optional<std::string> file = args.get("file");
  const std::string split = args.getOr("split", "test");
  auto limit = args.getInt("limit", 400);
  auto nprobe = args.getInt("nprobe", 128);
  const bool json = args.flag("json");
  auto method = retrievalMethodArg(args);
  auto rerank = retrievalRerankArg(args);
  const std::optional<std::string> answersPath = args.get("answers");
  auto serving = readServingParams(args, "hedra");
  if (!serving) return fail(serving.status());
  if (!limit) return fail(limit.status());
  if (!method) return fail(method.status());
  if (!rerank) return fail(rerank.status());
  if (!nprobe) return fail(nprobe.status());
  if (Status st = args.finish(); !st) return fail(st);
  if (builtin.has_value() == file.has_value())
    return fail(Status::invalidArgument("name the workflow: --builtin NAME (" + builtinWorkflowNames() + ", or a variant: " +
                                        workflowVariantNames() + "), or --file FILE"));
  if (*limit < 1) return fail(Status::invalidArgument("--limit must be at least 1"));
  if (*nprobe < 1) return fail(Status::invalidArgument("--nprobe must be at least 1"));
  if (answersPath) {  // refused before any work rather than after it
    const fs::path where = fs::absolute(*answersPath).parent_path();
    if (answersPath->empty() || fs::is_directory(*answersPath) || !fs::is_directory(where))
      return fail(Status::invalidArgument("--answers " + *answersPath +
                                          ": give a file in an existing directory (JSON Lines, one question a line)"));
  }

  Result<WorkflowGraph> graph = loadWorkflowChoice(builtin, file.value_or(""));
  if (!graph) return fail(graph.status());
  if (*method) graph->setRetrievalMethod(**method);  // every retrieval node through this retriever
  if (*rerank) graph->setRetrievalRerank(**rerank);
  if (Status v = graph->validate(); !v) return fail(v);
  const std::string name = builtin ? *builtin : std::filesystem::path(*file).stem().string();

  auto items = workload::loadQaItems(corpusPath, split);  // names the splits there are when empty
  if (!items) return fail(items.status());
  std::vector<int64_t> ids;
  for (const workload::QaItem& q : *items) ids.push_back(q.id);
  std::map<int64_t, const workload::QaItem*> byId;
  for (const workload::QaItem& q : *items) byId[q.id] = &q;
  std::vector<workload::TraceRequest> trace;
  for (int64_t id : spreadEvenly(ids, *limit)) {  // ids are grouped by type: each keeps its share
    const workload::QaItem& q = *byId.at(id);
    trace.push_back({.id = static_cast<int64_t>(trace.size()), .arrivalS = 0, .qaId = q.id, .topicEntity = q.topicEntity,
                     .question = q.question, .answers = q.answers, .type = q.type});
  }

  serving->nprobe = *nprobe;
  serving->maxLiveRequests = std::max<int32_t>(serving->maxLiveRequests, static_cast<int32_t>(trace.size()));
  const WorkflowGraph* served[] = {&*graph};
  if (Status s = prepareLexicalIndex(corpusPath, served); !s) return fail(s);
  std::fprintf(stderr, "loading the model, the embedder and the passage index...\n");
  auto assets = loadServingAssets(*serving, corpusPath);
  if (!assets) return fail(assets.status());
  std::fprintf(stderr, "answering %zu %s questions through %s (%s)...\n", trace.size(), split.c_str(), name.c_str(),
               servePolicyName(serving->policy).c_str());

  std::map<std::string, TypeTally> byType;
  TypeTally all;
  int64_t retrievals = 0, generated = 0;
  std::vector<std::pair<size_t, std::string>> examples;  // a few answers to show
  std::vector<std::string> answerLines(answersPath ? trace.size() : 0);  // --answers, by question
  const Stopwatch wall;
  auto f = serveRun(
      *assets, corpusPath, *serving, trace, [&](const workload::TraceRequest&) { return &*graph; }, 1e9, {},
      [&](size_t i, const Result<RequestResult>& r) {
        const workload::TraceRequest& q = trace[i];
        TypeTally& t = byType[q.type];
        ++t.questions, ++all.questions;
        const bool ok = r && corpus::answerMatches(r->answer, q.answers);
        if (answersPath) answerLines[i] = answerLine(q, r, ok);
        if (!r) {
          ++t.failed, ++all.failed;
          return;
        }
        t.correct += ok, all.correct += ok;
        for (const StageTiming& s : r->stages) {
          if (s.kind == NodeKind::Retrieval) ++retrievals;
          else generated += s.work;
        }
        if (examples.size() < 4 && i % std::max<size_t>(1, trace.size() / 4) == 0) examples.emplace_back(i, r->answer);
      });
  if (!f) return fail(f.status());
  const double seconds = wall.elapsedSeconds();
  if (answersPath) {
    std::string text;
    for (const std::string& line : answerLines) text += line + "\n";
    if (Status st = writeFileAtomic(*answersPath, text); !st) return fail(st);
    std::fprintf(stderr, "answers written to %s\n", answersPath->c_str());
  }
  const double n = static_cast<double>(std::max<int64_t>(1, all.questions - all.failed));

  if (json) {
    std::ostringstream out;
    JsonWriter w(out, true);
    w.beginObject();
    w.key("workflow").value(name).key("split").value(split).key("mode").value(servePolicyName(serving->policy));
    // What the retrieval nodes searched with, and how they ordered what they found.
    auto used = [&](auto name) {
      std::set<std::string_view> names;
      for (const WorkflowNode& node : graph->nodes())
        if (node.kind == NodeKind::Retrieval) names.insert(name(node.retrieval));
      std::string s;
      for (std::string_view m : names) s += (s.empty() ? "" : ",") + std::string(m);
      return s.empty() ? std::string("none") : s;
    };
    w.key("method").value(used([](const RetrievalOptions& r) { return retrievalMethodName(r.method); }));
    w.key("rerank").value(used([](const RetrievalOptions& r) { return retrievalRerankName(r.rerank); }));
    w.key("questions").value(all.questions).key("failed").value(all.failed);
    w.key("accuracy").value(all.accuracy());
    w.key("by_type").beginObject();
    for (const auto& [type, t] : byType) w.key(type).value(t.accuracy());
    w.endObject();
    w.key("questions_by_type").beginObject();
    for (const auto& [type, t] : byType) w.key(type).value(t.questions);
    w.endObject();
    w.key("retrievals_per_request").value(static_cast<double>(retrievals) / n);
    w.key("generated_tokens_per_request").value(static_cast<double>(generated) / n);
    w.key("model").value(serving->modelDir.string()).key("nprobe").value(*nprobe);
    w.key("seconds").value(seconds);
    w.endObject();
    out << "\n";
    std::cout << out.str();
    return 0;
  }
  std::printf("%s on %lld %s questions (%s): accuracy %.3f", name.c_str(), static_cast<long long>(all.questions),
              split.c_str(), servePolicyName(serving->policy).c_str(), all.accuracy());
  if (all.failed > 0) std::printf(" (%lld failed)", static_cast<long long>(all.failed));
  std::printf("\n");
  for (const auto& [type, t] : byType)
    std::printf("  %-11s %.3f  (%lld questions)\n", type.c_str(), t.accuracy(), static_cast<long long>(t.questions));
  std::printf("per request: %.2f retrievals, %.1f generated tokens; %.1f s\n", static_cast<double>(retrievals) / n,
              static_cast<double>(generated) / n, seconds);
  for (const auto& [i, answer] : examples)
    std::printf("  e.g. [%s] %s -> %s\n", trace[i].type.c_str(), trace[i].question.c_str(), answer.c_str());
  return 0;
}

}  // namespace rag::cli
