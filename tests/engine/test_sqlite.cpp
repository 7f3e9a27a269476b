#include <QtTest>

#include <filesystem>
#include <fstream>

#include "storage/sqlite.h"

using namespace rag;
namespace fs = std::filesystem;

namespace {
constexpr sql::Migration kV1[] = {
    {1, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"},
};
constexpr sql::Migration kV2[] = {
    {1, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"},
    {2, "ALTER TABLE t ADD COLUMN score REAL NOT NULL DEFAULT 0;"},
};
constexpr sql::Migration kBroken[] = {
    {1, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL);"},
    {2, "ALTER TABLE t ADD COLUMN ok REAL; THIS IS NOT SQL;"},
};
}  // namespace

class TestSqlite : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path path(const char* name) { return fs::path(m_dir.path().toStdString()) / name; }

private Q_SLOTS:
  void bindStepAndColumns() {
    auto db = sql::Db::open(path("a.db"), sql::OpenMode::Create);
    QVERIFY2(db.isOk(), db.status().message().c_str());
    QVERIFY(db->exec("CREATE TABLE t(i INTEGER, d REAL, s TEXT, b BLOB, n TEXT)").isOk());
    auto ins = db->prepare("INSERT INTO t VALUES (?, ?, ?, ?, ?)");
    QVERIFY(ins.isOk());
    const uint8_t blob[3] = {1, 2, 255};
    ins->bind(1, int64_t{1} << 40).bind(2, 2.5).bind(3, std::string_view("héllo")).bindBlob(4, blob, 3).bindNull(5);
    QVERIFY(ins->run().isOk());
    QCOMPARE(db->lastInsertRowId(), int64_t{1});
    auto sel = db->prepare("SELECT i, d, s, b, n FROM t");
    QVERIFY(sel.isOk());
    auto row = sel->step();
    QVERIFY(row.isOk() && *row);
    QCOMPARE(sel->columnInt64(0), int64_t{1} << 40);
    QCOMPARE(sel->columnDouble(1), 2.5);
    QCOMPARE(sel->columnText(2), std::string("héllo"));
    auto b = sel->columnBlob(3);
    QCOMPARE(b.size(), size_t{3});
    QCOMPARE(int(b[2]), 255);
    QVERIFY(sel->columnIsNull(4));
    row = sel->step();
    QVERIFY(row.isOk() && !*row);
  }

  void transactionRollsBackUnlessCommitted() {
    auto db = sql::Db::open(path("tx.db"), sql::OpenMode::Create);
    QVERIFY(db.isOk());
    QVERIFY(db->exec("CREATE TABLE t(x INTEGER)").isOk());
    {
      sql::Transaction tx(*db);
      QVERIFY(tx.beginStatus().isOk());
      QVERIFY(db->exec("INSERT INTO t VALUES (1)").isOk());
    }  // destroyed without commit
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM t"), int64_t{0});
    {
      sql::Transaction tx(*db);
      QVERIFY(db->exec("INSERT INTO t VALUES (1)").isOk());
      QVERIFY(tx.commit().isOk());
    }
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM t"), int64_t{1});
  }

  void errorsNameTheFile() {
    auto db = sql::Db::open(path("e.db"), sql::OpenMode::Create);
    QVERIFY(db.isOk());
    auto bad = db->prepare("SELECT * FROM no_such_table");
    QVERIFY(!bad.isOk());
    QVERIFY(bad.status().message().find("e.db") != std::string::npos);
    QVERIFY(bad.status().message().find("no_such_table") != std::string::npos);

    auto missing = sql::Db::open(path("missing.db"), sql::OpenMode::ReadOnly);
    QVERIFY(!missing.isOk());
    QCOMPARE(missing.status().code(), StatusCode::NotFound);
  }

  void garbageFileIsCorrupt() {
    fs::path p = path("garbage.db");
    std::ofstream(p) << std::string(4096, 'x');
    auto db = sql::Db::open(p, sql::OpenMode::ReadOnly);
    QVERIFY(!db.isOk());
    QCOMPARE(db.status().code(), StatusCode::Corrupt);
    QVERIFY(db.status().message().find("garbage.db") != std::string::npos);
  }

  void migrationsUpgradeInOrder() {
    fs::path p = path("m.db");
    {
      auto db = sql::Db::open(p, sql::OpenMode::Create);
      QVERIFY(sql::migrate(*db, kV1, "test").isOk());
      QCOMPARE(*db->userVersion(), 1);
      QVERIFY(db->exec("INSERT INTO t(name) VALUES ('kept')").isOk());
    }
    auto db = sql::Db::open(p, sql::OpenMode::ReadWrite);
    QVERIFY(sql::migrate(*db, kV2, "test").isOk());
    QCOMPARE(*db->userVersion(), 2);
    QCOMPARE(*db->queryInt64("SELECT count(*) FROM t WHERE name='kept' AND score=0"), int64_t{1});
    QVERIFY(sql::migrate(*db, kV2, "test").isOk());  // idempotent
  }

  void newerSchemaIsRefused() {
    fs::path p = path("new.db");
    auto db = sql::Db::open(p, sql::OpenMode::Create);
    QVERIFY(sql::migrate(*db, kV2, "run history").isOk());
    Status s = sql::migrate(*db, kV1, "run history");
    QCOMPARE(s.code(), StatusCode::SchemaMismatch);
    QVERIFY(s.message().find("newer") != std::string::npos);
    QVERIFY(s.message().find("run history") != std::string::npos);
    Status r = sql::requireSchemaVersion(*db, 1, "corpus", "rebuild it");
    QCOMPARE(r.code(), StatusCode::SchemaMismatch);
    QVERIFY(r.message().find("rebuild it") != std::string::npos);
  }

  void failedMigrationLeavesPreviousVersion() {
    fs::path p = path("broken.db");
    auto db = sql::Db::open(p, sql::OpenMode::Create);
    Status s = sql::migrate(*db, kBroken, "test");
    QVERIFY(!s.isOk());
    QCOMPARE(*db->userVersion(), 1);
    auto cols = db->queryInt64("SELECT count(*) FROM pragma_table_info('t') WHERE name='ok'");
    QCOMPARE(*cols, int64_t{0});  // step 2 was rolled back whole
  }
};

QTEST_GUILESS_MAIN(TestSqlite)
#include "test_sqlite.moc"
