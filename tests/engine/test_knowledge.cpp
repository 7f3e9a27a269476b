// Knowledge-graph retrieval (knowledge/) and dependency prompts (model/dep_prompt.h): Algorithm
// 1's prefix tree and layout, linking with lemma senses chosen by the embedder, the L-hop
// subgraph with cycles cut and the fan-out capped, top-K pruning in canonical order, and the
// graph of a real corpus built from the fixtures.
#include <QtTest>

#include <cmath>
#include <filesystem>

#include "corpus/corpus_builder.h"
#include "corpus_fixtures.h"
#include "knowledge/kg_retriever.h"
#include "knowledge/knowledge_graph.h"
#include "model/dep_prompt.h"
#include "model/tokenizer.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::knowledge;
using namespace rag::model;

namespace {


// A bag-of-words embedding: texts sharing words are close, which is all ranking tests need.
std::vector<float> bagOfWords(const std::string& text) {
  std::vector<float> v(64, 0.0f);
  for (const std::string& w : linkWords(text)) v[std::hash<std::string>{}(w) % 64] += 1.0f;
  float n = 0;
  for (float x : v) n += x * x;
  n = std::sqrt(std::max(n, 1e-6f));
  for (float& x : v) x /= n;
  return v;
}

KgRetriever::EmbedFn fakeEmbed() {
  return [](std::span<const std::string> texts) -> Result<std::vector<float>> {
    std::vector<float> out;
    for (const std::string& t : texts) {
      const std::vector<float> v = bagOfWords(t);
      out.insert(out.end(), v.begin(), v.end());
    }
    return out;
  };
}

// 1 dog (lemma) -> 2 dog (the animal), 3 dog (a man); 2 -> 4 canine -> 5 carnivore; 5 -> 2 (a cycle);
// 3 -> 6 chap; 2 has 3 more hyponyms 7..9. Passages: 1 describes 2, 2 describes 3, 3 describes 4.
std::shared_ptr<const KnowledgeGraph> smallGraph() {
  std::vector<std::string> names = {"dog", "dog", "dog", "canine", "carnivore", "chap", "puppy", "hound", "cur"};
  std::vector<EntityKind> kinds(names.size(), EntityKind::Synset);
  kinds[0] = EntityKind::Lemma;
  std::vector<KnowledgeGraph::EdgeSpec> edges = {
      {1, "lemma_of", 2}, {1, "lemma_of", 3}, {2, "hypernym", 4}, {4, "hypernym", 5}, {5, "hyponym", 2},
      {3, "hypernym", 6}, {2, "hyponym", 7},  {2, "hyponym", 8},  {2, "hyponym", 9}};
  return KnowledgeGraph::fromParts(names, kinds, edges, {2, 3, 4});
}

const std::map<int64_t, std::string> kPassages = {
    {1, "dog: a domesticated canine animal kept as a pet, a kind of carnivore"},
    {2, "dog: an informal word for a man, a chap or fellow"},
    {3, "canine: a carnivore of the dog family"}};

KgRetriever retriever(std::shared_ptr<const KnowledgeGraph> kg, std::vector<int64_t> searchHits = {}) {
  return KgRetriever(
      std::move(kg), fakeEmbed(),
      [searchHits](std::string_view, int32_t) -> Result<std::vector<int64_t>> { return searchHits; },
      [](int64_t pid) -> Result<std::string> {
        auto it = kPassages.find(pid);
        if (it == kPassages.end()) return Status::notFound("no passage");
        return it->second;
      });
}

}  // namespace

class TestKnowledge : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void algorithmOneLaysThePrefixTreeOutInPreOrder() {
    const std::vector<std::vector<int32_t>> paths = {{1, 2, 3}, {1, 2, 4}, {1, 5}, {6}};
    const DepTree t = buildDepTree(paths);
    QCOMPARE(t.tokens, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
    QCOMPARE(t.parents, (std::vector<int32_t>{-1, 0, 1, 1, 0, -1}));
    // The mask: token 3 (index 3, "4") sees itself, 2 and 1, not its sibling "3".
    const AttentionMask m = AttentionMask::ancestors(t.parents);
    std::vector<uint8_t> row(4);
    m.fillRow(3, row);
    QCOMPARE(row, (std::vector<uint8_t>{1, 1, 0, 1}));
    const DepTree c = chainTree({7, 8, 9});
    QCOMPARE(c.parents, (std::vector<int32_t>{-1, 0, 1}));
  }

  void structuralKeysSeparateEqualTokensOfAnotherShape() {
    const DepTree chain = chainTree({1, 2, 3, 4});
    const DepTree split = buildDepTree(std::vector<std::vector<int32_t>>{{1, 2}, {3, 4}});
    QCOMPARE(chain.tokens, split.tokens);
    const auto a = structuralKeys(chain, 100), b = structuralKeys(split, 100);
    QCOMPARE(a[0], b[0]);
    QCOMPARE(a[1], b[1]);
    QVERIFY(a[2] != b[2]);  // "3" follows "2" in the chain, starts a root in the split
  }

  void aDependencyPromptHasSegmentsThenTheQuestion() {
    auto tok = Tokenizer::load(std::filesystem::path(RAGWB_SOURCE_DIR) / "datasets/models/rag-llama/tokenizer.json");
    QVERIFY_OK(tok);
    ElementTokens elements(*tok);
    GraphVariables graphs;
    graphs["graph"] = {SubgraphText{2, {{"dog", " hypernym canine"}, {"dog", " hypernym canine", " hypernym carnivore"}}},
                       SubgraphText{6, {{"chap", " hypernym man"}}}};
    Variables vars{{"question", "What is a dog a kind of?"}, {"graph", flatGraphText(graphs["graph"])}};
    auto p = dependencyPrompt(elements, "Paths:\n{graph}Question: {question}\nAnswer:", vars, graphs);
    QVERIFY_OK(p);
    QVERIFY(p->has_value());
    const SegmentedPrompt& d = **p;
    QCOMPARE(d.segments.size(), size_t{3});  // the head, then one tree per subgraph
    QCOMPARE(d.segments[1].subgraphRoot, int64_t{2});
    // The shared prefix "dog hypernym canine" is stored once: fewer tokens than the flat paths.
    QVERIFY(d.contextTokens() + static_cast<int64_t>(d.tail.size()) < d.flatTokens);
    const std::vector<int32_t> parents = d.parents();
    QCOMPARE(static_cast<int64_t>(parents.size()), d.contextTokens());
    const std::vector<int64_t> offsets = d.segmentOffsets();
    for (int64_t off : offsets) QCOMPARE(parents[static_cast<size_t>(off)], -1);  // every segment's root is parentless
    QVERIFY_OK(d.mask().validate(static_cast<int64_t>(d.tokens().size())));
    // Without text after the graph the prompt has no question: refused, naming the fix.
    auto bad = dependencyPrompt(elements, "Paths:\n{graph}", vars, graphs);
    QVERIFY(!bad.isOk());
    QVERIFY(bad.status().message().find("after the graph variable") != std::string::npos);
    // No graph variable in the template: not a dependency prompt.
    auto none = dependencyPrompt(elements, "Question: {question}", vars, graphs);
    QVERIFY_OK(none);
    QVERIFY(!none->has_value());
  }

  void linkingChoosesTheSenseTheEmbedderPrefers() {
    KgRetriever r = retriever(smallGraph());
    auto res = r.retrieve("What is a dog a kind of, the pet animal?", {.subgraphs = 1});
    QVERIFY_OK(res);
    QCOMPARE(res->nameCandidates.size(), size_t{2});  // the lemma's two synsets
    QCOMPARE(res->subgraphs.size(), size_t{1});
    QCOMPARE(res->subgraphs[0].link.entity, EntityId{2});  // the animal, whose passage shares "pet animal"
    auto man = r.retrieve("Which dog is an informal word for a man?", {.subgraphs = 1});
    QVERIFY_OK(man);
    QCOMPARE(man->subgraphs[0].link.entity, EntityId{3});
  }

  void subgraphsCutCyclesCapFanoutAndKeepTheTopKInCanonicalOrder() {
    KgRetriever r = retriever(smallGraph());
    int64_t cut = 0;
    const std::vector<KgPath> all = r.expand(2, 2, 8, &cut);
    for (const KgPath& p : all) {
      std::vector<EntityId> seen = p.entities;
      std::sort(seen.begin(), seen.end());
      QVERIFY2(std::adjacent_find(seen.begin(), seen.end()) == seen.end(), "an entity twice on a path");
    }
    QCOMPARE(cut, int64_t{0});
    const std::vector<KgPath> capped = r.expand(2, 2, 2, &cut);
    QVERIFY(cut > 0);
    QVERIFY(capped.size() < all.size());
    auto res = r.retrieve("What is the animal dog a kind of, canine or carnivore?", {.subgraphs = 1, .topK = 2});
    QVERIFY_OK(res);
    const Subgraph& g = res->subgraphs[0];
    int kept = 0;
    for (const KgPath& p : g.paths) kept += p.kept;
    QCOMPARE(kept, 2);
    QVERIFY(g.paths[0].kept && g.paths[1].kept && !g.paths[2].kept);  // kept first
    // The best paths here are dog-hypernym-canine and its extension to carnivore: the shorter first.
    QCOMPARE(pathText(r.graph(), g.paths[0]), std::string("dog hypernym canine"));
    QCOMPARE(pathText(r.graph(), g.paths[1]), std::string("dog hypernym canine hypernym carnivore"));
    const auto texts = subgraphTexts(r.graph(), res->subgraphs);
    QCOMPARE(texts[0].paths.size(), size_t{2});
  }

  void relatedEntitiesComeFromThePassageSearch() {
    KgRetriever r = retriever(smallGraph(), {3});
    auto res = r.retrieve("Which animal family is this?", {.subgraphs = 5});
    QVERIFY_OK(res);
    QCOMPARE(res->subgraphs.size(), size_t{1});
    QCOMPARE(res->subgraphs[0].link.entity, EntityId{4});
    QCOMPARE(int(res->subgraphs[0].link.source), int(LinkSource::Passage));
  }

  void aQuestionThatLinksNothingSaysSo() {
    KgRetriever r = retriever(smallGraph());
    auto res = r.retrieve("What is the weather like?", {});
    QVERIFY_OK(res);
    QVERIFY(res->subgraphs.empty());
    QVERIFY(!res->note.empty());
    QVERIFY(!r.retrieve("x", {.hops = 0}).isOk());
  }

  void theGraphOfARealCorpus() {
    QTemporaryDir dir;
    const std::filesystem::path corpus = std::filesystem::path(dir.path().toStdString()) / "corpus.sqlite";
    corpus::CorpusBuildParams params;
    params.out = corpus;
    params.sources = fixtureSources();
    QVERIFY_OK(corpus::buildCorpus(params));
    auto kg = KnowledgeGraph::load(corpus);
    QVERIFY_OK(kg);
    const KgStats st = (*kg)->stats();
    QVERIFY(st.entities > 0);
    QVERIFY(st.edges > 0);
    QVERIFY((*kg)->relationId("hypernym") >= 0);
    // Every edge points at an entity, and a synset's passage describes it back.
    int64_t checked = 0;
    for (EntityId e = 1; e <= static_cast<EntityId>(st.entities); ++e) {
      for (const KgEdge& edge : (*kg)->outEdges(e)) QVERIFY((*kg)->contains(edge.dst));
      const int64_t pid = (*kg)->entityPassage(e);
      if (pid > 0) {
        QCOMPARE((*kg)->passageEntity(pid), e);
        ++checked;
      }
    }
    QVERIFY(checked > 0);
    QVERIFY(!KnowledgeGraph::load(std::filesystem::path(dir.path().toStdString()) / "missing.sqlite").isOk());
  }
};

QTEST_GUILESS_MAIN(TestKnowledge)
#include "test_knowledge.moc"
