#include <QtTest>

#include <sys/stat.h>

#include <filesystem>

#include "core/fs.h"
#include "core/json_writer.h"

using namespace rag;
namespace fs = std::filesystem;

class TestFs : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path dir() { return fs::path(m_dir.path().toStdString()); }

private Q_SLOTS:
  void atomicWriteReplacesWhole() {
    fs::path p = dir() / "sub/dir/out.txt";
    QVERIFY(writeFileAtomic(p, "first").isOk());
    QCOMPARE(*readFile(p), std::string("first"));
    QVERIFY(writeFileAtomic(p, "second version").isOk());
    QCOMPARE(*readFile(p), std::string("second version"));
    int leftovers = 0;
    for (auto& e : fs::directory_iterator(p.parent_path())) leftovers += e.path() != p;
    QCOMPARE(leftovers, 0);
  }

  void unwritableDirectoryIsAClearError() {
    if (::geteuid() == 0) {
      // root ignores permission bits: use a path below a regular file instead.
      fs::path file = dir() / "plain";
      QVERIFY(writeFileAtomic(file, "x").isOk());
      Status s = writeFileAtomic(file / "out.txt", "y");
      QVERIFY(!s.isOk());
      QCOMPARE(s.code(), StatusCode::IoError);
      QVERIFY(s.message().find("plain") != std::string::npos);
      return;
    }
    fs::path ro = dir() / "ro";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0500);
    Status s = writeFileAtomic(ro / "out.txt", "y");
    QVERIFY(!s.isOk());
    QVERIFY(s.message().find("not writable") != std::string::npos);
  }

  void stagedDirectoryReplacesTheWholeDirectory() {
    const fs::path target = dir() / "ckpt";
    auto write = [](const fs::path& d, const char* name, const char* text) {
      QVERIFY(writeFileAtomic(d / name, text).isOk());
    };
    // First commit: no target yet.
    Result<fs::path> staging = stageDirectory(target);
    QVERIFY2(staging.isOk(), staging.status().message().c_str());
    write(*staging, "a.txt", "one");
    write(*staging, "only-first.txt", "x");
    QVERIFY(commitStagedDirectory(*staging, target).isOk());
    QCOMPARE(*readFile(target / "a.txt"), std::string("one"));

    // An abandoned staging directory (a run killed mid-write) leaves the target as it was, and
    // the next stageDirectory starts from an empty one.
    staging = stageDirectory(target);
    write(*staging, "a.txt", "half");
    QCOMPARE(*readFile(target / "a.txt"), std::string("one"));
    QCOMPARE(committedDirectory(target), target);
    staging = stageDirectory(target);
    QVERIFY(fs::is_empty(*staging));

    // Second commit: the new directory replaces the old one as a whole.
    write(*staging, "a.txt", "two");
    QVERIFY(commitStagedDirectory(*staging, target).isOk());
    QCOMPARE(*readFile(target / "a.txt"), std::string("two"));
    QVERIFY(!fs::exists(target / "only-first.txt"));
    QVERIFY(!fs::exists(*staging));
    QVERIFY(!fs::exists(dir() / "ckpt.old"));

    // A commit interrupted between its two renames (file systems without RENAME_EXCHANGE)
    // leaves only <target>.old: that is the committed directory.
    fs::rename(target, dir() / "ckpt.old");
    QCOMPARE(committedDirectory(target), dir() / "ckpt.old");
    fs::remove_all(dir() / "ckpt.old");
    QVERIFY(committedDirectory(target).empty());
  }

  void readMissingIsNotFound() {
    auto r = readFile(dir() / "nope");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::NotFound);
  }

  void dataDirFollowsEnvironment() {
    qputenv("RAGRAPH_DATA_DIR", QByteArray::fromStdString(dir().string()));
    QCOMPARE(defaultDataDir(), dir());
    QCOMPARE(defaultCorpusPath(), dir() / "corpus.db");
    qputenv("RAGRAPH_CORPUS", "/somewhere/else.db");
    QCOMPARE(defaultCorpusPath(), fs::path("/somewhere/else.db"));
    qunsetenv("RAGRAPH_CORPUS");
  }

  void jsonWriterEscapesAndNests() {
    std::ostringstream os;
    JsonWriter w(os);
    w.beginObject();
    w.key("s").value("a\"b\\c\n\x01");
    w.key("n").value(int64_t{-3});
    w.key("d").value(0.25);
    w.key("inf").value(std::numeric_limits<double>::infinity());
    w.key("arr").beginArray().value(true).null().beginObject().endObject().endArray();
    w.endObject();
    const std::string expected =
        "{\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"n\":-3,\"d\":0.25,\"inf\":null,\"arr\":[true,null,{}]}";
    QCOMPARE(os.str(), expected);
  }
};

QTEST_GUILESS_MAIN(TestFs)
#include "test_fs.moc"
