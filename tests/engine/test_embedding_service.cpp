// The WindVE embedding service (retrieval/embedding_service.h) with a fake encoder: Algorithm 1
// routing, bounded queues answering Busy with a reason, dynamic batching, counters, shutdown;
// device planning and core lists; and the queue-depth estimators (retrieval/queue_depth.h).
#include <QtTest>

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "retrieval/embedding_service.h"
#include "retrieval/queue_depth.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::retrieval;

namespace {

// Embeds text t as [len(t), first byte, tag]; blocks while the gate is closed, so a test can
// hold queries in a queue; records every batch size.
class FakeEmbedder final : public Embedder {
public:
  explicit FakeEmbedder(float tag) : m_tag(tag) {}
  int64_t dim() const override { return 3; }
  Result<std::vector<float>> embed(std::span<const std::string> texts) override {
    {
      std::unique_lock lock(m_mutex);
      m_batches.push_back(static_cast<int64_t>(texts.size()));
      ++m_entered;
      m_changed.notify_all();
      m_changed.wait(lock, [&] { return m_open; });
    }
    if (m_fail) return Status::internal("fake embedder failure");
    std::vector<float> out;
    for (const std::string& t : texts) {
      out.push_back(static_cast<float>(t.size()));
      out.push_back(static_cast<float>(static_cast<unsigned char>(t[0])));
      out.push_back(m_tag);
    }
    return out;
  }
  void close() { std::lock_guard lock(m_mutex); m_open = false; }
  void open() {
    std::lock_guard lock(m_mutex);
    m_open = true;
    m_changed.notify_all();
  }
  // Waits until `n` embed calls have started (the worker holds a batch).
  bool waitEntered(int n) {
    std::unique_lock lock(m_mutex);
    return m_changed.wait_for(lock, std::chrono::seconds(10), [&] { return m_entered >= n; });
  }
  std::vector<int64_t> batches() {
    std::lock_guard lock(m_mutex);
    return m_batches;
  }
  std::atomic<bool> m_fail{false};

private:
  float m_tag;
  std::mutex m_mutex;
  std::condition_variable m_changed;
  bool m_open = true;
  int m_entered = 0;
  std::vector<int64_t> m_batches;
};

// One query held in the worker's embed call, then `waiting` more queued behind it.
std::vector<Submission> holdOneThenQueue(EmbeddingService& svc, FakeEmbedder& e, int waiting) {
  e.close();
  std::vector<Submission> subs;
  subs.push_back(svc.submit("first"));
  if (!e.waitEntered(1)) qFatal("the worker never started the first batch");
  for (int i = 0; i < waiting; ++i) subs.push_back(svc.submit(std::string("t").append(std::to_string(i))));
  return subs;
}

std::unique_ptr<EmbeddingService> makeService(std::shared_ptr<FakeEmbedder> main, std::shared_ptr<FakeEmbedder> aux,
                                              EmbeddingServiceParams p) {
  std::optional<EmbeddingInstance> a;
  if (aux) a = EmbeddingInstance{"aux", aux, {}};
  auto s = EmbeddingService::create({"main", main, {}}, std::move(a), p);
  if (!s) qFatal("%s", s.status().message().c_str());
  return std::move(*s);
}

std::vector<LatencySample> linear(double alpha, double beta, std::initializer_list<int64_t> levels) {
  std::vector<LatencySample> out;
  for (int64_t c : levels) out.push_back({c, alpha * static_cast<double>(c) + beta});
  return out;
}

}  // namespace

class TestEmbeddingService : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void chooseRouteIsAlgorithmOne() {
    QCOMPARE(chooseRoute(0, 2, 0, 1, true), Route::Main);
    QCOMPARE(chooseRoute(1, 2, 0, 1, true), Route::Main);
    QCOMPARE(chooseRoute(2, 2, 0, 1, true), Route::Auxiliary);
    QCOMPARE(chooseRoute(2, 2, 1, 1, true), Route::Busy);
    QCOMPARE(chooseRoute(2, 2, 0, 1, false), Route::Busy);   // main full, heterogeneous off
    QCOMPARE(chooseRoute(1, 2, 5, 1, false), Route::Main);   // main first whatever the auxiliary
  }

  void dispatchFillsMainThenAuxiliaryThenAnswersBusy() {
    auto main = std::make_shared<FakeEmbedder>(1.f), aux = std::make_shared<FakeEmbedder>(2.f);
    main->close();
    aux->close();
    auto svc = makeService(main, aux, {.mainDepth = 3, .auxDepth = 2, .heterogeneous = true, .maxBatch = 8});
    std::vector<Submission> subs;
    for (int i = 0; i < 7; ++i) subs.push_back(svc->submit(std::string("q").append(std::to_string(i))));
    const std::vector<Route> want = {Route::Main, Route::Main, Route::Main, Route::Auxiliary,
                                     Route::Auxiliary, Route::Busy, Route::Busy};
    for (size_t i = 0; i < want.size(); ++i) QCOMPARE(subs[i].route, want[i]);
    // Busy is answered at once, with the reason, while the others still wait.
    Result<std::vector<float>> busy = subs[5].result.get();
    QCOMPARE(busy.status().code(), StatusCode::Busy);
    QVERIFY(mentions(busy.status(), {"main queue (main) full at depth 3", "auxiliary queue (aux) full at depth 2"}));
    EmbeddingServiceStats st = svc->stats();
    QCOMPARE(st.main.queued + st.main.running, int64_t{3});
    QCOMPARE(st.auxiliary->queued + st.auxiliary->running, int64_t{2});
    QCOMPARE(st.busy, int64_t{2});
    QCOMPARE(st.main.full, int64_t{4});       // two overflowed to the auxiliary, two were busy
    QCOMPARE(st.auxiliary->full, int64_t{2});
    main->open();
    aux->open();
    for (int i = 0; i < 5; ++i) {
      Result<std::vector<float>> v = subs[static_cast<size_t>(i)].result.get();
      QVERIFY2(v.isOk(), v.status().message().c_str());
      QCOMPARE(v->size(), size_t{3});
      QCOMPARE((*v)[0], 2.f);                             // "qN" has two bytes
      QCOMPARE((*v)[2], i < 3 ? 1.f : 2.f);               // served by the instance it was routed to
    }
    st = svc->stats();
    QCOMPARE(st.main.served, int64_t{3});
    QCOMPARE(st.auxiliary->served, int64_t{2});
    QVERIFY(st.main.embedSeconds > 0 && st.main.embedCpuSeconds >= 0);  // accumulated, whatever the values
    QCOMPARE(st.main.accepted, int64_t{3});
    QCOMPARE(st.main.queued + st.main.running, int64_t{0});
    // Room again: the next query goes to the main queue.
    QCOMPARE(svc->submit("again").route, Route::Main);
  }

  void heterogeneousOffNeverUsesTheAuxiliary() {
    auto main = std::make_shared<FakeEmbedder>(1.f), aux = std::make_shared<FakeEmbedder>(2.f);
    main->close();
    auto svc = makeService(main, aux, {.mainDepth = 2, .auxDepth = 4, .heterogeneous = false});
    QVERIFY(!svc->heterogeneous());
    QCOMPARE(svc->submit("a").route, Route::Main);
    QCOMPARE(svc->submit("b").route, Route::Main);
    Submission third = svc->submit("c");
    QCOMPARE(third.route, Route::Busy);
    Result<std::vector<float>> r = third.result.get();
    QVERIFY(mentions(r.status(), {"full at depth 2", "heterogeneous mode is off"}));
    QCOMPARE(svc->stats().auxiliary->accepted, int64_t{0});
    QVERIFY(!svc->stats().heterogeneous);
    main->open();
  }

  void withoutAnAuxiliaryTheMainQueueIsTheBound() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    main->close();
    auto svc = makeService(main, nullptr, {.mainDepth = 1});
    QCOMPARE(svc->submit("a").route, Route::Main);
    Submission s = svc->submit("b");
    QCOMPARE(s.route, Route::Busy);
    QVERIFY(mentions(s.result.get().status(), {"no auxiliary device"}));
    QVERIFY(!svc->stats().auxiliary.has_value());
    main->open();
  }

  void queueLoadStaysBoundedUnderABurst() {
    auto main = std::make_shared<FakeEmbedder>(1.f), aux = std::make_shared<FakeEmbedder>(2.f);
    main->close();
    aux->close();
    auto svc = makeService(main, aux, {.mainDepth = 5, .auxDepth = 3});
    int busy = 0;
    for (int i = 0; i < 1000; ++i) busy += svc->submit("x").route == Route::Busy;
    QCOMPARE(busy, 992);
    const EmbeddingServiceStats st = svc->stats();
    QCOMPARE(st.main.queued + st.main.running, int64_t{5});
    QCOMPARE(st.auxiliary->queued + st.auxiliary->running, int64_t{3});
    main->open();
    aux->open();
  }

  void dynamicBatchingGroupsQueuedQueries() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    auto svc = makeService(main, nullptr, {.mainDepth = 100, .maxBatch = 4});
    std::vector<Submission> subs = holdOneThenQueue(*svc, *main, 10);
    QCOMPARE(svc->stats().main.queued, int64_t{10});
    QCOMPARE(svc->stats().main.running, int64_t{1});
    main->open();
    for (Submission& s : subs) QVERIFY(s.result.get().isOk());
    QCOMPARE(main->batches(), (std::vector<int64_t>{1, 4, 4, 2}));
    const EmbeddingServiceStats st = svc->stats();
    QCOMPARE(st.main.batches, int64_t{4});
    QCOMPARE(st.main.largestBatch, int64_t{4});
    QCOMPARE(st.main.served, int64_t{11});
  }

  void emptyTextIsInvalidAndNeverQueued() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    auto svc = makeService(main, nullptr, {.mainDepth = 1});
    Submission s = svc->submit("");
    QCOMPARE(s.route, Route::Refused);
    QCOMPARE(s.result.get().status().code(), StatusCode::InvalidArgument);
    QCOMPARE(svc->stats().refused, int64_t{1});
    QCOMPARE(svc->stats().main.accepted, int64_t{0});
  }

  void embedderErrorsReachEveryQueryOfTheBatch() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    main->m_fail = true;
    auto svc = makeService(main, nullptr, {.mainDepth = 4});
    Result<std::vector<float>> r = svc->submit("a").result.get();
    QCOMPARE(r.status().code(), StatusCode::Internal);
    QVERIFY(mentions(r.status(), {"embedding on main", "fake embedder failure"}));
    QCOMPARE(svc->stats().main.failed, int64_t{1});
  }

  void shutdownAnswersEveryFuture() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    auto svc = makeService(main, nullptr, {.mainDepth = 10, .maxBatch = 2});
    std::vector<Submission> subs = holdOneThenQueue(*svc, *main, 5);
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      main->open();
    });
    svc->shutdown();
    opener.join();
    int served = 0, cancelled = 0;
    for (Submission& s : subs) {
      QVERIFY(s.result.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
      Result<std::vector<float>> r = s.result.get();
      served += r.isOk();
      cancelled += r.status().code() == StatusCode::Cancelled;
    }
    QCOMPARE(served, 1);
    QCOMPARE(cancelled, 5);
    Submission late = svc->submit("late");
    QCOMPARE(late.route, Route::Refused);
    QCOMPARE(late.result.get().status().code(), StatusCode::Cancelled);
  }

  void badParametersAreRefused() {
    auto e = std::make_shared<FakeEmbedder>(1.f);
    QCOMPARE(EmbeddingService::create({"m", nullptr, {}}, std::nullopt, {}).status().code(), StatusCode::InvalidArgument);
    QCOMPARE(EmbeddingService::create({"m", e, {}}, std::nullopt, {.mainDepth = 0}).status().code(),
             StatusCode::InvalidArgument);
    QCOMPARE(EmbeddingService::create({"m", e, {}}, EmbeddingInstance{"a", e, {}}, {.auxDepth = 0}).status().code(),
             StatusCode::InvalidArgument);
    QCOMPARE(EmbeddingService::create({"m", e, {}}, std::nullopt, {.maxBatch = 0}).status().code(),
             StatusCode::InvalidArgument);
    auto bad = EmbeddingService::create({"m", e, {CPU_SETSIZE - 1}}, std::nullopt, {});
    QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
    QVERIFY(mentions(bad.status(), {"not available to this process"}));
  }

  void workersRunOnTheirCores() {
    const std::vector<int> allowed = allowedCores();
    QVERIFY(!allowed.empty());
    // An embedder that reports the core it ran on.
    struct CoreEmbedder final : Embedder {
      int64_t dim() const override { return 1; }
      Result<std::vector<float>> embed(std::span<const std::string> t) override {
        return std::vector<float>(t.size(), static_cast<float>(sched_getcpu()));
      }
    };
    auto svc = EmbeddingService::create({"pinned", std::make_shared<CoreEmbedder>(), {allowed.back()}}, std::nullopt, {});
    QVERIFY2(svc.isOk(), svc.status().message().c_str());
    for (int i = 0; i < 5; ++i) QCOMPARE((*svc)->submit("x").result.get()->at(0), static_cast<float>(allowed.back()));
  }

  void coreListsParseAndPrint() {
    QCOMPARE(*parseCoreList("0"), (std::vector<int>{0}));
    QCOMPARE(*parseCoreList("3,0-2,2"), (std::vector<int>{0, 1, 2, 3}));
    for (const char* bad : {"", "a", "1-", "3-1", "1,,2", "-1", "99999"}) {
      Result<std::vector<int>> r = parseCoreList(bad);
      QVERIFY2(!r.isOk(), bad);
      QVERIFY(mentions(r.status(), {"bad core list"}));
    }
    const std::vector<int> cores = {0, 1, 2, 5, 7, 8};
    QCOMPARE(formatCoreList(cores), std::string("0-2,5,7-8"));
  }

  void deviceDetectionFollowsAlgorithmTwo() {
    auto detect = [](bool cuda, bool hetero, std::vector<int> mainCores, std::vector<int> auxCores,
                     std::vector<int> allowed) {
      DeviceDetectParams p;
      p.cudaAvailable = cuda;
      p.heterogeneous = hetero;
      p.mainCores = std::move(mainCores);
      p.auxCores = std::move(auxCores);
      p.allowedCores = std::move(allowed);
      return detectDevices(p);
    };
    const std::vector<int> four = {0, 1, 2, 3};
    auto cpu = detect(false, true, {}, {}, four);
    QVERIFY(cpu.isOk());
    QCOMPARE(cpu->main.kind, DeviceKind::Cpu);
    QCOMPARE(cpu->main.cores, (std::vector<int>{0, 1}));
    QCOMPARE(cpu->auxiliary->cores, (std::vector<int>{2, 3}));
    QVERIFY(cpu->heterogeneous);
    QCOMPARE(cpu->main.name, std::string("cpu[0-1]"));

    auto given = detect(false, true, {3}, {}, four);
    QCOMPARE(given->auxiliary->cores, (std::vector<int>{0, 1, 2}));  // the rest

    auto off = detect(false, false, {}, {}, four);
    QVERIFY(!off->auxiliary && !off->heterogeneous);
    QCOMPARE(off->main.cores, four);

    auto single = detect(false, true, {}, {}, {0});
    QVERIFY(!single->auxiliary && !single->heterogeneous);
    QVERIFY(single->note.find("forced off") != std::string::npos);

    auto gpu = detect(true, true, {}, {}, four);
    QCOMPARE(gpu->main.kind, DeviceKind::Cuda);
    QCOMPARE(gpu->auxiliary->kind, DeviceKind::Cpu);
    QCOMPARE(gpu->auxiliary->cores, four);
    auto gpuOnly = detect(true, false, {}, {}, four);
    QVERIFY(!gpuOnly->auxiliary && gpuOnly->main.kind == DeviceKind::Cuda);

    auto overlap = detect(false, true, {0, 1}, {1, 2}, four);
    QVERIFY(mentions(overlap.status(), {"share core(s) 1", "disjoint"}));
    auto missing = detect(false, true, {7}, {}, four);
    QVERIFY(mentions(missing.status(), {"--main-cores core 7", "allowed: 0-3"}));
  }

  // ---- queue depths ----------------------------------------------------------------------------

  void fitRecoversExactLinearData() {
    auto f = fitLatency(linear(0.004, 0.05, {1, 2, 4, 8, 16, 32}));
    QVERIFY(f.isOk());
    QVERIFY(std::abs(f->alpha - 0.004) < 1e-12);
    QVERIFY(std::abs(f->beta - 0.05) < 1e-12);
    QVERIFY(f->rmse < 1e-12);
  }

  void fitClampsNegativeCoefficientsToZero() {
    // Falling latency: the best α ≥ 0 is 0, β the mean.
    auto falling = fitLatency(linear(-0.01, 1.0, {1, 2, 3, 4}));
    QCOMPARE(falling->alpha, 0.0);
    QVERIFY(std::abs(falling->beta - 0.975) < 1e-12);
    // A negative intercept: β = 0, α the least-squares slope through the origin.
    std::vector<LatencySample> s = linear(0.1, -0.05, {1, 2, 3, 4});
    auto through = fitLatency(s);
    QCOMPARE(through->beta, 0.0);
    double sxy = 0, sxx = 0;
    for (const LatencySample& x : s) {
      sxy += static_cast<double>(x.concurrency) * x.seconds;
      sxx += static_cast<double>(x.concurrency * x.concurrency);
    }
    QVERIFY(std::abs(through->alpha - sxy / sxx) < 1e-12);
    QVERIFY(through->alpha >= 0 && through->beta >= 0);
    // One level only: a horizontal line or a line through the origin, whichever fits (both do).
    auto one = fitLatency(linear(0.1, 0.2, {4}));
    QVERIFY(one.isOk());
    QVERIFY(std::abs(one->alpha * 4 + one->beta - 0.6) < 1e-12);
  }

  void fitRejectsBadSamples() {
    QCOMPARE(fitLatency({}).status().code(), StatusCode::InvalidArgument);
    std::vector<LatencySample> zero = {{0, 1.0}};
    QCOMPARE(fitLatency(zero).status().code(), StatusCode::InvalidArgument);
    std::vector<LatencySample> neg = {{1, -1.0}};
    QCOMPARE(fitLatency(neg).status().code(), StatusCode::InvalidArgument);
  }

  void depthSolvesTheSlo() {
    QCOMPARE(depthWithinSlo({0.1, 0.2, 0}, 1.0, 1000), int64_t{8});   // 0.1*8 + 0.2 = 1.0 exactly
    QCOMPARE(depthWithinSlo({0.1, 0.25, 0}, 1.0, 1000), int64_t{7});
    QCOMPARE(depthWithinSlo({0.1, 0.95, 0}, 1.0, 1000), int64_t{0});  // one query misses (Eq. 11)
    QCOMPARE(depthWithinSlo({0.0, 0.5, 0}, 1.0, 64), int64_t{64});    // flat: the cap
    QCOMPARE(depthWithinSlo({0.0, 1.5, 0}, 1.0, 64), int64_t{0});
    QCOMPARE(depthWithinSlo({1e-6, 0.0, 0}, 1.0, 500), int64_t{500});  // beyond the cap
    QCOMPARE(depthWithinSlo({0.1, 0.2, 0}, 1.0, 0), int64_t{0});
  }

  void profileDoublesUntilHalfTheSlo() {
    std::vector<int64_t> asked;
    MeasureLatency m = [&](int64_t c) -> Result<double> {
      asked.push_back(c);
      return 0.01 * static_cast<double>(c) + 0.02;
    };
    auto s = profileLevels(m, {.slo = 1.0});
    QVERIFY(s.isOk());
    QCOMPARE(asked, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));  // 0.66 > 0.5 at 64
    auto fit = fitLatency(*s);
    QCOMPARE(depthWithinSlo(*fit, 1.005, 1024), int64_t{98});
    asked.clear();
    QVERIFY(profileLevels(m, {.slo = 1.0, .maxConcurrency = 5}).isOk());
    QCOMPARE(asked, (std::vector<int64_t>{1, 2, 4}));
    QCOMPARE(profileLevels(m, {.slo = 0}).status().code(), StatusCode::InvalidArgument);
  }

  void stressStepsUntilTheSloIsMissed() {
    MeasureLatency m = [](int64_t c) -> Result<double> { return 0.01 * static_cast<double>(c) + 0.02; };
    auto r = stressDepth(m, {.slo = 1.0, .step = 8});
    QVERIFY(r.isOk());
    QCOMPARE(r->depth, int64_t{96});  // 104 gives 1.06
    QCOMPARE(r->samples.back().concurrency, int64_t{104});
    QVERIFY(!r->reachedCap);
    auto capped = stressDepth(m, {.slo = 1.0, .step = 10, .maxConcurrency = 50});
    QCOMPARE(capped->depth, int64_t{50});
    QVERIFY(capped->reachedCap);
    auto none = stressDepth(m, {.slo = 0.01, .step = 1});
    QCOMPARE(none->depth, int64_t{0});
    MeasureLatency failing = [](int64_t) -> Result<double> { return Status::busy("full"); };
    QCOMPARE(stressDepth(failing, {}).status().code(), StatusCode::Busy);
  }

  void largestWithinSloStepsDown() {
    MeasureLatency m = [](int64_t c) -> Result<double> { return 0.1 * static_cast<double>(c); };
    auto r = largestWithinSlo(m, 20, 3, 1.0);
    QCOMPARE(r->concurrency, int64_t{8});  // 20, 17, 14, 11, 8
    QCOMPARE(largestWithinSlo(m, 5, 1, 0.05)->concurrency, int64_t{0});
  }

  void lockstepSearchesAlternate() {
    std::vector<std::pair<int, int64_t>> calls;
    auto tagged = [&](int tag, double perQuery) -> MeasureLatency {
      return [&calls, tag, perQuery](int64_t c) -> Result<double> {
        calls.push_back({tag, c});
        return perQuery * static_cast<double>(c);
      };
    };
    const std::vector<MeasureLatency> ms = {tagged(0, 0.1), tagged(1, 0.05)};
    const std::vector<int64_t> starts = {12, 24}, steps = {2, 4};
    auto r = largestWithinSlo(ms, starts, steps, 1.0);
    QVERIFY(r.isOk());
    QCOMPARE((*r)[0].concurrency, int64_t{10});
    QCOMPARE((*r)[1].concurrency, int64_t{20});
    const std::vector<std::pair<int, int64_t>> want = {{0, 12}, {1, 24}, {0, 10}, {1, 20}};
    QCOMPARE(calls, want);
    const std::vector<int64_t> one = {1};
    QCOMPARE(largestWithinSlo(ms, one, steps, 1.0).status().code(), StatusCode::InvalidArgument);
  }

  void medianOfTakesTheMiddle() {
    int call = 0;
    MeasureLatency m = [&](int64_t) -> Result<double> {
      const double v[] = {5.0, 1.0, 3.0};
      return v[call++ % 3];
    };
    QCOMPARE(*medianOf(m, 3)(1), 3.0);
    QCOMPARE(median({}), 0.0);
    QCOMPARE(median({2.0, 9.0, 1.0, 4.0}), 4.0);
  }

  void timeBurstWaitsForEveryAnswerAndReportsBusy() {
    auto main = std::make_shared<FakeEmbedder>(1.f);
    auto svc = makeService(main, nullptr, {.mainDepth = 4, .maxBatch = 2});
    const std::vector<std::string> texts = {"a", "bb"};
    auto t = timeBurst(*svc, texts, 4);
    QVERIFY2(t.isOk(), t.status().message().c_str());
    QVERIFY(*t >= 0);
    QCOMPARE(svc->stats().main.served, int64_t{4});
    main->close();
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      main->open();
    });
    auto over = timeBurst(*svc, texts, 6);  // two more than the depth
    opener.join();
    QCOMPARE(over.status().code(), StatusCode::Busy);
    QVERIFY(mentions(over.status(), {"burst of 6"}));
  }
};

QTEST_GUILESS_MAIN(TestEmbeddingService)
#include "test_embedding_service.moc"
