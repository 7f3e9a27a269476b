#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "model/sampler.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> randomLogits(size_t n, uint32_t seed, float lo = -5, float hi = 5) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - mx) / temperature);
  double s = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= s;
  return p;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<double> f(logits.size());
  for (int i = 0; i < draws; ++i) {
    int32_t id = s.sample(logits);
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) qFatal("id %d out of range", id);
    f[static_cast<size_t>(id)] += 1.0 / draws;
  }
  return f;
}

// Each observed frequency within 5 standard deviations of the expected probability (the draws
// are seeded, so this is deterministic; the margin keeps it from depending on the seed).
bool matches(const std::vector<double>& observed, const std::vector<double>& expected,
             int draws) {
  for (size_t i = 0; i < expected.size(); ++i) {
    double sigma = std::sqrt(std::max(expected[i] * (1 - expected[i]), 1e-6) / draws);
    if (std::fabs(observed[i] - expected[i]) > 5 * sigma + 1e-9) {
      qWarning("token %zu: observed %.4f, expected %.4f", i, observed[i], expected[i]);
      return false;
    }
  }
  return true;
}

std::vector<float> logitsOfProbabilities(const std::vector<double>& p) {
  std::vector<float> v;
  for (double x : p) v.push_back(static_cast<float>(std::log(x)));
  return v;
}

}  // namespace

class TestSampler : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void greedyPicksArgmaxLowestIdOnTies() {
    Sampler s(SamplingParams{});
    QVERIFY(s.greedy());
    std::vector<float> a = {0.1f, 3, -2, 2.9f};
    QCOMPARE(s.sample(a), 1);
    std::vector<float> ties = {1, 5, 2, 5, 5};
    QCOMPARE(s.sample(ties), 1);
    std::vector<float> nan = {kNaN, -1, 0.5f, kNaN, 0.4f};
    QCOMPARE(s.sample(nan), 2);
    std::vector<float> nanFirst = {kNaN, kNaN, -7};
    QCOMPARE(s.sample(nanFirst), 2);
    std::vector<float> masked = {-kInf, -kInf, -100};
    QCOMPARE(s.sample(masked), 2);
    std::vector<float> none = {kNaN, -kInf};
    QCOMPARE(s.sample(none), -1);
    QCOMPARE(s.sample(std::span<const float>{}), -1);
    // A large vocabulary with the maximum near the end.
    std::vector<float> big = randomLogits(150000, 7);
    big[149990] = 6;
    QCOMPARE(s.sample(big), 149990);
  }

  void topKOneEqualsGreedy() {
    for (uint32_t row = 0; row < 40; ++row) {
      std::vector<float> logits = randomLogits(5000, row);
      if (row % 4 == 0) {  // a tie at the top: both must pick the lower id
        float mx = *std::max_element(logits.begin(), logits.end());
        logits[4000 - row] = mx;
        logits[100 + row] = mx;
      }
      Sampler k1(SamplingParams{.temperature = 1.5f, .topK = 1, .seed = row});
      Sampler k1p(SamplingParams{.temperature = 0.7f, .topK = 1, .topP = 0.3f, .seed = row});
      int32_t g = argmaxToken(logits);
      QCOMPARE(k1.sample(logits), g);
      QCOMPARE(k1p.sample(logits), g);
    }
  }

  void sameSeedSameTokensDifferentSeedDiffers() {
    std::vector<float> logits = randomLogits(1000, 3, -2, 2);
    SamplingParams p{.temperature = 0.9f, .topK = 200, .topP = 0.95f, .seed = 42};
    Sampler a(p), b(p);
    SamplingParams other = p;
    other.seed = 43;
    Sampler c(other), noise(SamplingParams{.temperature = 1, .seed = 42});
    std::vector<int32_t> sa, sb, sc;
    for (int i = 0; i < 300; ++i) {
      sa.push_back(a.sample(logits));
      noise.sample(logits);  // another sequence sampling in between changes nothing
      sb.push_back(b.sample(logits));
      sc.push_back(c.sample(logits));
    }
    QCOMPARE(sa, sb);
    int differing = 0;
    for (size_t i = 0; i < sa.size(); ++i) differing += sa[i] != sc[i];
    QVERIFY2(differing > 250, qPrintable(QString::number(differing)));
    // The draws are spread over many tokens, not stuck on one.
    QVERIFY(std::set<int32_t>(sa.begin(), sa.end()).size() > 100);

    // Each path (plain softmax, top-k, top-p) is reproducible on its own.
    for (SamplingParams q : {SamplingParams{.temperature = 1, .seed = 9},
                             SamplingParams{.temperature = 1, .topK = 10, .seed = 9},
                             SamplingParams{.temperature = 1, .topP = 0.5f, .seed = 9}}) {
      Sampler x(q), y(q);
      for (int i = 0; i < 50; ++i) QCOMPARE(x.sample(logits), y.sample(logits));
    }
  }

  void frequenciesMatchSoftmax() {
    const int draws = 20000;
    std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, -kInf, kNaN};
    std::vector<float> finite(logits.begin(), logits.begin() + 6);

    Sampler t1(SamplingParams{.temperature = 1, .seed = 1});
    std::vector<double> expected = softmax(finite, 1);
    expected.push_back(0);  // -inf: masked
    expected.push_back(0);  // NaN: never chosen
    QVERIFY(matches(frequencies(t1, logits, draws), expected, draws));

    Sampler t05(SamplingParams{.temperature = 0.5f, .seed = 2});
    expected = softmax(finite, 0.5);
    expected.insert(expected.end(), {0, 0});
    QVERIFY(matches(frequencies(t05, logits, draws), expected, draws));

    // Top-k renormalises over the k most likely: ids 4, 1, 0.
    Sampler k3(SamplingParams{.temperature = 1, .topK = 3, .seed = 3});
    std::vector<double> top3 = softmax({3.0f, 2.0f, 1.0f}, 1);
    expected = {top3[2], top3[1], 0, 0, top3[0], 0, 0, 0};
    QVERIFY(matches(frequencies(k3, logits, draws), expected, draws));

    // A large vocabulary (the path that keeps a weight per token).
    std::vector<float> big = randomLogits(4096, 11, -1, 1);
    big[17] = 6;
    big[4000] = 5.5f;
    Sampler tb(SamplingParams{.temperature = 1, .seed = 4});
    std::vector<double> pb = softmax(big, 1);
    std::vector<double> fb = frequencies(tb, big, draws);
    QVERIFY(matches({fb[17], fb[4000]}, {pb[17], pb[4000]}, draws));
  }

  void topKKeepsTheKMostLikelyWithTiesToTheLowerId() {
    const int draws = 20000;
    // A 4096-token vocabulary (the heap path: k much smaller than the vocabulary) whose 20 best
    // tokens are spread out and known.
    std::vector<float> logits = randomLogits(4096, 21, -3, 3);
    std::vector<float> best;
    for (size_t j = 0; j < 20; ++j) {
      logits[j * 200 + 7] = 4 + 0.1f * static_cast<float>(j);
      best.push_back(logits[j * 200 + 7]);
    }
    Sampler k20(SamplingParams{.temperature = 1, .topK = 20, .seed = 22});
    std::vector<double> f = frequencies(k20, logits, draws);
    std::vector<double> p = softmax(best, 1);
    std::vector<double> observed, expected;
    double outside = 1;
    for (size_t j = 0; j < 20; ++j) {
      observed.push_back(f[j * 200 + 7]);
      expected.push_back(p[j]);
      outside -= f[j * 200 + 7];
    }
    QVERIFY(matches(observed, expected, draws));
    QVERIFY2(outside < 1e-9, qPrintable(QString::number(outside)));

    // Equal logits: the k lowest ids, uniformly, for the heap (k small) and the selection
    // (k large) paths.
    std::vector<float> flat(1000, 0.5f);
    flat[3] = kNaN;
    for (int32_t k : {5, 500}) {
      Sampler s(SamplingParams{.temperature = 1, .topK = k, .seed = 23});
      std::set<int32_t> seen;
      for (int i = 0; i < 20000; ++i) {
        int32_t id = s.sample(flat);
        QVERIFY2(id >= 0 && id <= k && id != 3, qPrintable(QString::number(id)));  // NaN skipped
        seen.insert(id);
      }
      QCOMPARE(static_cast<int32_t>(seen.size()), k);
    }
  }

  void plusInfinityIsUniformOverInfiniteLogits() {
    std::vector<float> logits = {1, kInf, 2, kInf};
    Sampler s(SamplingParams{.temperature = 1, .seed = 5});
    std::vector<double> f = frequencies(s, logits, 4000);
    QVERIFY(matches(f, {0, 0.5, 0, 0.5}, 4000));
  }

  void topPExcludesTheTail() {
    const int draws = 20000;
    // Probabilities 0.05, 0.5, 0.15, 0.3: the 0.75 nucleus is {1, 3} (0.5 + 0.3 >= 0.75).
    std::vector<float> logits = logitsOfProbabilities({0.05, 0.5, 0.15, 0.3});
    Sampler p75(SamplingParams{.temperature = 1, .topP = 0.75f, .seed = 6});
    QVERIFY(matches(frequencies(p75, logits, draws), {0, 0.625, 0, 0.375}, draws));

    // 0.85 adds the next most likely token (0.5 + 0.3 + 0.15).
    Sampler p85(SamplingParams{.temperature = 1, .topP = 0.85f, .seed = 7});
    QVERIFY(matches(frequencies(p85, logits, draws), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95},
                    draws));

    // A tiny topP still keeps the most likely token.
    Sampler tiny(SamplingParams{.temperature = 1, .topP = 1e-6f, .seed = 8});
    for (int i = 0; i < 100; ++i) QCOMPARE(tiny.sample(logits), 1);

    // Top-p applies to what top-k left, renormalised: within the top 2 the probabilities are
    // 0.625 and 0.375, so topP 0.6 keeps only id 1 (without renormalising it would keep 3 too).
    Sampler kp(SamplingParams{.temperature = 1, .topK = 2, .topP = 0.6f, .seed = 9});
    for (int i = 0; i < 2000; ++i) QCOMPARE(kp.sample(logits), 1);
  }

  void topPNucleusOnALargeVocabulary() {
    // 30k tokens with a flat-ish distribution: the 0.5 nucleus holds thousands of tokens, so
    // the growing partial sort must run several rounds.
    std::vector<float> logits = randomLogits(30000, 12, 0, 10);
    const float topP = 0.5f;
    std::vector<double> p = softmax(logits, 1);
    std::vector<int32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    std::vector<int> rank(logits.size());
    double mass = 0;
    size_t nucleus = 0;
    for (size_t r = 0; r < order.size(); ++r) {
      rank[static_cast<size_t>(order[r])] = static_cast<int>(r);
      if (mass < topP) {
        mass += p[static_cast<size_t>(order[r])];
        nucleus = r + 1;
      }
    }
    QVERIFY2(nucleus > 1000, qPrintable(QString::number(nucleus)));

    Sampler s(SamplingParams{.temperature = 1, .topP = topP, .seed = 13});
    int maxRank = 0;
    for (int i = 0; i < 3000; ++i) {
      int32_t id = s.sample(logits);
      QVERIFY(id >= 0);
      int r = rank[static_cast<size_t>(id)];
      // One token of slack for float-versus-double rounding at the nucleus boundary.
      QVERIFY2(static_cast<size_t>(r) <= nucleus, qPrintable(QString::number(r)));
      maxRank = std::max(maxRank, r);
    }
    // Draws reach deep into the nucleus, not only into the first partial-sort round.
    QVERIFY2(static_cast<size_t>(maxRank) > nucleus / 2, qPrintable(QString::number(maxRank)));
  }

  void topPNucleusIsExactlyTheMostLikelyPrefix() {
    // 5000 distinct logits in shuffled positions; topP halfway between two cumulative sums, so
    // the nucleus is exactly the 300 most likely tokens: every one of them is drawn, nothing
    // else is (the boundary token included, one more excluded).
    const size_t n = 5000, nucleus = 300;
    std::vector<int32_t> pos(n);
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin(), pos.end(), std::mt19937(31));
    std::vector<float> logits(n);
    for (size_t r = 0; r < n; ++r) logits[static_cast<size_t>(pos[r])] = -0.001f * static_cast<float>(r);
    std::vector<double> p = softmax(logits, 1);
    double below = 0;
    for (size_t r = 0; r + 1 < nucleus; ++r) below += p[static_cast<size_t>(pos[r])];
    double at = below + p[static_cast<size_t>(pos[nucleus - 1])];
    auto topP = static_cast<float>((below + at) / 2);

    Sampler s(SamplingParams{.temperature = 1, .topP = topP, .seed = 32});
    std::set<int32_t> seen;
    for (int i = 0; i < 20000; ++i) seen.insert(s.sample(logits));
    std::set<int32_t> expected(pos.begin(), pos.begin() + nucleus);
    QCOMPARE(seen.size(), expected.size());
    QVERIFY(seen == expected);
  }

  void validationNamesFieldAndRange() {
    QVERIFY(SamplingParams{}.validate().isOk());
    QVERIFY((SamplingParams{.temperature = 0.8f, .topK = 40, .topP = 0.95f, .maxTokens = 0,
                            .stop = {"\n\n"}, .stopTokenIds = {2}})
                .validate()
                .isOk());

    Status s = SamplingParams{.temperature = -0.5f}.validate();
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"temperature", ">= 0", "-0.5"}));
    QVERIFY(mentions(SamplingParams{.temperature = kNaN}.validate(), {"temperature", "finite"}));
    QVERIFY(mentions(SamplingParams{.temperature = kInf}.validate(), {"temperature", "finite"}));
    s = SamplingParams{.topK = -3}.validate();
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"topK", ">= 0", "-3"}));
    for (float bad : {0.0f, -0.1f, 1.5f, kNaN}) {
      s = SamplingParams{.topP = bad}.validate();
      QCOMPARE(s.code(), StatusCode::InvalidArgument);
      QVERIFY(mentions(s, {"topP", "(0, 1]"}));
    }
    s = SamplingParams{.maxTokens = -1}.validate();
    QCOMPARE(s.code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(s, {"maxTokens", ">= 0", "-1"}));
    QVERIFY(mentions(SamplingParams{.stop = {"ok", ""}}.validate(), {"stop[1]", "empty"}));
    QVERIFY(mentions(SamplingParams{.stopTokenIds = {5, -2}}.validate(),
                     {"stopTokenIds[1]", "-2", ">= 0"}));
  }
};

QTEST_GUILESS_MAIN(TestSampler)
#include "test_sampler.moc"
