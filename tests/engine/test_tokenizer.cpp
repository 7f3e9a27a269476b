#include <QtTest>

#include <atomic>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "model/bpe_trainer.h"
#include "model/tokenizer.h"
#include "model/unicode_tables.h"

using namespace rag;
using namespace rag::model;

namespace {

const std::string kFixtures = std::string(RAGWB_FIXTURES_DIR) + "/tokenizer/";

// Ids as "[1, 2, 3]" so a failed comparison shows both sides.
QString str(const std::vector<int32_t>& ids) {
  QStringList parts;
  for (int32_t id : ids) parts << QString::number(id);
  return "[" + parts.join(", ") + "]";
}

QStringList pieces(SplitPattern p, std::string_view text) {
  QStringList out;
  for (std::string_view s : splitWithPattern(p, text))
    out << QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
  return out;
}

Tokenizer loadOrFail(const std::string& path) {
  Result<Tokenizer> t = Tokenizer::load(path);
  if (!t) qFatal("cannot load %s: %s", path.c_str(), t.status().toString().c_str());
  return std::move(t).value();
}

std::string randomUtf8(std::mt19937& rng, int maxChars) {
  // Code points from ASCII, Latin, Greek/Cyrillic, CJK, emoji and the rest of the planes,
  // skipping surrogates.
  static const std::pair<char32_t, char32_t> kRanges[] = {
      {0x00, 0x7F}, {0x80, 0x24F}, {0x370, 0x4FF}, {0x3000, 0x30FF}, {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0x1F300, 0x1FAFF}, {0xE000, 0xFFFD}, {0x10000, 0x10FFFF}};
  std::string s;
  int n = static_cast<int>(rng() % static_cast<unsigned>(maxChars + 1));
  for (int i = 0; i < n; ++i) {
    const auto& [lo, hi] = kRanges[rng() % std::size(kRanges)];
    char32_t cp = lo + static_cast<char32_t>(rng() % (hi - lo + 1));
    unicode::appendUtf8(s, cp);
  }
  return s;
}

std::string randomBytes(std::mt19937& rng, int maxLen) {
  std::string s(rng() % static_cast<unsigned>(maxLen + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xFF);
  return s;
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void gpt2ByteMapping() {
    QCOMPARE(byteToSymbol(32), char32_t{0x120});   // ' ' -> 'Ġ'
    QCOMPARE(byteToSymbol(10), char32_t{0x10A});   // '\n' -> 'Ċ'
    QCOMPARE(byteToSymbol('A'), char32_t{'A'});
    QCOMPARE(byteToSymbol(0), char32_t{0x100});
    QCOMPARE(byteToSymbol(127), char32_t{0x121});  // after the 33 bytes 0..32
    QCOMPARE(byteToSymbol(0xAD), char32_t{0x143}); // soft hyphen, the last remapped byte
    QCOMPARE(byteToSymbol(0xE9), char32_t{0xE9});
    QCOMPARE(symbolToByte(0x120), std::optional<uint8_t>(32));
    QCOMPARE(symbolToByte(0x10A), std::optional<uint8_t>(10));
    QVERIFY(!symbolToByte(0x144));
    QVERIFY(!symbolToByte(' '));  // a raw space is not a symbol: spaces are 'Ġ'
    QCOMPARE(bytesToSymbols(" hi\n"), std::string("\xC4\xA0hi\xC4\x8A"));
    std::set<char32_t> seen;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = byteToSymbol(static_cast<uint8_t>(b));
      seen.insert(cp);
      QCOMPARE(symbolToByte(cp), std::optional<uint8_t>(static_cast<uint8_t>(b)));
    }
    QCOMPARE(seen.size(), size_t{256});
  }

  void gpt2SplitPattern() {
    using P = SplitPattern;
    QCOMPARE(pieces(P::Gpt2, "hello  world"), (QStringList{"hello", " ", " world"}));
    QCOMPARE(pieces(P::Gpt2, "I'm don't we'll they've"),
             (QStringList{"I", "'m", " don", "'t", " we", "'ll", " they", "'ve"}));
    // GPT-2's contractions are case-sensitive.
    QCOMPARE(pieces(P::Gpt2, "I'M DON'T"), (QStringList{"I", "'", "M", " DON", "'", "T"}));
    QCOMPARE(pieces(P::Gpt2, "abc 123 4567"), (QStringList{"abc", " 123", " 4567"}));
    QCOMPARE(pieces(P::Gpt2, "a   b"), (QStringList{"a", "  ", " b"}));
    QCOMPARE(pieces(P::Gpt2, "a  "), (QStringList{"a", "  "}));
    QCOMPARE(pieces(P::Gpt2, "a\n\nb"), (QStringList{"a", "\n", "\n", "b"}));
    QCOMPARE(pieces(P::Gpt2, "  \n  hi"), (QStringList{"  \n ", " hi"}));
    QCOMPARE(pieces(P::Gpt2, "x = (1+2);"), (QStringList{"x", " =", " (", "1", "+", "2", ");"}));
    QCOMPARE(pieces(P::Gpt2, "won't!!! ok"), (QStringList{"won", "'t", "!!!", " ok"}));
    // Non-ASCII letters and numbers: ß, ö, ï are \p{L}; ª is a letter (Lo) too.
    QCOMPARE(pieces(P::Gpt2, "Größe 2024ª naïve"),
             (QStringList{"Größe", " 2024", "ª", " naïve"}));
    QCOMPARE(pieces(P::Gpt2, "café日本語"), (QStringList{"café日本語"}));
    QVERIFY(pieces(P::Gpt2, "").isEmpty());
  }

  void llama3SplitPattern() {
    using P = SplitPattern;
    // Digits go in groups of at most three; Qwen2 splits every digit.
    QCOMPARE(pieces(P::Llama3, "12345678"), (QStringList{"123", "456", "78"}));
    QCOMPARE(pieces(P::Llama3, "abc 123 4567"),
             (QStringList{"abc", " ", "123", " ", "456", "7"}));
    QCOMPARE(pieces(P::Qwen2, "2024"), (QStringList{"2", "0", "2", "4"}));
    // Contractions are case-insensitive.
    QCOMPARE(pieces(P::Llama3, "I'M DON'T"), (QStringList{"I", "'M", " DON", "'T"}));
    // Newline runs stay together, and punctuation keeps its trailing newlines.
    QCOMPARE(pieces(P::Llama3, "a\n\nb"), (QStringList{"a", "\n\n", "b"}));
    QCOMPARE(pieces(P::Llama3, "x = (1+2);\n\ny"),
             (QStringList{"x", " =", " (", "1", "+", "2", ");\n\n", "y"}));
    QCOMPARE(pieces(P::Llama3, "  \n  hi"), (QStringList{"  \n", " ", " hi"}));
    QCOMPARE(pieces(P::Llama3, "hello  world"), (QStringList{"hello", " ", " world"}));
    // One non-letter, non-digit character may lead a word.
    QCOMPARE(pieces(P::Llama3, "(hello"), (QStringList{"(hello"}));
  }

  void splitPatternsCoverEveryByte() {
    std::mt19937 rng(7);
    for (SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2})
      for (int i = 0; i < 300; ++i) {
        std::string s = i % 2 ? randomUtf8(rng, 30) : randomBytes(rng, 30);
        std::string joined;
        for (std::string_view piece : splitWithPattern(p, s)) {
          QVERIFY(!piece.empty());
          joined += piece;
        }
        QCOMPARE(joined, s);
      }
  }

  void recognizesOnlyKnownPatterns() {
    for (SplitPattern p : {SplitPattern::Gpt2, SplitPattern::Llama3, SplitPattern::Qwen2}) {
      Result<SplitPattern> r = recognizeSplitPattern(splitPatternRegex(p));
      QVERIFY(r.isOk());
      QCOMPARE(*r, p);
    }
    Result<SplitPattern> bad = recognizeSplitPattern(R"(\w+|[^\w\s]+)");
    QVERIFY(!bad);
    QVERIFY(bad.status().message().find(R"('\w+|[^\w\s]+')") != std::string::npos);
    QVERIFY(bad.status().message().find("not supported") != std::string::npos);
  }

  // gpt2_style: ids 0..255 are the bytes; merge rank r makes id 256 + r:
  //   256 he, 257 ll, 258 hell, 259 hello, 260 Ġw, 261 or, 262 Ġwor, 263 ld, 264 Ġworld,
  //   265 ĠĠ, 266 aa, 267 aaaa; added 268 <|start|>, 269 <|stop|>, 270 <|pad|>, 271 <tool>.
  void byteLevelBpeMerges() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    QCOMPARE(tok.kind(), TokenizerKind::ByteLevelBpe);
    QCOMPARE(tok.vocabSize(), 272);
    // "hello": h e l l o -> (h,e) r0 -> he l l o -> (l,l) r1 -> he ll o -> (he,ll) r2
    //   -> hell o -> (hell,o) r3 -> hello.
    // " world": Ġ w o r l d -> (Ġ,w) r4 -> Ġw o r l d -> (o,r) r5 -> Ġw or l d
    //   -> (Ġw,or) r6 -> Ġwor l d -> (l,d) r7 -> Ġwor ld -> (Ġwor,ld) r8 -> Ġworld.
    QCOMPARE(str(tok.encode("hello world")), str({259, 264}));
    // Two spaces: "hello", " ", " world" (the run gives its last space to the word).
    QCOMPARE(str(tok.encode("hello  world")), str({259, 32, 264}));
    // Three spaces: the run "  " merges to ĠĠ (r9).
    QCOMPARE(str(tok.encode("hello   world")), str({259, 265, 264}));
    // "aaaaa": (a,a) r10 at 0,1,2,3; leftmost first: aa a a a -> aa aa a, then (aa,aa) r11.
    QCOMPARE(str(tok.encode("aaaaa")), str({267, 97}));
    // "Hello": no (H,e) merge; (l,l) r1 only.
    QCOMPARE(str(tok.encode("Hello")), str({72, 101, 257, 111}));
    QCOMPARE(str(tok.encode("\n")), str({10}));
    QCOMPARE(tok.tokenText(10), std::optional<std::string>("\xC4\x8A"));  // 'Ċ'
    QCOMPARE(tok.tokenId("\xC4\xA0world"), std::optional<int32_t>(264));  // "Ġworld"
    QCOMPARE(tok.tokenText(264), std::optional<std::string>("\xC4\xA0world"));
    QVERIFY(!tok.tokenId("world"));
    QVERIFY(tok.encode("").empty());
  }

  void specialTokensAreKeptWhole() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    QCOMPARE(str(tok.encode("<|start|>hello<|stop|>")), str({268, 259, 269}));
    QCOMPARE(str(tok.encode("hello<|pad|><|pad|>")), str({259, 270, 270}));
    // Without special-token parsing the text is ordinary: "<|", "start", "|>", "hello", ...
    QCOMPARE(str(tok.encode("<|start|>hello", {.parseSpecial = false})),
             str({60, 124, 115, 116, 97, 114, 116, 124, 62, 259}));
    // <tool> has lstrip: the space before it is absorbed into the token.
    QCOMPARE(str(tok.encode("call <tool>x")), str({99, 97, 257, 271, 120}));
    QVERIFY(tok.isSpecial(268));
    QVERIFY(!tok.isSpecial(271));
    QVERIFY(!tok.isSpecial(259));
  }

  void bosEosFromConfigAndOptions() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style/tokenizer.json");
    // tokenizer_config.json next to the file names <|start|> and <|stop|>.
    QCOMPARE(tok.bosId(), std::optional<int32_t>(268));
    QCOMPARE(tok.eosId(), std::optional<int32_t>(269));
    QCOMPARE(tok.padId(), std::optional<int32_t>(270));
    QCOMPARE(str(tok.encode("hello", {.addBos = true})), str({268, 259}));
    QCOMPARE(str(tok.encode("hello", {.addBos = true, .addEos = true})), str({268, 259, 269}));
    QCOMPARE(str(tok.encode("hello")), str({259}));
  }

  void decodeByteLevel() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    std::vector<int32_t> ids = {268, 259, 264, 271, 269};
    QCOMPARE(*tok.decode(ids), std::string("<|start|>hello world<tool><|stop|>"));
    QCOMPARE(*tok.decode(ids, {.skipSpecial = true}), std::string("hello world<tool>"));
    // Single bytes of a multi-byte character decode to those bytes, not to U+FFFD.
    std::vector<int32_t> half = {0xC3};
    QCOMPARE(*tok.decode(half), std::string("\xC3"));
  }

  void decodeRejectsBadIds() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    std::vector<int32_t> tooBig = {259, 272};
    Result<std::string> r = tok.decode(tooBig);
    QVERIFY(!r);
    QCOMPARE(r.status().code(), StatusCode::InvalidArgument);
    QVERIFY(r.status().message().find("token id 272 is outside the vocabulary [0, 272)") !=
            std::string::npos);
    std::vector<int32_t> negative = {-1};
    QVERIFY(!tok.decode(negative));
  }

  void byteLevelRoundTrip() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    std::mt19937 rng(42);
    for (int i = 0; i < 500; ++i) {
      std::string s = randomUtf8(rng, 40);
      Result<std::string> back = tok.decode(tok.encode(s));
      QVERIFY(back.isOk());
      QCOMPARE(*back, s);
    }
    for (int i = 0; i < 500; ++i) {
      std::string s = randomBytes(rng, 40);
      QCOMPARE(*tok.decode(tok.encode(s, {.parseSpecial = false})), s);
    }
    const std::string text = "hello  world\n\n\tlet's see: 3.14159 + ünïcödé 日本語 😀 <|start|>x";
    QCOMPARE(*tok.decode(tok.encode(text)), text);
  }

  // llama3_style: bytes 0..255, 256 "Ġcat" (no merge builds it), merges 257 "12", 258 "34",
  // 259 "hi"; added 260 <|begin_of_text|>, 261 <|end_of_text|>; ignore_merges; BOS from the
  // TemplateProcessing post-processor; merges written as [a, b] pairs.
  void llama3StyleTokenizer() {
    Tokenizer tok = loadOrFail(kFixtures + "llama3_style.json");
    QCOMPARE(tok.bosId(), std::optional<int32_t>(260));
    QCOMPARE(tok.eosId(), std::optional<int32_t>(261));
    // ignore_merges: " cat" is a vocabulary entry, used whole although no merge makes it.
    QCOMPARE(str(tok.encode(" cat", {.addBos = true})), str({260, 256}));
    // " cats" is not in the vocabulary and no merge applies: five bytes.
    QCOMPARE(str(tok.encode(" cats")), str({32, 99, 97, 116, 115}));
    // "1234" splits as "123" + "4": (1,2) -> 257 then 3; the 3-4 pair is never adjacent in
    // one piece, so 258 must not appear.
    QCOMPARE(str(tok.encode("1234")), str({257, 51, 52}));
    QCOMPARE(str(tok.encode("hi")), str({259}));
    QCOMPARE(str(tok.encode("I'M")), str({73, 39, 77}));
    std::mt19937 rng(3);
    for (int i = 0; i < 200; ++i) {
      std::string s = randomUtf8(rng, 30);
      QCOMPARE(*tok.decode(tok.encode(s)), s);
    }
  }

  // wordpiece: 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP] 4 [MASK] 5 un 6 ##aff 7 ##able 8 the 9 cafe
  // 10 , 11 . 12 play 13 ##ing 14 ##s 15 hello 16 ! 17 中 18 a 19 ##a; 12 chars per word max.
  void wordPieceGreedyLongestMatch() {
    Tokenizer tok = loadOrFail(kFixtures + "wordpiece.json");
    QCOMPARE(tok.kind(), TokenizerKind::WordPiece);
    // "unaffable": longest prefix in the vocabulary "un", then "##aff", then "##able".
    QCOMPARE(str(tok.encode("unaffable")), str({5, 6, 7}));
    // Lowercased, accents stripped (É -> E -> e), punctuation split off.
    QCOMPARE(str(tok.encode("Playing, the CAFÉ!")), str({12, 13, 10, 8, 9, 16}));
    QCOMPARE(str(tok.encode("Ünaffable")), str({5, 6, 7}));
    QCOMPARE(str(tok.encode("plays")), str({12, 14}));
    // "play" matches but "##x" does not: the whole word is one [UNK].
    QCOMPARE(str(tok.encode("playx xyz")), str({1, 1}));
    // CJK ideographs become words of their own.
    QCOMPARE(str(tok.encode("中文")), str({17, 1}));
    // Longest match first: "a" then "##a" three times.
    QCOMPARE(str(tok.encode("aaaa")), str({18, 19, 19, 19}));
    QCOMPARE(tok.encode("aaaaaaaaaaaa").size(), size_t{12});          // 12 chars: allowed
    QCOMPARE(str(tok.encode("aaaaaaaaaaaaa")), str({1}));             // 13 chars: [UNK]
    // Control characters are dropped, tabs become spaces.
    QCOMPARE(str(tok.encode("hel\x01lo\tthe")), str({15, 8}));
    QCOMPARE(tok.unkId(), std::optional<int32_t>(1));
  }

  void wordPieceSpecialTokens() {
    Tokenizer tok = loadOrFail(kFixtures + "wordpiece.json");
    QCOMPARE(tok.clsId(), std::optional<int32_t>(2));
    QCOMPARE(tok.sepId(), std::optional<int32_t>(3));
    QCOMPARE(tok.padId(), std::optional<int32_t>(0));
    QCOMPARE(str(tok.encode("hello", {.addClsSep = true})), str({2, 15, 3}));
    QCOMPARE(str(tok.encode("[CLS] hello [SEP]")), str({2, 15, 3}));
    std::vector<int32_t> ids = {2, 5, 6, 7, 10, 8, 3};
    QCOMPARE(*tok.decode(ids), std::string("[CLS] unaffable, the [SEP]"));
    QCOMPARE(*tok.decode(ids, {.skipSpecial = true}), std::string("unaffable, the"));
  }

  void unicodeNormalization() {
    namespace uc = unicode;
    QCOMPARE(uc::nfd("\xC3\xA9"), std::string("e\xCC\x81"));                 // é -> e + U+0301
    QCOMPARE(uc::nfc("e\xCC\x81"), std::string("\xC3\xA9"));
    QCOMPARE(uc::nfc("\xE2\x84\xAB"), std::string("\xC3\x85"));              // Å sign -> Å
    QCOMPARE(uc::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"),                // jamo -> 각
             std::string("\xEA\xB0\x81"));
    QCOMPARE(uc::nfd("\xEA\xB0\x81"), std::string("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"));
    // Marks are reordered by combining class (U+0323 below before U+0301 above), then a
    // composes with U+0323 to U+1EA1; U+0301 stays separate.
    QCOMPARE(uc::nfc("a\xCC\x81\xCC\xA3"), std::string("\xE1\xBA\xA1\xCC\x81"));
    // A composition exclusion stays decomposed: U+0958 -> U+0915 U+093C.
    QCOMPARE(uc::nfc("\xE0\xA5\x98"), std::string("\xE0\xA4\x95\xE0\xA4\xBC"));
    QCOMPARE(uc::nfc("plain ascii"), std::string("plain ascii"));
    QCOMPARE(uc::nfc("bad \xFF byte"), std::string("bad \xFF byte"));
    std::string lower;
    for (char32_t cp : {U'Ä', U'Σ', U'Ж', U'A', U'İ'}) uc::appendLower(lower, cp);
    QCOMPARE(lower, std::string("äσжai\xCC\x87"));
    QVERIFY(uc::isLetter(U'ß'));
    QVERIFY(uc::isLetter(U'日'));
    QVERIFY(uc::isNumber(U'٣'));  // ARABIC-INDIC DIGIT THREE
    QVERIFY(uc::isNumber(U'½'));
    QVERIFY(!uc::isLetter(U'½'));
    QVERIFY(uc::isWhitespace(0x3000));
    QVERIFY(!uc::isWhitespace(0x200B));  // zero-width space is Cf, not White_Space
    QVERIFY(uc::isBertPunctuation(U'$'));
    QVERIFY(uc::isBertPunctuation(U'、'));
    QVERIFY(!uc::isBertPunctuation(U'a'));
  }

  void trainedTokenizerRoundTrips() {
    std::vector<std::string> texts;
    for (int i = 0; i < 200; ++i)
      texts.push_back("the quick brown fox jumps over the lazy dog " + std::to_string(i) +
                      " times; naïve café, 日本語!\n");
    BpeTrainParams params;
    params.vocabSize = 320;  // this corpus has enough repeated pairs for 61 merges
    Result<std::string> json = trainByteLevelBpe(textsFrom(texts), params);
    QVERIFY(json.isOk());
    Result<Tokenizer> tok = Tokenizer::fromJson(*json, "trained");
    QVERIFY2(tok.isOk(), tok.status().toString().c_str());
    QCOMPARE(tok->vocabSize(), 320);
    QCOMPARE(tok->bosId(), std::optional<int32_t>(0));
    QCOMPARE(tok->eosId(), std::optional<int32_t>(1));
    QCOMPARE(tok->padId(), std::optional<int32_t>(2));
    // Merges were learned: the training text takes far fewer tokens than bytes.
    std::vector<int32_t> ids = tok->encode(texts[5]);
    QVERIFY(ids.size() * 3 < texts[5].size());
    QCOMPARE(*tok->decode(ids), texts[5]);
    std::mt19937 rng(11);
    for (int i = 0; i < 300; ++i) {
      std::string s = i % 2 ? randomUtf8(rng, 40) : randomBytes(rng, 40);
      QCOMPARE(*tok->decode(tok->encode(s, {.parseSpecial = false})), s);
    }
  }

  void unsupportedTypesAreClearErrors() {
    Result<Tokenizer> unigram = Tokenizer::load(kFixtures + "unigram.json");
    QVERIFY(!unigram);
    QCOMPARE(unigram.status().code(), StatusCode::InvalidArgument);
    QVERIFY2(unigram.status().message().starts_with(
                 "tokenizer.json model type 'Unigram' is not supported; supported: BPE "
                 "(byte-level), WordPiece"),
             unigram.status().message().c_str());

    const std::string badRegex = R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "Isolated"}})";
    Result<Tokenizer> r = Tokenizer::fromJson(badRegex, "inline");
    QVERIFY(!r);
    QVERIFY2(r.status().message().find(R"('\w+')") != std::string::npos,
             r.status().message().c_str());

    const std::string sentencePiece = R"({"model": {"type": "BPE", "vocab": {"a": 0},
        "merges": [], "byte_fallback": true}, "pre_tokenizer": null})";
    Result<Tokenizer> sp = Tokenizer::fromJson(sentencePiece, "inline");
    QVERIFY(!sp);
    QVERIFY(sp.status().message().find("ByteLevel") != std::string::npos);
  }

  void corruptFilesAreReported() {
    Result<Tokenizer> missing = Tokenizer::load(kFixtures + "no_such_dir");
    QVERIFY(!missing);
    QCOMPARE(missing.status().code(), StatusCode::NotFound);

    Result<Tokenizer> badJson = Tokenizer::fromJson("{\"model\": ", "broken.json");
    QVERIFY(!badJson);
    QCOMPARE(badJson.status().code(), StatusCode::Corrupt);
    QVERIFY(badJson.status().message().find("broken.json") != std::string::npos);

    // A merge whose parts are not in the vocabulary.
    const std::string badMerge = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1},
        "merges": ["a c"]}, "pre_tokenizer": {"type": "ByteLevel"}})";
    Result<Tokenizer> m = Tokenizer::fromJson(badMerge, "merge.json");
    QVERIFY(!m);
    QCOMPARE(m.status().code(), StatusCode::Corrupt);
    QVERIFY2(m.status().message().find("merge 0") != std::string::npos &&
                 m.status().message().find("'c'") != std::string::npos,
             m.status().message().c_str());

    // Two tokens with one id.
    const std::string dupId = R"({"model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 0}}})";
    Result<Tokenizer> d = Tokenizer::fromJson(dupId, "dup.json");
    QVERIFY(!d);
    QVERIFY(d.status().message().find("id 0") != std::string::npos);
  }

  void threadSafeEncode() {
    Tokenizer tok = loadOrFail(kFixtures + "gpt2_style");
    const std::string text = "hello world, hello again; aaaaa\n";
    const std::vector<int32_t> expected = tok.encode(text);
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 2000; ++i)
          if (tok.encode(text) != expected) ++mismatches;
      });
    for (std::thread& th : threads) th.join();
    QCOMPARE(mismatches.load(), 0);
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
