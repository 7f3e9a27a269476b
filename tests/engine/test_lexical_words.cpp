// The embedder's whole words (model/lexical_words.h): words from text and from token bytes agree,
// each word's random vector is fixed and far from other words', bags are unit-RMS vectors weighted
// by their buckets, and the starting weights are BM25's IDF.
#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

#include "core/hash.h"
#include "model/bpe_trainer.h"
#include "model/lexical_words.h"
#include "model/tokenizer.h"

using namespace rag;
using namespace rag::model;

class TestLexicalWords : public QObject {
  Q_OBJECT

private Q_SLOTS:
  void wordsAreLowerCasedRunsOfLettersAndDigits() {
    const std::vector<uint64_t> h = wordHashes("Inulin (noun): a fructan, E-1500!");
    const std::vector<uint64_t> want = {fnv1a("inulin"), fnv1a("noun"), fnv1a("a"), fnv1a("fructan"),
                                        fnv1a("e"), fnv1a("1500")};
    QCOMPARE(h, want);
    QVERIFY(wordHashes(" ,;-- ").empty());
    QCOMPARE(wordHashes("caf\xc3\xa9 au"), (std::vector<uint64_t>{fnv1a("caf\xc3\xa9"), fnv1a("au")}));  // UTF-8 is word
  }

  // A word split over several BPE pieces ("in" + "ulin") is one word; the tokenizer round-trips
  // text, so the words of its tokens are the words of the text.
  void tokensGiveTheWordsOfTheirText() {
    const std::vector<std::string> texts = {"inulin is a fructan", "What is inulin a kind of?",
                                            "botulin, globulin and INULIN", "the lazy dog's bone 42 times"};
    BpeTrainParams params;
    params.vocabSize = 280;
    auto json = trainByteLevelBpe(textsFrom(texts), params);
    QVERIFY2(json.isOk(), json.status().message().c_str());
    auto tok = Tokenizer::fromJson(*json, "test");
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    const TokenWords words(*tok);
    for (const std::string& t : texts)
      QCOMPARE(words.hashes(tok->encode(t, {.parseSpecial = false})), wordHashes(t));
    // A word the tokenizer never saw is several tokens, one word; an id outside the vocabulary
    // breaks it rather than failing.
    std::vector<int32_t> ids = tok->encode("quixotic", {.parseSpecial = false});
    QVERIFY(ids.size() >= 2);
    QCOMPARE(words.hashes(ids).size(), size_t{1});
    ids.insert(ids.begin() + 1, -1);
    QCOMPARE(words.hashes(ids).size(), size_t{2});
  }

  void eachWordHasItsOwnFixedSigns() {
    std::vector<float> a(256), b(256), again(256);
    lexicalVector(fnv1a("inulin"), 256, a.data());
    lexicalVector(fnv1a("botulin"), 256, b.data());
    lexicalVector(fnv1a("inulin"), 256, again.data());
    QCOMPARE(a, again);
    double dot = 0;
    int plus = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      QVERIFY(a[i] == 1.0f || a[i] == -1.0f);
      plus += a[i] > 0;
      dot += a[i] * b[i];
    }
    QVERIFY2(plus > 96 && plus < 160, qPrintable(QString("%1 of 256 components +1").arg(plus)));
    QVERIFY2(std::abs(dot) / 256 < 0.25, qPrintable(QString("cosine %1").arg(dot / 256)));
    // A shorter vector is the prefix of a longer one (components do not depend on the size).
    std::vector<float> shortA(70);
    lexicalVector(fnv1a("inulin"), 70, shortA.data());
    QVERIFY(std::equal(shortA.begin(), shortA.end(), a.begin()));
  }

  void bagsAreUnitRmsVectorsOfWeightedWords() {
    const int64_t dim = 64, buckets = 1 << 16;
    std::vector<float> weights(buckets, 1.0f);
    std::vector<float> bag(dim), word(dim);
    const std::vector<uint64_t> one = {fnv1a("inulin")};
    lexicalBag(one, weights, dim, bag.data());
    lexicalVector(one[0], dim, word.data());
    QCOMPARE(bag, word);  // one word: its signs
    // A word of weight 0 adds nothing: the bag of (inulin, the) is inulin's when "the" weighs 0.
    const std::vector<uint64_t> two = {fnv1a("inulin"), fnv1a("the")};
    weights[static_cast<size_t>(lexicalBucket(fnv1a("the"), buckets))] = 0.0f;
    std::vector<float> both(dim);
    lexicalBag(two, weights, dim, both.data());
    QCOMPARE(both, bag);
    double norm = 0;
    weights.assign(buckets, 2.5f);
    lexicalBag(two, weights, dim, both.data());
    for (float v : both) norm += static_cast<double>(v) * v;
    QVERIFY(std::abs(norm - dim) < 1e-3);  // components of unit RMS
    lexicalBag({}, weights, dim, both.data());  // no words: the zero vector
    QCOMPARE(both, std::vector<float>(dim, 0.0f));
  }

  void startingWeightsAreTheInverseDocumentFrequency() {
    const std::vector<std::string> texts = {"the dog", "the cat", "the inulin", "The bone"};
    const int64_t buckets = 1 << 20;
    const std::vector<float> idf = inverseDocumentFrequency(texts, buckets);
    QCOMPARE(std::ssize(idf), buckets);
    auto weight = [&](const char* w) { return idf[static_cast<size_t>(lexicalBucket(fnv1a(w), buckets))]; };
    QVERIFY(std::abs(weight("the") - std::log(1.0 + 0.5 / 4.5)) < 1e-6);  // in all 4 (once each)
    QVERIFY(std::abs(weight("inulin") - std::log(1.0 + 3.5 / 1.5)) < 1e-6);
    QVERIFY(weight("unseen") > weight("inulin"));  // a word the collection lacks weighs most
  }
};

QTEST_GUILESS_MAIN(TestLexicalWords)
#include "test_lexical_words.moc"
