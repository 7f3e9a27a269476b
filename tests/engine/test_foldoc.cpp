#include <QtTest>

#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "corpus/foldoc.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

namespace {

fs::path fixtureDir() { return fs::path(RAGWB_FIXTURES_DIR) / "corpus/foldoc"; }

void writeBytes(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void writeGzip(const fs::path& p, std::string_view text) {
  gzFile gz = gzopen(p.c_str(), "wb");
  QVERIFY(gz);
  QCOMPARE(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), int(text.size()));
  QCOMPARE(gzclose(gz), Z_OK);
}

std::string encodeDict(uint64_t v) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string s;
  do {
    s.insert(s.begin(), a[v % 64]);
    v /= 64;
  } while (v);
  return s;
}

}  // namespace

class TestFoldoc : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  fs::path tmp(const std::string& name) {
    fs::path d = fs::path(m_tmp.path().toStdString()) / name;
    fs::create_directories(d);
    return d;
  }
  fs::path copyFixture(const std::string& name) {
    fs::path d = tmp(name);
    for (const char* f : {"foldoc.index", "foldoc.dict.dz"})
      fs::copy_file(fixtureDir() / f, d / f, fs::copy_options::overwrite_existing);
    return d;
  }

private Q_SLOTS:
  void decodesDictdBase64() {
    uint64_t v = 0;
    QVERIFY(decodeDictNumber("A", v));
    QCOMPARE(v, uint64_t{0});
    QVERIFY(decodeDictNumber("B", v));
    QCOMPARE(v, uint64_t{1});
    QVERIFY(decodeDictNumber("BA", v));
    QCOMPARE(v, uint64_t{64});
    QVERIFY(decodeDictNumber("K2+v", v));  // "lisp" in the real index
    QCOMPARE(v, uint64_t{10 * 64 * 64 * 64 + 54 * 64 * 64 + 62 * 64 + 47});
    QVERIFY(decodeDictNumber("//", v));
    QCOMPARE(v, uint64_t{63 * 64 + 63});
    QVERIFY(!decodeDictNumber("a-b", v));
    QVERIFY(!decodeDictNumber("", v));
    for (uint64_t x : {0ull, 5ull, 4096ull, 123456789ull}) {
      QVERIFY(decodeDictNumber(encodeDict(x), v));
      QCOMPARE(v, x);
    }
  }

  void readsFixtureDictionary() {
    Result<FoldocDictionary> r = readFoldoc(fixtureDir());
    QVERIFY2(r.isOk(), r.status().message().c_str());
    // 12 entries in the fixture, two of them dictd's 00-database-* info entries.
    QCOMPARE(r->entries.size(), size_t{10});
    for (const FoldocEntry& e : r->entries) QVERIFY(!e.term.starts_with("00-"));
    const FoldocEntry* lisp = r->find("LISP");
    QVERIFY(lisp);
    QCOMPARE(lisp->term, std::string("Lisp"));
    QCOMPARE(lisp->category, std::string("language"));
    // Alias headword lines resolve to their entry.
    const FoldocEntry* nb = r->find("NB");
    QVERIFY(nb);
    QCOMPARE(nb->term, std::string("C"));
    QCOMPARE(nb->aliases, std::vector<std::string>{"NB"});
    const FoldocEntry* q = r->find("2b1q");
    QVERIFY(q);
    QCOMPARE(q->term, std::string("two-binary, one-quaternary"));
    // Plural cross-reference forms fall back to the singular headword.
    QCOMPARE(r->find("Unixes"), r->find("unix"));
    QVERIFY(r->find("no such term") == nullptr);
    // Entries are in dictionary order with their byte offsets.
    for (size_t i = 1; i < r->entries.size(); ++i)
      QVERIFY(r->entries[i - 1].offset < r->entries[i].offset);
  }

  void entryOffsetsPointAtTheEntry() {
    Result<FoldocDictionary> r = readFoldoc(fixtureDir());
    QVERIFY(r.isOk());
    Result<std::string> data = gunzipFile(fixtureDir() / "foldoc.dict.dz");
    QVERIFY(data.isOk());
    for (const FoldocEntry& e : r->entries)
      QCOMPARE(data->substr(e.offset, e.term.size()), e.term);
  }

  void parsesHeadwordsAndBody() {
    FoldocEntry e = parseFoldocEntry(
        "two-binary, one-quaternary\n2B1Q\n\n   <communications> (2B1Q) A {physical layer}\n"
        "   encoding.\n\n   (2003-01-10)\n\n");
    QCOMPARE(e.term, std::string("two-binary, one-quaternary"));
    QCOMPARE(e.aliases, std::vector<std::string>{"2B1Q"});
    QCOMPARE(e.category, std::string("communications"));
    QVERIFY(e.body.starts_with("<communications> (2B1Q) A {physical layer}\nencoding."));
    QCOMPARE(foldocPlainText(e.body), std::string("(2B1Q) A physical layer encoding."));
    QCOMPARE(firstSentence(foldocPlainText(e.body)), std::string("A physical layer encoding."));
  }

  void extractsCrossReferences() {
    std::vector<FoldocXref> x = extractXrefs(
        "uses {strong typing}, {data\n  abstraction} and {standardised (standard)}; see "
        "{More about FOLDOC (about.html)}. Broken { brace {C} here.");
    QCOMPARE(x.size(), size_t{5});
    QCOMPARE(x[0].target, std::string("strong typing"));
    QCOMPARE(x[1].target, std::string("data abstraction"));  // across a line break
    QCOMPARE(x[2].text, std::string("standardised"));
    QCOMPARE(x[2].target, std::string("standard"));
    QCOMPARE(x[3].target, std::string("about.html"));
    QCOMPARE(x[4].target, std::string("C"));
    QCOMPARE(foldocPlainText("<language> a {data\n abstraction} and {standardised (standard)}."),
             std::string("a data abstraction and standardised."));
  }

  void fixtureXrefsResolve() {
    Result<FoldocDictionary> r = readFoldoc(fixtureDir());
    QVERIFY(r.isOk());
    const FoldocEntry* unix = r->find("unix");
    QVERIFY(unix);
    std::vector<std::string> resolved;
    for (const FoldocXref& x : extractXrefs(unix->body))
      if (const FoldocEntry* t = r->find(x.target)) resolved.push_back(t->term);
    QVERIFY(std::find(resolved.begin(), resolved.end(), "Multics") != resolved.end());
    QVERIFY(std::find(resolved.begin(), resolved.end(), "C") != resolved.end());
  }

  void chunksStayWithinTheLimit() {
    std::string text;
    for (int i = 0; i < 1000; ++i) {
      text += 'w';
      text += std::to_string(i);
      text += i % 7 ? " " : "\n ";
    }
    std::vector<std::string> chunks = chunkText(text, "Ada (language):", "Ada (continued):", 128);
    QVERIFY(chunks.size() >= 8);
    std::string rejoined;
    for (size_t i = 0; i < chunks.size(); ++i) {
      QVERIFY2(countTokens(chunks[i]) <= 128, chunks[i].c_str());
      QVERIFY(chunks[i].starts_with(i == 0 ? "Ada (language): w0 " : "Ada (continued): "));
      std::string body = chunks[i].substr(chunks[i].find(':') + 2);
      if (!rejoined.empty()) rejoined += ' ';
      rejoined += body;
    }
    // Order kept, nothing lost or duplicated.
    std::string expect;
    for (int i = 0; i < 1000; ++i) {
      expect += i ? " w" : "w";
      expect += std::to_string(i);
    }
    QCOMPARE(rejoined, expect);
  }

  void lastChunkIsNotARunt() {
    // 255 words at 126 per chunk would leave 3 words alone; the tail is split evenly instead.
    std::string text;
    for (int i = 0; i < 255; ++i) text += "w ";
    std::vector<std::string> chunks = chunkText(text, "T:", "T (continued):", 128);
    QCOMPARE(chunks.size(), size_t{3});
    QVERIFY(countTokens(chunks.back()) > 40);
    size_t words = 0;
    for (const std::string& c : chunks) words += countTokens(c.substr(c.find(':') + 1));
    QCOMPARE(words, size_t{255});
  }

  void shortTextIsOneChunk() {
    std::vector<std::string> c = chunkText("just a few words", "X:", "X (continued):", 128);
    QCOMPARE(c.size(), size_t{1});
    QCOMPARE(c[0], std::string("X: just a few words"));
    QCOMPARE(chunkText("", "X:", "X:", 128).size(), size_t{1});
  }

  void firstSentenceSkipsAbbreviations() {
    QCOMPARE(firstSentence("A language, e.g. Ada. It is large."),
             std::string("A language, e.g. Ada."));
    QCOMPARE(firstSentence("(ADA) Thing one. Thing two."), std::string("Thing one."));
    QCOMPARE(firstSentence("no end at all"), std::string("no end at all"));
    QCOMPARE(firstSentence("A compiler by Alfred V. Aho and P.C.J. Smith. More."),
             std::string("A compiler by Alfred V. Aho and P.C.J. Smith."));
    QCOMPARE(firstSentence("/yoo'niks/ An operating system. By Bell Labs."),
             std::string("An operating system."));
    QCOMPARE(firstSentence("[\"A Title\", D. Lowe, 1980]. A language from Acme Inc. for Unix. Two."),
             std::string("A language from Acme Inc. for Unix."));
    QCOMPARE(firstSentence("Common name for \"@\". [Jargon File]"),
             std::string("Common name for \"@\"."));
  }

  void missingFilesNameThePackage() {
    fs::path d = tmp("empty");
    Result<FoldocDictionary> r = readFoldoc(d);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::NotFound);
    QVERIFY2(r.status().message().find("apt-get install dict-foldoc") != std::string::npos,
             r.status().message().c_str());
  }

  void truncatedDictIsCorrupt() {
    fs::path d = copyFixture("truncated");
    Result<std::string> whole = readFile(d / "foldoc.dict.dz");
    QVERIFY(whole.isOk());
    writeBytes(d / "foldoc.dict.dz", std::string_view(*whole).substr(0, whole->size() / 2));
    Result<FoldocDictionary> r = readFoldoc(d);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    const std::string& m = r.status().message();
    QVERIFY2(m.find("truncated or corrupt") != std::string::npos, m.c_str());
    QVERIFY2(m.find("foldoc.dict.dz") != std::string::npos, m.c_str());
    QVERIFY2(m.find("apt-get install --reinstall dict-foldoc") != std::string::npos, m.c_str());
  }

  void damagedDictIsCorrupt() {
    fs::path d = copyFixture("damaged");
    Result<std::string> whole = readFile(d / "foldoc.dict.dz");
    QVERIFY(whole.isOk());
    std::string bytes = *whole;
    for (size_t i = 40; i < bytes.size() - 40; i += 3) bytes[i] = static_cast<char>(~bytes[i]);
    writeBytes(d / "foldoc.dict.dz", bytes);
    Result<std::string> r = gunzipFile(d / "foldoc.dict.dz");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
  }

  void plainTextIsNotAcceptedAsDictzip() {
    fs::path d = tmp("plain");
    writeBytes(d / "foldoc.dict.dz", "Ada\n\n   <language> A language.\n");
    Result<std::string> r = gunzipFile(d / "foldoc.dict.dz");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
  }

  void indexBeyondTheDataIsCorrupt() {
    fs::path d = tmp("beyond");
    const std::string dict = "Ada\n\n   <language> A language.\n\n";
    writeGzip(d / "foldoc.dict.dz", dict);
    writeBytes(d / "foldoc.index",
               "ada\tA\t" + encodeDict(dict.size()) + "\nbcpl\t" + encodeDict(dict.size()) +
                   "\tBA\n");
    Result<FoldocDictionary> r = readFoldoc(d);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    const std::string& m = r.status().message();
    QVERIFY2(m.find("points past the end") != std::string::npos, m.c_str());
    QVERIFY2(m.find("line 2") != std::string::npos, m.c_str());
  }

  void malformedIndexLineIsCorrupt() {
    fs::path d = tmp("badindex");
    writeGzip(d / "foldoc.dict.dz", "Ada\n\n   A language.\n");
    writeBytes(d / "foldoc.index", "ada A B\n");
    Result<FoldocDictionary> r = readFoldoc(d);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    QVERIFY(r.status().message().find("headword TAB offset TAB length") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestFoldoc)
#include "test_foldoc.moc"
