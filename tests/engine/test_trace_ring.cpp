#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "rag/trace.h"
#include "telemetry/chrome_trace.h"
#include "telemetry/trace_zone.h"
#include "telemetry/trace_ring.h"

using namespace rag;

namespace {
TraceEvent ev(uint32_t req, uint32_t arg0, uint16_t lane = 0) {
  TraceEvent e;
  e.beginNs = 1000 * arg0;
  e.endNs = e.beginNs + 500;
  e.requestId = req;
  e.lane = lane;
  e.stage = TraceStage::Decode;
  e.arg0 = arg0;
  return e;
}
}  // namespace

class TestTraceRing : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void fifoOrderAndCapacity() {
    TraceRing ring(5);
    QCOMPARE(ring.capacity(), size_t{8});
    for (uint32_t i = 0; i < 8; ++i) QVERIFY(ring.push(ev(1, i)));
    QVERIFY(!ring.push(ev(1, 99)));  // full: dropped, not blocked
    QCOMPARE(ring.dropped(), uint64_t{1});
    std::vector<TraceEvent> out;
    QCOMPARE(ring.drain(out, 3), size_t{3});
    QCOMPARE(ring.drain(out), size_t{5});
    for (uint32_t i = 0; i < 8; ++i) QCOMPARE(out[i].arg0, i);
    QCOMPARE(ring.drain(out), size_t{0});
    QVERIFY(ring.push(ev(1, 100)));  // space again after draining
  }

  void manyProducersOneConsumerLoseNothingUnlessFull() {
    TraceRing ring(1 << 12);
    constexpr int kThreads = 4, kPer = 50000;
    std::atomic<bool> go{false};
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t)
      producers.emplace_back([&, t] {
        while (!go) std::this_thread::yield();
        for (int i = 0; i < kPer; ++i)
          while (!ring.push(ev(static_cast<uint32_t>(t), static_cast<uint32_t>(i)))) std::this_thread::yield();
      });
    std::vector<TraceEvent> got;
    got.reserve(kThreads * kPer);
    go = true;
    while (got.size() < size_t(kThreads * kPer)) ring.drain(got, 1024);
    for (auto& p : producers) p.join();
    // Every producer's events arrive exactly once and in its own order.
    std::vector<uint32_t> next(kThreads, 0);
    for (const TraceEvent& e : got) {
      QCOMPARE(e.arg0, next[e.requestId]);
      ++next[e.requestId];
    }
    for (int t = 0; t < kThreads; ++t) QCOMPARE(next[t], uint32_t(kPer));
    QCOMPARE(ring.pushed(), uint64_t(kThreads * kPer));
  }

  void zoneRecordsScope() {
    TraceRing ring(16);
    uint16_t lane = ring.registerLane("generation", LaneKind::Generation);
    QCOMPARE(ring.registerLane("generation"), lane);  // same name, same lane
    QCOMPARE(ring.lanes().at(lane), (TraceLane{"generation", LaneKind::Generation}));
    for (int k = 0; k < static_cast<int>(LaneKind::Count_); ++k)  // kind names read back
      QCOMPARE(laneKindFromName(laneKindName(static_cast<LaneKind>(k))), static_cast<LaneKind>(k));
    QCOMPARE(laneKindFromName("no such kind"), LaneKind::Other);
    uint64_t before = nowNs();
    {
      RAG_TRACE_ZONE(zone, &ring, lane, TraceStage::Prefill, 42);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::vector<TraceEvent> out;
    ring.drain(out);
#if RAGWB_TRACING
    QCOMPARE(out.size(), size_t{1});
    QCOMPARE(out[0].requestId, 42u);
    QCOMPARE(out[0].stage, TraceStage::Prefill);
    QVERIFY(out[0].beginNs >= before);
    QVERIFY(out[0].durationNs() >= 2'000'000);
#else
    QCOMPARE(out.size(), size_t{0});
#endif
  }

  void chromeTraceIsValidJson() {
    std::vector<TraceEvent> evs = {ev(7, 1, 0), ev(8, 2, 1)};
    evs[1].flags = kTraceSpeculative | kTraceRollback;
    TraceEvent inst = ev(9, 3, 1);
    inst.flags = kTraceInstant;
    inst.endNs = inst.beginNs;
    evs.push_back(inst);
    std::ostringstream os;
    writeChromeTrace(os, evs, {{"scheduler", LaneKind::Scheduler}, {"retrieval \"0\"", LaneKind::Retrieval}});
    QJsonParseError err;
    QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(os.str()), &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(err.errorString()));
    QJsonArray arr = doc.object()["traceEvents"].toArray();
    QCOMPARE(arr.size(), 2 + 3);  // two thread_name records + three events
    int spans = 0, instants = 0;
    bool sawName = false, sawSpec = false;
    for (const auto& v : arr) {
      QJsonObject o = v.toObject();
      if (o["ph"] == "M" && o["args"].toObject()["name"] == "retrieval \"0\"") sawName = true;
      if (o["ph"] == "X") {
        ++spans;
        QCOMPARE(o["dur"].toDouble(), 0.5);  // 500 ns in microseconds
        if (o["args"].toObject()["request"].toInt() == 8) {
          QCOMPARE(o["cat"].toString(), QString("speculative"));
          QVERIFY(o["args"].toObject()["rollback"].toBool());
          QCOMPARE(o["ts"].toDouble(), 1.0);  // relative to the first event
          sawSpec = true;
        }
      }
      if (o["ph"] == "i") ++instants;
    }
    QCOMPARE(spans, 2);
    QCOMPARE(instants, 1);
    QVERIFY(sawName);
    QVERIFY(sawSpec);
  }

  // A worker's lane names its device when it computes on one (the timeline's GPU lanes), from
  // the descriptions the runner's backend and the embedder give.
  void laneNamesSayTheDevice() {
    QCOMPARE(deviceLaneName("generation", "cpu"), std::string("generation"));
    QCOMPARE(deviceLaneName("generation", "cuda:0 NVIDIA H200, 139.8 GiB, sm_90, CUDA graphs"),
             std::string("generation · cuda:0"));
    QCOMPARE(deviceLaneName("embedding", "cuda:1"), std::string("embedding · cuda:1"));
  }
};

QTEST_GUILESS_MAIN(TestTraceRing)
#include "test_trace_ring.moc"
