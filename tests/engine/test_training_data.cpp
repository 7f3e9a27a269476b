// Training examples from a corpus (model/training_data.h): keyed draws, QA prompts with
// answer-weighted loss and Block-Attention blocks, fitting a sequence length, packed passages.
#include <QtTest>

#include <filesystem>
#include <set>

#include "../fixtures/workload/tiny_corpus.h"
#include "corpus/qa_prompt.h"
#include "model/bpe_trainer.h"
#include "model/training_data.h"
#include "retrieval/bm25_index.h"
#include "storage/sqlite.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::model;
namespace fs = std::filesystem;

class TestTrainingData : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  fs::path corpus() const { return fs::path(m_dir.path().toStdString()) / "corpus.db"; }
  std::optional<Tokenizer> m_tok;

  std::unique_ptr<CorpusExampleSource> open(CorpusExampleOptions opts) {
    auto s = CorpusExampleSource::open(corpus(), *m_tok, opts);
    if (!s) qWarning("%s", s.status().message().c_str());
    return s ? std::move(*s) : nullptr;
  }
  std::string decode(std::span<const int32_t> ids) { return m_tok->decode(ids).valueOr("?"); }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    testing::TinyCorpusSpec spec;
    spec.entities = 30;
    spec.passages = true;
    QVERIFY(testing::makeTinyCorpus(corpus(), spec).isOk());
    auto texts = tokenizerTrainingTexts(corpus());
    QVERIFY2(texts.isOk(), texts.status().message().c_str());
    QCOMPARE(texts->size(), size_t{30 + 30 * 2});  // passages, then each train question and answer
    BpeTrainParams params;
    params.vocabSize = 330;
    auto json = trainByteLevelBpe(textsFrom(*texts), params);
    QVERIFY(json.isOk());
    auto tok = Tokenizer::fromJson(*json, "test");
    QVERIFY(tok.isOk());
    m_tok.emplace(*tok);
  }

  void examplesArePureFunctionsOfTheirKey() {
    auto a = open({});
    auto b = open({});
    QVERIFY(a && b);
    QCOMPARE(a->qaItems(), size_t{30});
    auto first = a->example(1, 5, 3, 512);
    (void)b->example(1, 0, 0, 512);  // another history before the same key
    auto again = b->example(1, 5, 3, 512);
    QVERIFY2(first.isOk(), first.status().message().c_str());
    QCOMPARE(again->tokens, first->tokens);
    QCOMPARE(again->lossWeights, first->lossWeights);
    int differ = 0;
    for (int64_t step = 6; step < 12; ++step) differ += a->example(1, step, 3, 512)->tokens != first->tokens;
    QVERIFY(differ >= 5);
    QVERIFY(a->example(2, 5, 3, 512)->tokens != first->tokens);
  }

  void qaExamplesWeighTheAnswerAndCutBlocksAtPassages() {
    CorpusExampleOptions opts;
    opts.mask = MaskKind::Block;
    opts.promptLossWeight = 0.25f;
    auto src = open(opts);
    auto e = src->example(3, 0, 0, 512);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    QCOMPARE(e->mask.kind, MaskKind::Block);
    QCOMPARE(e->mask.blockStarts.size(), size_t{6});  // 5 passages, then the question
    QVERIFY(e->mask.validate(static_cast<int64_t>(e->tokens.size())).isOk());
    // The answer and EOS weigh 1, everything before 0.25.
    size_t answerStart = e->tokens.size();
    while (answerStart > 0 && e->lossWeights[answerStart - 1] == 1.0f) --answerStart;
    for (size_t i = 0; i < answerStart; ++i) QCOMPARE(e->lossWeights[i], 0.25f);
    QCOMPARE(e->tokens.back(), *m_tok->eosId());
    const std::string answer = decode(std::span<const int32_t>(e->tokens).subspan(
        answerStart, e->tokens.size() - answerStart - 1));
    QVERIFY2(answer.starts_with(" answer "), answer.c_str());
    const std::string question = decode(std::span<const int32_t>(e->tokens).subspan(
        static_cast<size_t>(e->mask.blockStarts.back()),
        answerStart - static_cast<size_t>(e->mask.blockStarts.back())));
    QVERIFY2(question.starts_with("Question: What is entity ") && question.ends_with("\nAnswer:"),
             question.c_str());
    // Its gold passage is one of the blocks: the prompt states the answer.
    const std::string prompt = decode(std::span<const int32_t>(e->tokens).subspan(0, answerStart));
    QVERIFY(prompt.find("kind of:" + answer + ".") != std::string::npos);

    opts.mask = MaskKind::Causal;
    auto causal = open(opts)->example(3, 0, 0, 512);
    QCOMPARE(causal->tokens, e->tokens);
    QVERIFY(causal->mask.isCausal());
  }

  void aShortSequenceDropsDistractorsFirst() {
    CorpusExampleOptions opts;
    opts.mask = MaskKind::Block;
    auto src = open(opts);
    const auto full = src->example(4, 1, 2, 1000);
    const int64_t limit = static_cast<int64_t>(full->tokens.size()) - 10;
    auto fitted = src->example(4, 1, 2, limit);
    QVERIFY(static_cast<int64_t>(fitted->tokens.size()) <= limit);
    QVERIFY(fitted->mask.blockStarts.size() < full->mask.blockStarts.size());
    QVERIFY(fitted->mask.validate(static_cast<int64_t>(fitted->tokens.size())).isOk());
    // Whole passages went, not the front of one: the first block is one of the full prompt's.
    auto blockOf = [](const TrainingExample& x, size_t b) {
      const auto begin = static_cast<size_t>(x.mask.blockStarts[b]);
      const auto end = static_cast<size_t>(x.mask.blockStarts[b + 1]);
      return std::vector<int32_t>(x.tokens.begin() + static_cast<ptrdiff_t>(begin),
                                  x.tokens.begin() + static_cast<ptrdiff_t>(end));
    };
    bool whole = false;
    for (size_t b = 0; b + 1 < full->mask.blockStarts.size(); ++b) whole |= blockOf(*full, b) == blockOf(*fitted, 0);
    QVERIFY(whole);
    QVERIFY(decode(fitted->tokens).find("kind of: answer") != std::string::npos);  // the gold one stays
    // The question and answer survive whole: they end both sequences.
    const size_t tail = full->tokens.size() - static_cast<size_t>(full->mask.blockStarts.back());
    QVERIFY(std::equal(full->tokens.end() - static_cast<ptrdiff_t>(tail), full->tokens.end(),
                       fitted->tokens.end() - static_cast<ptrdiff_t>(tail)));
    // Too short even for the gold passage: the last tokens are kept.
    auto cut = src->example(4, 1, 2, 12);
    QCOMPARE(cut->tokens.size(), size_t{12});
    QVERIFY(std::equal(full->tokens.end() - 12, full->tokens.end(), cut->tokens.begin()));
    QCOMPARE(cut->mask.blockStarts.front(), 0);
    QVERIFY(cut->mask.validate(12).isOk());
  }

  void passageExamplesArePackedText() {
    CorpusExampleOptions opts;
    opts.data = TrainData::Passages;
    auto src = open(opts);
    auto e = src->example(1, 0, 0, 200);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    QCOMPARE(e->tokens.size(), size_t{200});
    QVERIFY(e->mask.isCausal());
    QVERIFY(std::all_of(e->lossWeights.begin(), e->lossWeights.end(), [](float w) { return w == 1.0f; }));
    QVERIFY(std::count(e->tokens.begin(), e->tokens.end(), *m_tok->eosId()) >= 2);
    QVERIFY(decode(e->tokens).find("(noun): the thing numbered") != std::string::npos);

    opts.data = TrainData::Mixed;
    auto mixed = open(opts);
    int qa = 0;
    for (int i = 0; i < 40; ++i) {
      auto m = mixed->example(1, 0, i, 400);
      qa += decode(m->tokens).find("Question: ") != std::string::npos;
    }
    QVERIFY2(qa > 8 && qa < 32, qPrintable(QString("%1 of 40 QA examples").arg(qa)));
  }

  void multiQuestionExamplesAnswerEveryQuestionOverOneContext() {
    CorpusExampleOptions opts;
    opts.questions = 3;
    opts.promptLossWeight = 0.0f;
    auto src = open(opts);
    auto e = src->example(4, 2, 1, 1024);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    const std::string text = decode(e->tokens);
    size_t questions = 0;
    for (size_t at = 0; (at = text.find("Question: ", at)) != std::string::npos; ++at) ++questions;
    QCOMPARE(questions, size_t{3});
    // Three answers, each ending in EOS, weigh 1; the context and questions weigh 0.
    QCOMPARE(std::count(e->tokens.begin(), e->tokens.end(), *m_tok->eosId()), 3);
    size_t runs = 0;
    for (size_t i = 0; i < e->tokens.size(); ++i) {
      if (e->lossWeights[i] == 1.0f && (i == 0 || e->lossWeights[i - 1] == 0.0f)) ++runs;
      if (e->tokens[i] == *m_tok->eosId()) QCOMPARE(e->lossWeights[i], 1.0f);
    }
    QCOMPARE(runs, size_t{3});
    // Each answer's passage is in the context: one context holds every question's gold passage.
    const size_t firstQuestion = text.find("Question: ");
    QVERIFY(firstQuestion > 0);
    // Too short for three questions: the extra ones go before the first question's passages.
    auto shortOne = src->example(4, 2, 1, static_cast<int64_t>(e->tokens.size()) - 1);
    QVERIFY(shortOne.isOk());
    QVERIFY(std::count(shortOne->tokens.begin(), shortOne->tokens.end(), *m_tok->eosId()) < 3);
  }

  void minPassagesDrawsContextsOfEverySize() {
    CorpusExampleOptions opts;
    opts.minPassages = 1;
    opts.mask = MaskKind::Block;
    auto src = open(opts);
    std::set<size_t> sizes;
    for (int i = 0; i < 60; ++i) {
      auto e = src->example(1, 0, i, 1024);
      QVERIFY(e.isOk());
      sizes.insert(e->mask.blockStarts.size() - 1);  // passages = blocks before the question
    }
    QCOMPARE(sizes, (std::set<size_t>{1, 2, 3, 4, 5}));
  }

  void recallExamplesAskEveryKeyOfTheirLines() {
    CorpusExampleOptions opts;
    opts.data = TrainData::Recall;
    opts.mask = MaskKind::Block;
    opts.promptLossWeight = 0.0f;
    auto src = open(opts);
    auto e = src->example(1, 3, 0, 256);
    QVERIFY2(e.isOk(), e.status().message().c_str());
    QVERIFY(e->tokens.size() <= 256 && e->tokens.size() > 128);
    QVERIFY(e->mask.validate(static_cast<int64_t>(e->tokens.size())).isOk());
    const std::string text = decode(e->tokens);
    // Every question's answer is the value of its key's line.
    size_t asked = 0;
    for (size_t at = 0; (at = text.find("Question: ", at)) != std::string::npos; ++at, ++asked) {
      const size_t keyEnd = text.find("?\nAnswer: ", at);
      QVERIFY(keyEnd != std::string::npos);
      const std::string key = text.substr(at + 10, keyEnd - at - 10);
      const size_t valueStart = keyEnd + 10;
      const size_t valueEnd = text.find("<|eos|>", valueStart) != std::string::npos
                                  ? std::min(text.find("<|eos|>", valueStart), text.find("Question: ", valueStart))
                                  : text.size();
      const std::string value = text.substr(valueStart, valueEnd - valueStart);
      QVERIFY2(text.find(key + ": " + value + ".\n") < text.find("Question: "),
               qPrintable(QString::fromStdString(key + " -> " + value)));
    }
    QCOMPARE(e->mask.blockStarts.size(), asked + 1);  // one block per line, then the questions
    QCOMPARE(std::count(e->tokens.begin(), e->tokens.end(), *m_tok->eosId()),
             static_cast<std::ptrdiff_t>(asked));
    QVERIFY(mentions(src->example(1, 3, 0, 8).status(), {"--seq-len 8", "at least 64"}));
  }

  void embedderPairsJoinQueriesToTheirPassages() {
    CorpusPairOptions titles;
    titles.titleFraction = 1.0;
    auto t = CorpusPairSource::open(corpus(), *m_tok, titles);
    QVERIFY2(t.isOk(), t.status().message().c_str());
    auto p = (*t)->pair(1, 2, 3, 200);
    QVERIFY2(p.isOk(), p.status().message().c_str());
    QVERIFY(p->passageId > 0);
    auto reader = corpus::QaPromptReader::open(corpus());
    const rag::Passage passage = *reader->passage(p->passageId);
    QCOMPARE(decode(p->query), std::string(plainTitle(passage.title)));
    QCOMPARE(decode(p->passage), std::string(corpus::embeddingText(passage)));
    QCOMPARE((*t)->pair(1, 2, 3, 200)->passage, p->passage);  // a pure function of the key
    QCOMPARE((*t)->pair(1, 2, 3, 5)->passage.size(), size_t{5});  // cut to maxTokens

    CorpusPairOptions questions;
    questions.titleFraction = 0.0;
    auto q = CorpusPairSource::open(corpus(), *m_tok, questions);
    for (int i = 0; i < 10; ++i) {
      auto qp = (*q)->pair(1, 0, i, 200);
      QVERIFY(qp.isOk());
      const std::string question = decode(qp->query);
      auto item = reader->db().queryInt64("SELECT count(*) FROM qa WHERE split = 'train' AND question = '" +
                                          question + "' AND json_extract(gold_passages, '$[0]') = " +
                                          std::to_string(qp->passageId));
      QVERIFY2(item.isOk() && *item >= 1, question.c_str());
    }
    CorpusPairOptions bad;
    bad.titleFraction = 1.5;
    QVERIFY(mentions(CorpusPairSource::open(corpus(), *m_tok, bad).status(), {"between 0 and 1"}));
    bad.titleFraction = 0.3;
    bad.hardNegatives = -0.1;
    QVERIFY(mentions(CorpusPairSource::open(corpus(), *m_tok, bad).status(), {"hard negative", "between 0 and 1"}));
  }

  void hardNegativesAreBm25LookAlikesThatAreNotGold() {
    CorpusPairOptions o;
    o.titleFraction = 0.0;
    o.hardNegatives = 1.0;
    auto src = CorpusPairSource::open(corpus(), *m_tok, o);
    QVERIFY2(src.isOk(), src.status().message().c_str());
    auto bm25 = retrieval::Bm25Index::openOrBuild(corpus());
    QVERIFY2(bm25.isOk(), bm25.status().message().c_str());
    auto reader = corpus::QaPromptReader::open(corpus());
    int withNegative = 0;
    for (int i = 0; i < 60; ++i) {
      auto p = (*src)->pair(1, 0, i, 200);
      QVERIFY2(p.isOk(), p.status().message().c_str());
      if (p->negative.empty()) continue;  // BM25 found nothing but gold
      ++withNegative;
      const std::string question = decode(p->query);
      QVERIFY(p->negativeId != p->passageId);
      auto top = bm25->search(question, o.hardNegativeDepth);
      QVERIFY(std::find(top->begin(), top->end(), p->negativeId) != top->end());
      QCOMPARE(decode(p->negative), std::string(corpus::embeddingText(*reader->passage(p->negativeId))));
      auto gold = reader->db().queryInt64("SELECT count(*) FROM qa, json_each(qa.gold_passages) g WHERE qa.split = 'train' "
                                          "AND qa.question = '" + question + "' AND g.value = " +
                                          std::to_string(p->negativeId));
      QVERIFY2(gold.isOk() && *gold == 0, question.c_str());
      QCOMPARE((*src)->pair(1, 0, i, 200)->negativeId, p->negativeId);  // a pure function of the key
    }
    // The tiny corpus's questions share only their entity number with a passage ("entity" and
    // "kind" are in every one, too common for BM25), so few have a non-gold look-alike.
    QVERIFY2(withNegative >= 1, "no pair had a hard negative");
    o.hardNegatives = 0;
    auto none = CorpusPairSource::open(corpus(), *m_tok, o);
    for (int i = 0; i < 5; ++i) QVERIFY((*none)->pair(1, 0, i, 200)->negative.empty());
  }

  void passageSpansAreRunningWordsAfterTheName() {
    const std::string text = "walker (noun): a shoe designed for comfortable walking. kind of: shoe.";
    QCOMPARE(passageSpan(text, 1, 3), std::string("shoe designed for"));
    QCOMPARE(passageSpan(text, 0, 2), std::string("a shoe"));
    QCOMPARE(passageSpan(text, 100, 2), std::string("of: shoe."));  // the start clamped to fit
    QCOMPARE(passageSpan(text, 0, 100), std::string("a shoe designed for comfortable walking. kind of: shoe."));
    QCOMPARE(passageSpan("no name here", 0, 2), std::string("no name"));
    QCOMPARE(passageSpan("", 0, 4), std::string());
  }

  // Title and span pairs never train on a passage that answers a dev or test question (the
  // retrieval figures are measured on those); here entities 1-15 keep only train questions.
  void titleAndSpanPairsLeaveHeldOutPassagesOut() {
    const fs::path held = fs::path(m_dir.path().toStdString()) / "held.db";
    fs::copy_file(corpus(), held, fs::copy_options::overwrite_existing);
    {
      auto db = sql::Db::open(held, sql::OpenMode::ReadWrite);
      QVERIFY(db.isOk());
      QVERIFY(db->exec("DELETE FROM qa WHERE split != 'train' AND topic_entity <= 15").isOk());
    }
    CorpusPairOptions o;
    o.titleFraction = 0.5;
    o.spanFraction = 0.5;
    auto src = CorpusPairSource::open(held, *m_tok, o);
    QVERIFY2(src.isOk(), src.status().message().c_str());
    auto reader = corpus::QaPromptReader::open(held);
    int titles = 0, spans = 0;
    for (int i = 0; i < 80; ++i) {
      auto p = (*src)->pair(3, 1, i, 200);
      QVERIFY2(p.isOk(), p.status().message().c_str());
      QVERIFY2(p->passageId >= 1 && p->passageId <= 15, std::to_string(p->passageId).c_str());
      const rag::Passage passage = *reader->passage(p->passageId);
      const std::string query = decode(p->query);
      if (query == plainTitle(passage.title)) {
        ++titles;
        continue;
      }
      ++spans;
      const std::string_view gloss = std::string_view(passage.text).substr(passage.text.find(": ") + 2);
      QVERIFY2(gloss.find(query) != std::string_view::npos, query.c_str());
      const auto words = std::count(query.begin(), query.end(), ' ') + 1;
      QVERIFY2(words >= 4 && words <= 12, query.c_str());
    }
    QVERIFY(titles >= 20 && spans >= 20);
    o.titleFraction = 0.7;
    o.spanFraction = 0.4;
    QVERIFY(mentions(CorpusPairSource::open(held, *m_tok, o).status(), {"title and span", "at most 1"}));
  }

  // Self-mined negatives come from the dense search's ranking of each question, mined once for
  // every question of the split in batches: never gold, nor a passage of a gold one's name.
  void selfMinedNegativesComeFromTheDenseRanking() {
    CorpusPairOptions o;
    o.titleFraction = 0.0;
    o.hardNegatives = 1.0;
    o.selfNegatives = 1.0;
    QVERIFY(mentions(CorpusPairSource::open(corpus(), *m_tok, o).status(), {"dense search"}));
    int64_t searched = 0, calls = 0;
    // A ranking that puts the question's own passage first, then entities 7, 8 and 9.
    o.denseSearch = [&](std::span<const std::string> queries, int32_t depth) {
      ++calls;
      searched += static_cast<int64_t>(queries.size());
      std::vector<std::vector<int64_t>> out;
      for (const std::string& q : queries) {
        const int64_t own = std::stoll(q.substr(q.find("entity ") + 7));
        out.push_back({own, 7, 8, 9});
        if (depth < 4) out.back().resize(static_cast<size_t>(depth));
      }
      return Result<std::vector<std::vector<int64_t>>>(std::move(out));
    };
    uint64_t reported = 0;
    o.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
      QCOMPARE(phase, std::string_view("mining"));
      reported = done;
      QCOMPARE(total, uint64_t{30});
    };
    auto src = CorpusPairSource::open(corpus(), *m_tok, o);
    QVERIFY2(src.isOk(), src.status().message().c_str());
    QCOMPARE(searched, int64_t{30});  // the 30 train questions, once
    QCOMPARE(calls, int64_t{1});
    QCOMPARE(reported, uint64_t{30});
    for (int i = 0; i < 40; ++i) {
      auto p = (*src)->pair(1, 0, i, 200);
      QVERIFY2(p.isOk(), p.status().message().c_str());
      QVERIFY2(p->negativeId >= 7 && p->negativeId <= 9, std::to_string(p->negativeId).c_str());
      QVERIFY(p->negativeId != p->passageId);
    }
    // A search that loses queries is an error, not a silent gap.
    o.denseSearch = [](std::span<const std::string>, int32_t) {
      return Result<std::vector<std::vector<int64_t>>>(std::vector<std::vector<int64_t>>{});
    };
    QVERIFY(mentions(CorpusPairSource::open(corpus(), *m_tok, o).status(), {"answered 0 of 30"}));
  }

  void errorsNameTheProblem() {
    QVERIFY(mentions(parseTrainData("books").status(), {"'books'", "qa", "passages", "mixed", "recall"}));
    QVERIFY(mentions(parseTrainMask("tree").status(), {"'tree'", "causal", "block"}));
    CorpusExampleOptions dev;
    dev.split = "dev";
    auto s = CorpusExampleSource::open(corpus(), *m_tok, dev);
    QCOMPARE(s.status().code(), StatusCode::NotFound);
    QVERIFY(mentions(s.status(), {"split 'dev'", "it has: test, train"}));
    // Passage data needs no QA split; QA data needs no passages until a prompt reads one.
    dev.data = TrainData::Passages;
    QVERIFY(CorpusExampleSource::open(corpus(), *m_tok, dev).isOk());
    auto missing = tokenizerTrainingTexts(fs::path(m_dir.path().toStdString()) / "absent.db");
    QVERIFY(mentions(missing.status(), {"does not exist", "ragraph corpus build"}));
  }
};

QTEST_GUILESS_MAIN(TestTrainingData)
#include "test_training_data.moc"
