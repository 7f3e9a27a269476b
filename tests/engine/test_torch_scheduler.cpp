// The serving engine (rag/engine.h + engine/sched): RAGraph requests through the scheduler, the
// generation worker (a real ModelRunner) and the retrieval worker (a real BERT embedder and FAISS
// IVF index) on a tiny corpus, with a tiny random model. The answers are noise; what is checked is
// what serving must guarantee: every policy gives the same tokens (speculation, splitting and
// reordering never change results), loops end, cancelling frees every KV block and search task,
// bounded queues answer Busy, bad input is refused with a clear error.
#include <QtTest>

#include <atomic>
#include <future>
#include <filesystem>
#include <map>
#include <mutex>

#include "../fixtures/serving/tiny_serving.h"
#include "corpus/qa_prompt.h"
#include "model/text_embedder.h"
#include "rag/engine.h"
#include "retrieval/bm25_index.h"
#include "retrieval/fusion_calibration.h"
#include "retrieval/passage_index.h"
#include "sched/stage_executor.h"
#include "status_checks.h"

using namespace rag;
namespace fs = std::filesystem;

class TestTorchScheduler : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path m_corpus, m_lm, m_emb;
  std::vector<std::string> m_questions;

  fs::path root() const { return fs::path(m_dir.path().toStdString()); }

  EngineParams params(std::string_view policy) const {
    EngineParams p;
    p.corpus = m_corpus;
    p.workerThreads = 1;
    p.serving.modelDir = m_lm;
    p.serving.embedderDir = m_emb;
    p.serving.policy = *parseServePolicy(policy);
    p.serving.nprobe = 8;
    p.serving.deterministic = true;
    // One cluster per sub-stage: the most partial results, so speculation really happens, and
    // whatever the workers' load (on a busy test machine the gauge could hold it back).
    p.serving.subStageSeconds = 1e-9;
    p.serving.specLoadThreshold = 2.0;
    return p;
  }

  std::unique_ptr<Engine> engine(const EngineParams& p) const {
    auto e = Engine::create(p);
    if (!e) qWarning("%s", e.status().message().c_str());
    return e ? std::move(*e) : nullptr;
  }

  // Runs every question through `graph` at once; answers and variables by question.
  std::vector<RequestResult> runAll(Engine& e, const WorkflowGraph& graph) const {
    std::vector<RequestHandle> hs;
    for (const std::string& q : m_questions) {
      auto h = e.submit(q, graph);
      if (!h) qWarning("%s", h.status().message().c_str());
      if (h) hs.push_back(*h);
    }
    std::vector<RequestResult> out;
    for (const RequestHandle& h : hs) {
      auto r = h.wait();
      if (!r) qWarning("request %u: %s", h.id(), r.status().message().c_str());
      if (r) out.push_back(*r);
    }
    return out;
  }

  static bool drained(Engine& e) {
    for (int i = 0; i < 200; ++i) {
      ServingStats s = e.servingStats();
      // What the prefix cache keeps is reusable KV, not a leak; everything else must be free.
      if (s.liveRequests == 0 && s.runningSequences == 0 && s.kvBlocksUsed == s.prefixCachedBlocks &&
          s.searchTasks == 0)
        return true;
      QTest::qWait(25);
    }
    ServingStats s = e.servingStats();
    qWarning("not drained: live %d, sequences %d, kv blocks %d (%d cached prefixes), search tasks %d",
             s.liveRequests, s.runningSequences, s.kvBlocksUsed, s.prefixCachedBlocks, s.searchTasks);
    return false;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    auto t = testing::makeTinyServing(root());
    QVERIFY2(t.isOk(), t.status().message().c_str());
    m_corpus = t->corpus;
    m_lm = t->model;
    m_emb = t->embedder;
    auto reader = corpus::QaPromptReader::open(m_corpus);
    QVERIFY(reader.isOk());
    auto ids = reader->splitIds("test");
    QVERIFY(ids.isOk() && ids->size() >= 6);
    for (size_t i = 0; i < 6; ++i) m_questions.push_back(reader->item((*ids)[i * 3])->question);
  }

  // The property the deterministic mode exists for: whatever the policy, every request gets the
  // same tokens. Hedra speculates (checked), reorders clusters and hands sub-stages to the
  // oldest searches first (or round-robin), reading a cluster once for all the searches of a
  // sub-stage (or not), with its queries embedded on a thread of their own (or not); results do
  // not move.
  void everyPolicyGivesTheSameAnswers_data() {
    QTest::addColumn<QString>("workflow");
    for (const char* w : {"oneshot", "hyde", "multistep", "irg", "recomp"}) QTest::newRow(w) << QString(w);
  }
  void everyPolicyGivesTheSameAnswers() {
    QFETCH(QString, workflow);
    auto graph = builtinWorkflow(*workflowFromName(workflow.toStdString()));
    QVERIFY(graph.isOk());
    std::map<std::string, std::vector<RequestResult>> byPolicy;
    for (const char* policy :
         {"sequential", "flashrag", "hedra", "hedra-roundrobin", "hedra-admissionorder", "hedra-searchbudget", "hedra-noshare",
          "hedra-noembedahead"}) {
      auto e = engine(params(policy));
      QVERIFY(e);
      byPolicy[policy] = runAll(*e, *graph);
      QCOMPARE(byPolicy[policy].size(), m_questions.size());
      QVERIFY(drained(*e));
      // Hedra embeds its queries on the embedding thread, the others on the search thread.
      const ServingStats stats = e->servingStats();
      QVERIFY2((stats.embeddingBusySeconds > 0) == (std::string(policy) == "hedra" ||
                                                     std::string(policy) == "hedra-roundrobin" ||
                                                     std::string(policy) == "hedra-admissionorder" ||
                                                     std::string(policy) == "hedra-searchbudget" ||
                                                     std::string(policy) == "hedra-noshare"),
               policy);
      QVERIFY(stats.retrievalBusySeconds > 0);
    }
    int speculations = 0;
    size_t generatedText = 0;
    for (size_t i = 0; i < m_questions.size(); ++i) {
      generatedText += byPolicy["sequential"][i].answer.size();
      const RequestResult& seq = byPolicy["sequential"][i];
      for (const char* policy :
           {"flashrag", "hedra", "hedra-roundrobin", "hedra-admissionorder", "hedra-searchbudget", "hedra-noshare", "hedra-noembedahead"}) {
        const RequestResult& other = byPolicy[policy][i];
        QCOMPARE(other.answer, seq.answer);
        QVERIFY2(other.variables == seq.variables, policy);
        QCOMPARE(other.lastPassages, seq.lastPassages);
        QCOMPARE(other.stages.size(), seq.stages.size());
      }
      const RequestResult& h = byPolicy["hedra"][i];
      QVERIFY(h.specAccepted <= h.speculations);
      speculations += h.speculations;
      QCOMPARE(byPolicy["sequential"][i].speculations, 0);
    }
    // RECOMP's compression node: a stage of its own that scored sentences, and a summary shorter
    // than the passages it came from.
    if (workflow == "recomp")
      for (const RequestResult& r : byPolicy["hedra"]) {
        QCOMPARE(r.stages.size(), size_t{3});
        QCOMPARE(r.stages[1].kind, NodeKind::Compression);
        QVERIFY(r.stages[1].work > 0);
        const std::string& summary = r.variables.at("summary");
        QVERIFY(!summary.empty() && summary.size() < r.variables.at("docs").size());
      }
    // Every workflow has a retrieval followed by a generation (RECOMP's through its compression
    // node): hedra must have speculated.
    QVERIFY(speculations > 0);
    QVERIFY2(generatedText > 0, "the model generated nothing: the comparison would prove little");
  }

  // BM25 and hybrid retrieval give every policy the same passages and answers too (hybrid fuses
  // the dense top-20 whatever the policy keeps), and BM25 finds passages in this corpus.
  void lexicalMethodsGiveEveryPolicyTheSameAnswers() {
    for (RetrievalMethod method : {RetrievalMethod::Bm25, RetrievalMethod::Hybrid}) {
      auto graph = builtinWorkflow(Workflow::OneShot);
      QVERIFY(graph.isOk());
      graph->setRetrievalMethod(method);
      std::map<std::string, std::vector<RequestResult>> byPolicy;
      for (const char* policy : {"sequential", "flashrag", "hedra"}) {
        auto e = engine(params(policy));
        QVERIFY(e);
        byPolicy[policy] = runAll(*e, *graph);
        QCOMPARE(byPolicy[policy].size(), m_questions.size());
        QVERIFY(drained(*e));
      }
      for (size_t i = 0; i < m_questions.size(); ++i) {
        QVERIFY(!byPolicy["sequential"][i].lastPassages.empty());
        for (const char* policy : {"flashrag", "hedra"}) {
          QCOMPARE(byPolicy[policy][i].lastPassages, byPolicy["sequential"][i].lastPassages);
          QCOMPARE(byPolicy[policy][i].answer, byPolicy["sequential"][i].answer);
        }
      }
    }
  }

  // A query of several parts ('|') is one search: BM25's rankings of the parts fused by
  // reciprocal rank (c 60), the dense search for the mean of their embeddings (HyDE's query
  // vector), hybrid fusing those two; a part given twice changes nothing; every policy agrees.
  void aQueryOfSeveralPartsSearchesAsOne() {
    auto graphWith = [](const std::string& query, RetrievalMethod method) {
      WorkflowGraph g("parts");
      g.addGeneration("draft", "Question: {question}\nDraft:", "draft", {.maxTokens = 6})
          .addRetrieval("retrieve", 5, query, "docs", {.method = method})
          .addGeneration("answer", "{docs}Question: {question}\nAnswer:", "answer", {.maxTokens = 4})
          .addEdge(std::string(kStart), "draft")
          .addEdge("draft", "retrieve")
          .addEdge("retrieve", "answer")
          .addEdge("answer", std::string(kEnd));
      return g;
    };
    auto passages = [](const std::vector<RequestResult>& rs) {
      std::vector<std::vector<int64_t>> out;
      for (const RequestResult& r : rs) out.push_back(r.lastPassages);
      return out;
    };
    auto bm25 = retrieval::Bm25Index::openOrBuild(m_corpus);
    QVERIFY2(bm25.isOk(), bm25.status().message().c_str());
    auto emb = model::TextEmbedder::load(m_emb);
    QVERIFY(emb.isOk());
    auto index = retrieval::PassageIndex::load(retrieval::defaultIndexBase(m_corpus), (*emb)->fingerprint());
    QVERIFY2(index.isOk(), index.status().message().c_str());
    // The first part: the draft and another question's words (a tiny random model's draft alone
    // may name nothing in the corpus).
    const std::string other = m_questions.back();
    for (RetrievalMethod method : {RetrievalMethod::Bm25, RetrievalMethod::Dense, RetrievalMethod::Hybrid}) {
      std::map<std::string, std::vector<RequestResult>> byPolicy;
      for (const char* policy : {"sequential", "flashrag", "hedra"}) {
        auto e = engine(params(policy));
        QVERIFY(e);
        byPolicy[policy] = runAll(*e, graphWith("{draft} " + other + " | question", method));
        QCOMPARE(byPolicy[policy].size(), m_questions.size());
        QVERIFY(drained(*e));
      }
      const std::vector<RequestResult>& served = byPolicy["sequential"];
      QCOMPARE(passages(byPolicy["flashrag"]), passages(served));
      QCOMPARE(passages(byPolicy["hedra"]), passages(served));
      auto e = engine(params("sequential"));
      QVERIFY(e);
      QCOMPARE(passages(runAll(*e, graphWith("question | question", method))),
               passages(runAll(*e, graphWith("question", method))));
      if (method == RetrievalMethod::Hybrid) continue;  // its two sides are each checked here
      int differs = 0;  // queries whose parts' own top 5 differ: else the check proves little
      for (size_t i = 0; i < served.size(); ++i) {
        const std::string question = m_questions[i];
        const std::string expanded = sched::trimmedText(served[i].variables.at("draft") + " " + other);
        std::vector<int64_t> expected;
        if (method == RetrievalMethod::Bm25) {
          auto a = bm25->search(expanded, 20), b = bm25->search(question, 20);
          QVERIFY(a.isOk() && b.isOk());
          differs += std::vector<int64_t>(a->begin(), a->begin() + std::min<size_t>(5, a->size())) !=
                     std::vector<int64_t>(b->begin(), b->begin() + std::min<size_t>(5, b->size()));
          const std::vector<std::vector<int64_t>> rankings{*a, *b};
          expected = retrieval::reciprocalRankFusion(rankings, 5, 60.0);
        } else {
          // One text at a time, as the deterministic engine embeds them, summed in its order.
          auto va = (*emb)->embed(std::span<const std::string>(&expanded, 1));
          auto vb = (*emb)->embed(std::span<const std::string>(&question, 1));
          QVERIFY(va.isOk() && vb.isOk());
          std::vector<float> mean(va->size());
          for (size_t d = 0; d < mean.size(); ++d) mean[d] = (0.0f + (*va)[d] + (*vb)[d]) / 2.0f;
          auto top = index->searchExact(mean, 5), ta = index->searchExact(*va, 5), tb = index->searchExact(*vb, 5);
          QVERIFY(top.isOk() && ta.isOk() && tb.isOk());
          differs += (*ta)[0] != (*tb)[0];
          for (int64_t id : (*top)[0])
            if (id >= 0) expected.push_back(id);
        }
        QCOMPARE(served[i].lastPassages, expected);
      }
      QVERIFY2(differs > 0, "every draft left its query's top 5 as they were: the check would prove little");
    }
  }

  // Hybrid retrieval serves with the fusion constants stored for the index's embedder
  // (retrieval/fusion_calibration.h): all weight on BM25 serves BM25's passages, all on the dense
  // side the dense search's; another embedder's constants are not used. Hedra's partial top-k
  // are fused as the final one is: with all weight on BM25, a generation speculating on one
  // whose five passages all came from BM25 always matches the final prompt.
  void hybridServesTheFusionMeasuredForItsEmbedder() {
    auto graph = builtinWorkflow(Workflow::OneShot);
    QVERIFY(graph.isOk());
    std::vector<RequestResult> last;  // the last passagesBy's requests
    auto passagesBy = [&](RetrievalMethod method) {
      WorkflowGraph g = *graph;
      g.setRetrievalMethod(method);
      auto e = engine(params("hedra"));
      std::vector<std::vector<int64_t>> out;
      if (!e) return out;
      last = runAll(*e, g);
      for (const RequestResult& r : last) out.push_back(r.lastPassages);
      return out;
    };
    const auto bm25 = passagesBy(RetrievalMethod::Bm25), dense = passagesBy(RetrievalMethod::Dense);
    QCOMPARE(bm25.size(), m_questions.size());
    QVERIFY2(bm25 != dense, "the two rankings agree on this corpus: the check would prove nothing");
    auto emb = model::TextEmbedder::load(m_emb);
    QVERIFY(emb.isOk());
    const fs::path base = retrieval::defaultIndexBase(m_corpus);
    auto store = [&](std::string fingerprint, retrieval::HybridFusion f) {
      retrieval::FusionCalibration c{.fingerprint = std::move(fingerprint), .fusion = f, .nprobe = 8, .k = 5};
      return retrieval::saveFusionCalibration(base, c).isOk();
    };
    QVERIFY(store((*emb)->fingerprint(), {.c = 1, .denseWeight = 0, .lexicalWeight = 1}));
    const auto lexicalFirst = passagesBy(RetrievalMethod::Hybrid);
    QCOMPARE(lexicalFirst.size(), bm25.size());
    int speculations = 0;
    for (size_t i = 0; i < bm25.size(); ++i) {  // BM25's hits first (it may find fewer than 5), then dense ones
      QVERIFY(lexicalFirst[i].size() >= bm25[i].size());
      QCOMPARE(std::vector<int64_t>(lexicalFirst[i].begin(), lexicalFirst[i].begin() + std::ssize(bm25[i])), bm25[i]);
      if (bm25[i].size() < lexicalFirst[i].size()) continue;  // the dense tail may still move
      speculations += last[i].speculations;
      QCOMPARE(last[i].specAccepted, last[i].speculations);
    }
    QVERIFY2(speculations > 0, "hedra never speculated on a partial top-k: the check would prove nothing");
    QVERIFY(store((*emb)->fingerprint(), {.c = 1, .denseWeight = 1, .lexicalWeight = 0}));
    QCOMPARE(passagesBy(RetrievalMethod::Hybrid), dense);
    QVERIFY(store("another-embedder", {.c = 1, .denseWeight = 1, .lexicalWeight = 0}));
    const auto defaults = passagesBy(RetrievalMethod::Hybrid);
    std::error_code ec;
    fs::remove(retrieval::fusionCalibrationPath(base), ec);
    QCOMPARE(defaults, passagesBy(RetrievalMethod::Hybrid));  // as with no file at all
  }

  // A retrieval node's `rerank: bm25` keeps the passages its method found and orders them by
  // their BM25 score for its query (Bm25Index::rankAmong), under every policy alike: hedra's
  // partial top-k are reranked as the final one is.
  void rerankOrdersTheSamePassagesByBm25() {
    auto graph = builtinWorkflow(Workflow::OneShot);
    QVERIFY(graph.isOk());
    auto bm25 = retrieval::Bm25Index::openOrBuild(m_corpus);
    QVERIFY2(bm25.isOk(), bm25.status().message().c_str());
    auto passagesWith = [&](RetrievalRerank rerank, const char* policy) {
      WorkflowGraph g = *graph;
      g.setRetrievalMethod(RetrievalMethod::Dense);
      g.setRetrievalRerank(rerank);
      std::vector<std::vector<int64_t>> out;
      auto e = engine(params(policy));
      if (!e) return out;
      for (const RequestResult& r : runAll(*e, g)) out.push_back(r.lastPassages);
      return out;
    };
    const auto dense = passagesWith(RetrievalRerank::None, "sequential");
    const auto reranked = passagesWith(RetrievalRerank::Bm25, "sequential");
    QCOMPARE(dense.size(), m_questions.size());
    QCOMPARE(reranked.size(), dense.size());
    int moved = 0;
    for (size_t i = 0; i < dense.size(); ++i) {
      auto order = bm25->rankAmong(m_questions[i], dense[i]);
      QVERIFY(order.isOk());
      std::vector<int64_t> expected;
      for (size_t p : *order) expected.push_back(dense[i][p]);
      QCOMPARE(reranked[i], expected);
      moved += reranked[i] != dense[i];
    }
    QVERIFY2(moved > 0, "BM25 kept every dense order: the check would prove nothing");
    QCOMPARE(passagesWith(RetrievalRerank::Bm25, "hedra"), reranked);
    QCOMPARE(passagesWith(RetrievalRerank::Bm25, "flashrag"), reranked);
  }

  // The prefix cache (on above, by default) changes no token: every policy with the cache off
  // answers as with it on, and a second pass of the same questions, prefilled mostly from the
  // cache, answers as the first.
  void prefixCacheChangesNoAnswer_data() { everyPolicyGivesTheSameAnswers_data(); }
  void prefixCacheChangesNoAnswer() {
    QFETCH(QString, workflow);
    auto graph = builtinWorkflow(*workflowFromName(workflow.toStdString()));
    QVERIFY(graph.isOk());
    for (const char* policy : {"sequential", "flashrag", "hedra"}) {
      EngineParams on = params(policy);
      auto cached = engine(on);
      QVERIFY(cached);
      const std::vector<RequestResult> first = runAll(*cached, *graph);
      const std::vector<RequestResult> again = runAll(*cached, *graph);
      const ServingStats s = cached->servingStats();
      QVERIFY(s.prefixCacheOn);
      QVERIFY2(s.prefixHitTokens > 0, policy);  // the second pass did reuse KV
      QVERIFY(drained(*cached));
      EngineParams off = on;
      off.serving.prefixCache = false;
      auto plain = engine(off);
      QVERIFY(plain);
      const std::vector<RequestResult> uncached = runAll(*plain, *graph);
      QVERIFY(!plain->servingStats().prefixCacheOn);
      QCOMPARE(first.size(), m_questions.size());
      QCOMPARE(again.size(), m_questions.size());
      QCOMPARE(uncached.size(), m_questions.size());
      for (size_t i = 0; i < m_questions.size(); ++i) {
        QCOMPARE(first[i].answer, uncached[i].answer);
        QCOMPARE(again[i].answer, uncached[i].answer);
        QVERIFY2(first[i].variables == uncached[i].variables, policy);
        QVERIFY2(again[i].variables == uncached[i].variables, policy);
      }
    }
  }

  // GraphRAG (DepCache): the knowledge node leaves the question's subgraphs as paths, the
  // generation node reads them as dependency trees; a second pass finds every segment's whole
  // blocks in the prefix cache (GKVR) and answers exactly as the first, which computed them; the
  // causal flat-path rendering serves too; nothing leaks.
  void graphRagServesWithDependencyAttentionAndItsCache() {
    auto graph = builtinWorkflow(Workflow::GraphRag);
    QVERIFY(graph.isOk());
    EngineParams p = params("hedra");
    auto e = engine(p);
    QVERIFY(e);
    const std::vector<RequestResult> first = runAll(*e, *graph);
    const ServingStats afterFirst = e->servingStats();
    const std::vector<RequestResult> again = runAll(*e, *graph);
    const ServingStats afterAgain = e->servingStats();
    QCOMPARE(first.size(), m_questions.size());
    QCOMPARE(again.size(), m_questions.size());
    int withPaths = 0;
    for (size_t i = 0; i < first.size(); ++i) {
      QCOMPARE(first[i].stages.size(), size_t{2});
      QCOMPARE(first[i].stages[0].kind, NodeKind::Knowledge);
      const std::string& paths = first[i].variables.at("graph");
      if (!paths.empty() && paths.front() != '(') ++withPaths;
      QCOMPARE(again[i].answer, first[i].answer);
      QCOMPARE(again[i].variables.at("graph"), paths);
      QVERIFY(again[i].stages[1].cachedPromptTokens >= first[i].stages[1].cachedPromptTokens);
    }
    QVERIFY2(withPaths > 0, "no question of the tiny corpus linked an entity with edges");
    QVERIFY(afterAgain.prefixHitTokens > afterFirst.prefixHitTokens);
    QVERIFY(drained(*e));
    EngineParams flat = p;
    flat.serving.dependencyAttention = false;
    auto f = engine(flat);
    QVERIFY(f);
    const std::vector<RequestResult> causal = runAll(*f, *graph);
    QCOMPARE(causal.size(), m_questions.size());
    for (size_t i = 0; i < causal.size(); ++i) QCOMPARE(causal[i].variables.at("graph"), first[i].variables.at("graph"));
    QVERIFY(drained(*f));
  }

  // Block-Attention through the engine: One-shot's passages become blocks; each request's stage
  // record says so; the first pass computes every block alone (and the block store keeps them),
  // a second finds them and answers token for token as the first, and a new engine over the
  // same corpus loads them from the block store instead of computing them; nothing leaks.
  void blockAttentionServesFromStoredBlocks() {
    auto graph = builtinWorkflow(Workflow::OneShot);
    QVERIFY(graph.isOk());
    EngineParams p = params("hedra");
    p.serving.blockAttention = true;
    std::vector<RequestResult> first, again;
    {
      auto e = engine(p);
      QVERIFY(e);
      first = runAll(*e, *graph);
      const ServingStats s1 = e->servingStats();
      again = runAll(*e, *graph);
      const ServingStats s2 = e->servingStats();
      QVERIFY(s1.blockTokens > 0);
      QVERIFY(s2.blockHitTokens > s1.blockHitTokens);
      QCOMPARE(s2.depSegmentTokens, int64_t{0});
      QVERIFY(drained(*e));
    }  // stopping the engine saves the block store
    QCOMPARE(first.size(), m_questions.size());
    QCOMPARE(again.size(), m_questions.size());
    for (size_t i = 0; i < first.size(); ++i) {
      const StageTiming& gen = first[i].stages.back();
      QCOMPARE(gen.kind, NodeKind::Generation);
      QCOMPARE(gen.attention, std::string("block"));
      QCOMPARE(again[i].answer, first[i].answer);
      QVERIFY(again[i].stages.back().cachedPromptTokens > 0);
    }
    auto restarted = engine(p);
    QVERIFY(restarted);
    const std::vector<RequestResult> third = runAll(*restarted, *graph);
    const ServingStats s3 = restarted->servingStats();
    QVERIFY(s3.blockStoreRecords > 0);
    QVERIFY2(s3.blockStoreHitTokens > 0, "a restarted engine computed blocks the store had");
    QVERIFY(s3.blockStoreNotice.empty());
    for (size_t i = 0; i < third.size(); ++i) QCOMPARE(third[i].answer, first[i].answer);
    QVERIFY(drained(*restarted));
    // Off: one causal prefill, recorded as such.
    EngineParams off = params("hedra");
    auto plain = engine(off);
    QVERIFY(plain);
    const std::vector<RequestResult> causal = runAll(*plain, *graph);
    for (const RequestResult& r : causal) QCOMPARE(r.stages.back().attention, std::string("causal"));
    QCOMPARE(plain->servingStats().blockTokens, int64_t{0});
  }

  // Many GraphRAG requests at once on a small KV pool all finish: a DepCache ticket holds its
  // finished segments' KV until its last segment is computed, so unbounded tickets building at
  // once filled the pool with half-built tickets and nothing finished (a hang found by `eval
  // workflow` submitting 300 questions at once).
  void graphRagUnderMemoryPressureFinishes() {
    auto graph = builtinWorkflow(Workflow::GraphRag);
    QVERIFY(graph.isOk());
    EngineParams p = params("hedra");
    p.serving.kvBudgetBytes = 1 << 20;  // 256 blocks of this model: far less than 60 tickets need at once
    auto e = engine(p);
    QVERIFY(e);
    std::vector<RequestHandle> hs;
    for (int round = 0; round < 10; ++round)
      for (const std::string& q : m_questions) {
        auto h = e->submit(q + " (" + std::to_string(round) + ")", *graph);
        QVERIFY2(h.isOk(), h.status().message().c_str());
        hs.push_back(*h);
      }
    QTRY_VERIFY_WITH_TIMEOUT(std::all_of(hs.begin(), hs.end(), [](const RequestHandle& h) { return h.done(); }), 120000);
    for (const RequestHandle& h : hs) {
      auto r = h.wait();
      QVERIFY2(r.isOk(), r.status().message().c_str());
    }
    QVERIFY(drained(*e));
  }

  void loopsEndAndRunawayLoopsFailAlone() {
    auto e = engine(params("hedra"));
    QVERIFY(e);
    // IRG: generate three times, retrieving again between them.
    auto irg = e->submit(m_questions[0], *builtinWorkflow(Workflow::Irg));
    QVERIFY(irg.isOk());
    // A loop whose exit condition never comes true ends at the max_node_runs guard.
    WorkflowGraph loop("forever");
    loop.addRetrieval("retrieve", 2, "question", "docs");
    loop.addGeneration("think", "{docs}Question: {question}\nAnswer:", "answer", {.maxTokens = 2});
    loop.addEdge(std::string(kStart), "retrieve");
    loop.addEdge("retrieve", "think");
    loop.addEdge("think", std::string(kEnd), EdgeCondition::contains("answer", "\x01never\x01"));
    loop.addEdge("think", "retrieve");
    loop.setMaxNodeRuns(3);
    QVERIFY2(loop.validate().isOk(), loop.validate().message().c_str());
    auto runaway = e->submit(m_questions[1], loop);
    QVERIFY(runaway.isOk());
    auto ok = e->submit(m_questions[2], *builtinWorkflow(Workflow::OneShot));
    QVERIFY(ok.isOk());
    auto r = irg->wait();
    QVERIFY2(r.isOk(), r.status().message().c_str());
    int generations = 0;
    for (const StageTiming& s : r->stages) generations += s.node == "generate";
    QCOMPARE(generations, 3);
    QCOMPARE(r->stages.size(), size_t{6});  // retrieve, generate, then retrieve_again + generate twice
    for (size_t i = 1; i < r->stages.size(); ++i) QVERIFY(r->stages[i].beginSeconds >= r->stages[i - 1].beginSeconds);
    auto bad = runaway->wait();
    QVERIFY(!bad.isOk());
    QVERIFY(mentions(bad.status(), {"retrieve", "3"}));
    QVERIFY(ok->wait().isOk());  // unaffected
    QVERIFY(drained(*e));
  }

  void cancellingFreesEveryBlockAndTask() {
    for (const char* policy : {"hedra", "sequential"}) {
      auto e = engine(params(policy));
      QVERIFY(e);
      std::vector<RequestHandle> hs;
      for (const std::string& q : m_questions) hs.push_back(*e->submit(q, *builtinWorkflow(Workflow::Multistep)));
      QTRY_VERIFY_WITH_TIMEOUT(e->servingStats().kvBlocksUsed > 0 || e->servingStats().searchTasks > 0, 5000);
      for (const RequestHandle& h : hs) QVERIFY(e->cancel(h.id()).isOk());
      int cancelled = 0;
      for (const RequestHandle& h : hs) {
        auto r = h.wait();
        if (!r) {
          QCOMPARE(r.status().code(), StatusCode::Cancelled);
          ++cancelled;
        }
      }
      QVERIFY(cancelled > 0);
      QVERIFY2(drained(*e), policy);
      QVERIFY(!e->cancel(999999).isOk());
    }
  }

  // Shutting down with requests in flight, some not even taken by the scheduler yet: every
  // handle still gets an answer (Cancelled or a result), nothing waits forever.
  void shutdownAnswersEveryHandle() {
    auto e = engine(params("hedra"));
    QVERIFY(e);
    std::vector<RequestHandle> hs;
    for (int round = 0; round < 3; ++round)
      for (const std::string& q : m_questions) hs.push_back(*e->submit(q, *builtinWorkflow(Workflow::Multistep)));
    e->shutdown();
    QCOMPARE(e->submit(m_questions[0], *builtinWorkflow(Workflow::OneShot)).status().code(), StatusCode::Cancelled);
    for (const RequestHandle& h : hs) {
      auto answered = std::async(std::launch::async, [h] { return h.wait().isOk(); });
      QVERIFY2(answered.wait_for(std::chrono::seconds(20)) == std::future_status::ready, "a handle never got its answer");
    }
  }

  void boundedQueueAnswersBusy() {
    EngineParams p = params("flashrag");
    p.serving.maxLiveRequests = 2;
    auto e = engine(p);
    QVERIFY(e);
    auto g = *builtinWorkflow(Workflow::Multistep);
    auto a = e->submit(m_questions[0], g), b = e->submit(m_questions[1], g), c = e->submit(m_questions[2], g);
    QVERIFY(a.isOk() && b.isOk());
    QVERIFY(!c.isOk());
    QCOMPARE(c.status().code(), StatusCode::Busy);
    QVERIFY(mentions(c.status(), {"limit is 2"}));
    QVERIFY(a->wait().isOk() && b->wait().isOk());
    QVERIFY(e->submit(m_questions[2], g).isOk());  // room again
  }

  // The generation batch limits reach the runner: with room for one sequence and 8 rows a step,
  // requests submitted together generate one at a time and prefill their prompts (longer than 8
  // tokens) in chunks. Unset, the limits are the device's defaults.
  void generationBatchFollowsItsLimits() {
    ServingParams d;
    QCOMPARE(d.runningSequences(), 64);
    QCOMPARE(d.batchTokens(), 512);
    d.device = "cuda:1";
    QCOMPARE(d.runningSequences(), 256);
    QCOMPARE(d.batchTokens(), 2048);
    d.maxRunningSequences = 8;
    d.maxBatchTokens = 100;
    QCOMPARE(d.runningSequences(), 8);
    QCOMPARE(d.batchTokens(), 100);

    EngineParams p = params("hedra");
    p.serving.maxRunningSequences = 1;
    p.serving.maxBatchTokens = 8;
    auto e = engine(p);
    QVERIFY(e);
    std::vector<RequestHandle> hs;
    for (const std::string& q : m_questions) hs.push_back(*e->submit(q, *builtinWorkflow(Workflow::OneShot)));
    for (const RequestHandle& h : hs) QVERIFY(h.wait().isOk());
    std::vector<TraceEvent> ev;
    e->drainTrace(ev);
    const std::vector<TraceLane> lanes = e->traceLanes();
    uint32_t steps = 0, mostSequences = 0, mostRows = 0, chunked = 0;
    for (const TraceEvent& t : ev)
      if (t.stage == TraceStage::Decode && lanes.at(t.lane).kind == LaneKind::Generation) {
        ++steps;
        mostRows = std::max(mostRows, t.arg0);  // rows computed
        mostSequences = std::max(mostSequences, t.arg1);  // sequences in the batch
        chunked += t.arg0 == 8;
      }
    QVERIFY(steps > 0);
    QCOMPARE(mostSequences, 1u);
    QCOMPARE(mostRows, 8u);
    QVERIFY(chunked >= m_questions.size());  // every prompt took at least one full chunk
  }

  void badInputIsRefusedClearly() {
    auto e = engine(params("hedra"));
    QVERIFY(e);
    WorkflowGraph g("broken");
    g.addGeneration("answer", "Use {nothing}: {question}", "answer");
    g.addEdge(std::string(kStart), "answer");
    g.addEdge("answer", std::string(kEnd));
    auto r = e->submit("a question", g);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"answer", "nothing"}));
    QCOMPARE(e->submit("  ", *builtinWorkflow(Workflow::OneShot)).status().code(), StatusCode::InvalidArgument);
    // Serving off: a clear Unavailable, not a crash.
    EngineParams off;
    off.corpus = m_corpus;
    auto plain = Engine::create(off);
    QVERIFY(plain.isOk());
    QCOMPARE((*plain)->submit("q", *builtinWorkflow(Workflow::OneShot)).status().code(), StatusCode::Unavailable);
    // A missing model names the directory.
    EngineParams missing = params("hedra");
    missing.serving.modelDir = root() / "no-model";
    auto m = Engine::create(missing);
    QVERIFY(!m.isOk());
    QVERIFY(mentions(m.status(), {"no-model"}));
    QVERIFY(!parseServePolicy("fastest").isOk());
    QVERIFY(mentions(parseServePolicy("fastest").status(), {"fastest", "hedra-nospec"}));
    EngineParams nan = params("hedra");
    nan.serving.specLoadThreshold = -0.5;
    QVERIFY(mentions(Engine::create(nan).status(), {"specLoadThreshold"}));
  }

  // The load gate of the speculation trigger: with no idle share allowed (threshold 0) hedra
  // never speculates, and the answers are those it gives when it does.
  void speculationWaitsForIdleThreads() {
    auto graph = builtinWorkflow(Workflow::OneShot);
    QVERIFY(graph.isOk());
    EngineParams never = params("hedra");
    never.serving.specLoadThreshold = 0.0;
    auto e = engine(never);
    QVERIFY(e);
    const std::vector<RequestResult> held = runAll(*e, *graph);
    auto free = engine(params("hedra"));
    QVERIFY(free);
    const std::vector<RequestResult> spec = runAll(*free, *graph);
    QCOMPARE(held.size(), m_questions.size());
    QCOMPARE(spec.size(), m_questions.size());
    int64_t heldSpeculations = 0, freeSpeculations = 0;
    for (size_t i = 0; i < held.size(); ++i) {
      heldSpeculations += held[i].speculations;
      freeSpeculations += spec[i].speculations;
      QCOMPARE(held[i].answer, spec[i].answer);
    }
    QCOMPARE(heldSpeculations, int64_t{0});
    QVERIFY(freeSpeculations > 0);
    for (double load : {e->servingStats().generationLoad, e->servingStats().retrievalLoad})
      QVERIFY(load >= 0.0 && load <= 1.0);
    // Every request generated and retrieved: both workers have reported work.
    QVERIFY(e->servingStats().generationBusySeconds > 0.0);
    QVERIFY(e->servingStats().retrievalBusySeconds > 0.0);
  }

  // The gauge the speculation trigger reads is the share of time a worker's loop works, whatever
  // threads the worker computes with: a generation worker of 2 threads kept stepping reads well
  // above 1/2 (measured over its threads, it never could, and hedra went on speculating on a
  // saturated worker of 8 threads on the GPU machine).
  void aSaturatedWorkerReadsBusyWhateverItsThreads() {
    WorkflowGraph g("long");
    g.addGeneration("answer", "Question: {question}\nAnswer:", "answer", {.maxTokens = 1500});
    g.addEdge(std::string(kStart), "answer");
    g.addEdge("answer", std::string(kEnd));
    QVERIFY(g.validate().isOk());
    EngineParams p = params("flashrag");
    p.serving.generationThreads = 2;
    auto e = engine(p);
    QVERIFY(e);
    std::vector<RequestHandle> hs;
    for (int copy = 0; copy < 4; ++copy)
      for (const std::string& q : m_questions) {
        auto h = e->submit(q, g);
        QVERIFY(h.isOk());
        hs.push_back(*h);
      }
    double highest = 0.0;
    int64_t generated = 0;
    for (;;) {
      highest = std::max(highest, e->servingStats().generationLoad);
      if (e->servingStats().liveRequests == 0) break;
      QTest::qWait(10);
    }
    for (const RequestHandle& h : hs) {
      auto r = h.wait();
      QVERIFY(r.isOk());
      for (const StageTiming& s : r->stages) generated += s.work;
    }
    // Enough decoding for several of the gauge's 100 ms windows (on a fast machine the test says
    // so rather than passing vacuously).
    if (e->servingStats().generationBusySeconds < 0.3)
      QSKIP(qPrintable(QString("%1 tokens in %2 s of generation work: too few to fill the gauge's windows").arg(generated).arg(e->servingStats().generationBusySeconds)));
    // Measured over its 2 threads the gauge could never pass 0.5; over the loop it read above 0.6
    // in every CI run but one, 0.576 on the 2-core machine with another test running beside it,
    // so the bound sits just above what the old gauge could reach.
    QVERIFY2(highest > 0.55, qPrintable(QString("highest generation load %1 over %2 tokens").arg(highest).arg(generated)));
  }

  // A client streaming a request sees each node's whole text, also when the node's run was a
  // speculation adopted once its input was final (its text so far is published at adoption).
  void streamedTextIsEveryGenerationsOutput() {
    EngineParams p = params("hedra");
    std::mutex mu;
    std::map<uint32_t, std::string> streamed, lastNode;  // per request: text since its last NodeStarted
    p.onEvent = [&](const RequestEvent& ev) {
      std::lock_guard lock(mu);
      if (ev.kind == RequestEvent::Kind::NodeStarted) streamed[ev.requestId].clear();
      if (ev.kind == RequestEvent::Kind::Tokens) streamed[ev.requestId] += ev.text;
      if (ev.kind == RequestEvent::Kind::NodeFinished) lastNode[ev.requestId] = streamed[ev.requestId];
    };
    auto e = engine(p);
    QVERIFY(e);
    int accepted = 0;
    for (Workflow w : {Workflow::OneShot, Workflow::Hyde}) {
      const std::vector<RequestResult> rs = runAll(*e, *builtinWorkflow(w));
      QCOMPARE(rs.size(), m_questions.size());
      std::lock_guard lock(mu);
      for (const RequestResult& r : rs) {
        accepted += r.specAccepted;
        std::string s = lastNode[r.id];
        const auto b = s.find_first_not_of(" \t\n"), en = s.find_last_not_of(" \t\n");
        s = b == std::string::npos ? std::string() : s.substr(b, en - b + 1);
        QCOMPARE(s, r.answer);
      }
    }
    QVERIFY2(accepted > 0, "no speculation was adopted: the test did not exercise what it checks");
  }

  void eventsAndTraceDescribeTheRun() {
    EngineParams p = params("hedra");
    std::mutex mu;
    std::map<RequestEvent::Kind, int> kinds;
    p.onEvent = [&](const RequestEvent& ev) {
      std::lock_guard lock(mu);
      ++kinds[ev.kind];
    };
    auto e = engine(p);
    QVERIFY(e);
    auto h = e->submit(m_questions[0], *builtinWorkflow(Workflow::Hyde));
    QVERIFY(h.isOk());
    auto r = h->wait();
    QVERIFY(r.isOk());
    QCOMPARE(r->stages.size(), size_t{3});
    QCOMPARE(r->variables.count("hypothesis"), size_t{1});
    QCOMPARE(r->lastPassages.size(), size_t{5});
    {
      std::lock_guard lock(mu);
      QCOMPARE(kinds[RequestEvent::Kind::Submitted], 1);
      QCOMPARE(kinds[RequestEvent::Kind::NodeStarted] >= 3, true);
      QCOMPARE(kinds[RequestEvent::Kind::NodeFinished], 3);
      QCOMPARE(kinds[RequestEvent::Kind::Finished], 1);
    }
    std::vector<TraceEvent> ev;
    e->drainTrace(ev);
    const std::vector<TraceLane> lanes = e->traceLanes();
    bool request = false, decode = false, retrieval = false;
    for (const TraceEvent& t : ev) {
      request |= t.stage == TraceStage::Request && t.requestId == h->id();
      decode |= t.stage == TraceStage::Decode && lanes.at(t.lane).kind == LaneKind::Generation;
      retrieval |= t.stage == TraceStage::RetrievalStep && lanes.at(t.lane).kind == LaneKind::Retrieval;
    }
    QVERIFY(request && decode && retrieval);
  }
};

QTEST_GUILESS_MAIN(TestTorchScheduler)
#include "test_torch_scheduler.moc"
