// The embedder's whole words (model/lexical_words.h): words from text and from token bytes agree
// (a title before ':' included), each word's random vector is fixed and far from other words',
// bags are BM25-weighted sums whose inner products are BM25-like scores, and the collection's
// statistics are BM25's IDF and mean length.
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
    const Words w = textWords("Inulin (noun): a fructan, E-1500: yes!");
    const std::vector<uint64_t> want = {fnv1a("inulin"), fnv1a("noun"), fnv1a("fructan"),  // "a" is a stopword
                                        fnv1a("e"), fnv1a("1500"), fnv1a("yes")};
    QCOMPARE(w.hashes, want);
    QCOMPARE(w.head, size_t{2});  // the words before the first ':' (the second ends nothing)
    QVERIFY(textWords(" ,;-- ").hashes.empty());
    QVERIFY(textWords("What is THE kind of that?").hashes == std::vector<uint64_t>{fnv1a("kind")});
    QVERIFY(isStopword("what") && !isStopword("kind"));
    QCOMPARE(textWords("caf\xc3\xa9 au").hashes, (std::vector<uint64_t>{fnv1a("caf\xc3\xa9"), fnv1a("au")}));  // UTF-8 is word
    QCOMPARE(textWords("no title here").head, size_t{0});
    QCOMPARE(textWords(": a leading colon").head, size_t{0});
    // A ':' after kLexicalHeadWords words is prose, not a title.
    std::string prose;
    for (size_t i = 0; i <= kLexicalHeadWords; ++i) prose += "w" + std::to_string(i) + " ";
    QCOMPARE(textWords(prose + ": end").head, size_t{0});
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
    for (const std::string& t : texts) {
      const Words fromTokens = words.words(tok->encode(t, {.parseSpecial = false}));
      QCOMPARE(fromTokens.hashes, textWords(t).hashes);
      QCOMPARE(fromTokens.head, textWords(t).head);
    }
    // A word the tokenizer never saw is several tokens, one word; an id outside the vocabulary
    // breaks it rather than failing.
    std::vector<int32_t> ids = tok->encode("quixotic", {.parseSpecial = false});
    QVERIFY(ids.size() >= 2);
    QCOMPARE(words.words(ids).hashes.size(), size_t{1});
    ids.insert(ids.begin() + 1, -1);
    QCOMPARE(words.words(ids).hashes.size(), size_t{2});
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

  // sat(tf) = tf (k1 + 1) / (tf + k1 (1 - b + b len / avg)): 1 for a lone word of a text of the
  // mean length, growing with repeats but never past k1 + 1, smaller in a longer text; a head word
  // counts twice.
  void countsSaturateLikeBm25() {
    auto sat = [](const char* text, double avg, uint64_t word) {
      for (const auto& [h, s] : saturatedCounts(textWords(text), avg))
        if (h == word) return static_cast<double>(s);
      return -1.0;
    };
    const uint64_t dog = fnv1a("dog");
    QVERIFY(std::abs(sat("dog", 1.0, dog) - 1.0) < 1e-6);
    const double k = kLexicalK1 * (1 - kLexicalB + kLexicalB * 3.0 / 1.0);
    QVERIFY(std::abs(sat("dog dog dog", 1.0, dog) - 3 * (kLexicalK1 + 1) / (3 + k)) < 1e-6);
    QVERIFY(sat("dog dog dog dog dog dog dog dog", 8.0, dog) < kLexicalK1 + 1);
    QVERIFY(sat("dog cat", 2.0, dog) > sat("dog cat cow pig", 2.0, dog));  // longer: less
    QVERIFY(std::abs(sat("dog: cat", 2.0, dog) - sat("dog dog cat", 2.0, dog) * (2 + kLexicalK1 * (1 - kLexicalB + kLexicalB * 1.5)) /
                                                   (2 + kLexicalK1 * (1 - kLexicalB + kLexicalB * 1.0))) < 1e-6);
    const auto counts = saturatedCounts(textWords("b c b"), 3.0);  // distinct, first seen first
    QCOMPARE(counts.size(), size_t{2});
    QCOMPARE(counts[0].first, fnv1a("b"));
  }

  // bag(q)·bag(p) ≈ sum over shared words of weight² sat_q sat_p: with many components the inner
  // product of two bags is the BM25-like score of their shared words, and texts sharing no word
  // are near 0.
  void bagInnerProductsScoreSharedWords() {
    const int64_t dim = 4096, buckets = 1 << 16;
    std::vector<float> weights(buckets, 1.0f);
    weights[static_cast<size_t>(lexicalBucket(fnv1a("inulin"), buckets))] = 3.0f;
    std::vector<float> q(dim), p(dim), r(dim), empty(dim, 1.0f);
    const double avg = 4.0;
    lexicalBag(textWords("what is inulin"), weights, avg, dim, q.data());
    lexicalBag(textWords("inulin: a fructan"), weights, avg, dim, p.data());
    lexicalBag(textWords("botulin a toxin of bacteria"), weights, avg, dim, r.data());
    auto dot = [&](const std::vector<float>& a, const std::vector<float>& b) {
      double s = 0;
      for (int64_t i = 0; i < dim; ++i) s += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
      return s;
    };
    auto satOf = [&](const char* text, const char* word) {
      for (const auto& [h, s] : saturatedCounts(textWords(text), avg))
        if (h == fnv1a(word)) return static_cast<double>(s);
      return 0.0;
    };
    const double want = 9.0 * satOf("what is inulin", "inulin") * satOf("inulin: a fructan", "inulin");
    QVERIFY2(std::abs(dot(q, p) - want) < 0.15 * want, qPrintable(QString("%1 vs %2").arg(dot(q, p)).arg(want)));
    QVERIFY2(std::abs(dot(q, r)) < 0.2 * want, qPrintable(QString("%1").arg(dot(q, r))));
    // A word of weight 0 adds nothing, a stopword is no word; no words: the zero vector.
    std::vector<float> alone(dim), withThe(dim), withCow(dim);
    weights[static_cast<size_t>(lexicalBucket(fnv1a("cow"), buckets))] = 0.0f;
    lexicalBag(textWords("inulin fructan"), weights, avg, dim, alone.data());
    lexicalBag(textWords("inulin the fructan"), weights, avg, dim, withThe.data());
    QCOMPARE(withThe, alone);
    lexicalBag(textWords("inulin cow fructan"), weights, avg, dim, withCow.data());
    QVERIFY(dot(alone, withCow) > 0.8 * dot(alone, alone));
    lexicalBag(textWords(" ,; "), weights, avg, dim, empty.data());
    QCOMPARE(empty, std::vector<float>(dim, 0.0f));
  }

  void statisticsAreTheInverseDocumentFrequencyAndMeanLength() {
    const std::vector<std::string> texts = {"big dog", "big cat", "big inulin", "Big bone and the big rest"};
    const int64_t buckets = 1 << 20;
    const LexicalStatistics stats = lexicalStatistics(texts, buckets);
    QCOMPARE(std::ssize(stats.idf), buckets);
    auto weight = [&](const char* w) { return stats.idf[static_cast<size_t>(lexicalBucket(fnv1a(w), buckets))]; };
    QVERIFY(std::abs(weight("big") - std::log(1.0 + 0.5 / 4.5)) < 1e-6);  // in all 4 (twice in one)
    QVERIFY(std::abs(weight("inulin") - std::log(1.0 + 3.5 / 1.5)) < 1e-6);
    QVERIFY(weight("unseen") > weight("inulin"));  // a word the collection lacks weighs most
    QVERIFY(std::abs(stats.avgWords - 10.0 / 4) < 1e-9);  // "and", "the": stopwords
  }
};

QTEST_GUILESS_MAIN(TestLexicalWords)
#include "test_lexical_words.moc"
