#include <QtTest>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "../fixtures/workload/tiny_corpus.h"
#include "core/clock.h"
#include "core/fs.h"
#include "workload/driver.h"
#include "workload/trace_file.h"
#include "core/random.h"
#include "workload/workload_trace.h"

using namespace rag;
using namespace rag::workload;
namespace fs = std::filesystem;

namespace {

constexpr int kEntities = 200;

double harmonic(int n, double s) {
  double h = 0;
  for (int k = 1; k <= n; ++k) h += std::pow(k, -s);
  return h;
}

// Fraction of requests whose topic entity is among the `window` most recent distinct entities
// asked before it (the temporal sampler's own window).
double repeatWithinWindow(const std::vector<TraceRequest>& trace, size_t window) {
  std::vector<int64_t> recent;  // most recent first, distinct
  size_t repeats = 0;
  for (const TraceRequest& r : trace) {
    auto it = std::find(recent.begin(), recent.end(), r.topicEntity);
    if (it != recent.end()) {
      ++repeats;
      recent.erase(it);
    }
    recent.insert(recent.begin(), r.topicEntity);
    if (recent.size() > window) recent.pop_back();
  }
  return static_cast<double>(repeats) / static_cast<double>(trace.size());
}

double immediateRepeat(const std::vector<TraceRequest>& trace) {
  size_t n = 0;
  for (size_t i = 1; i < trace.size(); ++i) n += trace[i].topicEntity == trace[i - 1].topicEntity;
  return static_cast<double>(n) / static_cast<double>(trace.size() - 1);
}

std::map<int64_t, int64_t> entityCounts(const std::vector<TraceRequest>& trace) {
  std::map<int64_t, int64_t> c;
  for (const TraceRequest& r : trace) ++c[r.topicEntity];
  return c;
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

class TestWorkloadTrace : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::vector<QaItem> m_items;
  fs::path path(const char* name) { return fs::path(m_dir.path().toStdString()) / name; }

  std::vector<TraceRequest> make(TraceParams p) {
    Result<std::vector<TraceRequest>> t = makeWorkloadTrace(p, m_items);
    if (!t) qWarning("makeWorkloadTrace: %s", t.status().message().c_str());
    return t.isOk() ? std::move(t).value() : std::vector<TraceRequest>{};
  }

  static TraceParams params(std::string_view popularity, int64_t requests, uint64_t seed = 1) {
    TraceParams p;
    p.rate = 20;
    p.requests = requests;
    p.seed = seed;
    p.popularity = parsePopularity(popularity).value();
    return p;
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    Status s = testing::makeTinyCorpus(path("corpus.db"));
    QVERIFY2(s.isOk(), s.message().c_str());
    Result<std::vector<QaItem>> items = loadQaItems(path("corpus.db"), "test");
    QVERIFY2(items.isOk(), items.status().message().c_str());
    m_items = std::move(items).value();
  }

  void loadsOneSplitWithAnswers() {
    // Entity e has 1 + e % 3 test items and one train item.
    size_t expected = 0;
    for (int e = 1; e <= kEntities; ++e) expected += 1 + e % 3;
    QCOMPARE(m_items.size(), expected);
    for (const QaItem& q : m_items) QVERIFY(q.question != "Train question?");
    QVERIFY(std::is_sorted(m_items.begin(), m_items.end(),
                           [](const QaItem& a, const QaItem& b) { return a.id < b.id; }));
    const QaItem& first = m_items.front();
    QCOMPARE(first.topicEntity, int64_t{1});
    QCOMPARE(first.question, testing::tinyQuestion(1, 0, true));
    QCOMPARE(first.answers.size(), size_t{2});
    QCOMPARE(first.answers[0], std::string("answer 1"));
    QCOMPARE(first.answers[1], std::string("alt \"0\""));
    QCOMPARE(first.type, std::string("single_hop"));
    Result<std::vector<QaItem>> train = loadQaItems(path("corpus.db"), "train");
    QVERIFY(train.isOk());
    QCOMPARE(train->size(), size_t{kEntities});
  }

  void poissonArrivals() {
    const double rate = 20;
    const size_t n = 5000;
    std::vector<TraceRequest> t = make(params("uniform", n));
    QCOMPARE(t.size(), n);
    std::vector<double> gaps;
    double prev = 0;
    for (size_t i = 0; i < n; ++i) {
      QCOMPARE(t[i].id, static_cast<int64_t>(i));
      QVERIFY(t[i].arrivalS > prev);
      gaps.push_back(t[i].arrivalS - prev);
      prev = t[i].arrivalS;
    }
    double mean = 0;
    for (double g : gaps) mean += g;
    mean /= n;
    double var = 0;
    for (double g : gaps) var += (g - mean) * (g - mean);
    var /= n - 1;
    double cv = std::sqrt(var) / mean;
    // Standard errors: 1.4% for the mean, ~2% for the CV. Fixed-interval arrivals (CV 0) or
    // uniform gaps (CV 0.58) or a rate/mean mix-up fail by far.
    QVERIFY2(std::abs(mean * rate - 1) < 0.05, qPrintable(QString("mean gap %1").arg(mean)));
    QVERIFY2(std::abs(cv - 1) < 0.08, qPrintable(QString("cv %1").arg(cv)));
    // Shape: Kolmogorov-Smirnov distance to the exponential CDF below the 1% critical value.
    std::sort(gaps.begin(), gaps.end());
    double d = 0;
    for (size_t i = 0; i < n; ++i) {
      double cdf = 1 - std::exp(-rate * gaps[i]);
      d = std::max({d, cdf - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - cdf});
    }
    QVERIFY2(d < 1.63 / std::sqrt(static_cast<double>(n)), qPrintable(QString("KS %1").arg(d)));

    // The whole trace spans about n / rate seconds; a tenth of the rate stretches it tenfold.
    TraceParams slow = params("uniform", n);
    slow.rate = 2;
    std::vector<TraceRequest> ts = make(slow);
    QVERIFY(std::abs(ts.back().arrivalS / t.back().arrivalS - 10) < 1e-6);
  }

  void zipfSkewMatchesHarmonicNumber() {
    const int n = 20000;
    for (double s : {1.0, 1.5}) {
      std::vector<TraceRequest> t = make(params(s == 1.0 ? "zipf:1" : "zipf:1.5", n));
      std::vector<int64_t> counts;
      for (auto [e, c] : entityCounts(t)) counts.push_back(c);
      std::sort(counts.rbegin(), counts.rend());
      double top = static_cast<double>(counts[0]) / n;
      double second = static_cast<double>(counts[1]) / n;
      double expectTop = 1 / harmonic(kEntities, s);
      QVERIFY2(std::abs(top - expectTop) < 0.015,
               qPrintable(QString("S=%1 top %2 expected %3").arg(s).arg(top).arg(expectTop)));
      QVERIFY2(std::abs(second - expectTop / std::pow(2, s)) < 0.015,
               qPrintable(QString("S=%1 second %2").arg(s).arg(second)));
    }
    // The ranking is a seeded permutation: the hottest entity changes with the seed and is
    // not simply the lowest id.
    std::set<int64_t> hottest;
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      auto counts = entityCounts(make(params("zipf:2", 2000, seed)));
      auto top = std::max_element(counts.begin(), counts.end(),
                                  [](auto& a, auto& b) { return a.second < b.second; });
      hottest.insert(top->first);
    }
    QVERIFY(hottest.size() >= 3);
  }

  void temporalRepeatsWithinWindow() {
    const int n = 5000;
    std::vector<TraceRequest> uni = make(params("uniform", n));
    std::vector<TraceRequest> tmp = make(params("temporal", n));  // P = 0.5, W = 16
    double u = repeatWithinWindow(uni, 16);
    double r = repeatWithinWindow(tmp, 16);
    // Uniform over 200 entities: 16 / 200 = 0.08. Temporal: P + (1 - P) * 0.08 = 0.54.
    QVERIFY2(u > 0.05 && u < 0.11, qPrintable(QString("uniform %1").arg(u)));
    QVERIFY2(r > 0.50 && r < 0.58, qPrintable(QString("temporal %1").arg(r)));
    // Recent entities are preferred: the last one is re-asked with probability P / H(16).
    double immediate = immediateRepeat(tmp);
    double expected = 0.5 / harmonic(16, 1.0);
    QVERIFY2(std::abs(immediate - expected) < 0.03, qPrintable(QString("immediate %1").arg(immediate)));
    QVERIFY(immediateRepeat(uni) < 0.02);
    // The locality is short-term: over the whole trace nearly every entity is asked.
    QVERIFY(entityCounts(tmp).size() >= 190);

    // A window of one re-asks exactly the previous entity with probability P.
    TraceParams w1 = params("temporal:0.7", n);
    w1.popularity.window = 1;
    double imm1 = immediateRepeat(make(w1));
    QVERIFY2(std::abs(imm1 - 0.7) < 0.03, qPrintable(QString("window 1: %1").arg(imm1)));
    // More repeat probability, more repeats.
    QVERIFY(repeatWithinWindow(make(params("temporal:0.8", n)), 16) > r + 0.2);
  }

  void mixRatios() {
    TraceParams p = params("uniform", 10000);
    p.mix = parseWorkflowMix("oneshot:3,multistep:1,irg:0").value();
    TraceSummary s = summarizeWorkloadTrace(make(p));
    QVERIFY(std::abs(s.perWorkflow[0] / 10000.0 - 0.75) < 0.02);
    QVERIFY(std::abs(s.perWorkflow[2] / 10000.0 - 0.25) < 0.02);
    QCOMPARE(s.perWorkflow[3], int64_t{0});  // irg has weight 0
    QCOMPARE(s.perWorkflow[1] + s.perWorkflow[4], int64_t{0});

    p.mix = parseWorkflowMix("oneshot,hyde,multistep,irg,recomp").value();
    s = summarizeWorkloadTrace(make(p));
    for (size_t w = 0; w < 5; ++w)
      QVERIFY2(std::abs(s.perWorkflow[w] / 10000.0 - 0.2) < 0.02, qPrintable(QString::number(s.perWorkflow[w])));
    QCOMPARE(s.perWorkflow[static_cast<size_t>(Workflow::GraphRag)], int64_t{0});  // not in the mix
  }

  void requestsCarryTheirQaItem() {
    std::map<int64_t, const QaItem*> byId;
    for (const QaItem& q : m_items) byId[q.id] = &q;
    std::vector<TraceRequest> t = make(params("uniform", 6000));
    std::map<int64_t, std::map<int64_t, int>> picks;  // entity -> qa id -> count
    for (const TraceRequest& r : t) {
      QVERIFY(byId.count(r.qaId));
      const QaItem& q = *byId[r.qaId];
      QCOMPARE(r.topicEntity, q.topicEntity);
      QCOMPARE(r.question, q.question);
      QCOMPARE(r.type, q.type);
      QVERIFY(r.answers == q.answers);
      picks[r.topicEntity][r.qaId]++;
    }
    // An entity's items are picked uniformly: pool the entities with three items
    // (id % 3 == 2) and compare the share of each item position.
    std::array<int, 3> byPosition{};
    for (auto& [e, m] : picks) {
      if (e % 3 != 2) continue;
      QCOMPARE(m.size(), size_t{3});  // 30 requests per entity on average: all three appear
      int k = 0;
      for (auto& [id, c] : m) byPosition[k++] += c;
    }
    int total = byPosition[0] + byPosition[1] + byPosition[2];
    for (int c : byPosition) QVERIFY(std::abs(c / double(total) - 1.0 / 3) < 0.03);
  }

  void sameSeedSameBytes() {
    TraceParams p = params("zipf:1.1", 500, 42);
    p.mix = parseWorkflowMix("oneshot:1,multistep:1").value();
    TraceHeader h = makeTraceHeader(p, m_items);
    QVERIFY(writeWorkloadTrace(path("a.jsonl"), h, make(p)).isOk());
    QVERIFY(writeWorkloadTrace(path("b.jsonl"), h, make(p)).isOk());
    std::string a = readFile(path("a.jsonl")).value();
    QCOMPARE(readFile(path("b.jsonl")).value(), a);
    TraceParams other = p;
    other.seed = 43;
    QVERIFY(formatWorkloadTrace(makeTraceHeader(other, m_items), make(other)) != a);
    // Changing only the mix keeps arrivals and questions, request by request.
    TraceParams remix = p;
    remix.mix = parseWorkflowMix("irg:1,recomp:2").value();
    std::vector<TraceRequest> x = make(p), y = make(remix);
    int differentWorkflow = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      QCOMPARE(x[i].arrivalS, y[i].arrivalS);
      QCOMPARE(x[i].qaId, y[i].qaId);
      differentWorkflow += x[i].workflow != y[i].workflow;
    }
    QCOMPARE(differentWorkflow, 500);
  }

  void randomStreamsArePinned() {
    // Published traces must stay reproducible: these values come from std::mt19937_64 (fixed
    // by the standard) and this file's own transforms. A change here changes every trace.
    Rng rng(5489);
    std::mt19937_64 reference(5489);
    QCOMPARE(rng.uniform01(), static_cast<double>(reference() >> 11) * 0x1.0p-53);
    QCOMPARE(deriveSeed(1, 0), uint64_t{0x910A2DEC89025CC1ULL});
    // below() is unbiased and in range; the Lemire rejection keeps n = 3 at 1/3 each.
    std::array<int, 3> hits{};
    for (int i = 0; i < 30000; ++i) hits[rng.below(3)]++;
    for (int h : hits) QVERIFY(std::abs(h - 10000) < 400);
    for (int i = 0; i < 1000; ++i) QVERIFY(rng.below(1) == 0);
    // A zero weight is never drawn, wherever it sits.
    std::vector<double> w = {0, 1, 0, 2, 0};
    DiscreteSampler d(w);
    std::array<int, 5> picks{};
    for (int i = 0; i < 9000; ++i) picks[d.sample(rng)]++;
    QCOMPARE(picks[0] + picks[2] + picks[4], 0);
    QVERIFY(std::abs(picks[3] - 6000) < 300);
  }

  void tracesArePinned() {
    // The first requests of seed 1 on the tiny corpus, for each popularity. Integers are exact
    // on every platform; arrival times go through log1p, hence the tolerance.
    struct Pin {
      const char* popularity;
      std::array<int64_t, 3> qaIds;
    };
    const Pin pins[] = {{"uniform", {503, 404, 368}}, {"zipf:1", {233, 233, 110}},
                        {"temporal", {503, 368, 503}}};
    const double arrivals[] = {0.038014079365556425, 0.14961974131530736, 0.26020939994596554};
    const Workflow workflows[] = {Workflow::OneShot, Workflow::OneShot, Workflow::Multistep};
    for (const Pin& pin : pins) {
      TraceParams p = params(pin.popularity, 3);
      p.mix = parseWorkflowMix("oneshot:1,multistep:1").value();
      std::vector<TraceRequest> t = make(p);
      QCOMPARE(t.size(), size_t{3});
      for (size_t i = 0; i < 3; ++i) {
        QCOMPARE(t[i].qaId, pin.qaIds[i]);
        QVERIFY(std::abs(t[i].arrivalS - arrivals[i]) < 1e-12);
        QCOMPARE(t[i].workflow, workflows[i]);
      }
    }
  }

  void readerRoundTrip() {
    TraceParams p = params("temporal", 300, 9);
    p.mix = parseWorkflowMix("oneshot:1,hyde:1,multistep:1,irg:1,recomp:1").value();
    std::vector<TraceRequest> t = make(p);
    QVERIFY(writeWorkloadTrace(path("rt.jsonl"), makeTraceHeader(p, m_items), t).isOk());
    std::string text = readFile(path("rt.jsonl")).value();
    QVERIFY(text.rfind("{\"trace\":{\"version\":1,", 0) == 0);
    QVERIFY(contains(text, "\"popularity\":\"temporal:0.5\",\"window\":16,"));
    Result<std::vector<TraceRequest>> back = readWorkloadTrace(path("rt.jsonl"));
    QVERIFY2(back.isOk(), back.status().message().c_str());
    QCOMPARE(back->size(), t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      const TraceRequest &a = t[i], &b = (*back)[i];
      QCOMPARE(b.id, a.id);
      QVERIFY(std::abs(b.arrivalS - a.arrivalS) <= 1e-9 * std::max(1.0, a.arrivalS));
      QCOMPARE(b.workflow, a.workflow);
      QCOMPARE(b.qaId, a.qaId);
      QCOMPARE(b.topicEntity, a.topicEntity);
      QCOMPARE(b.question, a.question);
      QVERIFY(b.answers == a.answers);
      QCOMPARE(b.type, a.type);
    }
    // The escaped question survives even when it is not in the random trace.
    TraceRequest tricky;
    tricky.question = testing::tinyQuestion(1, 0, true);
    tricky.answers = {"a\"b", "\\", ""};
    std::string one = formatWorkloadTrace(makeTraceHeader(p, m_items), std::vector{tricky});
    Result<std::vector<TraceRequest>> r = parseWorkloadTrace(one, "tricky");
    QVERIFY(r.isOk());
    QCOMPARE(r->front().question, tricky.question);
    QVERIFY(r->front().answers == tricky.answers);
    QCOMPARE(std::count(one.begin(), one.end(), '\n'), 2);  // a newline in a question is escaped
  }

  void readerToleratesHandWrittenTraces() {
    const std::string fixture = std::string(RAGWB_FIXTURES_DIR) + "/workload/hand_written.jsonl";
    Result<std::vector<TraceRequest>> t = readWorkloadTrace(fixture);
    QVERIFY2(t.isOk(), t.status().message().c_str());
    QCOMPARE(t->size(), size_t{3});
    QCOMPARE((*t)[0].workflow, Workflow::Hyde);
    QCOMPARE((*t)[0].qaId, int64_t{-1});  // no qa_id: a custom question
    QVERIFY((*t)[0].answers.empty());
    QCOMPARE((*t)[1].answers.size(), size_t{2});
    QCOMPARE((*t)[2].id, int64_t{7});
    QCOMPARE((*t)[2].question, std::string("caf\xC3\xA9?"));  // from a \u escape
    // No header, CRLF line ends and a trailing blank line are fine too.
    auto r = parseWorkloadTrace(
        "{\"id\":0,\"arrival_s\":0,\"workflow\":\"irg\",\"question\":\"q\"}\r\n\r\n", "crlf");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->front().workflow, Workflow::Irg);
  }

  void readerErrorsNameLineAndField() {
    const std::string ok = "{\"id\":0,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\"}";
    const std::string hdr = "{\"trace\":{\"version\":1}}";
    struct Case {
      std::string text;
      const char* expect;
    };
    const std::vector<Case> cases = {
        {hdr + "\n" + ok + "\n{\"id\":1,\"arrival_s\":2,", "line 3, column 23: unexpected end"},
        {hdr + "\n{\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\"}", "line 2: missing field 'id'"},
        {ok + "\n{\"id\":1,\"arrival_s\":2,\"workflow\":\"oneshot\"}", "line 2: missing field 'question'"},
        {ok + "\n{\"id\":1,\"arrival_s\":\"2\",\"workflow\":\"oneshot\",\"question\":\"q\"}",
         "line 2: field 'arrival_s' must be a number of seconds, got string"},
        {"{\"id\":1.5,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\"}", "line 1: field 'id' must be an integer"},
        {"{\"id\":-1,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\"}", "line 1: field 'id' must be >= 0"},
        {"{\"id\":0,\"arrival_s\":1,\"workflow\":\"fancy\",\"question\":\"q\"}", "line 1: unknown workflow 'fancy'"},
        {"{\"id\":0,\"arrival_s\":1,\"workflow\":3,\"question\":\"q\"}", "field 'workflow' must be a string, got number"},
        {"{\"id\":0,\"arrival_s\":-1,\"workflow\":\"oneshot\",\"question\":\"q\"}", "'arrival_s' must be >= 0"},
        {"{\"id\":0,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\",\"answers\":\"a\"}",
         "field 'answers' must be an array of strings, got string"},
        {"{\"id\":0,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\",\"answers\":[1]}",
         "field 'answers' must hold only strings"},
        {"{\"id\":0,\"arrival_s\":1,\"workflow\":\"oneshot\",\"question\":\"q\",\"qa_id\":\"7\"}",
         "field 'qa_id' must be an integer, got string"},
        {ok + "\n{\"id\":0,\"arrival_s\":2,\"workflow\":\"oneshot\",\"question\":\"q\"}", "line 2: id 0 appears twice"},
        {ok + "\n{\"id\":1,\"arrival_s\":0.5,\"workflow\":\"oneshot\",\"question\":\"q\"}",
         "line 2: arrival_s goes back in time"},
        {ok + "\n" + hdr, "line 2: a trace header is allowed only on the first line"},
        {"{\"trace\":{\"version\":2}}" "\n" + ok, "line 1: trace format version 2 is newer"},
        {"{\"trace\":{}}" "\n" + ok, "line 1: the trace header has no valid 'version'"},
        {"[1,2]", "line 1: expected a JSON object, got array"},
        {"\n\n" + ok + "\n{oops}", "line 4, column 2: expected a member name"},
        {"", "has no requests"},
        {hdr + "\n", "has no requests"},
    };
    for (const Case& c : cases) {
      Result<std::vector<TraceRequest>> r = parseWorkloadTrace(c.text, "t.jsonl");
      QVERIFY2(!r.isOk(), c.expect);
      QCOMPARE(r.status().code(), StatusCode::Corrupt);
      QVERIFY2(contains(r.status().message(), c.expect), r.status().message().c_str());
      QVERIFY(r.status().message().rfind("trace t.jsonl", 0) == 0);
    }
    Result<std::vector<TraceRequest>> missing = readWorkloadTrace(path("nope.jsonl"));
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(contains(missing.status().message(), "nope.jsonl"));
  }

  void badParameters() {
    for (const char* bad : {"", "zipf", "zipf:", "zipf:abc", "zipf:0", "zipf:-1", "zipf:1x",
                            "temporal:1", "temporal:-0.1", "temporal:x", "uniform:2", "hot"}) {
      Result<PopularitySpec> r = parsePopularity(bad);
      QVERIFY2(!r.isOk(), bad);
      QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    }
    QVERIFY(contains(parsePopularity("hot").status().message(), "zipf:S"));
    QCOMPARE(parsePopularity("zipf:1.25")->zipfExponent, 1.25);
    QCOMPARE(parsePopularity("temporal:0")->repeatProbability, 0.0);
    QCOMPARE(formatPopularity(*parsePopularity("zipf:1.25")), std::string("zipf:1.25"));

    for (const char* bad : {"", ",", "oneshot:1,", "oneshot:", "oneshot:x", "oneshot:-1",
                            "oneshot:1,oneshot:2", "fancy:1", "oneshot:0,irg:0", "oneshot:inf",
                            "oneshot:1:2"}) {
      Result<WorkflowMix> r = parseWorkflowMix(bad);
      QVERIFY2(!r.isOk(), bad);
      QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    }
    QVERIFY(contains(parseWorkflowMix("fancy:1").status().message(),
                     "known: oneshot, hyde, multistep, irg, recomp"));
    WorkflowMix m = parseWorkflowMix(" oneshot : 2 , recomp").value();
    QCOMPARE(m.size(), size_t{2});
    QCOMPARE(m[1].workflow, Workflow::Recomp);
    QCOMPARE(m[1].weight, 1.0);
    QCOMPARE(formatWorkflowMix(m), std::string("oneshot:2,recomp:1"));

    TraceParams p;
    for (double rate : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
      p.rate = rate;
      QVERIFY(contains(validateTraceParams(p).message(), "--rate"));
    }
    p.rate = 1;
    for (int64_t n : {int64_t{0}, int64_t{-5}, kMaxTraceRequests + 1}) {
      p.requests = n;
      QVERIFY(contains(validateTraceParams(p).message(), "--requests"));
      QVERIFY(!makeWorkloadTrace(p, m_items).isOk());
    }
    p.requests = 10;
    p.popularity = parsePopularity("temporal").value();
    p.popularity.window = 0;
    QVERIFY(contains(validateTraceParams(p).message(), "--window"));
    p.popularity.window = 16;
    QVERIFY(validateTraceParams(p).isOk());
    QVERIFY(!makeWorkloadTrace(p, {}).isOk());
  }

  void corpusErrors() {
    Result<std::vector<QaItem>> missing = loadQaItems(path("absent.db"), "test");
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
    QVERIFY(contains(missing.status().message(), "ragraph corpus build"));
    QVERIFY(contains(missing.status().message(), "--corpus"));

    Result<std::vector<QaItem>> noSplit = loadQaItems(path("corpus.db"), "validation");
    QCOMPARE(noSplit.status().code(), StatusCode::NotFound);
    QVERIFY2(contains(noSplit.status().message(), "no QA items in split 'validation'; it has: test, train"),
             noSplit.status().message().c_str());

    fs::path empty = path("empty.db");
    QVERIFY(testing::makeTinyCorpus(empty, {.entities = 0}).isOk());
    QVERIFY(contains(loadQaItems(empty, "test").status().message(), "no QA items at all"));

    fs::path newer = path("newer.db");
    QVERIFY(testing::makeTinyCorpus(newer, {.entities = 2}).isOk());
    {
      auto db = sql::Db::open(newer, sql::OpenMode::ReadWrite);
      QVERIFY(db->setUserVersion(corpus::kCorpusSchemaVersion + 1).isOk());
    }
    Result<std::vector<QaItem>> mismatch = loadQaItems(newer, "test");
    QCOMPARE(mismatch.status().code(), StatusCode::SchemaMismatch);
    QVERIFY(contains(mismatch.status().message(), "rebuild it with `ragraph corpus build`"));

    fs::path broken = path("broken.db");
    QVERIFY(testing::makeTinyCorpus(broken, {.entities = 2}).isOk());
    {
      auto db = sql::Db::open(broken, sql::OpenMode::ReadWrite);
      QVERIFY(db->exec("UPDATE qa SET answers = '[1, 2' WHERE id = 2").isOk());
    }
    Result<std::vector<QaItem>> corrupt = loadQaItems(broken, "test");
    QCOMPARE(corrupt.status().code(), StatusCode::Corrupt);
    QVERIFY2(contains(corrupt.status().message(), "qa item 2 has answers"), corrupt.status().message().c_str());

    std::ofstream(path("notadb.db")) << "this is not sqlite, just text padding it out to a page...";
    QVERIFY(!loadQaItems(path("notadb.db"), "test").isOk());
  }

  void unwritableOutputLeavesNothing() {
    std::ofstream(path("plainfile")) << "x";
    fs::path out = path("plainfile") / "trace.jsonl";  // a file cannot hold a directory
    TraceParams p = params("uniform", 10);
    Status s = writeWorkloadTrace(out, makeTraceHeader(p, m_items), make(p));
    QVERIFY(!s.isOk());
    QVERIFY(contains(s.message(), "writing trace"));
    QVERIFY(!fs::exists(out));
    // A directory as --out is refused and left alone.
    fs::create_directories(path("adir"));
    QVERIFY(!writeWorkloadTrace(path("adir"), makeTraceHeader(p, m_items), make(p)).isOk());
    QVERIFY(fs::is_directory(path("adir")));
  }

  void summary() {
    std::vector<TraceRequest> t;
    const int64_t entities[] = {5, 5, 5, 5, 5, 3, 3, 3, 1, 2, 4};
    double at = 0;
    for (int64_t e : entities) {
      TraceRequest r;
      r.id = static_cast<int64_t>(t.size());
      r.arrivalS = at += 0.5;
      r.topicEntity = e;
      r.workflow = e == 5 ? Workflow::Multistep : Workflow::OneShot;
      t.push_back(r);
    }
    TraceSummary s = summarizeWorkloadTrace(t);
    QCOMPARE(s.requests, int64_t{11});
    QCOMPARE(s.durationS, 5.5);
    QCOMPARE(s.meanRate, 2.0);
    QCOMPARE(s.distinctEntities, int64_t{5});
    QCOMPARE(s.top20EntityShare, 5.0 / 11);  // top 20% of 5 entities = the one with 5 requests
    QCOMPARE(s.perWorkflow[static_cast<size_t>(Workflow::Multistep)], int64_t{5});
    QCOMPARE(s.perWorkflow[static_cast<size_t>(Workflow::OneShot)], int64_t{6});
    QCOMPARE(summarizeWorkloadTrace({}).requests, int64_t{0});
    // Uniform over many entities: every entity about once, so the top 20% draw about 20%+.
    TraceSummary u = summarizeWorkloadTrace(make(params("uniform", 2000)));
    TraceSummary z = summarizeWorkloadTrace(make(params("zipf:1.2", 2000)));
    QVERIFY(z.top20EntityShare > u.top20EntityShare + 0.2);
  }

  // The one driver's arrivals: the same seed gives the same times, a non-positive rate submits
  // everything at once, and the pacer hands arrivals out in order, never before their time.
  void driverArrivalsAndPacing() {
    const std::vector<double> a = rag::poissonArrivals(200, 50.0, 7);
    QCOMPARE(a, rag::poissonArrivals(200, 50.0, 7));
    QVERIFY(a != rag::poissonArrivals(200, 50.0, 8));
    QCOMPARE(a.front(), 0.0);
    QVERIFY(std::is_sorted(a.begin(), a.end()));
    QVERIFY(std::abs(a.back() / 199.0 * 50.0 - 1.0) < 0.25);  // mean gap 1/rate
    for (double t : rag::poissonArrivals(5, 0.0, 1)) QCOMPARE(t, 0.0);

    ArrivalPacer pacer({0.0, 0.0, 0.2});
    QVERIFY(pacer.due());
    pacer.advance();
    QCOMPARE(pacer.next(), size_t{1});
    QVERIFY(pacer.due());
    pacer.advance();
    QVERIFY(!pacer.due());  // 0.2 s away
    QVERIFY(pacer.nsUntilDue() > 100'000'000);
    QTRY_VERIFY_WITH_TIMEOUT(pacer.due(), 2000);
    pacer.advance();
    QVERIFY(pacer.finished());
    QVERIFY(!pacer.due());
    ArrivalPacer stopped({0.0, 5.0});
    stopped.stop();
    QVERIFY(stopped.finished());
  }

  void driverReplaysInOrderAndStops() {
    std::vector<TraceRequest> trace(4);
    for (size_t i = 0; i < trace.size(); ++i) {
      trace[i].id = static_cast<int64_t>(i);
      trace[i].arrivalS = 0.02 * static_cast<double>(i);
      trace[i].question = "q" + std::to_string(i);
    }
    std::vector<std::string> seen;
    const uint64_t start = nowNs();
    std::vector<Submission> subs = replayTrace(trace, [&](const TraceRequest& r) -> Result<RequestHandle> {
      seen.push_back(r.question);
      return r.id == 2 ? Result<RequestHandle>(Status::busy("full")) : Result<RequestHandle>(Status::cancelled("fake"));
    });
    QCOMPARE(seen, (std::vector<std::string>{"q0", "q1", "q2", "q3"}));
    QCOMPARE(subs.size(), size_t{4});
    QCOMPARE(subs[2].handle.status().code(), StatusCode::Busy);  // recorded, not retried
    QVERIFY(subs[3].submittedNs - start >= 60'000'000);           // not before its arrival
    std::atomic<bool> stop{false};
    std::vector<Submission> cut = replayTrace(
        trace, [&](const TraceRequest&) -> Result<RequestHandle> { return Status::cancelled("fake"); },
        {.stop = &stop, .onSubmitted = [&](const Submission& s) { if (s.index == 1) stop = true; }});
    QCOMPARE(cut.size(), size_t{2});
  }
};

QTEST_GUILESS_MAIN(TestWorkloadTrace)
#include "test_workload_trace.moc"
