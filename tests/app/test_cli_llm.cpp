// `ragraph run`, `ragraph eval qa` and `ragraph bench llm` through the built binary, with a
// tiny model trained here on a tiny corpus (the answers are wrong; the plumbing is checked).
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <thread>
#include <tuple>

#include "../fixtures/workload/tiny_corpus.h"
#include "cli_run.h"
#include "core/blas_info.h"
#include "core/json.h"

using namespace rag;
namespace fs = std::filesystem;

class TestCliLlm : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  QString path(const char* name) const { return m_dir.filePath(name); }
  QString corpus() const { return path("corpus.db"); }
  QString model() const { return path("lm"); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    testing::TinyCorpusSpec spec;
    spec.entities = 30;
    spec.passages = true;
    Status s = testing::makeTinyCorpus(corpus().toStdString(), spec);
    QVERIFY2(s.isOk(), s.message().c_str());
    CliRun r = runRagraph({"train", "tokenizer", "--corpus", corpus(), "--vocab", "300", "--out", path("tok"), "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runRagraph({"train", "lm", "--corpus", corpus(), "--tokenizer", path("tok"), "--out", model(), "--layers", "1",
                    "--hidden", "32", "--heads", "2", "--steps", "2", "--batch", "2", "--seq-len", "96", "--threads", "1"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
  }

  void evalReportsAccuracyPerType() {
    CliRun r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--split", "test", "--limit", "12",
                           "--max-tokens", "4", "--json", "--threads", "1"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(*doc->find("items")->asInt64(), int64_t{12});
    const double acc = doc->find("accuracy")->asDouble();
    QVERIFY(acc >= 0.0 && acc <= 1.0);
    QCOMPARE(std::string(doc->find("context")->asString()), std::string("gold"));
    int64_t perType = 0;
    for (const auto& [type, v] : doc->find("by_type")->asObject()) perType += *v.find("items")->asInt64();
    QCOMPARE(perType, int64_t{12});
    // ... and by where the prompt put the gold passage: places 1..5, every question counted once.
    int64_t perPlace = 0;
    for (const auto& [place, v] : doc->find("by_gold_place")->asObject()) {
      QVERIFY2(place >= "1" && place <= "5" && place.size() == 1, place.c_str());
      perPlace += *v.find("items")->asInt64();
    }
    QCOMPARE(perPlace, int64_t{12});
    // --orders 3: each question read with its passages in three rotations; the first order is
    // the plain run's prompt, so its accuracy is the run above's, and a perfect choice among the
    // orders bounds the chosen answer's from above.
    CliRun o = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--split", "test", "--limit", "12",
                           "--max-tokens", "4", "--json", "--threads", "1", "--orders", "3"});
    QVERIFY2(o.code == 0, qPrintable(o.err));
    auto od = parseJson(o.out.toStdString());
    QVERIFY2(od.isOk(), qPrintable(o.out));
    QCOMPARE(*od->find("orders")->find("n")->asInt64(), int64_t{3});
    QCOMPARE(od->find("orders")->find("first_order_accuracy")->asDouble(), acc);
    QVERIFY(od->find("accuracy")->asDouble() <= od->find("orders")->find("any_order_accuracy")->asDouble());
    QVERIFY(acc <= od->find("orders")->find("any_order_accuracy")->asDouble());
    QCOMPARE(*od->find("items")->asInt64(), int64_t{12});
    QVERIFY(doc->find("orders") == nullptr);  // a plain run says nothing of orders
    for (const QStringList& bad : {QStringList{"--orders", "0"}, QStringList{"--orders", "6"},
                                   QStringList{"--orders", "2", "--context", "none"}}) {
      o = runRagraph(QStringList{"eval", "qa", "--corpus", corpus(), "--model", model(), "--limit", "2"} + bad);
      QCOMPARE(o.code, 2);
      QVERIFY2(o.err.contains("--orders"), qPrintable(o.err));
    }
    // --rerank bm25: the same passages, ordered by BM25 for the question before reading, so the
    // gold passage (the one sharing the question's rare words) leads more often than shuffled.
    CliRun rr = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--split", "test", "--limit", "12",
                            "--max-tokens", "4", "--json", "--threads", "1", "--rerank", "bm25"});
    QVERIFY2(rr.code == 0, qPrintable(rr.err));
    auto rd = parseJson(rr.out.toStdString());
    QVERIFY2(rd.isOk(), qPrintable(rr.out));
    QCOMPARE(std::string(rd->find("rerank")->asString()), std::string("bm25"));
    QCOMPARE(std::string(doc->find("rerank")->asString()), std::string("none"));
    auto firstPlace = [](const JsonValue& d) {
      const JsonValue* one = d.find("by_gold_place")->find("1");
      return one ? *one->find("items")->asInt64() : int64_t{0};
    };
    QVERIFY2(firstPlace(*rd) > firstPlace(*doc), qPrintable(rr.out));
    QVERIFY2(firstPlace(*rd) >= 9, qPrintable(rr.out));  // 3 in 4 at least (11 of 12 here)
    o = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--limit", "2", "--rerank", "cross"});
    QCOMPARE(o.code, 2);
    QVERIFY2(o.err.contains("--rerank cross") && o.err.contains("bm25"), qPrintable(o.err));
    // Block-Attention masks and closed-book prompts go through the same path; a closed-book
    // prompt has no gold passage to place.
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--limit", "4", "--max-tokens", "2",
                    "--context", "none", "--mask", "block", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("\"mask\": \"block\""));
    QVERIFY(!r.out.contains("by_gold_place"));
  }

  void runAnswersOneQuestion() {
    CliRun r = runRagraph({"run", "--qa", "1", "--corpus", corpus(), "--model", model(), "--max-tokens", "3", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QVERIFY(doc->find("answer") != nullptr);
    QVERIFY(doc->find("passages")->size() >= 1);  // gold context by default for a corpus question
    QVERIFY(doc->find("correct") != nullptr);
    // --rerank bm25: the same passages, in BM25's order for the question; a bad name is refused
    // before the model loads.
    CliRun rr = runRagraph({"run", "--qa", "1", "--corpus", corpus(), "--model", model(), "--max-tokens", "3", "--json",
                            "--rerank", "bm25"});
    QVERIFY2(rr.code == 0, qPrintable(rr.err));
    auto rd = parseJson(rr.out.toStdString());
    QVERIFY2(rd.isOk(), qPrintable(rr.out));
    auto ids = [](const JsonValue& d) {
      std::vector<int64_t> v;
      for (const JsonValue& p : d.find("passages")->asArray()) v.push_back(p.asInt64().value_or(-1));
      std::sort(v.begin(), v.end());
      return v;
    };
    QCOMPARE(ids(*rd), ids(*doc));
    rr = runRagraph({"run", "--qa", "1", "--corpus", corpus(), "--model", path("no-such-model"), "--rerank", "cross"});
    QCOMPARE(rr.code, 2);
    QVERIFY2(rr.err.contains("--rerank cross"), qPrintable(rr.err));
    // Free text has no gold passages: closed-book by default, a clear error when gold is asked.
    r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--max-tokens", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("\"context\": \"none\""));
    r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--context", "gold"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--context gold needs a corpus question"), qPrintable(r.err));
  }

  // --device is read before anything loads: a name that is no device is a usage error, CUDA
  // where this build or machine has none is refused with the fix, and where it has one the
  // question is answered on it.
  void deviceIsCheckedBeforeAnythingLoads() {
    CliRun r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--device", "tpu"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--device takes cpu, cuda or cuda:N, not 'tpu'"), qPrintable(r.err));
    r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--device", "cuda:x"});
    QCOMPARE(r.code, 2);
    r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--device", "cpu",
                    "--max-tokens", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runRagraph({"run", "What is nothing?", "--corpus", corpus(), "--model", model(), "--device", "cuda",
                    "--max-tokens", "2", "--json"});
    if (r.code != 0) QVERIFY2(r.code == 1 && r.err.contains("use --device cpu"), qPrintable(r.err));
    else QVERIFY(r.out.contains("\"answer\""));
    // The query encoder's placement (serving commands) is checked the same way, before loading.
    r = runRagraph({"workflow", "run", "--builtin", "oneshot", "What is nothing?", "--corpus", corpus(), "--model", model(),
                    "--encoder-device", "tpu"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--encoder-device takes cpu, cuda or cuda:N, not 'tpu'"), qPrintable(r.err));
    r = runRagraph({"workflow", "run", "--builtin", "oneshot", "What is nothing?", "--corpus", corpus(), "--model", model(),
                    "--encoder-device", "cuda:9"});
    QVERIFY2(r.code == 1 && r.err.contains("--encoder-device cuda:9"), qPrintable(r.err));
    r = runRagraph({"workflow", "run", "--builtin", "oneshot", "What is nothing?", "--corpus", corpus(), "--model", model(),
                    "--encoder-gpu-min", "4"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("add --encoder-device cuda"), qPrintable(r.err));
  }

  // The retrieval path end to end: a tiny embedder trained here, the index built beside the
  // corpus, recall reported, and QA prompts built from what it retrieves.
  void retrievalFromTrainingToAnswers() {
    CliRun r = runRagraph({"train", "embedder", "--corpus", corpus(), "--tokenizer", path("tok"), "--out", path("emb"),
                           "--layers", "1", "--hidden", "16", "--heads", "2", "--steps", "3", "--batch", "4",
                           "--seq-len", "32", "--threads", "1"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runRagraph({"eval", "retrieval", "--corpus", corpus(), "--embedder", path("emb")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("ragraph index build"), qPrintable(r.err));
    r = runRagraph({"index", "build", "--corpus", corpus(), "--embedder", path("emb"), "--nlist", "4", "--quiet", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto built = parseJson(r.out.toStdString());
    QVERIFY2(built.isOk(), qPrintable(r.out));
    QCOMPARE(*built->find("passages")->asInt64(), int64_t{30});
    QVERIFY(fs::exists(corpus().toStdString() + ".index.ivf"));
    // This corpus has no dev split: the index is built, its default nprobe not measured, and
    // the warning says how to measure it.
    QCOMPARE(built->find("default_nprobe_measured")->asBool(), false);
    QVERIFY2(r.err.contains("ragraph index calibrate --split"), qPrintable(r.err));
    // --if-needed keeps an index its embedder built and rebuilds one another embedder built.
    r = runRagraph({"index", "build", "--corpus", corpus(), "--embedder", path("emb"), "--if-needed", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(parseJson(r.out.toStdString())->find("up_to_date")->asBool(), true);
    // A second embedder continued from the first with negatives mined from the first's index,
    // and a lexical branch of whole words added (weighed by the corpus's passages).
    r = runRagraph({"train", "embedder", "--corpus", corpus(), "--out", path("emb-self"), "--hard-negatives", "1",
                    "--self-negatives", "1", "--steps", "1", "--batch", "4", "--seq-len", "32", "--threads", "1"});
    QCOMPARE(r.code, 2);  // a usage error
    QVERIFY2(r.err.contains("--init"), qPrintable(r.err));
    r = runRagraph({"train", "embedder", "--corpus", corpus(), "--init", path("emb"), "--out", path("emb-self"),
                    "--hard-negatives", "1", "--self-negatives", "1", "--span-pairs", "0.2", "--lexical-buckets", "1024",
                    "--lexical-dim", "64", "--steps", "1", "--batch", "4", "--seq-len", "32", "--threads", "1"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("self-mined") || r.err.contains("self-mined"), qPrintable(r.out + r.err));
    QVERIFY2((r.out + r.err).contains("lexical branch of 1024 word buckets in 64 components"), qPrintable(r.out + r.err));
    QFile config(path("emb-self") + "/config.json");
    QVERIFY(config.open(QIODevice::ReadOnly));
    const QByteArray configText = config.readAll();
    QVERIFY(configText.contains("\"lexical_buckets\": 1024") && configText.contains("\"lexical_dim\": 64"));
    r = runRagraph({"train", "embedder", "--corpus", corpus(), "--init", path("emb-self"), "--out", path("emb-lex2"),
                    "--lexical-buckets", "1024", "--steps", "1", "--batch", "4", "--seq-len", "32", "--threads", "1"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("lexical branch already") && r.err.contains("drop --lexical-buckets"), qPrintable(r.err));
    r = runRagraph({"train", "embedder", "--corpus", corpus(), "--init", path("emb"), "--out", path("emb-lex2"),
                    "--lexical-buckets", "99999999", "--steps", "1", "--threads", "1"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--lexical-buckets must be at most"), qPrintable(r.err));
    // An untrained branch added to a trained embedder (`model lexical`): its index holds the wider
    // vectors, and retrieval evaluates over them.
    r = runRagraph({"model", "lexical", "--corpus", corpus(), "--embedder", path("emb"), "--out", path("emb-lex"),
                    "--buckets", "1024", "--dim", "48", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QCOMPARE(*parseJson(r.out.toStdString())->find("dim")->asInt64(), int64_t{48});
    r = runRagraph({"model", "lexical", "--corpus", corpus(), "--embedder", path("emb"), "--out", path("emb-lex")});
    QCOMPARE(r.code, 2);  // nothing is overwritten
    QVERIFY2(r.err.contains("exists"), qPrintable(r.err));
    r = runRagraph({"model", "lexical", "--corpus", corpus(), "--embedder", path("emb-lex"), "--out", path("emb-lex3")});
    QVERIFY2(r.code != 0 && r.err.contains("lexical branch already"), qPrintable(r.err));
    r = runRagraph({"model", "lexical", "--corpus", corpus(), "--embedder", path("emb"), "--out", path("emb-lex3"),
                    "--dim", "0"});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--dim must be"), qPrintable(r.err));
    QVERIFY(!QFile::exists(path("emb-lex3")));
    r = runRagraph({"index", "build", "--corpus", corpus(), "--embedder", path("emb-lex"), "--index",
                    path("lex/corpus.index"), "--nlist", "4", "--quiet", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    r = runRagraph({"eval", "retrieval", "--corpus", corpus(), "--split", "train", "--embedder", path("emb-lex"),
                    "--index", path("lex/corpus.index"), "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    for (const QString& dir : {path("emb-self"), path("emb")}) {
      r = runRagraph({"index", "build", "--corpus", corpus(), "--embedder", dir, "--nlist", "4", "--if-needed",
                      "--quiet", "--json"});
      QVERIFY2(r.code == 0, qPrintable(r.err));
      QCOMPARE(parseJson(r.out.toStdString())->find("up_to_date")->asBool(), false);
      QVERIFY2(r.err.contains("rebuilding the passage index"), qPrintable(r.err));
    }
    // An index anywhere: its directory is made.
    r = runRagraph({"index", "build", "--corpus", corpus(), "--embedder", path("emb-self"), "--index",
                    path("new/dir/corpus.index"), "--nlist", "4", "--quiet"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(QFile::exists(path("new/dir/corpus.index.ivf")));
    r = runRagraph({"index", "calibrate", "--corpus", corpus(), "--embedder", path("emb"), "--quiet"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("dev"), qPrintable(r.err));
    r = runRagraph({"index", "calibrate", "--corpus", corpus(), "--embedder", path("emb"), "--split", "train",
                    "--target", "1", "--quiet", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto calibrated = parseJson(r.out.toStdString());
    QVERIFY2(calibrated.isOk(), qPrintable(r.out));
    const int64_t nprobe = *calibrated->find("nprobe")->find("nprobe")->asInt64();
    QVERIFY(nprobe >= 1 && nprobe <= 4);
    // ... and hybrid's fusion over that nprobe, the best of its grid, which retrieval then uses.
    const JsonValue* fusion = calibrated->find("fusion");
    QVERIFY2(fusion && fusion->isObject(), qPrintable(r.out));
    QCOMPARE(*fusion->find("nprobe")->asInt64(), nprobe);
    QCOMPARE(fusion->find("grid")->size(), size_t{24});
    for (const JsonValue& p : fusion->find("grid")->asArray())
      QVERIFY(p.find("recall")->asDouble() <= fusion->find("recall")->asDouble());
    r = runRagraph({"eval", "retrieval", "--corpus", corpus(), "--embedder", path("emb"), "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto measured = parseJson(r.out.toStdString());
    QVERIFY2(measured.isOk(), qPrintable(r.out));
    QCOMPARE(*measured->find("default_nprobe")->asInt64(), nprobe);
    QCOMPARE(measured->find("default_nprobe_from")->asString(), std::string("calibration"));
    QCOMPARE(measured->find("hybrid_fusion")->find("from")->asString(), std::string("calibration"));
    QCOMPARE(measured->find("hybrid_fusion")->find("c")->asDouble(), fusion->find("c")->asDouble());
    QCOMPARE(measured->find("hybrid_fusion")->find("dense_weight")->asDouble(), fusion->find("dense_weight")->asDouble());
    r = runRagraph({"eval", "retrieval", "--corpus", corpus(), "--embedder", path("emb"), "--nprobe", "4", "--fusion-sweep", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto rec = parseJson(r.out.toStdString());
    QVERIFY2(rec.isOk(), qPrintable(r.out));
    for (const char* key : {"recall@1", "recall@5", "recall@20"}) {
      const double flat = rec->find("flat")->find(key)->asDouble();
      QVERIFY(flat >= 0 && flat <= 1);
      // Searching all 4 clusters is the exact search.
      QCOMPARE(rec->find("ivf_default")->find(key)->asDouble(), flat);
    }
    // Recall@5 per question type: the tiny corpus's two types, the overall figure between them.
    for (const char* method : {"flat", "bm25", "hybrid"}) {
      const JsonValue* byType = rec->find(method)->find("recall@5_by_type");
      QVERIFY2(byType && byType->isObject(), method);
      const double single = byType->find("single_hop")->asDouble(), twoHop = byType->find("two_hop")->asDouble();
      const double overall = rec->find(method)->find("recall@5")->asDouble();
      QVERIFY2(overall >= std::min(single, twoHop) - 1e-9 && overall <= std::max(single, twoHop) + 1e-9, method);
    }
    // The sweep fuses the same two rankings: dense at weight 0 is BM25's order, and the point of
    // the shipped fusion is `hybrid`.
    const JsonValue* sweep = rec->find("fusion_sweep");
    QVERIFY(sweep && sweep->isArray());
    QCOMPARE(sweep->asArray().size(), size_t{24});
    const double usedC = rec->find("hybrid_fusion")->find("c")->asDouble();
    const double usedWeight = rec->find("hybrid_fusion")->find("dense_weight")->asDouble();
    int matched = 0;
    for (const JsonValue& p : sweep->asArray()) {
      const double c = p.find("c")->asDouble(), w = p.find("dense_weight")->asDouble();
      for (const char* key : {"recall@1", "recall@5"}) {
        if (w == 0) QCOMPARE(p.find(key)->asDouble(), rec->find("bm25")->find(key)->asDouble());
        if (c == usedC && w == usedWeight) QCOMPARE(p.find(key)->asDouble(), rec->find("hybrid")->find(key)->asDouble());
      }
      matched += c == usedC && w == usedWeight;
    }
    QCOMPARE(matched, 1);
    QVERIFY(rec->find("ivf")->find("8") == nullptr);  // nprobe above nlist is not listed
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--context", "retrieved", "--embedder",
                    path("emb"), "--nprobe", "4", "--limit", "3", "--max-tokens", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("\"context\": \"retrieved\""));
    r = runRagraph({"run", "What is entity 7 a kind of?", "--corpus", corpus(), "--model", model(), "--context",
                    "retrieved", "--embedder", path("emb"), "--max-tokens", "2", "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto one = parseJson(r.out.toStdString());
    QVERIFY2(one.isOk(), qPrintable(r.out));
    QCOMPARE(one->find("passages")->size(), size_t{5});
  }

  void badInputNamesTheFix() {
    CliRun r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", path("nowhere")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("config.json"), qPrintable(r.err));
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--context", "retrieved",
                    "--embedder", path("no-embedder")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("config.json"), qPrintable(r.err));
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--context", "nearby"});
    QVERIFY2(r.err.contains("retrieved"), qPrintable(r.err));
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--split", "nosuch"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("nosuch"), qPrintable(r.err));
    r = runRagraph({"eval", "qa", "--corpus", corpus(), "--model", model(), "--mask", "diagonal"});
    QCOMPARE(r.code, 2);  // a bad command line
    QVERIFY(r.err.contains("--mask must be causal or block"));
    r = runRagraph({"run", "--corpus", corpus(), "--model", model()});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("no question"));
  }

  // The weights for llama.cpp: a GGUF file (its layout is checked in engine_test_gguf), and
  // bench llm refusing a llama-bench that is not there before it measures anything.
  void ggufExportAndTheLlamaCppComparison() {
    CliRun r = runRagraph({"model", "gguf", "--model", model(), "--out", path("lm.gguf"), "--json"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(doc->find("tensors")->asInt64().value_or(0), int64_t{2 + 9 + 0});  // one layer, tied embeddings
    QFile f(path("lm.gguf"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.read(4), QByteArray("GGUF"));
    QCOMPARE(f.size(), doc->find("bytes")->asInt64().value_or(-1));
    r = runRagraph({"model", "gguf", "--model", model()});
    QCOMPARE(r.code, 2);  // a bad command line
    QVERIFY2(r.err.contains("--out"), qPrintable(r.err));
    r = runRagraph({"bench", "llm", "--model", model(), "--llama-bench", path("no-llama.cpp/llama-bench")});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("--llama-bench") && r.err.contains("llama.cpp"), qPrintable(r.err));
  }

  void benchBlocksServesTheBlockPairsBaseByDefault() {
    // Block-Attention's Table 1 reads one base model three ways (vanilla, block without and with
    // fine-tuning), so without --model `bench blocks` serves the model the shipped vanilla / block
    // pair grew from, rag-llama, and not the default model; --model still wins.
    const fs::path base = fs::path(RAGWB_SOURCE_DIR) / "datasets/models/rag-llama";
    if (!fs::exists(base / "config.json")) QSKIP("no shipped datasets/models/rag-llama");
    const QStringList args = {"bench", "blocks", "--corpus", corpus(), "--tables", "ttft", "--lengths", "64",
                              "--repeats", "1", "--question-tokens", "8"};
    for (const auto& [extra, want] : {std::pair{QStringList{}, fs::weakly_canonical(base).string()},
                                      std::pair{QStringList{"--model", model()}, model().toStdString()}}) {
      CliRun r = runRagraph(args + extra, 120000);
      QVERIFY2(r.code == 0, qPrintable(r.err));
      auto doc = parseJson(r.out.toStdString());
      QVERIFY2(doc.isOk(), qPrintable(r.out));
      const std::string served = doc->find("settings")->find("model")->asString();
      QCOMPARE(fs::weakly_canonical(served).string(), fs::weakly_canonical(want).string());
    }
  }

  void benchPrintsTheFigures() {
    const QStringList args = {"bench", "llm", "--model", model(), "--prompt", "8", "--prefill", "16", "--steps", "2",
                              "--threads", "1", "--json"};
    // The report names OpenBLAS's kernel set (core/blas_info.h): the one OPENBLAS_CORETYPE pins.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("OPENBLAS_CORETYPE", "Haswell");
    CliRun r = runRagraph(args, 120000, env);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    const std::string kernels = doc->find("blas_kernels")->asString();
    QVERIFY2(kernels == "Haswell" || kernels.empty(), kernels.c_str());  // empty: not OpenBLAS
    for (const char* b : {"1", "8", "32", "64"}) QVERIFY(doc->find("decode_tokens_per_s")->find(b)->asDouble() > 0);
    // Left to itself, OpenBLAS 0.3.21 falls back to its SSE3 "Prescott" kernels on CPUs it does not
    // know; ragraph then starts again with the set the CPU has (core/blas_info.h).
    env.remove("OPENBLAS_CORETYPE");
    env.remove("RAGWB_BLAS_RESTART");
    r = runRagraph(args, 120000, env);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    const std::string chosen = doc->find("blas_kernels")->asString();
    if (cpuVectorFeatures().avx2Fma) QVERIFY2(chosen != "Prescott", chosen.c_str());
    QVERIFY(doc->find("prefill_tokens_per_s")->asDouble() > 0);
    const double share = doc->find("overhead_share_b32")->asDouble();
    QVERIFY(share >= 0.0 && share < 1.0);
    QVERIFY(doc->find("floor")->find("read_bandwidth_bytes_per_s")->asDouble() > 0);
  }

  // Serving through the scheduler (after retrievalFromTrainingToAnswers built the index).
  void servingCommands() {
    const QStringList common = {"--corpus", corpus(), "--model", model(), "--embedder", path("emb"), "--nprobe", "4"};
    CliRun r = runRagraph(QStringList{"workflow", "run", "--builtin", "irg", "What is entity 7 a kind of?", "--json"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto one = parseJson(r.out.toStdString());
    QVERIFY2(one.isOk(), qPrintable(r.out));
    QCOMPARE(one->find("stages")->size(), size_t{6});  // retrieve, generate, (retrieve_again, generate) x 2
    QVERIFY(one->find("variables")->find("docs") != nullptr);
    {
      // Every run's output is kept, each round's too: the variables hold only the last ones.
      const auto& stages = one->find("stages")->asArray();
      QCOMPARE(stages[5].find("node")->asString(), std::string("generate"));
      QCOMPARE(stages[5].find("output")->asString(), one->find("answer")->asString());
      QCOMPARE(stages[4].find("output")->asString(), one->find("variables")->find("docs")->asString());
      QVERIFY(!stages[0].find("output")->asString().empty());  // the first round's passages
    }
    QCOMPARE(one->find("passages")->size(), size_t{5});
    r = runRagraph(QStringList{"bench", "serve", "--workflows", "oneshot,multistep", "--modes", "sequential,flashrag,hedra,hedra-nogpucache",
                               "--rps", "40", "--requests", "4", "--json", path("serve.json"), "--trace", path("serve.trace.json"),
                               "--find-max", "--search-steps", "1", "--min-seconds", "0.2", "--kv-mb", "96", "--gpu-cache-mb", "64",
                               "--max-running", "32", "--warmup", "0.1"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QFile f(path("serve.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto doc = parseJson(f.readAll().toStdString());
    QVERIFY(doc.isOk());
    QCOMPARE(doc->find("runs")->size(), size_t{8});  // the warm-up of each workflow is not among them
    QCOMPARE(doc->find("settings")->find("warmup_s")->asDouble(), 0.1);
    QVERIFY(doc->find("settings")->find("prime")->asBool());  // each run's engine primed (the default)
    QVERIFY2(r.err.contains("warming up: oneshot / sequential at 40 rps"), qPrintable(r.err));
    QVERIFY(doc->find("settings")->find("blas_kernels") != nullptr);  // which matrix kernels ran
    // Eq. (2)'s two sizes as given, and where generation ran.
    QCOMPARE(*doc->find("settings")->find("kv_mb")->asInt64(), int64_t{96});
    QCOMPARE(*doc->find("settings")->find("gpu_cache_mb")->asInt64(), int64_t{64});
    QCOMPARE(doc->find("settings")->find("device")->asString(), std::string("cpu"));
    // The generation batch: as given, else the device's default (the CPU's 512 rows a step).
    QCOMPARE(*doc->find("settings")->find("max_running")->asInt64(), int64_t{32});
    QCOMPARE(*doc->find("settings")->find("max_batch_tokens")->asInt64(), int64_t{512});
    // 0.2 s of arrivals at 40 rps are 8 requests: more than --requests 4.
    QCOMPARE(doc->find("runs")->asArray().at(0).find("requests")->asInt64().value_or(0), int64_t{8});
    QCOMPARE(doc->find("runs")->asArray().at(0).find("rps")->asDouble(), 40.0);  // each run says its rate
    QVERIFY(doc->find("search_runs")->size() >= 8);  // at least one probe per workflow and mode
    // Every run generated and retrieved: both workers' work per request, and the ceiling it sets
    // (at most one request per generation busy time).
    for (const auto& run : doc->find("runs")->asArray()) {
      const double gen = run.find("busy_ms_per_request")->find("generation")->asDouble();
      const double ret = run.find("busy_ms_per_request")->find("retrieval")->asDouble();
      const double emb = run.find("busy_ms_per_request")->find("embedding")->asDouble();
      const double cpu = run.find("cpu_ms_per_request")->asDouble();
      const double ceiling = run.find("ceiling_rps")->asDouble();
      QVERIFY2(gen > 0 && ret > 0, qPrintable(QString("generation %1 ms, retrieval %2 ms").arg(gen).arg(ret)));
      QVERIFY(ceiling > 0 && ceiling <= 1000.0 / gen + 1e-9 && ceiling <= 1000.0 / ret + 1e-9);
      // Hedra's queries are embedded on the embedding thread, the baselines' on the search thread;
      // the ceiling holds that thread's time too, on this machine's cores. The process's CPU time
      // is reported beside it.
      const std::string mode = run.find("mode")->asString();
      QVERIFY2(mode.starts_with("hedra") ? emb > 0 : emb == 0, mode.c_str());
      const double cores = std::max(1u, std::thread::hardware_concurrency());
      QVERIFY(ceiling <= cores * 1000.0 / (gen + ret + emb) + 1e-9);
      if (emb > 0) QVERIFY(ceiling <= 1000.0 / emb + 1e-9);
      QVERIFY2(cpu > 0, mode.c_str());
      QVERIFY2(run.find("prime_s")->asDouble() > 0, mode.c_str());
      // The generation worker's busy time, split: the forward pass, the runner's host work, the
      // worker's own; together no more than the busy time they are part of.
      const JsonValue* steps = run.find("generation_steps");
      QVERIFY(steps != nullptr && steps->find("steps")->asInt64().value_or(0) > 0);
      QVERIFY(steps->find("rows_per_step")->asDouble() >= 1);
      const double fwd = steps->find("forward_ms_per_request")->asDouble();
      const double runnerHost = steps->find("runner_host_ms_per_request")->asDouble();
      const double workerHost = steps->find("worker_host_ms_per_request")->asDouble();
      QVERIFY2(fwd > 0 && runnerHost >= 0 && workerHost >= 0 && fwd + runnerHost + workerHost <= gen * (1 + 1e-9) + 1e-6,
               qPrintable(QString("forward %1, runner %2, worker %3 of %4 ms").arg(fwd).arg(runnerHost).arg(workerHost).arg(gen)));
      // Generation on the CPU: no run had a GPU cluster cache, so none served a visit.
      QVERIFY(run.find("gpu_cache")->find("active")->isBool() && !run.find("gpu_cache")->find("active")->asBool());
      QCOMPARE(run.find("gpu_cache")->find("hit_rate")->asDouble(), 0.0);
    }
    for (const char* w : {"oneshot", "multistep"}) {
      const auto* s = doc->find("summary")->find(w);
      QVERIFY(s != nullptr);
      QVERIFY(s->find("hedra_over_flashrag") != nullptr && s->find("hedra_over_sequential") != nullptr);
      QVERIFY(s->find("max_sustained_rps")->find("hedra") != nullptr);
      QVERIFY(s->find("ceiling_rps")->find("hedra")->asDouble() > 0);
      // hedra_over_bound is hedra's highest sustained rate over its ceiling (null when no rate
      // was sustained), and over_bound says the same of every policy.
      const JsonValue* sustained = s->find("max_sustained_rps")->find("hedra");
      const JsonValue* overBound = s->find("hedra_over_bound");
      QVERIFY(overBound != nullptr && s->find("over_bound")->find("flashrag") != nullptr);
      if (sustained->isNull()) QVERIFY(overBound->isNull());
      else QCOMPARE(overBound->asDouble(), sustained->asDouble() / s->find("ceiling_rps")->find("hedra")->asDouble());
      // ... and over the ceiling of the run that sustained it, which is that run's own.
      const JsonValue* atSustained = s->find("ceiling_at_sustained_rps")->find("hedra");
      const JsonValue* overAtSustained = s->find("over_ceiling_at_sustained")->find("hedra");
      QVERIFY(atSustained != nullptr && overAtSustained != nullptr);
      if (sustained->isNull()) {
        QVERIFY(atSustained->isNull() && overAtSustained->isNull());
      } else {
        bool found = false;
        for (const char* list : {"runs", "search_runs"})
          for (const auto& run : doc->find(list)->asArray())
            if (run.find("workflow")->asString() == w && run.find("mode")->asString() == "hedra" &&
                run.find("rps")->asDouble() == sustained->asDouble() && run.find("slo_attainment")->asDouble() >= 0.9)
              found = found || run.find("ceiling_rps")->asDouble() == atSustained->asDouble();
        QVERIFY2(found, w);
        QCOMPARE(overAtSustained->asDouble(), sustained->asDouble() / atSustained->asDouble());
      }
      // The GPU cluster cache's gain, hedra over hedra-nogpucache (on this machine both search on
      // the CPU: the ratio is whatever the runs gave, computed from the two rates).
      const JsonValue* withoutCache = s->find("max_sustained_rps")->find("hedra-nogpucache");
      const JsonValue* speedup = s->find("gpu_cache_speedup");
      QVERIFY(speedup != nullptr && withoutCache != nullptr);
      if (sustained->isNull() || withoutCache->isNull()) QVERIFY(speedup->isNull());
      else QCOMPARE(speedup->asDouble(), sustained->asDouble() / withoutCache->asDouble());
      QVERIFY(s->find("latency_hedra-nogpucache_over_hedra")->find("40") != nullptr);
    }
    QVERIFY(QFile::exists(path("serve.trace.json")));
    // Priming: the same run with and without it. The run's counters start after the priming (the
    // prompts looked up in the prefix cache are the run's own, the same either way), and the
    // primed engine holds every prompt's prefix already (more of them found).
    std::map<std::string, std::pair<int64_t, int64_t>> prefix;  // --prime: (queried, hit) tokens
    for (const char* prime : {"on", "off"}) {
      r = runRagraph(QStringList{"bench", "serve", "--workflows", "oneshot", "--modes", "flashrag", "--rps", "40",
                                 "--requests", "4", "--min-seconds", "0", "--warmup", "0", "--prime", prime,
                                 "--json", path("prime.json")} + common);
      QVERIFY2(r.code == 0, qPrintable(r.err));
      QFile pf(path("prime.json"));
      QVERIFY(pf.open(QIODevice::ReadOnly));
      auto pd = parseJson(pf.readAll().toStdString());
      QVERIFY(pd.isOk());
      QCOMPARE(pd->find("settings")->find("prime")->asBool(), std::string(prime) == "on");
      QCOMPARE(pd->find("settings")->find("rerank")->asString(), std::string("as written"));
      const JsonValue& run = pd->find("runs")->asArray().at(0);
      QCOMPARE(run.find("completed")->asInt64().value_or(0), int64_t{4});
      QCOMPARE(run.find("prime_s")->asDouble() > 0, std::string(prime) == "on");
      prefix[prime] = {run.find("prefix_cache")->find("queried_tokens")->asInt64().value_or(-1),
                       run.find("prefix_cache")->find("hit_tokens")->asInt64().value_or(-1)};
    }
    QVERIFY(prefix["on"].first > 0);
    QCOMPARE(prefix["on"].first, prefix["off"].first);
    QVERIFY2(prefix["on"].second > prefix["off"].second,
             qPrintable(QString("hit tokens primed %1, cold %2").arg(prefix["on"].second).arg(prefix["off"].second)));
    // --rerank bm25: the built-ins served with their passages reordered by BM25 (the BM25 index
    // built first), said in the settings.
    r = runRagraph(QStringList{"bench", "serve", "--workflows", "oneshot", "--modes", "hedra", "--rps", "40", "--requests", "4",
                               "--min-seconds", "0", "--warmup", "0", "--rerank", "bm25", "--json", path("rerank.json")} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    {
      QFile rf(path("rerank.json"));
      QVERIFY(rf.open(QIODevice::ReadOnly));
      auto rd = parseJson(rf.readAll().toStdString());
      QVERIFY(rd.isOk());
      QCOMPARE(rd->find("settings")->find("rerank")->asString(), std::string("bm25"));
      QCOMPARE(rd->find("runs")->asArray().at(0).find("completed")->asInt64().value_or(0), int64_t{4});
    }
    // Bad options: exit 2, naming the fix.
    for (const auto& [option, value, named] : {std::tuple{"--rerank", "cross", "use none or bm25"},
                                               std::tuple{"--modes", "fastest", "hedra-nospec"},
                                               std::tuple{"--rps", "0", "--rps"},
                                               std::tuple{"--min-seconds", "-1", "--min-seconds"},
                                               std::tuple{"--warmup", "-1", "--warmup"},
                                               std::tuple{"--prime", "maybe", "--prime"},
                                               std::tuple{"--spec-load", "-1", "--spec-load"},
                                               std::tuple{"--kv-mb", "0", "--kv-mb"},
                                               std::tuple{"--max-running", "-1", "--max-running"},
                                               std::tuple{"--max-batch-tokens", "100000", "--max-batch-tokens"},
                                               std::tuple{"--gpu-cache-mb", "0", "hedra-nogpucache"}}) {
      r = runRagraph(QStringList{"bench", "serve", option, value} + common);
      QCOMPARE(r.code, 2);
      QVERIFY2(r.err.contains(named), qPrintable(r.err));
    }
  }

  // Accuracy of a workflow through the engine, per question type (after the index is built).
  void evalWorkflowScoresThroughTheEngine() {
    const QStringList common = {"--corpus", corpus(), "--model", model(), "--embedder", path("emb"), "--nprobe", "4"};
    CliRun r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--limit", "12", "--json", "--answers",
                                      path("answers.jsonl")} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto doc = parseJson(r.out.toStdString());
    QVERIFY2(doc.isOk(), qPrintable(r.out));
    QCOMPARE(doc->find("questions")->asInt64().value_or(0), int64_t{12});
    QCOMPARE(doc->find("method")->asString(), std::string("hybrid"));  // the built-in's own, chosen by measurement
    const double acc = doc->find("accuracy")->asDouble();
    QVERIFY(acc >= 0 && acc <= 1);
    // --answers: a line per question with its answer and every variable; the correct ones are
    // the accuracy's.
    QFile answers(path("answers.jsonl"));
    QVERIFY(answers.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = answers.readAll().trimmed().split('\n');
    QCOMPARE(lines.size(), 12);
    int correct = 0;
    for (const QByteArray& line : lines) {
      auto a = parseJson(line.toStdString());
      QVERIFY2(a.isOk(), line.constData());
      QVERIFY(!a->find("question")->asString().empty() && a->find("gold")->size() > 0);
      QCOMPARE(a->find("variables")->find("answer")->asString(), a->find("answer")->asString());
      QVERIFY(a->find("variables")->find("docs") != nullptr);  // what the retrieval found
      // ... and every node run in order with what it wrote.
      const auto& steps = a->find("steps")->asArray();
      QCOMPARE(steps.size(), size_t{2});
      QCOMPARE(steps[0].find("node")->asString(), std::string("retrieve"));
      QCOMPARE(steps[0].find("output")->asString(), a->find("variables")->find("docs")->asString());
      QCOMPARE(steps[1].find("output")->asString(), a->find("answer")->asString());
      correct += a->find("correct")->asBool();
    }
    QVERIFY(std::abs(correct / 12.0 - acc) < 1e-9);
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--answers", path("no/such/dir/a.jsonl")} + common);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("existing directory"), qPrintable(r.err));
    int64_t perType = 0;
    double weighted = 0;
    for (const auto& [type, n] : doc->find("questions_by_type")->asObject()) {
      perType += n.asInt64().value_or(0);
      weighted += doc->find("by_type")->find(type)->asDouble() * static_cast<double>(n.asInt64().value_or(0));
    }
    QCOMPARE(perType, int64_t{12});                   // every question counted under its type
    QVERIFY(std::abs(weighted / 12 - acc) < 1e-9);    // and the types add up to the whole
    QCOMPARE(doc->find("retrievals_per_request")->asDouble(), 1.0);  // One-shot retrieves once
    QVERIFY(doc->find("generated_tokens_per_request")->asDouble() > 0);
    // Hybrid's BM25 side built its FTS5 index beside the corpus; each side alone, through the same engine.
    for (const char* method : {"dense", "bm25"}) {
      r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--limit", "12", "--method", method, "--json"} +
                     common);
      QVERIFY2(r.code == 0, qPrintable(r.err));
      auto m = parseJson(r.out.toStdString());
      QVERIFY2(m.isOk(), qPrintable(r.out));
      QCOMPARE(m->find("method")->asString(), std::string(method));
      QCOMPARE(m->find("failed")->asInt64().value_or(-1), int64_t{0});
      QCOMPARE(m->find("retrievals_per_request")->asDouble(), 1.0);
    }
    QVERIFY(QFile::exists(corpus() + ".fts"));
    // A missing BM25 index is built before any question is served, and said so; a dense-only
    // workflow that does not rerank does not need it.
    QVERIFY(QFile::remove(corpus() + ".fts"));
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--limit", "2", "--method", "dense", "--rerank",
                               "none", "--json"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(!QFile::exists(corpus() + ".fts"));
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--limit", "2", "--json"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.indexOf("building the BM25 index") >= 0 &&
                 r.err.indexOf("building the BM25 index") < r.err.indexOf("answering"),
             qPrintable(r.err));
    QVERIFY(QFile::exists(corpus() + ".fts"));
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--method", "sparse"} + common);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("bm25"), qPrintable(r.err));
    // --rerank bm25 on a dense workflow needs the BM25 index too: built first, and reported.
    QVERIFY(QFile::remove(corpus() + ".fts"));
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--limit", "3", "--method", "dense", "--rerank",
                               "bm25", "--json"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.indexOf("building the BM25 index") >= 0, qPrintable(r.err));
    auto reranked = parseJson(r.out.toStdString());
    QVERIFY2(reranked.isOk(), qPrintable(r.out));
    QCOMPARE(reranked->find("rerank")->asString(), std::string("bm25"));
    QCOMPARE(reranked->find("failed")->asInt64().value_or(-1), int64_t{0});
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--rerank", "cross"} + common);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--rerank cross: use none or bm25"), qPrintable(r.err));
    // A compiled-in variant by name: irg-bridge searches four times a request (the question, its
    // top 3 again, then the answer before each of the two later rounds).
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "irg-bridge", "--limit", "3", "--json"} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto bridge = parseJson(r.out.toStdString());
    QVERIFY2(bridge.isOk(), qPrintable(r.out));
    QCOMPARE(bridge->find("workflow")->asString(), std::string("irg-bridge"));
    QCOMPARE(bridge->find("retrievals_per_request")->asDouble(), 4.0);
    // Bad input names the fix before any work starts.
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "nope"} + common);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("oneshot") && r.err.contains("irg-bridge"), qPrintable(r.err));
    r = runRagraph(QStringList{"eval", "workflow", "--builtin", "oneshot", "--split", "nope"} + common);
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("train"), qPrintable(r.err));  // lists the splits there are
  }

  // The prefix cache on vs off over one trace, and the policies' hit-rate table.
  void benchPrefixComparesCacheOnAndOff() {
    const QStringList common = {"--corpus", corpus(), "--model", model(), "--embedder", path("emb"), "--nprobe", "4"};
    CliRun r = runRagraph(QStringList{"bench", "prefix", "--requests", "40", "--rps", "200", "--sim-requests", "60",
                                      "--deterministic", "--json", path("prefix.json")} + common);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QFile f(path("prefix.json"));
    QVERIFY(f.open(QIODevice::ReadOnly));
    auto doc = parseJson(f.readAll().toStdString());
    QVERIFY(doc.isOk());
    QVERIFY(doc->find("ttft_p50_ms")->find("on")->asDouble() > 0);
    QVERIFY(doc->find("ttft_p50_ms")->find("off")->asDouble() > 0);
    QVERIFY(doc->find("hit_rate")->asDouble() > 0);  // the template's tokens at least repeat
    QCOMPARE(doc->find("serve")->find("off")->find("hit_rate")->asDouble(), 0.0);
    // The cache changes no answer.
    QCOMPARE(doc->find("serve")->find("on")->find("accuracy")->asDouble(),
             doc->find("serve")->find("off")->find("accuracy")->asDouble());
    for (const char* trace : {"uniform", "zipf:1.1", "temporal"})
      for (const char* size : {"5%", "10%", "20%"})
        for (const char* policy : {"lru", "lfu", "pgdsf"}) {
          const auto* v = doc->find("hit_rates")->find(trace)->find(size)->find(policy);
          QVERIFY(v != nullptr);
          QVERIFY(v->asDouble() >= 0 && v->asDouble() <= 1);
        }
    r = runRagraph(QStringList{"bench", "prefix", "--policies", "fifo"} + common);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("lru"), qPrintable(r.err));
  }
};

QTEST_GUILESS_MAIN(TestCliLlm)
#include "test_cli_llm.moc"
