#include <QtTest>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/fs.h"
#include "corpus/wordnet.h"

using namespace rag;
using namespace rag::corpus;
namespace fs = std::filesystem;

namespace {

// Copied from wordnet-base 3.0 data files.
const char* kDogLine =
    "02084071 05 n 03 dog 0 domestic_dog 0 Canis_familiaris 0 023 @ 02083346 n 0000 @ 01317541 "
    "n 0000 #m 02083863 n 0000 #m 07994941 n 0000 ~ 01322604 n 0000 ~ 02084732 n 0000 ~ 02084861 "
    "n 0000 ~ 02085272 n 0000 ~ 02085374 n 0000 ~ 02087122 n 0000 ~ 02103406 n 0000 ~ 02110341 n "
    "0000 ~ 02110806 n 0000 ~ 02110958 n 0000 ~ 02111129 n 0000 ~ 02111277 n 0000 ~ 02111500 n "
    "0000 ~ 02111626 n 0000 ~ 02112497 n 0000 ~ 02112826 n 0000 ~ 02113335 n 0000 ~ 02113978 n "
    "0000 %p 02158846 n 0000 | a member of the genus Canis (probably descended from the common "
    "wolf) that has been domesticated by man since prehistoric times; occurs in many breeds; "
    "\"the dog barked all night\"  ";
const char* kBreatheLine =
    "00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 021 * 00005041 v 0000 * "
    "00004227 v 0000 + 03110323 a 0301 + 00831191 n 0303 + 04080833 n 0301 + 04250850 n 0105 + "
    "00831191 n 0101 ^ 00004227 v 0103 ^ 00005041 v 0103 $ 00002325 v 0000 $ 00002573 v 0000 ~ "
    "00002573 v 0000 ~ 00002724 v 0000 ~ 00002942 v 0000 ~ 00003826 v 0000 ~ 00004032 v 0000 ~ "
    "00004227 v 0000 ~ 00005041 v 0000 ~ 00006697 v 0000 ~ 00007328 v 0000 ~ 00017031 v 0000 02 + "
    "02 00 + 08 00 | draw air into, and expel out of, the lungs; \"I can breathe better when the "
    "air is clean\"; \"The patient is respiring\"  ";
const char* kMarkedAdjLine =
    "00003356 00 s 02 abducent 0 abducting(a) 0 001 & 00002312 a 0000 | especially of muscles; "
    "drawing away from the midline of the body or from an adjacent part  ";
const char* kAdverbLine =
    "00085811 02 r 05 quickly 0 rapidly 0 speedily 0 chop-chop 0 apace 0 004 \\ 00979366 a 0302 "
    "\\ 00979697 a 0201 ! 00161630 r 0101 \\ 00979366 a 0101 | with rapid movements; \"he works "
    "quickly\"  ";

fs::path fixtureDir() { return fs::path(RAGWB_FIXTURES_DIR) / "corpus/wordnet"; }

}  // namespace

class TestWordNet : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;

private Q_SLOTS:
  void parsesASynsetLine() {
    Result<WnSynset> r = parseWordNetLine(kDogLine, "test");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    const WnSynset& s = *r;
    QCOMPARE(s.offset, 2084071u);
    QCOMPARE(s.pos, 'n');
    QCOMPARE(s.lexFilenum, 5);
    QCOMPARE(s.words.size(), size_t{3});
    QCOMPARE(s.words[1].text, std::string("domestic dog"));  // underscores become spaces
    QCOMPARE(s.words[2].text, std::string("Canis familiaris"));
    QCOMPARE(s.pointers.size(), size_t{23});
    QCOMPARE(s.pointers[0].type, std::string_view("hypernym"));
    QCOMPARE(s.pointers[0].targetOffset, 2083346u);
    QVERIFY(!s.pointers[0].lexical());
    QCOMPARE(s.pointers[2].type, std::string_view("member_holonym"));
    QCOMPARE(s.pointers[4].type, std::string_view("hyponym"));
    QCOMPARE(s.pointers[22].type, std::string_view("part_meronym"));
    QCOMPARE(s.definition,
             std::string("a member of the genus Canis (probably descended from the common wolf) "
                         "that has been domesticated by man since prehistoric times; occurs in "
                         "many breeds"));
    QCOMPARE(s.examples.size(), size_t{1});
    QCOMPARE(s.examples[0], std::string("the dog barked all night"));
  }

  void verbFramesAndLexicalPointers() {
    Result<WnSynset> r = parseWordNetLine(kBreatheLine, "test");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->words.size(), size_t{4});
    QCOMPARE(r->words[3].lexId, 3);
    QCOMPARE(r->pointers.size(), size_t{21});  // the frames after the pointers are not pointers
    QCOMPARE(r->pointers[0].type, std::string_view("entailment"));
    // "+ 03110323 a 0301": from word 3 (respire) to word 1 of the target.
    const WnPointer& p = r->pointers[2];
    QCOMPARE(p.type, std::string_view("derivation"));
    QVERIFY(p.lexical());
    QCOMPARE(int(p.sourceWord), 3);
    QCOMPARE(int(p.targetWord), 1);
    QCOMPARE(p.targetPos, 'a');
    QCOMPARE(r->pointers[7].type, std::string_view("also_see"));
    QCOMPARE(r->pointers[9].type, std::string_view("verb_group"));
    QCOMPARE(r->definition, std::string("draw air into, and expel out of, the lungs"));
    QCOMPARE(r->examples.size(), size_t{2});
    QCOMPARE(r->examples[1], std::string("The patient is respiring"));
  }

  void adjectiveMarkersAreStripped() {
    Result<WnSynset> r = parseWordNetLine(kMarkedAdjLine, "test");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->pos, 's');
    QCOMPARE(r->words[1].text, std::string("abducting"));
    QCOMPARE(r->pointers[0].type, std::string_view("similar_to"));
    QVERIFY(r->examples.empty());
  }

  void backslashDependsOnPartOfSpeech() {
    Result<WnSynset> r = parseWordNetLine(kAdverbLine, "test");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    QCOMPARE(r->pointers[0].type, std::string_view("derived_from_adjective"));
    QCOMPARE(r->pointers[2].type, std::string_view("antonym"));
    QCOMPARE(pointerTypeName("\\", 'a'), std::string_view("pertainym"));
    QCOMPARE(pointerTypeName("\\", 'r'), std::string_view("derived_from_adjective"));
  }

  void pointerSymbolTable_data() {
    QTest::addColumn<QString>("symbol");
    QTest::addColumn<QString>("name");
    const std::pair<const char*, const char*> rows[] = {
        {"!", "antonym"}, {"@", "hypernym"}, {"@i", "instance_hypernym"}, {"~", "hyponym"},
        {"~i", "instance_hyponym"}, {"#m", "member_holonym"}, {"#s", "substance_holonym"},
        {"#p", "part_holonym"}, {"%m", "member_meronym"}, {"%s", "substance_meronym"},
        {"%p", "part_meronym"}, {"=", "attribute"}, {"+", "derivation"}, {";c", "domain_topic"},
        {"-c", "member_of_domain_topic"}, {";r", "domain_region"}, {"-r", "member_of_domain_region"},
        {";u", "domain_usage"}, {"-u", "member_of_domain_usage"}, {"*", "entailment"},
        {">", "cause"}, {"^", "also_see"}, {"$", "verb_group"}, {"&", "similar_to"},
        {"<", "participle"}};
    for (const auto& [sym, name] : rows) QTest::newRow(sym) << QString(sym) << QString(name);
  }
  void pointerSymbolTable() {
    QFETCH(QString, symbol);
    QFETCH(QString, name);
    QCOMPARE(QString::fromStdString(std::string(pointerTypeName(symbol.toStdString(), 'n'))), name);
  }

  void pointerNamesAreUniqueSnakeCase() {
    std::set<std::string_view> seen;
    for (std::string_view n : allPointerTypeNames()) {
      QVERIFY(seen.insert(n).second);
      for (char c : n) QVERIFY((c >= 'a' && c <= 'z') || c == '_');
    }
    QCOMPARE(seen.size(), size_t{27});  // 25 symbols, `\\` read two ways
    QVERIFY(pointerTypeName("?", 'n').empty());
  }

  void corruptLinesAreNamed_data() {
    QTest::addColumn<QString>("line");
    QTest::addColumn<QString>("what");
    QTest::newRow("short offset") << "0208407 05 n 01 dog 0 000 | x" << "offset";
    QTest::newRow("bad w_cnt") << "02084071 05 n zz dog 0 000 | x" << "word count";
    QTest::newRow("bad ss_type") << "02084071 05 q 01 dog 0 000 | x" << "synset type";
    QTest::newRow("unknown symbol") << "02084071 05 n 01 dog 0 001 ?? 02083346 n 0000 | x"
                                    << "pointer symbol";
    QTest::newRow("cut pointers") << "02084071 05 n 01 dog 0 002 @ 02083346 n 0000 | x"
                                  << "pointer list";
    QTest::newRow("no gloss") << "02084071 05 n 01 dog 0 000" << "gloss";
    QTest::newRow("word number") << "02084071 05 n 01 dog 0 001 + 02083346 n 0201 | x"
                                 << "word";
  }
  void corruptLinesAreNamed() {
    QFETCH(QString, line);
    QFETCH(QString, what);
    Result<WnSynset> r = parseWordNetLine(line.toStdString(), "data.noun line 7");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    const std::string& m = r.status().message();
    QVERIFY2(m.find("data.noun line 7") != std::string::npos, m.c_str());
    QVERIFY2(m.find(what.toStdString()) != std::string::npos, m.c_str());
    QVERIFY2(m.find("apt-get install --reinstall wordnet-base") != std::string::npos, m.c_str());
  }

  void readsFixtureFileSkippingTheLicense() {
    Result<std::vector<WnSynset>> r = readWordNetFile(fixtureDir() / "data.noun");
    QVERIFY2(r.isOk(), r.status().message().c_str());
    Result<std::string> text = readFile(fixtureDir() / "data.noun");
    QVERIFY(text.isOk());
    size_t lines = static_cast<size_t>(std::count(text->begin(), text->end(), '\n'));
    QCOMPARE(r->size(), lines - 2);  // two license lines
    for (const WnSynset& s : *r) {
      // In the real files and in the fixture the offset is the line's byte offset.
      QCOMPARE(uint64_t{s.offset}, s.lineOffset);
      QVERIFY(!s.words.empty());
    }
    bool dog = false;
    for (const WnSynset& s : *r) dog |= s.words[0].text == "dog" && s.pos == 'n';
    QVERIFY(dog);
  }

  void missingFileNamesThePackage() {
    Result<std::vector<WnSynset>> r = readWordNetFile(fs::path(m_tmp.path().toStdString()) / "data.noun");
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::NotFound);
    QVERIFY(r.status().message().find("apt-get install wordnet-base") != std::string::npos);
  }

  void corruptFileNamesTheLine() {
    fs::path p = fs::path(m_tmp.path().toStdString()) / "data.verb";
    {
      std::ofstream out(p);
      out << "  1 license line  \n" << kBreatheLine << "\n00002325 29 v 01 respire\n";
    }
    Result<std::vector<WnSynset>> r = readWordNetFile(p);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
    QVERIFY2(r.status().message().find("data.verb line 3") != std::string::npos,
             r.status().message().c_str());
  }

  void emptyFileIsCorrupt() {
    fs::path p = fs::path(m_tmp.path().toStdString()) / "data.adv";
    { std::ofstream out(p); }
    Result<std::vector<WnSynset>> r = readWordNetFile(p);
    QVERIFY(!r.isOk());
    QCOMPARE(r.status().code(), StatusCode::Corrupt);
  }
};

QTEST_GUILESS_MAIN(TestWordNet)
#include "test_wordnet.moc"
