// WindVE's live experiments (retrieval/windve_load.h) on a fake embedder whose batches take a
// fixed time: a device's calibration (levels, fit, depth, progress, stop), and the closed-loop
// load: clients past the queues' depths get BUSY answers, heterogeneous mode off never routes to
// the auxiliary queue, on it spills there, the snapshot agrees with the summary, stop ends a load
// early, and bad settings are refused. No timings asserted.
#include <QtTest>

#include <atomic>
#include <chrono>
#include <thread>

#include "retrieval/query_texts.h"
#include "retrieval/windve_load.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;

namespace {

// A batch takes `msPerBatch` plus `msPerText` per text; vectors [1, 0].
class SleepEmbedder final : public Embedder {
public:
  SleepEmbedder(int msPerBatch, int msPerText) : m_batch(msPerBatch), m_text(msPerText) {}
  int64_t dim() const override { return 2; }
  Result<std::vector<float>> embed(std::span<const std::string> texts) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(m_batch + m_text * static_cast<int>(texts.size())));
    std::vector<float> out;
    for (size_t i = 0; i < texts.size(); ++i) out.insert(out.end(), {1.0f, 0.0f});
    return out;
  }

private:
  int m_batch, m_text;
};

const std::vector<std::string> kTexts = {"what is a bridge?", "what is a compiler?", "name a kind of tree"};

std::unique_ptr<EmbeddingService> service(int64_t mainDepth, int64_t auxDepth, bool hetero) {
  auto r = EmbeddingService::create({"main", std::make_shared<SleepEmbedder>(10, 1), {}},
                                    EmbeddingInstance{"aux", std::make_shared<SleepEmbedder>(20, 2), {}},
                                    {.mainDepth = mainDepth, .auxDepth = auxDepth, .heterogeneous = hetero});
  if (!r) qFatal("%s", r.status().message().c_str());
  return std::move(*r);
}

}  // namespace

class TestWindVeLoad : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void calibrationProfilesLevelsAndFindsADepth() {
    std::vector<LatencySample> seen;
    auto r = calibrateDevice({"fake", std::make_shared<SleepEmbedder>(5, 1), {}}, kTexts,
                             {.slo = 0.2, .maxConcurrency = 16}, [&](const LatencySample& s) { seen.push_back(s); },
                             nullptr);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->device, std::string("fake"));
    QVERIFY(r->samples.size() >= 2);
    QCOMPARE(seen.size(), r->samples.size());  // every level reported as it was measured
    for (size_t i = 0; i < r->samples.size(); ++i) QCOMPARE(r->samples[i].concurrency, int64_t{1} << i);
    QVERIFY(r->fit.alpha >= 0 && r->fit.beta >= 0);
    QCOMPARE(r->depth, depthWithinSlo(r->fit, 0.2, 16));
    QVERIFY(r->depth >= 1);
  }

  void calibrationRefusesBadSettingsAndStops() {
    auto inst = EmbeddingInstance{"fake", std::make_shared<SleepEmbedder>(1, 0), {}};
    auto bad = calibrateDevice(inst, kTexts, {.slo = 0}, {}, nullptr);
    QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(bad.status(), {"SLO", "positive"}));
    QCOMPARE(calibrateDevice(inst, kTexts, {.maxConcurrency = 1}, {}, nullptr).status().code(), StatusCode::InvalidArgument);
    QCOMPARE(calibrateDevice(inst, {}, {}, {}, nullptr).status().code(), StatusCode::InvalidArgument);
    std::atomic<bool> stop{true};
    auto stopped = calibrateDevice(inst, kTexts, {}, {}, &stop);
    QCOMPARE(stopped.status().code(), StatusCode::Cancelled);
  }

  void clientsPastTheDepthGetBusyAndNeverTheAuxiliaryWhenHeterogeneousIsOff() {
    auto svc = service(2, 2, /*hetero=*/false);
    ClosedLoopLoad load(*svc, kTexts, {.clients = 6, .seconds = 0.3, .sloSeconds = 1});
    QCOMPARE(load.snapshot().served, int64_t{0});  // before the run
    auto r = load.run(nullptr);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->served > 0);
    QVERIFY(r->busy > 0);  // 6 clients on 2 places: at least the first sweep's 4 are refused
    QCOMPARE(r->routedAux, int64_t{0});
    QCOMPARE(r->routedMain, r->served);  // every accepted query was answered before run() returned
    QCOMPARE(r->submitted, r->served + r->busy);
    const ClosedLoopSnapshot s = load.snapshot();
    QVERIFY(!s.running);
    QCOMPARE(s.served, r->served);
    QCOMPARE(s.busy, r->busy);
    QCOMPARE(s.service.main.queued + s.service.main.running, int64_t{0});
    QVERIFY(s.service.auxiliary.has_value());
    QCOMPARE(s.service.auxiliary->accepted, int64_t{0});
    QVERIFY(r->withinSlo <= r->served);
    QVERIFY(r->p50Seconds > 0 && r->p50Seconds <= r->p99Seconds && r->p99Seconds <= r->maxSeconds);
  }

  void heterogeneousModeSpillsPastTheMainQueueOntoTheAuxiliary() {
    auto svc = service(2, 2, /*hetero=*/true);
    ClosedLoopLoad load(*svc, kTexts, {.clients = 6, .seconds = 0.3});
    auto r = load.run(nullptr);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->routedAux > 0);
    QVERIFY(r->busy > 0);  // still 2 clients past both queues
    const EmbeddingServiceStats st = svc->stats();
    QCOMPARE(st.main.served + st.auxiliary->served, r->served);
    QCOMPARE(st.auxiliary->accepted, r->routedAux);
  }

  void fewerClientsThanTheDepthAreNeverBusy() {
    auto svc = service(4, 1, /*hetero=*/false);
    ClosedLoopLoad load(*svc, kTexts, {.clients = 3, .seconds = 0.2});
    auto r = load.run(nullptr);
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->served > 0);
    QCOMPARE(r->busy, int64_t{0});
  }

  void stopEndsALoadEarlyAndBadSettingsAreRefused() {
    auto svc = service(2, 2, true);
    ClosedLoopLoad load(*svc, kTexts, {.clients = 4, .seconds = 600});
    std::atomic<bool> stop{false};
    std::thread stopper([&] {
      while (load.snapshot().served < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      stop = true;
    });
    auto r = load.run(&stop);
    stopper.join();
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QVERIFY(r->served >= 2);
    for (ClosedLoopParams p : {ClosedLoopParams{.clients = 0}, ClosedLoopParams{.seconds = 0},
                               ClosedLoopParams{.busyBackoffSeconds = -1}}) {
      ClosedLoopLoad bad(*svc, kTexts, p);
      QCOMPARE(bad.run(nullptr).status().code(), StatusCode::InvalidArgument);
    }
    ClosedLoopLoad noTexts(*svc, {}, {});
    QCOMPARE(noTexts.run(nullptr).status().code(), StatusCode::InvalidArgument);
  }

  void percentilesAreNearestRank() {
    QCOMPARE(percentile({}, 0.5), 0.0);
    QCOMPARE(percentile({3, 1, 2}, 0.5), 2.0);
    std::vector<double> v;
    for (int i = 1; i <= 100; ++i) v.push_back(i);
    QCOMPARE(percentile(v, 0.99), 99.0);
    QCOMPARE(percentile(v, 1.0), 100.0);
    QCOMPARE(percentile(v, 0.0), 1.0);
  }

  void queryTextsFallBackToTheTokenizerWithoutACorpus() {
    auto words = loadQueryTexts("/nonexistent/corpus.db", RAGWB_SOURCE_DIR "/datasets/models/rag-embedder", 4);
    QVERIFY2(words.isOk(), words.status().message().c_str());
    QCOMPARE(words->texts.size(), size_t{4});
    QVERIFY(words->source.find("tokenizer") != std::string::npos);
    for (const std::string& t : words->texts) QVERIFY(!t.empty() && t.back() == '?');
    auto q = loadQueryTexts("/nonexistent/corpus.db", RAGWB_FIXTURES_DIR "/nonexistent-embedder", 4);
    QVERIFY(!q.isOk());  // neither a corpus nor a tokenizer: the error names the tokenizer file
    QVERIFY(mentions(q.status(), {"tokenizer.json"}));
  }
};

QTEST_GUILESS_MAIN(TestWindVeLoad)
#include "test_windve_load.moc"
