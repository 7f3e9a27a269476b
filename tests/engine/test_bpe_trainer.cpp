#include <QtTest>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/bpe_trainer.h"
#include "model/tokenizer.h"

using namespace rag;
using namespace rag::model;

namespace {

std::vector<std::string> mergesOf(const std::string& tokenizerJson) {
  Result<JsonValue> doc = parseJson(tokenizerJson);
  if (!doc) qFatal("trainer wrote invalid JSON: %s", doc.status().toString().c_str());
  std::vector<std::string> out;
  for (const JsonValue& m : doc->find("model")->find("merges")->asArray()) out.push_back(m.asString());
  return out;
}

// The textbook trainer: recount every pair over all words after each merge. Same tie-break as
// the incremental trainer (highest count, then smallest pair of ids).
std::vector<std::string> naiveMerges(const std::vector<std::string>& texts, int numSpecials,
                                     int merges, int64_t minCount) {
  std::map<std::string, int64_t> counts;
  for (const std::string& t : texts)
    for (std::string_view p : splitWithPattern(SplitPattern::Gpt2, t)) ++counts[std::string(p)];
  std::vector<std::string> tokens(static_cast<size_t>(numSpecials));
  for (int b = 0; b < 256; ++b) tokens.push_back(bytesToSymbols(std::string(1, static_cast<char>(b))));
  std::vector<std::pair<std::vector<int>, int64_t>> words;
  for (const auto& [w, c] : counts) {
    std::vector<int> syms;
    for (char ch : w) syms.push_back(numSpecials + static_cast<unsigned char>(ch));
    words.emplace_back(syms, c);
  }
  std::vector<std::string> out;
  for (int m = 0; m < merges; ++m) {
    std::map<std::pair<int, int>, int64_t> pairs;
    for (const auto& [syms, c] : words)
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += c;
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;  // map order: ties keep the smallest pair
    if (best->second < minCount) break;
    const auto [a, b] = best->first;
    const int id = static_cast<int>(tokens.size());
    tokens.push_back(tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)]);
    out.push_back(tokens[static_cast<size_t>(a)] + " " + tokens[static_cast<size_t>(b)]);
    for (auto& [syms, c] : words) {
      std::vector<int> merged;
      for (size_t i = 0; i < syms.size();) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          merged.push_back(id);
          i += 2;
        } else {
          merged.push_back(syms[i++]);
        }
      }
      syms = merged;
    }
  }
  return out;
}

std::vector<std::string> sampleCorpus(int lines, unsigned seed) {
  static const char* kWords[] = {"the", "of", "graph", "retrieval", "cache", "token", "lower",
                                 "lowest", "newer", "wider", "a", "an", "café", "日本", "42",
                                 "1999", "don't", "it's", "(x)", "--", "\t", "  "};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < lines; ++i) {
    std::string line;
    int n = 3 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (k) line += ' ';
      line += kWords[rng() % std::size(kWords)];
    }
    out.push_back(line + "\n");
  }
  return out;
}

}  // namespace

class TestBpeTrainer : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void firstMergeIsTheMostFrequentPair() {
    // "xyxyxyxy" x50: (x,y) 4 x 50 = 200, (y,x) 3 x 50 = 150; "hello" x30: 30 per pair.
    std::vector<std::string> texts(50, "xyxyxyxy");
    texts.insert(texts.end(), 30, "hello");
    BpeTrainParams params;
    params.vocabSize = 3 + 256 + 2;
    BpeTrainStats stats;
    Result<std::string> json = trainByteLevelBpe(textsFrom(texts), params, &stats);
    QVERIFY(json.isOk());
    std::vector<std::string> merges = mergesOf(*json);
    QCOMPARE(merges.size(), size_t{2});
    QCOMPARE(merges[0], std::string("x y"));
    // After it, "xy xy" occurs 3 x 50 = 150 times, more than any other pair.
    QCOMPARE(merges[1], std::string("xy xy"));
    QCOMPARE(stats.texts, int64_t{80});
    QCOMPARE(stats.uniqueWords, int64_t{2});
    QCOMPARE(stats.vocabSize, params.vocabSize);
  }

  void matchesTheTextbookAlgorithm() {
    std::vector<std::string> texts = sampleCorpus(400, 5);
    BpeTrainParams params;
    params.vocabSize = 3 + 256 + 120;
    params.minPairCount = 1;
    Result<std::string> json = trainByteLevelBpe(textsFrom(texts), params);
    QVERIFY(json.isOk());
    std::vector<std::string> expected = naiveMerges(texts, 3, 120, 1);
    std::vector<std::string> got = mergesOf(*json);
    QCOMPARE(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(got[i] == expected[i],
               qPrintable(QString("merge %1: got '%2', expected '%3'")
                              .arg(i).arg(QString::fromStdString(got[i]),
                                          QString::fromStdString(expected[i]))));
  }

  void savedFileReloadsAndRoundTrips() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("tok/tokenizer.json").toStdString();
    std::vector<std::string> texts = sampleCorpus(300, 9);
    BpeTrainParams params;
    params.vocabSize = 3 + 256 + 60;
    std::vector<std::string> phases;
    uint64_t lastDone = 0, lastTotal = 0;
    params.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
      phases.emplace_back(phase);
      lastDone = done;
      lastTotal = total;
    };
    Result<BpeTrainStats> stats = trainByteLevelBpeToFile(textsFrom(texts), params, path);
    QVERIFY2(stats.isOk(), stats.status().toString().c_str());
    QCOMPARE(stats->merges, int64_t{60});
    QVERIFY(!phases.empty());
    QCOMPARE(phases.back(), std::string("merging"));
    QCOMPARE(lastDone, uint64_t{60});
    QCOMPARE(lastTotal, uint64_t{60});

    Result<Tokenizer> tok = Tokenizer::load(dir.filePath("tok").toStdString());
    QVERIFY2(tok.isOk(), tok.status().toString().c_str());
    QCOMPARE(tok->vocabSize(), stats->vocabSize);
    QCOMPARE(tok->tokenId("<|bos|>"), std::optional<int32_t>(0));
    QCOMPARE(tok->tokenId("<|eos|>"), std::optional<int32_t>(1));
    QCOMPARE(tok->tokenId("<|pad|>"), std::optional<int32_t>(2));
    QVERIFY(tok->isSpecial(0));
    std::string all;
    for (const std::string& t : texts) all += t;
    std::vector<int32_t> ids = tok->encode(all, {.addBos = true, .addEos = true});
    QCOMPARE(ids.front(), 0);
    QCOMPARE(ids.back(), 1);
    QVERIFY(ids.size() < all.size() / 2);  // 60 merges on a 22-word corpus compress a lot
    QCOMPARE(*tok->decode(ids, {.skipSpecial = true}), all);
  }

  void specialTokensAreNotLearnedFrom() {
    std::vector<std::string> texts(100, "<|eos|><|eos|>ab ab<|bos|>");
    BpeTrainParams params;
    params.vocabSize = 3 + 256 + 10;
    Result<std::string> json = trainByteLevelBpe(textsFrom(texts), params);
    QVERIFY(json.isOk());
    std::vector<std::string> merges = mergesOf(*json);
    // Only "ab" and " ab" remain once the specials are cut out: a b, Ġ ab.
    QCOMPARE(merges, (std::vector<std::string>{"a b", "\xC4\xA0 ab"}));
    Result<Tokenizer> tok = Tokenizer::fromJson(*json, "trained");
    QVERIFY(tok.isOk());
    QCOMPARE(tok->encode("<|eos|>"), (std::vector<int32_t>{1}));
  }

  void stopsWhenNoPairRepeats() {
    std::vector<std::string> texts = {"abc"};
    BpeTrainParams params;
    params.vocabSize = 1000;
    BpeTrainStats stats;
    Result<std::string> json = trainByteLevelBpe(textsFrom(texts), params, &stats);
    QVERIFY(json.isOk());
    QCOMPARE(stats.merges, int64_t{0});
    QCOMPARE(stats.vocabSize, 3 + 256);
  }

  void rejectsBadParameters() {
    std::vector<std::string> texts = {"abc"};
    BpeTrainParams small;
    small.vocabSize = 200;
    Result<std::string> r = trainByteLevelBpe(textsFrom(texts), small);
    QVERIFY(!r);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(r.status().message().find("259") != std::string::npos);

    BpeTrainParams dup;
    dup.specialTokens = {"<|eos|>", "<|eos|>"};
    QVERIFY(!trainByteLevelBpe(textsFrom(texts), dup));

    BpeTrainParams empty;
    empty.specialTokens = {""};
    QVERIFY(!trainByteLevelBpe(textsFrom(texts), empty));
  }
};

QTEST_GUILESS_MAIN(TestBpeTrainer)
#include "test_bpe_trainer.moc"
