// A retrieval sub-stage's budget (HedraRAG Eq. 1) and the order it takes its searches in
// (sched/stage_budget.h).
#include <QtTest>

#include "sched/stage_budget.h"

using namespace rag;
using namespace rag::sched;

class TestStageBudget : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void theBudgetMaximisesTheGain() {
    const double tR = 0.02, beta = 2e-4;
    const double mb = optimalSubStageSeconds(tR, beta);
    QCOMPARE(mb, std::sqrt(2 * beta * tR));
    // Δ is largest there: any other budget in the range gains less.
    for (double other : {1e-4, mb / 2, mb * 1.5, tR})
      QVERIFY2(subStageGain(other, tR, beta) < subStageGain(mb, tR, beta), QByteArray::number(other));
    // Clamped to [min, t_R]; a retrieval shorter than the minimum is one sub-stage.
    QCOMPARE(optimalSubStageSeconds(tR, 0.0), 1e-4);
    QCOMPARE(optimalSubStageSeconds(tR, 10.0), tR);
    QCOMPARE(optimalSubStageSeconds(5e-5, beta), 1e-4);
  }

  // t_R is the live searches' remaining work: one search's time times their shares left (each
  // clamped to [0, 1]); so the budget grows as the square root of the backlog.
  void theStageIsTheLiveSearchesRemainingWork() {
    const double search = 0.004, beta = 5e-4;
    QCOMPARE(retrievalStageSeconds(search, std::vector<double>{1.0}), search);
    QCOMPARE(retrievalStageSeconds(search, std::vector<double>{1.0, 0.5, 0.25}), search * 1.75);
    QCOMPARE(retrievalStageSeconds(search, std::vector<double>{2.0, -1.0}), search);
    QCOMPARE(retrievalStageSeconds(search, {}), 0.0);
    const double one = optimalSubStageSeconds(retrievalStageSeconds(search, std::vector<double>(1, 1.0)), beta);
    const double fifty = optimalSubStageSeconds(retrievalStageSeconds(search, std::vector<double>(50, 1.0)), beta);
    QCOMPARE(one, std::sqrt(2 * beta * search));
    QVERIFY(std::abs(fifty / one - std::sqrt(50.0)) < 1e-9);
  }

  // Live searches in admission order: request 7's first retrieval, then request 3's later one,
  // a speculation of request 1, request 3's other search, request 5's.
  void oldestRequestsGoFirstAndSpeculationLast() {
    const std::vector<SearchRank> live = {
        {.requestId = 7}, {.requestId = 3}, {.requestId = 1, .speculative = true}, {.requestId = 3}, {.requestId = 5}};
    // Oldest request first (one request's searches as admitted), the speculation after them all.
    QCOMPARE(subStageOrder(live, SubStagePlanning::OldestFirst), (std::vector<size_t>{1, 3, 4, 0, 2}));
    // The ablation keeps the admission order but for the speculation.
    QCOMPARE(subStageOrder(live, SubStagePlanning::AdmissionOrder), (std::vector<size_t>{0, 1, 3, 4, 2}));
    QCOMPARE(subStageOrder(live, SubStagePlanning::RoundRobin), (std::vector<size_t>{0, 1, 3, 4, 2}));
    // Speculations among themselves: oldest request first too.
    const std::vector<SearchRank> spec = {{.requestId = 9, .speculative = true}, {.requestId = 2, .speculative = true}};
    QCOMPARE(subStageOrder(spec, SubStagePlanning::OldestFirst), (std::vector<size_t>{1, 0}));
    QVERIFY(subStageOrder({}, SubStagePlanning::OldestFirst).empty());
  }
};

QTEST_APPLESS_MAIN(TestStageBudget)
#include "test_stage_budget.moc"
