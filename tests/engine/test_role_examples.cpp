// Training examples for the built-in workflows' roles (knowledge/role_examples.h) over a corpus
// built from the WordNet/FOLDOC fixtures and the shipped tokenizer: each role's prompt is its
// built-in node's template, its completion what that node should write; draws are pure functions
// of their key; only the split's questions are targets, weighted by type when asked; long prompts
// drop passages; bad mixes and unknown question types are refused by name.
#include <QtTest>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "corpus/qa_prompt.h"
#include "corpus_fixtures.h"
#include "knowledge/role_examples.h"
#include "rag/workflow.h"
#include "storage/sqlite.h"
#include "status_checks.h"

using namespace rag;
using namespace rag::knowledge;
namespace fs = std::filesystem;

class TestRoleExamples : public QObject {
  Q_OBJECT
  QTemporaryDir m_dir;
  std::optional<model::Tokenizer> m_tok;
  fs::path corpus() const { return fs::path(m_dir.path().toStdString()) / "corpus.db"; }

  std::unique_ptr<RoleExampleSource> open(RoleExampleOptions o = {}) {
    auto s = RoleExampleSource::open(corpus(), *m_tok, o);
    if (!s) qWarning("%s", s.status().message().c_str());
    return s ? std::move(*s) : nullptr;
  }
  // Two sources over one mix, one with the default options and one with `change` applied, so
  // that their draws can be compared key by key.
  std::pair<std::unique_ptr<RoleExampleSource>, std::unique_ptr<RoleExampleSource>> openPair(
      std::vector<RoleWeight> mix, const std::function<void(RoleExampleOptions&)>& change) {
    RoleExampleOptions base;
    base.mix = std::move(mix);
    RoleExampleOptions changed = base;
    change(changed);
    return {open(base), open(changed)};
  }
  // The first draws of step 0 until every role has shown up (or 2,000 draws).
  std::map<Role, std::vector<RoleExampleText>> byRole(RoleExampleSource& s) {
    std::map<Role, std::vector<RoleExampleText>> out;
    for (int64_t i = 0; i < 2000 && out.size() < std::size(kAllRoles); ++i) {
      auto t = s.exampleText(7, 0, i);
      if (!t) {
        qWarning("%s", t.status().message().c_str());
        return {};
      }
      out[t->role].push_back(*t);
    }
    return out;
  }
  // A built-in workflow's node (an empty node when there is no such node).
  static WorkflowNode builtinNode(std::string_view file, std::string_view node) {
    auto g = builtinWorkflowFile(file);
    const WorkflowNode* n = g ? g->findNode(node) : nullptr;
    return n ? *n : WorkflowNode{};
  }
  static std::string nodeTemplate(std::string_view file, std::string_view node) {
    return builtinNode(file, node).promptTemplate;
  }
  // How many passages a built-in retrieval node keeps (0 when there is no such node).
  static int64_t nodeTopk(std::string_view file, std::string_view node) {
    const WorkflowNode n = builtinNode(file, node);
    return n.kind == NodeKind::Retrieval ? n.topk : 0;
  }
  static int64_t passagesIn(const RoleExampleText& t) {
    return std::count_if(t.pieces.begin(), t.pieces.end(),
                         [](const model::PromptPiece& p) { return p.origin == model::SegmentOrigin::Passage; });
  }

private Q_SLOTS:
  void initTestCase() {
    QVERIFY(m_dir.isValid());
    corpus::CorpusBuildParams p;
    p.out = corpus();
    p.sources = fixtureSources();
    p.qa.testFraction = 0.3;
    p.qa.devFraction = 0.2;
    auto built = corpus::buildCorpus(p);
    QVERIFY2(built.isOk(), built.status().message().c_str());
    auto tok = model::Tokenizer::load(fs::path(RAGWB_SOURCE_DIR) / "datasets/models/rag-llama/tokenizer.json");
    QVERIFY2(tok.isOk(), tok.status().message().c_str());
    m_tok.emplace(*tok);
  }

  void everyRoleFollowsItsBuiltinTemplate() {
    auto s = open();
    QVERIFY(s);
    auto roles = byRole(*s);
    QCOMPARE(roles.size(), std::size(kAllRoles));
    // The template's literal text around the variables is in the prompt, in order.
    auto literalParts = [](const std::string& tmpl) {
      std::vector<std::string> parts;
      size_t at = 0;
      while (at < tmpl.size()) {
        const size_t open = tmpl.find('{', at);
        parts.push_back(tmpl.substr(at, open - at));
        if (open == std::string::npos) break;
        at = tmpl.find('}', open) + 1;
      }
      return parts;
    };
    // The compress role is the abstractive RECOMP's node: the built-in compresses without the model.
    const std::map<Role, std::pair<std::string_view, std::string_view>> nodes = {
        {Role::AnswerGold, {"oneshot", "answer"}},     {Role::Answer, {"oneshot", "answer"}},
        {Role::Irg, {"irg", "generate"}},              {Role::Hyde, {"hyde", "hypothesis"}},
        {Role::Decompose, {"multistep", "decompose"}}, {Role::SubAnswer, {"multistep", "subanswer"}},
        {Role::Next, {"multistep", "next"}},           {Role::MultistepAnswer, {"multistep", "answer"}},
        {Role::Compress, {kRecompAbstractive, "compress"}}, {Role::RecompAnswer, {"recomp", "answer"}}};
    for (const auto& [role, examples] : roles) {
      const auto& [workflow, node] = nodes.at(role);
      const std::string tmpl = nodeTemplate(workflow, node);
      QVERIFY(!tmpl.empty());
      for (const RoleExampleText& t : examples) {
        size_t at = 0;
        for (const std::string& part : literalParts(tmpl)) {
          const size_t found = t.prompt.find(part, at);
          QVERIFY2(found != std::string::npos, qPrintable(QString::fromStdString(std::string(roleName(role)) + ": '" +
                                                                                 part + "' not in: " + t.prompt)));
          at = found + part.size();
        }
        QVERIFY2(!t.completion.empty(), roleName(role).data());
        QVERIFY(t.completion.find('\n') == std::string::npos);  // every node stops at a newline
      }
    }
  }

  void completionsAreWhatEachNodeShouldWrite() {
    auto s = open();
    QVERIFY(s);
    auto roles = byRole(*s);
    corpus::QaPromptReader reader = *corpus::QaPromptReader::open(corpus());
    for (Role answering : {Role::AnswerGold, Role::Answer, Role::Irg, Role::MultistepAnswer, Role::RecompAnswer})
      for (const RoleExampleText& t : roles[answering]) {
        auto item = reader.item(t.qaId);
        QVERIFY(item.isOk());
        QCOMPARE(t.completion, item->answers.front());
      }
    // Gold-context answering puts the gold passage in the prompt.
    for (const RoleExampleText& t : roles[Role::AnswerGold]) {
      auto item = reader.item(t.qaId);
      bool passageOfGold = false;
      for (const model::PromptPiece& p : t.pieces)
        for (const Passage& g : item->goldPassages) passageOfGold |= p.passageId == g.id;
      QVERIFY(passageOfGold);
    }
    // Retrieved answering: passages as pieces of their own (what Block-Attention and the prefix
    // cache reuse), at most as many as One-shot's retrieve node keeps.
    const int64_t oneShotTopk = nodeTopk("oneshot", "retrieve");
    QVERIFY(oneShotTopk >= 1);
    for (const RoleExampleText& t : roles[Role::Answer]) QVERIFY(passagesIn(t) >= 1 && passagesIn(t) <= oneShotTopk);
    // HyDE writes the gold passage as prompts show it.
    for (const RoleExampleText& t : roles[Role::Hyde]) {
      auto item = reader.item(t.qaId);
      std::string gold = model::passageText(item->goldPassages.front()).text;
      gold.pop_back();  // its newline
      QCOMPARE(t.completion, gold);
    }
    // Multistep: Next says DONE or asks a question; a decomposition is a question.
    for (const RoleExampleText& t : roles[Role::Next])
      QVERIFY(t.completion == "DONE" || t.completion.back() == '?');
    for (const RoleExampleText& t : roles[Role::Decompose]) QCOMPARE(t.completion.back(), '?');
    // RECOMP's summary holds the answer and is far shorter than the passages it summarises.
    for (const RoleExampleText& t : roles[Role::Compress]) {
      auto item = reader.item(t.qaId);
      QVERIFY2(corpus::answerMatches(t.completion, item->answers), t.completion.c_str());
      QVERIFY(t.completion.size() * 2 < t.prompt.size());
    }
  }

  void twoHopQuestionsDecomposeAlongTheirPath() {
    RoleExampleOptions o;
    o.mix = {{Role::Decompose, 1}, {Role::Next, 1}, {Role::SubAnswer, 1}};
    o.twoHopShare = 1.0;
    auto s = open(o);
    QVERIFY(s);
    corpus::QaPromptReader reader = *corpus::QaPromptReader::open(corpus());
    int firstHops = 0, secondHops = 0, dones = 0, firstHopQueries = 0, factQueries = 0, fullHops = 0;
    const int64_t hopTopk[] = {nodeTopk("multistep", "retrieve"), nodeTopk("multistep", "retrieve_next")};
    QVERIFY(hopTopk[0] >= 1 && hopTopk[1] >= 1);
    for (int64_t i = 0; i < 200; ++i) {
      auto t = s->exampleText(3, 1, i);
      QVERIFY2(t.isOk(), t.status().message().c_str());
      auto item = reader.item(t->qaId);
      QCOMPARE(item->type, std::string("two_hop"));
      if (t->role == Role::Decompose) {
        // "Abort is a kind of something; what is that a kind of?" -> "What is abort a kind of?"
        QVERIFY2(t->completion.rfind("What ", 0) == 0, t->completion.c_str());
        QVERIFY(t->completion != item->question);
        ++firstHops;
      } else if (t->role == Role::Next) {
        if (t->completion == "DONE") ++dones;
        else ++secondHops;
      } else {
        QVERIFY2(t->completion.back() == '.', t->completion.c_str());
        // Retrieved as the built-in does: the first sub-question with the question (retrieve),
        // the second with the first hop's fact between them (retrieve_next).
        const std::string shown = "Sub-question: ";
        const size_t at = t->prompt.rfind(shown) + shown.size();
        const std::string subquestion = t->prompt.substr(at, t->prompt.find('\n', at) - at);
        const bool firstHopQuery = t->query == subquestion + " " + item->question;
        const bool factQuery = t->query.starts_with(subquestion + " ") && t->query.ends_with(". " + item->question);
        QVERIFY2(firstHopQuery || factQuery, t->query.c_str());
        firstHopQueries += firstHopQuery;
        factQueries += factQuery;
        // ... keeping as many passages as that node does (fewer only when the prompt is long).
        const int64_t topk = hopTopk[factQuery ? 1 : 0];
        QVERIFY2(passagesIn(*t) >= 1 && passagesIn(*t) <= topk, t->query.c_str());
        fullHops += passagesIn(*t) == topk;
      }
    }
    QVERIFY(firstHops > 0 && secondHops > 0 && dones > 0);
    QVERIFY(firstHopQueries > 0 && factQueries > 0 && fullHops > 0);
  }

  // Two-hop IRG examples retrieve with the intermediate entity, or with irgGuessShare the answer
  // or the topic (what a served first round mostly writes); other questions' examples are the
  // same draws either way.
  void irgRoundsMayRetrieveWithAGuess() {
    auto [a, b] = openPair({{Role::Irg, 1}}, [](RoleExampleOptions& o) { o.irgGuessShare = 1; });
    QVERIFY(a && b);
    corpus::QaPromptReader reader = *corpus::QaPromptReader::open(corpus());
    int twoHop = 0, answered = 0, topical = 0;
    for (int64_t i = 0; i < 200; ++i) {
      auto x = a->exampleText(4, 0, i), y = b->exampleText(4, 0, i);
      QVERIFY2(x.isOk() && y.isOk(), "an IRG example");
      QCOMPARE(y->qaId, x->qaId);
      QCOMPARE(y->completion, x->completion);
      auto item = reader.item(x->qaId);
      QVERIFY(item.isOk());
      if (item->type != "two_hop") {
        QCOMPARE(y->query, x->query);
        continue;
      }
      ++twoHop;
      const std::string withAnswer = x->completion + " " + item->question;
      QVERIFY2(x->query != withAnswer && x->query.ends_with(" " + item->question), x->query.c_str());
      QVERIFY2(y->query != x->query, y->query.c_str());
      answered += y->query == withAnswer;
      topical += y->query != withAnswer;
    }
    QVERIFY(twoHop > 0 && answered > 0 && topical > 0);
  }

  // With goldQuestions N a gold-passage prompt asks N questions over one set of passages, which
  // holds every one's gold passages; each further question is the node's template without
  // passages and trains its answer after the previous EOS. One question is the shipped draw.
  void goldPromptsMayAskSeveralQuestions() {
    auto [a, b] = openPair({{Role::AnswerGold, 1}}, [](RoleExampleOptions& o) { o.goldQuestions = 3; });
    QVERIFY(a && b);
    corpus::QaPromptReader reader = *corpus::QaPromptReader::open(corpus());
    const std::string tmpl = nodeTemplate("oneshot", "answer");
    QVERIFY(tmpl.starts_with("{docs}"));
    const int32_t eos = *m_tok->eosId();
    int asked = 0, whole = 0;
    for (int64_t i = 0; i < 40; ++i) {
      auto x = a->exampleText(8, 0, i), y = b->exampleText(8, 0, i);
      QVERIFY2(x.isOk() && y.isOk(), "a gold-passage example");
      QVERIFY(x->followUps.empty());
      QCOMPARE(y->qaId, x->qaId);
      QCOMPARE(y->completion, x->completion);
      QVERIFY(y->followUps.size() <= 2);
      std::set<int64_t> shown;
      for (const model::PromptPiece& p : y->pieces)
        if (p.origin == model::SegmentOrigin::Passage) shown.insert(p.passageId);
      for (const RoleExampleText::FollowUp& f : y->followUps) {
        auto item = reader.item(f.qaId);
        QVERIFY(item.isOk());
        QCOMPARE(item->split, std::string("train"));
        QCOMPARE(f.completion, item->answers.front());
        std::string prompt;
        for (const model::PromptPiece& p : f.pieces) {
          QVERIFY(p.origin != model::SegmentOrigin::Passage);
          prompt += p.text;
        }
        QCOMPARE(prompt, "Question: " + item->question + "\nAnswer:");
        for (const Passage& g : item->goldPassages) QVERIFY2(shown.count(g.id), "a follow-up's gold passage is shown");
        ++asked;
      }
      // Tokens: one EOS per question answered, each a full-weight completion token.
      auto ex = b->example(8, 0, i, 384);
      QVERIFY2(ex.isOk(), ex.status().message().c_str());
      int64_t eosCount = 0;
      for (size_t t = 0; t < ex->tokens.size(); ++t)
        if (ex->tokens[t] == eos) {
          QCOMPARE(ex->lossWeights[t], 1.0f);
          ++eosCount;
        }
      QVERIFY(eosCount >= 1 && eosCount <= 1 + static_cast<int64_t>(y->followUps.size()));
      whole += eosCount == 1 + static_cast<int64_t>(y->followUps.size());
      // A short sequence keeps the first question and leaves off the follow-ups that do not fit.
      auto shorter = b->example(8, 0, i, static_cast<int64_t>(ex->tokens.size()) - 1);
      if (y->followUps.empty()) continue;
      QVERIFY2(shorter.isOk(), shorter.status().message().c_str());
      QVERIFY(shorter->tokens.size() < ex->tokens.size());
      QVERIFY(std::equal(shorter->tokens.begin(), shorter->tokens.end(), ex->tokens.begin()));
    }
    QVERIFY(asked > 40 && whole > 30);
  }

  // Shuffled prompts hold the same retrieved passages in another order; the completion is the
  // same; gold-passage prompts (already at a random place) and shuffle 0 keep the order.
  void retrievedPassagesAreShuffled() {
    auto passagesOf = [](const RoleExampleText& t) {
      std::vector<int64_t> ids;
      for (const model::PromptPiece& p : t.pieces)
        if (p.origin == model::SegmentOrigin::Passage) ids.push_back(p.passageId);
      return ids;
    };
    auto [a, b] = openPair({{Role::Answer, 1}, {Role::AnswerGold, 1}}, [](RoleExampleOptions& o) { o.shufflePassages = 1; });
    QVERIFY(a && b);
    int reordered = 0;
    for (int64_t i = 0; i < 60; ++i) {
      auto x = a->exampleText(6, 0, i);
      auto y = b->exampleText(6, 0, i);
      QVERIFY2(x.isOk() && y.isOk(), "a role example");
      QCOMPARE(x->role, y->role);
      QCOMPARE(x->completion, y->completion);
      std::vector<int64_t> px = passagesOf(*x), py = passagesOf(*y);
      if (x->role == Role::AnswerGold) {
        QCOMPARE(px, py);
        continue;
      }
      reordered += px != py;
      std::sort(px.begin(), px.end());
      std::sort(py.begin(), py.end());
      QCOMPARE(px, py);
    }
    QVERIFY(reordered > 0);
  }

  void longCompletionsWeighNoMoreThanTheBudget() {
    RoleExampleOptions capped;
    capped.completionBudget = 8;
    auto plain = open(), budget = open(capped);
    QVERIFY(plain && budget);
    int longOnes = 0, shortOnes = 0;
    for (int64_t i = 0; i < 80; ++i) {
      auto x = plain->example(5, 1, i, 384);
      auto y = budget->example(5, 1, i, 384);
      QVERIFY2(x.isOk() && y.isOk(), "a role example");
      QCOMPARE(x->tokens, y->tokens);  // the budget changes weights only
      double completion = 0, weighed = 0;
      for (size_t j = 0; j < x->tokens.size(); ++j) {
        completion += x->lossWeights[j];
        weighed += y->lossWeights[j];
      }
      if (completion > 8) {
        ++longOnes;
        QVERIFY2(std::abs(weighed - 8.0) < 1e-3, qPrintable(QString("a %1-token completion weighs %2").arg(completion).arg(weighed)));
      } else {
        ++shortOnes;
        QCOMPARE(y->lossWeights, x->lossWeights);
      }
    }
    QVERIFY(longOnes > 0 && shortOnes > 0);  // HyDE's passages and the answers both drawn
  }

  void drawsArePureAndStayInTheirSplit() {
    auto a = open(), b = open();
    QVERIFY(a && b);
    (void)b->exampleText(1, 0, 0);
    for (int64_t i = 0; i < 50; ++i) {
      auto x = a->example(9, 4, i, 384);
      auto y = b->example(9, 4, i, 384);
      QVERIFY2(x.isOk(), x.status().message().c_str());
      QCOMPARE(x->tokens, y->tokens);
      QCOMPARE(x->lossWeights, y->lossWeights);
      // The completion (weight 1) ends with EOS; the prompt weighs 0 by default.
      QCOMPARE(x->tokens.back(), *m_tok->eosId());
      QCOMPARE(x->lossWeights.back(), 1.0f);
      QCOMPARE(x->lossWeights[1], 0.0f);
    }
    corpus::QaPromptReader reader = *corpus::QaPromptReader::open(corpus());
    auto train = reader.splitIds("train");
    const std::set<int64_t> trainIds(train->begin(), train->end());
    for (int64_t i = 0; i < 300; ++i) {
      auto t = a->exampleText(2, 2, i);
      QVERIFY(trainIds.count(t->qaId));
    }
  }

  void questionTypesWeighTheDraw() {
    // The fixture corpus's train split by type.
    auto db = sql::Db::open(corpus(), sql::OpenMode::ReadOnly);
    QVERIFY(db.isOk());
    std::map<int64_t, std::string> typeOf;
    {
      auto st = db->prepare("SELECT id, type FROM qa WHERE split = 'train'");
      QVERIFY(st.isOk());
      while (*st->step()) typeOf[st->columnInt64(0)] = st->columnText(1);
    }
    std::set<std::string> held;
    for (const auto& [id, type] : typeOf) held.insert(type);
    QVERIFY(held.count("definition") && held.size() >= 2);
    // Only definition questions: every answer-role draw is one.
    RoleExampleOptions only;
    only.mix = {{Role::Answer, 1}, {Role::AnswerGold, 1}};
    for (const std::string& t : held) only.questionTypes.push_back({t, t == "definition" ? 1.0 : 0.0});
    auto s = open(only);
    QVERIFY(s);
    for (int64_t i = 0; i < 100; ++i) {
      auto t = s->exampleText(3, 1, i);
      QVERIFY2(t.isOk(), t.status().message().c_str());
      QCOMPARE(typeOf.at(t->qaId), std::string("definition"));
    }
    // Weighting a type up draws it more often than the uniform draw does.
    auto [uniform, heavy] = openPair({{Role::Answer, 1}}, [](RoleExampleOptions& o) {
      o.questionTypes = {{"definition", 4}};
    });
    QVERIFY(uniform && heavy);
    int plain = 0, weighted = 0;
    for (int64_t i = 0; i < 400; ++i) {
      plain += typeOf.at(uniform->exampleText(4, 0, i)->qaId) == "definition";
      weighted += typeOf.at(heavy->exampleText(4, 0, i)->qaId) == "definition";
    }
    QVERIFY2(weighted > plain + 40, qPrintable(QString("%1 vs %2").arg(weighted).arg(plain)));
    // A type the split does not hold, and weights that leave nothing, are refused by name.
    RoleExampleOptions typo;
    typo.questionTypes = {{"defintion", 2}};
    auto bad = RoleExampleSource::open(corpus(), *m_tok, typo);
    QVERIFY(!bad.isOk());
    QVERIFY(QString::fromStdString(bad.status().message()).contains("defintion"));
    QVERIFY(QString::fromStdString(bad.status().message()).contains("definition"));  // the types held
    RoleExampleOptions none;
    for (const std::string& t : held) none.questionTypes.push_back({t, 0.0});
    QVERIFY(!RoleExampleSource::open(corpus(), *m_tok, none).isOk());
    auto parsed = parseQuestionTypes("definition:3,foldoc");
    QVERIFY(parsed.isOk());
    QCOMPARE(parsed->size(), size_t{2});
    QCOMPARE(parsed->at(1).weight, 1.0);
    QVERIFY(!parseQuestionTypes("definition:-1").isOk());
    QVERIFY(!parseQuestionTypes("definition:many").isOk());
  }

  void longPromptsDropPassagesThenFail() {
    RoleExampleOptions o;
    o.mix = {{Role::Answer, 1}};
    auto s = open(o);
    QVERIFY(s);
    auto full = s->exampleText(5, 0, 0);
    auto trimmed = s->exampleText(5, 0, 0, 3);
    QVERIFY(full.isOk() && trimmed.isOk());
    QVERIFY(trimmed->prompt.size() < full->prompt.size());
    auto fits = s->example(5, 0, 0, 4096);
    QVERIFY(fits.isOk());
    auto shorter = s->example(5, 0, 0, static_cast<int64_t>(fits->tokens.size()) - 1);
    QVERIFY2(shorter.isOk(), shorter.status().message().c_str());  // fewer passages
    QVERIFY(shorter->tokens.size() < fits->tokens.size());
    auto none = s->example(5, 0, 0, 8);
    QVERIFY(!none.isOk());
    QVERIFY(QString::fromStdString(none.status().message()).contains("--seq-len"));
    // A draw that does not fit even with one passage is drawn again: under a limit one token short
    // of its one-passage form, some draw of the first 50 is replaced by a shorter one.
    bool redrawn = false;
    for (int64_t i = 0; i < 50 && !redrawn; ++i) {
      auto t = s->exampleText(5, 0, i, 5);
      QVERIFY2(t.isOk(), t.status().message().c_str());
      QCOMPARE(passagesIn(*t), int64_t{1});
      const int64_t onePassage = static_cast<int64_t>(model::tokenizePieces(*m_tok, t->pieces).tokens.size() +
                                                      m_tok->encode(" " + t->completion, {.parseSpecial = false}).size() + 1);
      auto again = s->example(5, 0, i, onePassage - 1);
      if (!again) continue;  // every redraw was as long
      QVERIFY(static_cast<int64_t>(again->tokens.size()) < onePassage);
      redrawn = true;
    }
    QVERIFY(redrawn);
  }

  void badMixesAreRefused() {
    auto bad = parseRoleMix("answer:2,summarise:1");
    QVERIFY(!bad.isOk());
    QVERIFY(QString::fromStdString(bad.status().message()).contains("multistep_answer"));  // names the roles
    QVERIFY(!parseRoleMix("answer:x").isOk());
    QVERIFY(!parseRoleMix("answer:-1").isOk());
    QVERIFY(!parseRoleMix("answer:0").isOk());
    auto ok = parseRoleMix("answer:3,hyde");
    QVERIFY(ok.isOk());
    QCOMPARE(ok->size(), size_t{2});
    QCOMPARE(ok->at(1).weight, 1.0);
    QCOMPARE(factSentence("hypernym", "dog", "canine", "What is dog a kind of?"), std::string("Dog is a kind of canine."));
    QCOMPARE(factSentence("domain_topic", "x", "y", "Which field is x used in?"),
             std::string("The answer to \"Which field is x used in?\" is y."));
  }
};

QTEST_GUILESS_MAIN(TestRoleExamples)
#include "test_role_examples.moc"
