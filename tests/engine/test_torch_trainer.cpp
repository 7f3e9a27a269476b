// The training loop (model/trainer.h) on tiny models: it learns, resumes bit for bit, follows its
// schedule, applies masks and loss weights, ignores padding and keeps its checkpoint whole.
#include "model/bert.h"  // torch first; QT_NO_KEYWORDS keeps Qt's macros out of its way

#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <random>

#include "core/fs.h"
#include "model/llama.h"
#include "model/bpe_trainer.h"
#include "model/lexical_words.h"
#include "model/tokenizer.h"
#include "model/trainer.h"
#include "status_checks.h"
#include "core/random.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

namespace {

constexpr int kVocab = 16;

LlamaConfig tinyConfig() {
  LlamaConfig c;
  c.architectureName = "LlamaForCausalLM";
  c.hiddenSize = 32;
  c.intermediateSize = 64;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 2;
  c.numKeyValueHeads = 1;  // grouped-query attention is exercised
  c.headDim = 16;
  c.maxPositionEmbeddings = 64;
  c.vocabSize = kVocab;
  c.tieWordEmbeddings = true;
  return c;
}

// k random tokens in [3, vocab), the separator 2, then the same k tokens again: only the copy
// is weighted. Every `blockEvery`-th example (0: none) gets a block mask over its two halves.
class CopyTask : public ExampleSource {
public:
  int k = 6;
  int blockEvery = 0;
  std::vector<int64_t> stepsAsked;

  Result<TrainingExample> example(uint64_t seed, int64_t step, int64_t index, int64_t) override {
    stepsAsked.push_back(step);
    std::mt19937_64 rng(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)),
                                             static_cast<uint64_t>(index)));
    TrainingExample e;
    for (int i = 0; i < k; ++i) e.tokens.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
    e.tokens.push_back(2);
    for (int i = 0; i < k; ++i) e.tokens.push_back(e.tokens[static_cast<size_t>(i)]);
    e.lossWeights.assign(e.tokens.size(), 0.0f);
    for (size_t i = static_cast<size_t>(k) + 1; i < e.tokens.size(); ++i) e.lossWeights[i] = 1.0f;
    if (blockEvery > 0 && index % blockEvery == 0) e.mask = AttentionMask::blocks({0, k / 2, k});
    return e;
  }
};

// Returns the examples it was given, by index (modulo their count), whatever the key.
class FixedExamples : public ExampleSource {
public:
  std::vector<TrainingExample> examples;
  Result<TrainingExample> example(uint64_t, int64_t, int64_t index, int64_t) override {
    return examples[static_cast<size_t>(index) % examples.size()];
  }
};

TrainingExample counting(int n, AttentionMask mask = {}) {
  TrainingExample e;
  for (int i = 0; i < n; ++i) e.tokens.push_back(3 + (i * 5) % (kVocab - 3));
  e.lossWeights.assign(static_cast<size_t>(n), 1.0f);
  e.mask = std::move(mask);
  return e;
}

TrainSetup setupIn(const fs::path& out, int64_t steps) {
  TrainSetup s;
  s.outDir = out;
  s.model.config = tinyConfig();
  s.params.steps = steps;
  s.params.batch = 8;
  s.params.seqLen = 32;
  s.params.lr = 1e-2;
  s.params.minLr = 1e-3;
  s.params.warmupSteps = std::min<int64_t>(10, steps - 1);
  s.params.checkpointEvery = 0;
  s.params.logEvery = 5;
  s.params.seed = 7;
  s.params.threads = 2;
  return s;
}

double firstLoss(const fs::path& out, ExampleSource& source, int64_t batch) {
  TrainSetup s = setupIn(out, 1);
  s.params.batch = batch;
  Result<TrainResult> r = trainLanguageModel(s, source, nullptr, {});
  if (!r) qWarning("%s", r.status().message().c_str());
  return r ? r->lossHistory.at(0) : std::nan("");
}

// Embedder pairs: the query is k random tokens, its passage the same tokens in reverse order
// followed by two noise tokens; every pair has its own passage. Only an encoder that reads the
// tokens can match a query to its passage among the batch's.
class MatchTask : public PairSource {
public:
  int k = 4;
  Result<TrainingPair> pair(uint64_t seed, int64_t step, int64_t index, int64_t) override {
    std::mt19937_64 rng(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)),
                                             static_cast<uint64_t>(index)));
    TrainingPair p;
    for (int i = 0; i < k; ++i) p.query.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
    p.passage.assign(p.query.rbegin(), p.query.rend());
    for (int i = 0; i < 2; ++i) p.passage.push_back(3 + static_cast<int32_t>(rng() % (kVocab - 3)));
    p.passageId = 0;
    return p;
  }
};

// MatchTask with a hard negative per pair: the query's tokens in another order (rotated by one)
// with two noise tokens, the same token set as the positive. In-batch negatives never share a
// query's tokens, so only the hard negatives teach the encoder to read their order.
class LookAlikeTask : public MatchTask {
public:
  Result<TrainingPair> pair(uint64_t seed, int64_t step, int64_t index, int64_t n) override {
    RAG_ASSIGN_OR_RETURN(TrainingPair p, MatchTask::pair(seed, step, index, n));
    p.negative.assign(p.query.begin() + 1, p.query.end());
    p.negative.push_back(p.query.front());
    p.negative.insert(p.negative.end(), p.passage.end() - 2, p.passage.end());
    p.negativeId = 0;
    return p;
  }
};

// Pairs over real text: a query names one of 48 made-up words ("find qzvkre"), its passage holds
// the same word among two others ("zqkver qzvkre vkzqre"). The 48 words of a seed are anagrams
// of one another, so pooled pieces (nearly the same letters) barely tell them apart; a word's
// own identity does, for words never trained on (another `wordSeed`) too.
class WordTask : public PairSource {
public:
  WordTask(const Tokenizer& tok, uint64_t wordSeed) : words(madeUpWords(wordSeed)), m_tok(tok) {}
  static std::vector<std::string> madeUpWords(uint64_t wordSeed) {
    std::mt19937_64 rng(wordSeed);
    std::string letters = "abcdefghijklmnopqrstuvwxyz";
    for (size_t i = letters.size(); i > 1; --i) std::swap(letters[i - 1], letters[rng() % i]);
    letters.resize(6);
    std::vector<std::string> out;
    while (out.size() < 48) {
      for (size_t i = letters.size(); i > 1; --i) std::swap(letters[i - 1], letters[rng() % i]);
      if (std::find(out.begin(), out.end(), letters) == out.end()) out.push_back(letters);
    }
    return out;
  }
  // Texts holding every word of a seed, to train the tokenizer on.
  static std::vector<std::string> texts(uint64_t wordSeed) {
    const std::vector<std::string> words = madeUpWords(wordSeed);
    std::vector<std::string> out;
    for (size_t i = 0; i < words.size(); ++i) out.push_back("find " + words[i] + " " + words[(i * 7 + 3) % words.size()]);
    return out;
  }
  Result<TrainingPair> pair(uint64_t seed, int64_t step, int64_t index, int64_t) override {
    std::mt19937_64 rng(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(index)));
    const size_t w = rng() % words.size();
    TrainingPair p;
    p.query = m_tok.encode("find " + words[w], {.parseSpecial = false});
    p.passage = m_tok.encode(words[rng() % words.size()] + " " + words[w] + " " + words[rng() % words.size()],
                             {.parseSpecial = false});
    p.passageId = static_cast<int64_t>(w) + 1;
    return p;
  }
  std::vector<std::string> words;

private:
  const Tokenizer& m_tok;
};

TrainSetup embedderSetupIn(const fs::path& out, int64_t steps) {
  TrainSetup s = setupIn(out, steps);
  BertConfig& c = s.model.encoder;
  c.architectureName = "BertModel";
  c.hiddenSize = 32;
  c.numHiddenLayers = 2;
  c.numAttentionHeads = 2;
  c.intermediateSize = 64;
  c.vocabSize = kVocab;
  c.maxPositionEmbeddings = 16;
  s.params.batch = 16;
  s.params.lr = 3e-3;
  s.params.minLr = 3e-4;
  return s;
}

}  // namespace

class TestTorchTrainer : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path path(const std::string& name) const { return fs::path(m_dir.path().toStdString()) / name; }

private Q_SLOTS:
  void initTestCase() { QVERIFY(m_dir.isValid()); }

  void aTinyModelLearnsToCopy() {
    CopyTask task;
    TrainSetup s = setupIn(path("copy"), 100);
    s.params.batch = 16;
    std::vector<TrainProgress> reports;
    TrainCallbacks cb;
    cb.progress = [&](const TrainProgress& p) { reports.push_back(p); };
    Result<TrainResult> r = trainLanguageModel(s, task, nullptr, cb);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->completed);
    QCOMPARE(r->step, int64_t{100});
    QCOMPARE(r->lossHistory.size(), size_t{100});
    const double start = r->lossHistory.front();
    qInfo("copy task: loss %.3f -> %.3f in 100 steps", start, r->finalLoss);
    QVERIFY2(start > 2.0, qPrintable(QString("start loss %1").arg(start)));  // ~ln(13): guessing
    QVERIFY2(r->finalLoss < 0.25 * start,
             qPrintable(QString("loss went from %1 to %2").arg(start).arg(r->finalLoss)));
    QCOMPARE(reports.size(), size_t{20});
    QCOMPARE(reports.back().step, int64_t{100});
    QVERIFY(reports.back().tokensPerSecond > 0);
    QVERIFY(reports.back().gradNorm > 0);
    QCOMPARE(r->tokens, int64_t{100 * 16 * 13});
    // The final model is a Hugging Face directory LlamaModel::load reads back.
    auto m = LlamaModel::load(path("copy"));
    QVERIFY2(m.isOk(), m.status().message().c_str());
    QCOMPARE(m->config().numKeyValueHeads, int64_t{1});
    QVERIFY(fs::exists(path("copy") / "checkpoint/optimizer.pt"));
  }

  void anEmbedderLearnsToMatchQueriesToPassages() {
    MatchTask task, heldOut;
    TrainSetup s = embedderSetupIn(path("embedder"), 150);
    s.params.evalEvery = 150;
    s.params.evalExamples = 32;
    Result<TrainResult> r = trainEmbedder(s, task, &heldOut, {}, 0.1);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->completed);
    // In-batch cross-entropy starts at about ln(16) = 2.77 (guessing) and must fall far below it.
    const double start = r->lossHistory.front();
    qInfo("embedder match task: loss %.3f -> %.3f, held-out %.3f", start, r->finalLoss,
          r->evalHistory.back().loss);
    // A random encoder already pools token identities, so it starts above chance (ln 16 = 2.77
    // is guessing); training must still cut the held-out loss to a fraction of the start.
    QVERIFY2(r->evalHistory.back().loss < 0.25 * start,
             qPrintable(QString("held-out loss %1 vs start %2").arg(r->evalHistory.back().loss).arg(start)));
    QCOMPARE(r->tokens, int64_t{150 * 16 * (4 + 6)});
    // The result is a BERT checkpoint whose embeddings put a fresh query nearest its passage.
    auto m = BertModel::load(path("embedder"));
    QVERIFY2(m.isOk(), m.status().message().c_str());
    torch::NoGradGuard noGrad;
    std::vector<int64_t> q, d;
    for (int i = 0; i < 16; ++i) {
      TrainingPair p = *heldOut.pair(99, 0, i, 16);
      q.insert(q.end(), p.query.begin(), p.query.end());
      d.insert(d.end(), p.passage.begin(), p.passage.end());
    }
    torch::Tensor qe = m->embed(torch::tensor(q).view({16, 4}), torch::ones({16, 4}, torch::kBool));
    torch::Tensor de = m->embed(torch::tensor(d).view({16, 6}), torch::ones({16, 6}, torch::kBool));
    const int64_t hits = torch::matmul(qe, de.t()).argmax(1).eq(torch::arange(16)).sum().item<int64_t>();
    QVERIFY2(hits >= 12, qPrintable(QString("%1 of 16 queries found their passage").arg(hits)));
  }

  void hardNegativesTeachWhatInBatchOnesCannot() {
    LookAlikeTask task, heldOut;
    TrainSetup s = embedderSetupIn(path("embedder-hard"), 150);
    Result<TrainResult> r = trainEmbedder(s, task, nullptr, {}, 0.1);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->tokens, int64_t{150 * 16 * (4 + 6 + 6)});  // the negatives are encoded too
    auto m = BertModel::load(path("embedder-hard"));
    QVERIFY2(m.isOk(), m.status().message().c_str());
    torch::NoGradGuard noGrad;
    std::vector<int64_t> q, d, neg;
    for (int i = 0; i < 16; ++i) {
      TrainingPair p = *heldOut.pair(99, 0, i, 16);
      q.insert(q.end(), p.query.begin(), p.query.end());
      d.insert(d.end(), p.passage.begin(), p.passage.end());
      neg.insert(neg.end(), p.negative.begin(), p.negative.end());
    }
    torch::Tensor qe = m->embed(torch::tensor(q).view({16, 4}), torch::ones({16, 4}, torch::kBool));
    torch::Tensor de = m->embed(torch::tensor(d).view({16, 6}), torch::ones({16, 6}, torch::kBool));
    torch::Tensor ne = m->embed(torch::tensor(neg).view({16, 6}), torch::ones({16, 6}, torch::kBool));
    const int64_t wins = (qe * de).sum(1).gt((qe * ne).sum(1)).sum().item<int64_t>();
    QVERIFY2(wins >= 13, qPrintable(QString("%1 of 16 queries preferred their passage to its look-alike").arg(wins)));
  }

  // A lexical branch added at weight 0 changes none of the starting model's similarities (the
  // first step's loss is the plain run's); at weight 0.5, on pairs of words never trained on, the
  // held-out loss ends well below the plain encoder's, and its word weights learn. It needs the
  // run's tokenizer.
  void aLexicalBranchStartsNeutralAndLearnsWords() {
    const fs::path tokDir = path("lexical-tokenizer");
    fs::create_directories(tokDir);
    BpeTrainParams bpe;
    bpe.vocabSize = 300;
    auto json = trainByteLevelBpe(textsFrom(WordTask::texts(11)), bpe);
    QVERIFY2(json.isOk(), json.status().message().c_str());
    QVERIFY(writeFileAtomic(tokDir / "tokenizer.json", *json).isOk());
    Tokenizer tok = *Tokenizer::load(tokDir / "tokenizer.json");
    WordTask task(tok, 11), heldOut(tok, 12);
    auto setup = [&](const std::string& name, bool lexical, double weight = 0.5) {
      TrainSetup s = embedderSetupIn(path(name), 200);
      s.model.encoder.vocabSize = tok.vocabSize();
      s.model.encoder.maxPositionEmbeddings = 32;
      s.params.seqLen = 32;
      s.params.evalEvery = 200;
      s.params.evalExamples = 64;
      s.tokenizerDir = tokDir;
      if (lexical) {
        s.model.lexical = lexicalStatistics(WordTask::texts(11), 4096);
        s.model.lexicalDim = 256;
        s.model.lexicalWeight = weight;
      }
      return s;
    };
    Result<TrainResult> plain = trainEmbedder(setup("words-plain", false), task, &heldOut, {}, 0.1);
    Result<TrainResult> lexical = trainEmbedder(setup("words-lexical", true), task, &heldOut, {}, 0.1);
    TrainSetup neutral = setup("words-neutral", true, 0.0);
    neutral.params.steps = 1;
    neutral.params.evalEvery = 0;
    neutral.params.warmupSteps = 0;
    Result<TrainResult> zero = trainEmbedder(neutral, task, nullptr, {}, 0.1);
    QVERIFY2(plain.isOk(), plain.status().message().c_str());
    QVERIFY2(lexical.isOk(), lexical.status().message().c_str());
    QVERIFY2(zero.isOk(), zero.status().message().c_str());
    qInfo("word task: first loss %.5f plain, %.5f with a weight-0 branch; held-out %.4f plain, %.4f lexical",
          plain->lossHistory.front(), zero->lossHistory.front(), plain->evalHistory.back().loss,
          lexical->evalHistory.back().loss);
    QVERIFY(std::abs(plain->lossHistory.front() - zero->lossHistory.front()) < 1e-5);
    QVERIFY(lexical->evalHistory.back().loss < 0.6 * plain->evalHistory.back().loss);
    auto m = BertModel::load(path("words-lexical"));
    QVERIFY2(m.isOk(), m.status().message().c_str());
    QCOMPARE(m->config().lexicalBuckets, int64_t{4096});
    QCOMPARE(m->config().lexicalDim, int64_t{256});
    // The word weights moved from their start, sqrt(0.5 idf).
    std::vector<float> start = lexicalStatistics(WordTask::texts(11), 4096).idf;
    for (float& w : start) w = std::sqrt(0.5f * w);
    QVERIFY((m->weights().lexicalWeight.to(torch::kFloat32) - torch::tensor(start)).abs().max().item<float>() > 0.01f);

    TrainSetup noTokenizer = setup("words-notok", true);
    noTokenizer.tokenizerDir.clear();
    noTokenizer.params.evalEvery = 0;
    const Status refused = trainEmbedder(noTokenizer, task, nullptr, {}).status();
    QVERIFY2(mentions(refused, {"lexical branch", "tokenizer"}), refused.message().c_str());
  }

  void embedderRunsResumeAndRefuseBadInput() {
    MatchTask task;
    Result<TrainResult> a = trainEmbedder(embedderSetupIn(path("emb-straight"), 6), task, nullptr, {});
    QVERIFY2(a.isOk(), a.status().message().c_str());
    int64_t polled = 0;
    TrainCallbacks stopAt3;
    stopAt3.stopRequested = [&] { return ++polled == 3; };
    QVERIFY(!trainEmbedder(embedderSetupIn(path("emb-split"), 6), task, nullptr, stopAt3)->completed);
    TrainSetup resume = embedderSetupIn(path("emb-split"), 6);
    resume.resume = true;
    Result<TrainResult> b = trainEmbedder(resume, task, nullptr, {});
    QVERIFY2(b.isOk(), b.status().message().c_str());
    QCOMPARE(b->lossHistory.size(), a->lossHistory.size());
    for (size_t i = 0; i < a->lossHistory.size(); ++i)
      QVERIFY2(b->lossHistory[i] == a->lossHistory[i],
               qPrintable(QString("step %1: %2 vs %3").arg(i).arg(b->lossHistory[i], 0, 'g', 17).arg(a->lossHistory[i], 0, 'g', 17)));
    auto ma = BertModel::load(path("emb-straight"));
    auto mb = BertModel::load(path("emb-split"));
    std::vector<torch::Tensor> pa = ma->parameters(), pb = mb->parameters();
    for (size_t i = 0; i < pa.size(); ++i) QVERIFY(torch::equal(pa[i], pb[i]));

    QVERIFY(mentions(trainEmbedder(embedderSetupIn(path("emb-t"), 2), task, nullptr, {}, 0.0).status(),
                     {"--temperature"}));
    task.k = 0;  // an empty query
    QVERIFY(mentions(trainEmbedder(embedderSetupIn(path("emb-empty"), 2), task, nullptr, {}).status(),
                     {"training pair 0 of step 0", "1 to 16"}));
  }

  void resumeContinuesBitForBit() {
    CopyTask straightTask;
    straightTask.blockEvery = 3;
    TrainSetup straight = setupIn(path("straight"), 20);
    Result<TrainResult> a = trainLanguageModel(straight, straightTask, nullptr, {});
    QVERIFY2(a.isOk(), a.status().message().c_str());

    // The same run stopped after 10 steps...
    CopyTask firstHalf;
    firstHalf.blockEvery = 3;
    TrainSetup split = setupIn(path("split"), 20);
    int64_t polled = 0;
    TrainCallbacks stopAt10;
    stopAt10.stopRequested = [&] { return ++polled == 10; };
    std::vector<int64_t> checkpoints;
    stopAt10.checkpointed = [&](int64_t step, const fs::path&) { checkpoints.push_back(step); };
    Result<TrainResult> b1 = trainLanguageModel(split, firstHalf, nullptr, stopAt10);
    QVERIFY2(b1.isOk(), b1.status().message().c_str());
    QVERIFY(!b1->completed);
    QCOMPARE(b1->step, int64_t{10});
    QCOMPARE(checkpoints, std::vector<int64_t>{10});
    QVERIFY(!fs::exists(path("split") / "model.safetensors"));  // no final model yet

    // ...killed while writing its next checkpoint (a half-written staging directory) and, on a
    // file system without RENAME_EXCHANGE, between the two renames of the commit (only
    // checkpoint.old is left)...
    fs::rename(path("split") / "checkpoint", path("split") / "checkpoint.old");
    fs::create_directories(path("split") / "checkpoint.staging");
    QVERIFY(writeFileAtomic(path("split") / "checkpoint.staging/model.safetensors", "trunc").isOk());
    QVERIFY(writeFileAtomic(path("split") / "checkpoint.staging/trainer_state.json", "{\"st").isOk());

    // ...and resumed: it asks for steps 10..19 only and ends with the same weights.
    CopyTask secondHalf;
    secondHalf.blockEvery = 3;
    split.resume = true;
    Result<TrainResult> b2 = trainLanguageModel(split, secondHalf, nullptr, {});
    QVERIFY2(b2.isOk(), b2.status().message().c_str());
    QVERIFY(b2->completed);
    QCOMPARE(b2->startStep, int64_t{10});
    QCOMPARE(secondHalf.stepsAsked.front(), int64_t{10});
    QCOMPARE(secondHalf.stepsAsked.size(), size_t{10 * 8});
    // The losses of the second half are the same numbers; the first half's come back from the
    // checkpoint's JSON (10 significant digits).
    QCOMPARE(b2->lossHistory.size(), a->lossHistory.size());
    for (size_t i = 0; i < a->lossHistory.size(); ++i) {
      if (i >= 10) QCOMPARE(b2->lossHistory[i], a->lossHistory[i]);
      else QVERIFY(std::abs(b2->lossHistory[i] - a->lossHistory[i]) < 1e-8 * a->lossHistory[i]);
    }
    const std::string weightsA = *readFile(path("straight") / "model.safetensors");
    const std::string weightsB = *readFile(path("split") / "model.safetensors");
    QVERIFY(weightsA == weightsB);
    QVERIFY(fs::is_directory(path("split") / "checkpoint"));
    QVERIFY(!fs::exists(path("split") / "checkpoint.old"));
    QVERIFY(!fs::exists(path("split") / "checkpoint.staging"));

    // Resuming a finished run trains nothing and keeps the model.
    CopyTask none;
    Result<TrainResult> again = trainLanguageModel(split, none, nullptr, {});
    QVERIFY2(again.isOk(), again.status().message().c_str());
    QVERIFY(again->completed);
    QVERIFY(none.stepsAsked.empty());
    QVERIFY(*readFile(path("split") / "model.safetensors") == weightsA);
  }

  void scheduleWarmsUpThenDecays() {
    TrainParams p;
    p.steps = 101;
    p.lr = 1e-3;
    p.minLr = 1e-4;
    p.warmupSteps = 10;
    QVERIFY(validateTrainParams(p).isOk());
    QCOMPARE(learningRate(p, 0), 1e-4);   // lr / warmup
    QCOMPARE(learningRate(p, 4), 5e-4);
    QCOMPARE(learningRate(p, 9), 1e-3);   // the peak at the end of warm-up
    QCOMPARE(learningRate(p, 10), 1e-3);
    QVERIFY(std::abs(learningRate(p, 55) - 5.5e-4) < 1e-12);  // half-way: the mean of lr and minLr
    QVERIFY(std::abs(learningRate(p, 100) - 1e-4) < 1e-15);   // the last step: minLr
    for (int64_t s = 11; s <= 100; ++s) QVERIFY(learningRate(p, s) < learningRate(p, s - 1));
    p.warmupSteps = 0;
    QCOMPARE(learningRate(p, 0), 1e-3);
  }

  void masksReachTheForward() {
    // Chained parents make every token see all earlier ones: the dense-mask path must give the
    // causal loss; a block mask hides tokens and must change it.
    std::vector<int32_t> chain = {-1};
    for (int32_t i = 1; i < 12; ++i) chain.push_back(i - 1);
    FixedExamples causal, chained, blocked;
    causal.examples = {counting(12)};
    chained.examples = {counting(12, AttentionMask::ancestors(chain))};
    blocked.examples = {counting(12, AttentionMask::blocks({0, 4, 8}))};
    const double lc = firstLoss(path("mask-causal"), causal, 1);
    const double la = firstLoss(path("mask-chain"), chained, 1);
    const double lb = firstLoss(path("mask-block"), blocked, 1);
    QVERIFY2(std::abs(la - lc) < 1e-5, qPrintable(QString("%1 vs %2").arg(la).arg(lc)));
    QVERIFY2(std::abs(lb - lc) > 1e-4, qPrintable(QString("%1 vs %2").arg(lb).arg(lc)));
  }

  void paddingAndLossWeightsAreExact() {
    // A batch of a long causal and a short block-masked sequence: the short one is padded. Its
    // loss must be the token-weighted mean of the two sequences' own losses.
    FixedExamples pair, longOnly, shortOnly;
    TrainingExample a = counting(12);
    TrainingExample b = counting(7, AttentionMask::blocks({0, 3}));
    b.lossWeights = {1, 1, 0, 2, 1, 0, 1};  // weights count: 5 targets (index 0 never counts)
    pair.examples = {a, b};
    longOnly.examples = {a};
    shortOnly.examples = {b};
    const double lab = firstLoss(path("pad-pair"), pair, 2);
    const double la = firstLoss(path("pad-a"), longOnly, 1);
    const double lb = firstLoss(path("pad-b"), shortOnly, 1);
    const double expected = (11 * la + 5 * lb) / 16;
    QVERIFY2(std::abs(lab - expected) < 1e-5,
             qPrintable(QString("batch %1, expected %2 (a %3, b %4)").arg(lab).arg(expected).arg(la).arg(lb)));
  }

  void theLossIsTheFullForwardsWeightedMean() {
    // The trainer computes logits only where a target weighs; its loss must be the one the whole
    // forward's logits give: sum of weight * cross-entropy over every target of both sequences,
    // over the sum of weights, zero-weight targets (most of a prompt) included as zeros.
    TrainingExample a = counting(12);
    a.lossWeights = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 2};
    TrainingExample b = counting(7, AttentionMask::blocks({0, 3}));
    b.lossWeights = {1, 0, 0, 0.5f, 0, 0, 1};
    FixedExamples pair;
    pair.examples = {a, b};
    const double trained = firstLoss(path("loss-full"), pair, 2);

    Result<LlamaModel> m = LlamaModel::initRandom(tinyConfig(), setupIn(path("unused"), 1).params.seed);
    QVERIFY2(m.isOk(), m.status().message().c_str());
    torch::NoGradGuard noGrad;
    double sum = 0, weight = 0;
    for (const TrainingExample& e : pair.examples) {
      const auto n = static_cast<int64_t>(e.tokens.size());
      std::vector<int64_t> ids(e.tokens.begin(), e.tokens.end());
      torch::Tensor tokens = torch::tensor(ids, torch::kLong).unsqueeze(0);
      torch::Tensor allowed;
      if (!e.mask.isCausal()) {
        std::vector<uint8_t> dense = e.mask.dense(n);
        allowed = torch::from_blob(dense.data(), {1, n, n}, torch::kUInt8).to(torch::kBool);
      }
      torch::Tensor logp = torch::log_softmax(
          m->forwardDense(tokens, torch::arange(n, torch::kLong).unsqueeze(0), allowed).squeeze(0), -1);
      for (int64_t t = 1; t < n; ++t) {
        const double w = e.lossWeights[static_cast<size_t>(t)];
        sum -= w * logp[t - 1][ids[static_cast<size_t>(t)]].item<double>();
        weight += w;
      }
    }
    QVERIFY2(std::abs(trained - sum / weight) < 1e-5,
             qPrintable(QString("trainer %1, full forward %2").arg(trained).arg(sum / weight)));
  }

  void heldOutEvaluationRunsOnFixedExamples() {
    CopyTask train, heldOut;
    TrainSetup s = setupIn(path("eval"), 10);
    s.params.evalEvery = 5;
    s.params.evalExamples = 12;
    std::vector<EvalPoint> points;
    TrainCallbacks cb;
    cb.evaluated = [&](const EvalPoint& e) { points.push_back(e); };
    Result<TrainResult> r = trainLanguageModel(s, train, &heldOut, cb);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(points.size(), size_t{2});
    QCOMPARE(points[0].step, int64_t{5});
    QCOMPARE(points[1].step, int64_t{10});
    QVERIFY(points[1].loss < points[0].loss);
    QCOMPARE(r->evalHistory.size(), size_t{2});
    QCOMPARE(heldOut.stepsAsked, std::vector<int64_t>(24, -1));
  }

  void bf16TrainsFromF32MasterWeights() {
    CopyTask f32Task, bf16Task;
    TrainSetup s = setupIn(path("bf16"), 3);
    s.params.dtype = TrainDType::BF16;
    Result<TrainResult> r = trainLanguageModel(s, bf16Task, nullptr, {});
    QVERIFY2(r.isOk(), r.status().message().c_str());
    Result<TrainResult> ref = trainLanguageModel(setupIn(path("bf16-ref"), 3), f32Task, nullptr, {});
    QVERIFY(std::abs(r->lossHistory[0] - ref->lossHistory[0]) < 0.05);
    auto m = LlamaModel::load(path("bf16"));
    QVERIFY(m.isOk());
    QCOMPARE(m->dtype(), torch::kFloat32);
  }

  void theTokenizerIsCopiedNextToTheModel() {
    std::vector<std::string> texts = {"a tiny text", "another tiny text"};
    BpeTrainParams bpe;
    bpe.vocabSize = 270;
    QVERIFY(trainByteLevelBpeToFile(textsFrom(texts), bpe, path("tok") / "tokenizer.json").isOk());
    CopyTask task;
    TrainSetup s = setupIn(path("with-tok"), 2);
    s.tokenizerDir = path("tok");
    QVERIFY(trainLanguageModel(s, task, nullptr, {}).isOk());
    QVERIFY(Tokenizer::load(path("with-tok")).isOk());
    QVERIFY(Tokenizer::load(path("with-tok") / "checkpoint").isOk());
  }

  void runsRefuseWhatTheyCannotDo() {
    CopyTask task;
    TrainSetup s = setupIn(path("refuse"), 2);
    s.runOptions = {{"data", "qa"}};
    QVERIFY(trainLanguageModel(s, task, nullptr, {}).isOk());

    Result<TrainResult> again = trainLanguageModel(s, task, nullptr, {});
    QCOMPARE(again.status().code(), StatusCode::AlreadyExists);
    QVERIFY(mentions(again.status(), {"already holds a checkpoint", "--resume", "--out"}));

    TrainSetup nothing = setupIn(path("refuse-empty"), 2);
    nothing.resume = true;
    Result<TrainResult> none = trainLanguageModel(nothing, task, nullptr, {});
    QCOMPARE(none.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(none.status(), {"no checkpoint to resume", "without --resume"}));

    TrainSetup other = s;
    other.resume = true;
    other.params.batch = 4;
    Result<TrainResult> batch = trainLanguageModel(other, task, nullptr, {});
    QCOMPARE(batch.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(batch.status(), {"--batch 8", "--batch 4", "--resume", "another --out"}));

    other = s;
    other.resume = true;
    other.runOptions = {{"data", "passages"}};
    Result<TrainResult> data = trainLanguageModel(other, task, nullptr, {});
    QVERIFY(mentions(data.status(), {"--data qa", "--data passages"}));

    FixedExamples outside, tooLong, weightless;
    outside.examples = {counting(5)};
    outside.examples[0].tokens[2] = kVocab;
    tooLong.examples = {counting(40)};
    weightless.examples = {counting(6)};
    weightless.examples[0].lossWeights.assign(6, 0.0f);
    Result<TrainResult> r = trainLanguageModel(setupIn(path("refuse-vocab"), 2), outside, nullptr, {});
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(r.status(), {"token id 16", "outside the model's vocabulary of 16"}));
    r = trainLanguageModel(setupIn(path("refuse-long"), 2), tooLong, nullptr, {});
    QVERIFY(mentions(r.status(), {"40 tokens", "2 to 32", "--seq-len"}));
    r = trainLanguageModel(setupIn(path("refuse-weights"), 2), weightless, nullptr, {});
    QVERIFY(mentions(r.status(), {"nothing to learn"}));

    TrainSetup bad = setupIn(path("refuse-params"), 2);
    bad.params.warmupSteps = 5;
    r = trainLanguageModel(bad, task, nullptr, {});
    QVERIFY(mentions(r.status(), {"--warmup"}));
    QVERIFY(!fs::exists(path("refuse-params") / "checkpoint"));
  }
};

QTEST_GUILESS_MAIN(TestTorchTrainer)
#include "test_torch_trainer.moc"
