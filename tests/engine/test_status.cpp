#include <QtTest>

#include "rag/status.h"

using namespace rag;

namespace {
Result<int> parsePositive(int v) {
  if (v <= 0) return Status::invalidArgument("value must be positive, got " + std::to_string(v));
  return v;
}
Result<int> doubled(int v) {
  RAG_ASSIGN_OR_RETURN(int x, parsePositive(v));
  return 2 * x;
}
Status check(int v) {
  RAG_RETURN_IF_ERROR(parsePositive(v).status());
  return Status::ok();
}
}  // namespace

class TestStatus : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void okByDefault() {
    Status s;
    QVERIFY(s.isOk());
    QCOMPARE(s.toString(), std::string("ok"));
  }
  void errorCarriesCodeAndMessage() {
    Status s = Status::corrupt("file x is truncated; rebuild it");
    QVERIFY(!s.isOk());
    QCOMPARE(s.code(), StatusCode::Corrupt);
    QCOMPARE(s.toString(), std::string("corrupt: file x is truncated; rebuild it"));
    Status c = s.withContext("loading corpus");
    QCOMPARE(c.code(), StatusCode::Corrupt);
    QCOMPARE(c.message(), std::string("loading corpus: file x is truncated; rebuild it"));
  }
  void resultValueOrError() {
    Result<int> good = doubled(4);
    QVERIFY(good.isOk());
    QCOMPARE(*good, 8);
    Result<int> bad = doubled(-1);
    QVERIFY(!bad.isOk());
    QCOMPARE(bad.status().code(), StatusCode::InvalidArgument);
    QVERIFY(bad.status().message().find("-1") != std::string::npos);
    QCOMPARE(bad.valueOr(7), 7);
    QVERIFY(check(3).isOk());
    QVERIFY(!check(0).isOk());
  }
  void resultHoldsMoveOnly() {
    Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
    std::unique_ptr<int> p = std::move(r).value();
    QCOMPARE(*p, 5);
  }
};

QTEST_GUILESS_MAIN(TestStatus)
#include "test_status.moc"
