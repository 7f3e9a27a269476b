// The mask description shared by the runner, the dense reference and the trainer.
#include <QtTest>

#include "model/attention_mask.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;

namespace {
std::vector<uint8_t> row(const AttentionMask& m, int64_t i) {
  std::vector<uint8_t> r(static_cast<size_t>(i + 1), 9);
  m.fillRow(i, r);
  return r;
}
}  // namespace

class TestAttentionMask : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void causalSeesEverythingBefore() {
    QCOMPARE(row(AttentionMask::causal(), 3), (std::vector<uint8_t>{1, 1, 1, 1}));
    std::vector<uint8_t> d = AttentionMask::causal().dense(3);
    QCOMPARE(d, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  }

  void blocksSeeThemselvesAndTheLastBlockSeesAll() {
    AttentionMask m = AttentionMask::blocks({0, 2, 5});
    QVERIFY(m.validate(7).isOk());
    QVERIFY(!m.isCausal());
    QCOMPARE(row(m, 1), (std::vector<uint8_t>{1, 1}));
    QCOMPARE(row(m, 3), (std::vector<uint8_t>{0, 0, 1, 1}));
    QCOMPARE(row(m, 4), (std::vector<uint8_t>{0, 0, 1, 1, 1}));
    QCOMPARE(row(m, 5), (std::vector<uint8_t>{1, 1, 1, 1, 1, 1}));  // last block
    QCOMPARE(row(m, 8), std::vector<uint8_t>(9, 1));                  // generated token
  }

  void ancestorsFollowTheParentChain() {
    // 0 <- 1 <- 2, 0 <- 3 (a sibling of 1), 4 is a second root.
    AttentionMask m = AttentionMask::ancestors({-1, 0, 1, 0, -1});
    QVERIFY(m.validate(6).isOk());
    QCOMPARE(row(m, 2), (std::vector<uint8_t>{1, 1, 1}));
    QCOMPARE(row(m, 3), (std::vector<uint8_t>{1, 0, 0, 1}));
    QCOMPARE(row(m, 4), (std::vector<uint8_t>{0, 0, 0, 0, 1}));
    QCOMPARE(row(m, 5), std::vector<uint8_t>(6, 1));  // past the tree: the question
  }

  void badMasksNameTheProblem() {
    QVERIFY(mentions(AttentionMask::blocks({1, 3}).validate(5), {"start at position 0"}));
    QVERIFY(mentions(AttentionMask::blocks({0, 3, 3}).validate(5), {"not after"}));
    QVERIFY(mentions(AttentionMask::blocks({0, 9}).validate(5), {"beyond the prompt"}));
    QVERIFY(mentions(AttentionMask::ancestors({-1, 1}).validate(5), {"parent of position 1"}));
    QVERIFY(mentions(AttentionMask::ancestors({-1, 0, 0}).validate(2), {"3 parents"}));
    QVERIFY(AttentionMask::blocks({0}).isCausal());
  }
};

QTEST_GUILESS_MAIN(TestAttentionMask)
#include "test_attention_mask.moc"
