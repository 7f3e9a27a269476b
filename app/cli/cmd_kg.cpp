// `ragraph kg retrieve "question"`: what a knowledge-graph retrieval node finds for a question
// (knowledge/kg_retriever.h), shown the way a user checks it: the entities the question's
// n-grams matched and the one the embedder chose for each, the entities the passage search
// added, and each subgraph's kept paths in prompt order and its best pruned ones, with their
// cosine scores; then the dependency prompt's size against the flat one. Needs the corpus and
// the embedder, not the passage index.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "knowledge/kg_retriever.h"
#include "model/dep_prompt.h"
#include "model/tokenizer.h"
#include "model_choice.h"
#include "retriever.h"

namespace rag::cli {

int cmdKgRetrieve(Args& args) {
  const std::string corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const bool json = args.flag("json");
  auto subgraphs = args.getInt("subgraphs", 5);
  auto hops = args.getInt("hops", 2);
  auto fanout = args.getInt("fanout", 8);
  auto paths = args.getInt("paths", 30);
  auto showPruned = args.getInt("show-pruned", 3);
  auto embedderDir = readEmbedderDir(args);
  const std::string tokenizerPath = args.getOr("tokenizer", (defaultModelDir() / "tokenizer.json").string());
  for (auto* r : {&subgraphs, &hops, &fanout, &paths, &showPruned})
    if (!*r) return fail(r->status());
  if (!embedderDir) return fail(embedderDir.status());
  if (Status st = args.finish(); !st) return fail(st);
  if (args.positionals().size() != 1) return fail(Status::invalidArgument("usage: ragraph kg retrieve \"question\""));
  const std::string question = args.positionals()[0];
  const knowledge::KgParams params{.subgraphs = static_cast<int32_t>(*subgraphs),
                                   .hops = static_cast<int32_t>(*hops),
                                   .fanout = static_cast<int32_t>(*fanout),
                                   .topK = static_cast<int32_t>(*paths)};
  if (Status st = params.validate(); !st) return fail(st);

  const Stopwatch load;
  auto embedder = model::TextEmbedder::load(*embedderDir);
  if (!embedder) return fail(embedder.status());
  auto setup = KgSetup::open(corpusPath, **embedder);
  if (!setup) return fail(setup.status());
  auto tok = model::Tokenizer::load(tokenizerPath);
  if (!tok) return fail(tok.status());
  const double loadSeconds = load.elapsedSeconds();
  const std::shared_ptr<const knowledge::KnowledgeGraph>& kg = setup->graph;
  const Stopwatch sw;
  auto res = setup->retriever->retrieve(question, params);
  if (!res) return fail(res.status());
  const double seconds = sw.elapsedSeconds();
  model::GraphVariables graphs{{"graph", knowledge::subgraphTexts(*kg, res->subgraphs)}};
  Variables vars{{"question", question}, {"graph", model::flatGraphText(graphs["graph"])}};
  model::ElementTokens elements(*tok);
  auto dep = model::dependencyPrompt(elements, "Knowledge graph paths:\n{graph}Question: {question}\nAnswer:", vars, graphs);
  if (!dep || !dep->has_value()) return fail(dep ? Status::internal("the prompt lost its graph") : dep.status());
  const model::SegmentedPrompt& d = **dep;
  const auto source = [](knowledge::LinkSource s) { return s == knowledge::LinkSource::Name ? "name" : "passage"; };

  if (json) {
    std::ostringstream out;
    JsonWriter w(out);
    w.beginObject();
    w.key("question").value(question);
    w.key("note").value(res->note);
    w.key("seconds").value(seconds);
    w.key("name_candidates").beginArray();
    for (const knowledge::LinkedEntity& c : res->nameCandidates)
      w.beginObject().key("entity").value(int64_t{c.entity}).key("name").value(kg->name(c.entity))
          .key("matched").value(c.matched).key("score").value(c.score).endObject();
    w.endArray();
    w.key("subgraphs").beginArray();
    for (const knowledge::Subgraph& g : res->subgraphs) {
      w.beginObject();
      w.key("entity").value(int64_t{g.link.entity}).key("name").value(kg->name(g.link.entity));
      w.key("source").value(source(g.link.source)).key("score").value(g.link.score);
      w.key("cut_edges").value(g.cutEdges);
      w.key("paths").beginArray();
      for (const knowledge::KgPath& p : g.paths)
        w.beginObject().key("text").value(knowledge::pathText(*kg, p)).key("score").value(p.score).key("kept").value(p.kept).endObject();
      w.endArray();
      w.endObject();
    }
    w.endArray();
    w.key("prompt_tokens").beginObject().key("flat").value(d.flatTokens)
        .key("dependency").value(d.contextTokens() + static_cast<int64_t>(d.tail.size())).endObject();
    w.endObject();
    std::cout << out.str() << "\n";
    return 0;
  }
  std::printf("loaded the graph (%lld entities, %lld edges), the embedder and BM25 in %.1f s; retrieved in %.0f ms\n",
              static_cast<long long>(kg->stats().entities), static_cast<long long>(kg->stats().edges), loadSeconds,
              seconds * 1e3);
  if (!res->note.empty()) std::printf("note: %s\n", res->note.c_str());
  for (const knowledge::LinkedEntity& c : res->nameCandidates)
    std::printf("  \"%s\" -> #%d %s (%.3f)\n", c.matched.c_str(), c.entity, std::string(kg->name(c.entity)).c_str(), c.score);
  for (const knowledge::Subgraph& g : res->subgraphs) {
    int kept = 0;
    for (const knowledge::KgPath& p : g.paths) kept += p.kept;
    std::printf("\nsubgraph of #%d %s (by %s, %.3f): %d of %zu paths kept%s\n", g.link.entity,
                std::string(kg->name(g.link.entity)).c_str(), source(g.link.source), g.link.score, kept, g.paths.size(),
                g.cutEdges > 0 ? (", " + std::to_string(g.cutEdges) + " edges over the fan-out cap").c_str() : "");
    int64_t pruned = 0;
    for (const knowledge::KgPath& p : g.paths) {
      if (!p.kept && pruned++ >= *showPruned) break;
      std::printf("  %s %.3f  %s\n", p.kept ? "+" : "-", p.score, knowledge::pathText(*kg, p).c_str());
    }
  }
  std::printf("\nprompt: %lld tokens as dependency trees, %lld as flat paths\n",
              static_cast<long long>(d.contextTokens() + static_cast<int64_t>(d.tail.size())),
              static_cast<long long>(d.flatTokens));
  return 0;
}

}  // namespace rag::cli
