#include <QtTest>

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <filesystem>

#include "overview/corpus_stats_model.h"
#include "overview/overview_page.h"
#include "rag/corpus.h"

namespace fs = std::filesystem;

class TestOverview : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;

  static rag::CorpusStats sample() {
    rag::CorpusStats s;
    s.passages = 130001;
    s.entities = 100002;
    s.relations = 300003;
    s.qa["train"]["single_hop"] = 10;
    s.qa["train"]["two_hop"] = 5;
    s.qa["test"]["single_hop"] = 7;
    return s;
  }

private Q_SLOTS:
  void modelRowsFollowStats() {
    ragwb::CorpusStatsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.rowCount(), 0);
    model.setStats(sample());
    // 3 totals + "QA train" + 2 types + "QA test" + 1 type
    QCOMPARE(model.rowCount(), 8);
    QCOMPARE(model.columnCount(), 2);
    QCOMPARE(model.index(0, 1).data(Qt::UserRole).toLongLong(), 130001LL);
    QCOMPARE(model.index(3, 0).data().toString(), QString("QA train"));
    QCOMPARE(model.index(3, 1).data(Qt::UserRole).toLongLong(), 15LL);
    QCOMPARE(model.index(7, 1).data(Qt::UserRole).toLongLong(), 7LL);
    model.clear();
    QCOMPARE(model.rowCount(), 0);
  }

  void missingCorpusReportsHowToBuildIt() {
    ragwb::OverviewPage page;
    QSignalSpy failed(&page, &ragwb::OverviewPage::failed);
    page.loadCorpus(fs::path(m_dir.path().toStdString()) / "none.db");
    QVERIFY(failed.wait(5000));
    QVERIFY(failed.at(0).at(0).toString().contains("ragraph corpus build"));
    QCOMPARE(page.model()->rowCount(), 0);
  }

  void garbageCorpusIsAnErrorNotACrash() {
    fs::path p = fs::path(m_dir.path().toStdString()) / "garbage.db";
    QFile f(QString::fromStdString(p.string()));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QByteArray(8192, 'z'));
    f.close();
    ragwb::OverviewPage page;
    QSignalSpy failed(&page, &ragwb::OverviewPage::failed);
    page.loadCorpus(p);
    QVERIFY(failed.wait(5000));
    QVERIFY(failed.at(0).at(0).toString().contains("garbage.db"));
  }
};

QTEST_MAIN(TestOverview)
#include "test_overview.moc"
