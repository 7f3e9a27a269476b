// Prompts as token segments (model/prompt.h): a workflow template over variables and retrieved
// passages gives the segments (and so the tokens) a QA prompt of the same content gives, each
// passage tokenized on its own, with its origin; overwritten passage variables are plain text.
#include <QtTest>

#include <filesystem>
#include <optional>

#include "corpus/qa_prompt.h"
#include "model/prompt.h"
#include "model/tokenizer.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;

class TestPrompt : public QObject {
  Q_OBJECT
  std::optional<Tokenizer> m_tok;

  std::vector<int32_t> encode(std::string_view s) const { return m_tok->encode(s, {.parseSpecial = false}); }

private Q_SLOTS:
  void initTestCase() {
    auto tok = Tokenizer::load(std::filesystem::path(RAGWB_FIXTURES_DIR) / "tokenizer" / "gpt2_style");
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    m_tok.emplace(std::move(*tok));
  }

  void passagesBecomeTheirOwnSegments() {
    Variables vars{{"question", "What is a dog a kind of?"}, {"docs", "dog: a canine.\nwolf: wild dog.\n"}};
    PassageVariables passages{{"docs", {{11, "dog: a canine.\n"}, {12, "wolf: wild dog.\n"}}}};
    auto pieces = promptPieces("{docs}Question: {question}\nAnswer:", vars, passages);
    QVERIFY(pieces.isOk());
    QCOMPARE(pieces->size(), size_t{3});
    QCOMPARE((*pieces)[0].origin, SegmentOrigin::Passage);
    QCOMPARE((*pieces)[1].passageId, int64_t{12});
    QCOMPARE((*pieces)[2].text, std::string("Question: What is a dog a kind of?\nAnswer:"));
    PromptTokens p = tokenizePieces(*m_tok, *pieces);
    QCOMPARE(p.text, std::string("dog: a canine.\nwolf: wild dog.\nQuestion: What is a dog a kind of?\nAnswer:"));
    QCOMPARE(p.segments.size(), size_t{3});
    // Each passage encodes alone: the same ids wherever it appears.
    const std::vector<int32_t> wolf = encode("wolf: wild dog.\n");
    QCOMPARE(std::vector<int32_t>(p.tokens.begin() + p.segments[1].begin, p.tokens.begin() + p.segments[1].end), wolf);
    QCOMPARE(p.segments[1].passageId, int64_t{12});
    QCOMPARE(p.blockStarts(), (std::vector<int32_t>{0, p.segments[1].begin, p.segments[2].begin}));
    // ... and the layout is the QA prompt's, so serving reads what training taught.
    corpus::QaPrompt qa;
    qa.text = p.text;
    qa.segmentStarts = {0, 15, 31};
    qa.passageIds = {11, 12};
    QaTokens t = tokenizeQaPrompt(*m_tok, qa);
    QCOMPARE(std::vector<int32_t>(t.tokens.begin(), t.tokens.begin() + t.promptLength), p.tokens);
    QCOMPARE(t.blockStarts, p.blockStarts());
  }

  void textAndPlainVariablesRunTogether() {
    Variables vars{{"question", "Why?"}, {"fact", "Because."}};
    auto pieces = promptPieces("Q: {question} F: {fact}", vars, {});
    QCOMPARE(pieces->size(), size_t{1});
    PromptTokens p = tokenizePieces(*m_tok, *pieces);
    QCOMPARE(p.tokens, encode("Q: Why? F: Because."));  // one string, as before segments existed
    QCOMPARE(p.segments.front().origin, SegmentOrigin::Text);
  }

  void overwrittenPassageVariablesArePlainText() {
    Variables vars{{"docs", "a summary now\n"}};
    PassageVariables passages{{"docs", {{1, "first\n"}, {2, "second\n"}}}};
    auto pieces = promptPieces("{docs}End", vars, passages);
    QCOMPARE(pieces->size(), size_t{1});
    QCOMPARE((*pieces)[0].text, std::string("a summary now\nEnd"));
  }

  void missingVariablesAndBadTemplatesAreRefused() {
    auto missing = promptPieces("{docs}{question}", Variables{{"question", "q"}}, {});
    QVERIFY(!missing.isOk());
    QVERIFY(mentions(missing.status(), {"{docs}", "not set"}));
    auto bad = promptPieces("{docs", Variables{}, {});
    QVERIFY(mentions(bad.status(), {"unclosed"}));
  }
};

QTEST_GUILESS_MAIN(TestPrompt)
#include "test_prompt.moc"
