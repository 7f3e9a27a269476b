#include "knowledge/role_examples.h"

#include <algorithm>
#include <map>
#include <span>

#include "core/json.h"
#include "corpus/qa_builder.h"
#include "model/prompt.h"
#include "retrieval/extractive_summary.h"
#include "rag/workflow.h"

namespace rag::knowledge {

std::string_view roleName(Role r) {
  switch (r) {
    case Role::AnswerGold: return "answer_gold";
    case Role::Answer: return "answer";
    case Role::Irg: return "irg";
    case Role::Hyde: return "hyde";
    case Role::Decompose: return "decompose";
    case Role::SubAnswer: return "subanswer";
    case Role::Next: return "next";
    case Role::MultistepAnswer: return "multistep_answer";
    case Role::Compress: return "compress";
    case Role::RecompAnswer: return "recomp_answer";
  }
  return "answer";
}

std::vector<RoleWeight> defaultRoleMix() {
  return {{Role::AnswerGold, 2}, {Role::Answer, 3}, {Role::Irg, 1},       {Role::Hyde, 1},
          {Role::Decompose, 1},  {Role::SubAnswer, 1}, {Role::Next, 1},   {Role::MultistepAnswer, 1},
          {Role::Compress, 1},   {Role::RecompAnswer, 1}};
}

namespace {

// "name:weight,name,..." (a name without a weight weighs 1) for the option `flag`; InvalidArgument
// for an empty name, a weight that is not a number, or a negative one.
Result<std::vector<std::pair<std::string, double>>> parseWeightList(std::string_view text, std::string_view flag) {
  std::vector<std::pair<std::string, double>> list;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item = text.substr(at, comma - at);
    at = comma + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    const std::string name(item.substr(0, colon));
    if (name.empty()) return Status::invalidArgument("--" + std::string(flag) + ": '" + std::string(item) + "' names nothing");
    double w = 1;
    if (colon != std::string_view::npos) {
      try {
        size_t used = 0;
        const std::string number(item.substr(colon + 1));
        w = std::stod(number, &used);
        if (used != number.size()) throw std::invalid_argument(number);
      } catch (const std::exception&) {
        return Status::invalidArgument("--" + std::string(flag) + ": the weight of '" + name + "' is not a number");
      }
      if (w < 0) return Status::invalidArgument("--" + std::string(flag) + ": the weight of '" + name + "' is negative");
    }
    list.emplace_back(name, w);
  }
  return list;
}

}  // namespace

Result<std::vector<RoleWeight>> parseRoleMix(std::string_view text) {
  std::string names;
  for (Role r : kAllRoles) names += (names.empty() ? "" : ", ") + std::string(roleName(r));
  RAG_ASSIGN_OR_RETURN(auto list, parseWeightList(text, "roles"));
  std::vector<RoleWeight> mix;
  double total = 0;
  for (const auto& [name, w] : list) {
    auto role = std::find_if(std::begin(kAllRoles), std::end(kAllRoles), [&](Role r) { return roleName(r) == name; });
    if (role == std::end(kAllRoles))
      return Status::invalidArgument("--roles: unknown role '" + name + "'; the roles are " + names);
    mix.push_back({*role, w});
    total += w;
  }
  if (total <= 0)
    return Status::invalidArgument("--roles gives no role a positive weight; e.g. answer:3,hyde:1 (roles: " + names +
                                   ")");
  return mix;
}

Result<std::vector<TypeWeight>> parseQuestionTypes(std::string_view text) {
  RAG_ASSIGN_OR_RETURN(auto list, parseWeightList(text, "question-types"));
  std::vector<TypeWeight> types;
  for (auto& [name, w] : list) types.push_back({std::move(name), w});
  return types;
}

std::string factSentence(std::string_view relation, std::string_view topic, std::string_view answer,
                         std::string_view question) {
  static const std::map<std::string_view, std::string_view> kLinks = {
      {"hypernym", " is a kind of "},        {"instance_hypernym", " is an instance of "},
      {"part_holonym", " is a part of "},    {"member_holonym", " is a member of "},
      {"substance_holonym", " is a substance of "}};
  std::string s;
  if (auto link = kLinks.find(relation); link != kLinks.end() && !topic.empty()) {
    s.append(topic).append(link->second).append(answer).append(".");
    s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  } else if (relation == "antonym" && !topic.empty()) {
    s.append("The opposite of ").append(topic).append(" is ").append(answer).append(".");
  } else {
    s.append("The answer to \"").append(question).append("\" is ").append(answer).append(".");
  }
  return s;
}

namespace {

// A question as the roles see it: the QA item, the names on its path, and each hop's question.
struct RoleItem {
  QaItem qa;
  std::string topic;          // the name the question uses
  std::string intermediate;   // two-hop: the entity between topic and answer
  std::vector<std::string> relations;  // along the KG path
  std::string firstHop, secondHop;     // two-hop: the single-hop question of each hop
};

}  // namespace

struct RoleExampleSource::Impl {
  Impl(corpus::QaPromptReader r, retrieval::Bm25Index b, const RoleExampleOptions& o)
      : reader(std::move(r)), bm25(std::move(b)), options(o) {}

  corpus::QaPromptReader reader;
  retrieval::Bm25Index bm25;
  RoleExampleOptions options;
  std::vector<int64_t> ids;        // every question of the split
  std::vector<int64_t> twoHopIds;  // the split's two-hop questions
  // With options.questionTypes: the split's questions by type, and a draw over the types weighted
  // by count x weight.
  std::vector<std::vector<int64_t>> idsOfType;
  DiscreteSampler types;
  DiscreteSampler roles;
  std::vector<Role> roleOf;        // sampler index -> role
  std::map<Role, std::string> templates;
  // What the retrievals behind the prompts search with and how many passages they keep: the
  // built-ins' own retrieval nodes.
  struct Search {
    std::string query;
    int32_t topk = 0;
  };
  Search oneShot;        // One-shot's retrieve node (the answer roles)
  Search irg;            // IRG's later rounds (its retrieve_again node)
  Search multistep;      // Multistep's first sub-question (its retrieve node)
  Search multistepNext;  // ... and each later one, after a fact was learnt (its retrieve_next node)
  Search compress;       // the abstractive RECOMP's retrieve node

  Result<RoleItem> item(int64_t qaId);
  int64_t drawQuestion(Rng& rng) {
    if (idsOfType.empty()) return ids[rng.below(ids.size())];
    const std::vector<int64_t>& of = idsOfType[types.sample(rng)];
    return of[rng.below(of.size())];
  }
  Result<std::vector<model::PassageText>> retrieve(std::string_view query, int32_t k, const RoleItem& item,
                                                   bool dropGold);
  Result<std::string> entityName(int64_t id);
};

Result<std::string> RoleExampleSource::Impl::entityName(int64_t id) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, reader.db().prepare("SELECT name FROM entities WHERE id = ?"));
  st.bind(1, id);
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return Status::corrupt("the corpus has no entity " + std::to_string(id) + "; rebuild it with `ragraph corpus build`");
  return st.columnText(0);
}

Result<RoleItem> RoleExampleSource::Impl::item(int64_t qaId) {
  RoleItem r;
  RAG_ASSIGN_OR_RETURN(r.qa, reader.item(qaId));
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, reader.db().prepare("SELECT topic_name FROM qa_topic_names WHERE qa_id = ?"));
    st.bind(1, qaId);
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (row) r.topic = st.columnText(0);
  }
  RAG_ASSIGN_OR_RETURN(JsonValue path, parseJson(r.qa.kgPath));
  std::vector<int64_t> entities;
  if (path.isArray())
    for (const JsonValue& v : path.asArray()) {
      if (v.isString()) r.relations.push_back(v.asString());
      else if (auto id = v.asInt64()) entities.push_back(*id);
    }
  if (r.qa.type == "two_hop" && entities.size() >= 3 && r.relations.size() >= 2) {
    RAG_ASSIGN_OR_RETURN(r.intermediate, entityName(entities[1]));
    r.firstHop = corpus::singleHopQuestion(r.relations[0], 'n', r.topic);
    r.secondHop = corpus::singleHopQuestion(r.relations[1], 'n', r.intermediate);
  }
  return r;
}

Result<std::vector<model::PassageText>> RoleExampleSource::Impl::retrieve(std::string_view query, int32_t k,
                                                                           const RoleItem& item, bool dropGold) {
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, bm25.search(query, k + (dropGold ? 4 : 0)));
  std::vector<model::PassageText> out;
  for (int64_t id : ids) {
    if (static_cast<int32_t>(out.size()) >= k) break;
    if (dropGold && std::any_of(item.qa.goldPassages.begin(), item.qa.goldPassages.end(),
                                [&](const Passage& g) { return g.id == id; }))
      continue;
    RAG_ASSIGN_OR_RETURN(Passage p, reader.passage(id));
    out.push_back(model::passageText(p));
  }
  return out;
}

RoleExampleSource::RoleExampleSource(std::unique_ptr<Impl> impl, model::Tokenizer tokenizer)
    : m_impl(std::move(impl)), m_tokenizer(std::move(tokenizer)) {}
RoleExampleSource::~RoleExampleSource() = default;
size_t RoleExampleSource::items() const { return m_impl->ids.size(); }

Result<std::unique_ptr<RoleExampleSource>> RoleExampleSource::open(const std::filesystem::path& corpus,
                                                                   const model::Tokenizer& tokenizer,
                                                                   const RoleExampleOptions& options) {
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
  RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index bm25, retrieval::Bm25Index::openOrBuild(corpus));
  auto impl = std::make_unique<Impl>(std::move(reader), std::move(bm25), options);
  RAG_ASSIGN_OR_RETURN(impl->ids, impl->reader.splitIds(options.split));
  std::map<std::string, std::vector<int64_t>> idsByType;
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, impl->reader.db().prepare("SELECT type, id FROM qa WHERE split = ? ORDER BY id"));
    st.bind(1, options.split);
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      idsByType[st.columnText(0)].push_back(st.columnInt64(1));
    }
  }
  if (auto twoHop = idsByType.find("two_hop"); twoHop != idsByType.end()) impl->twoHopIds = twoHop->second;
  if (!options.questionTypes.empty()) {
    std::string held;
    for (const auto& [type, of] : idsByType) held += (held.empty() ? "" : ", ") + type;
    for (const TypeWeight& t : options.questionTypes)
      if (!idsByType.contains(t.type))
        return Status::invalidArgument("--question-types: the " + options.split + " split has no '" + t.type +
                                       "' questions; its types are " + held);
    std::vector<double> typeWeights;
    for (auto& [type, of] : idsByType) {
      double w = 1;
      for (const TypeWeight& t : options.questionTypes)
        if (t.type == type) w = t.weight;
      if (w <= 0) continue;
      typeWeights.push_back(w * static_cast<double>(of.size()));
      impl->idsOfType.push_back(std::move(of));
    }
    if (typeWeights.empty())
      return Status::invalidArgument("--question-types leaves no question type (every weight is 0); the " +
                                     options.split + " split's types are " + held);
    impl->types = DiscreteSampler(typeWeights);
  }
  std::vector<double> weights;
  for (const RoleWeight& w : options.mix)
    if (w.weight > 0) {
      weights.push_back(w.weight);
      impl->roleOf.push_back(w.role);
    }
  if (weights.empty()) return Status::invalidArgument("the role mix gives no role a positive weight");
  impl->roles = DiscreteSampler(weights);

  // Each role's prompt is its built-in node's template.
  struct Source {
    Role role;
    std::string_view file;  // a compiled-in workflow file (builtinWorkflowFile)
    std::string_view node;
  };
  // The compress role is the abstractive RECOMP's (the built-in compresses extractively, without
  // the model); the others are the built-ins' nodes.
  const Source sources[] = {{Role::AnswerGold, workflowName(Workflow::OneShot), "answer"},
                            {Role::Answer, workflowName(Workflow::OneShot), "answer"},
                            {Role::Irg, workflowName(Workflow::Irg), "generate"},
                            {Role::Hyde, workflowName(Workflow::Hyde), "hypothesis"},
                            {Role::Decompose, workflowName(Workflow::Multistep), "decompose"},
                            {Role::SubAnswer, workflowName(Workflow::Multistep), "subanswer"},
                            {Role::Next, workflowName(Workflow::Multistep), "next"},
                            {Role::MultistepAnswer, workflowName(Workflow::Multistep), "answer"},
                            {Role::Compress, kRecompAbstractive, "compress"},
                            {Role::RecompAnswer, workflowName(Workflow::Recomp), "answer"}};
  auto builtinNode = [](std::string_view file, std::string_view id, NodeKind kind) -> Result<WorkflowNode> {
    RAG_ASSIGN_OR_RETURN(WorkflowGraph g, builtinWorkflowFile(file));
    const WorkflowNode* n = g.findNode(id);
    if (!n || n->kind != kind)
      return Status::internal("the compiled-in " + std::string(file) + " workflow has no " +
                              std::string(nodeKindName(kind)) + " node '" + std::string(id) + "'");
    return *n;
  };
  for (const Source& s : sources) {
    Result<WorkflowNode> n = builtinNode(s.file, s.node, NodeKind::Generation);
    if (!n) return n.status().withContext("the " + std::string(roleName(s.role)) + " role");
    impl->templates[s.role] = n->promptTemplate;
  }
  // ... and the retrievals behind them search with the built-in's own queries.
  auto searchOf = [&](std::string_view file, std::string_view id) -> Result<Impl::Search> {
    RAG_ASSIGN_OR_RETURN(WorkflowNode n, builtinNode(file, id, NodeKind::Retrieval));
    return Impl::Search{n.query, static_cast<int32_t>(n.topk)};
  };
  RAG_ASSIGN_OR_RETURN(impl->oneShot, searchOf(workflowName(Workflow::OneShot), "retrieve"));
  RAG_ASSIGN_OR_RETURN(impl->irg, searchOf(workflowName(Workflow::Irg), "retrieve_again"));
  RAG_ASSIGN_OR_RETURN(impl->multistep, searchOf(workflowName(Workflow::Multistep), "retrieve"));
  RAG_ASSIGN_OR_RETURN(impl->multistepNext, searchOf(workflowName(Workflow::Multistep), "retrieve_next"));
  RAG_ASSIGN_OR_RETURN(impl->compress, searchOf(kRecompAbstractive, "retrieve"));
  return std::unique_ptr<RoleExampleSource>(new RoleExampleSource(std::move(impl), tokenizer));
}

Result<RoleExampleText> RoleExampleSource::exampleText(uint64_t seed, int64_t step, int64_t index, size_t dropPassages) {
  Impl& m = *m_impl;
  Rng rng(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(index)));
  const Role role = m.roleOf[m.roles.sample(rng)];
  const bool multistepRole =
      role == Role::Decompose || role == Role::SubAnswer || role == Role::Next || role == Role::MultistepAnswer;
  const bool twoHop = multistepRole && !m.twoHopIds.empty() && rng.uniform01() < m.options.twoHopShare;
  const int64_t qaId = twoHop ? m.twoHopIds[rng.below(m.twoHopIds.size())] : m.drawQuestion(rng);
  RAG_ASSIGN_OR_RETURN(RoleItem it, m.item(qaId));
  const bool hops = !it.firstHop.empty() && !it.secondHop.empty();
  const std::string& answer = it.qa.answers.empty() ? std::string() : it.qa.answers.front();
  if (answer.empty()) return Status::corrupt("question " + std::to_string(qaId) + " has no answer");

  Variables vars{{"question", it.qa.question}};
  std::vector<model::PassageText> docs;
  std::string docsVar = "docs";
  std::string completion;
  std::vector<QaItem> followUpItems;  // answer_gold's further questions over the same passages
  const bool dropGold = rng.uniform01() < m.options.noGoldShare;
  // The multistep hop this example stands at: a two-hop question's first or second hop, or the
  // question itself as its only hop.
  const bool secondHop = hops && rng.uniform01() < 0.5;
  const std::string subquestion = hops ? (secondHop ? it.secondHop : it.firstHop) : it.qa.question;
  const std::string firstFact = hops ? factSentence(it.relations[0], it.topic, it.intermediate, it.firstHop) : "";
  const std::string fact = hops ? (secondHop ? factSentence(it.relations[1], it.intermediate, answer, it.secondHop) : firstFact)
                                : factSentence(it.qa.relation, it.topic, answer, it.qa.question);
  std::string retrievalQuery;  // what the prompt's passages were retrieved with, if any
  auto search = [&](const Impl::Search& node, const Variables& q, bool withoutGold) {
    retrievalQuery = queryText(node.query, q);
    return m.retrieve(retrievalQuery, node.topk, it, withoutGold);
  };
  // The passages Multistep retrieves at this hop: the first sub-question's with the question (its
  // retrieve node), the second's with the first hop's fact too (retrieve_next).
  auto hopPassages = [&]() {
    Variables q{{std::string(kQuestionVar), it.qa.question}, {"subquestion", subquestion}};
    if (secondHop) q["fact"] = firstFact;
    return search(secondHop ? m.multistepNext : m.multistep, q, false);
  };

  switch (role) {
    case Role::AnswerGold: {
      // One context for every question asked over it: the first item with the gold passages of
      // all of them (corpus::QaPromptReader puts them among random ones, in a random order).
      QaItem all = it.qa;
      for (int32_t q = 1; q < m.options.goldQuestions; ++q) {
        RAG_ASSIGN_OR_RETURN(QaItem more, m.reader.item(m.ids[rng.below(m.ids.size())]));
        if (more.answers.empty() || more.answers.front().empty()) continue;
        corpus::addGoldPassages(all, more);
        followUpItems.push_back(std::move(more));
      }
      corpus::QaPromptOptions o;
      RAG_ASSIGN_OR_RETURN(std::vector<Passage> ctx, m.reader.contextPassages(all, o, rng.below(uint64_t{1} << 62)));
      for (const Passage& p : ctx) docs.push_back(model::passageText(p));
      completion = answer;
      break;
    }
    case Role::Answer: {
      RAG_ASSIGN_OR_RETURN(docs, search(m.oneShot, vars, dropGold));
      completion = answer;
      break;
    }
    case Role::Irg: {
      // The previous round's output, retrieved with as IRG does (with the question: Iter-RetGen).
      const bool guessed = hops && m.options.irgGuessShare > 0 && rng.uniform01() < m.options.irgGuessShare;
      std::string previous = hops && !guessed ? it.intermediate : (rng.uniform01() < 0.5 ? answer : it.topic);
      const Variables round = {{std::string(kQuestionVar), it.qa.question}, {"answer", previous}};
      RAG_ASSIGN_OR_RETURN(docs, search(m.irg, round, dropGold));
      completion = answer;
      break;
    }
    case Role::Hyde: {
      if (it.qa.goldPassages.empty()) return Status::corrupt("question " + std::to_string(qaId) + " has no gold passage");
      std::string text = model::passageText(it.qa.goldPassages.front()).text;
      while (!text.empty() && text.back() == '\n') text.pop_back();
      completion = text;
      break;
    }
    case Role::Decompose: completion = hops ? it.firstHop : it.qa.question; break;
    case Role::SubAnswer: {
      vars["subquestion"] = subquestion;
      RAG_ASSIGN_OR_RETURN(docs, hopPassages());
      completion = fact;
      break;
    }
    case Role::Next: {
      vars["subquestion"] = subquestion;
      vars["fact"] = fact;
      completion = hops && !secondHop ? it.secondHop : "DONE";
      break;
    }
    case Role::MultistepAnswer: {
      vars["fact"] = fact;
      vars["subquestion"] = subquestion;
      RAG_ASSIGN_OR_RETURN(docs, hopPassages());
      completion = answer;
      break;
    }
    case Role::Compress:
    case Role::RecompAnswer: {
      // The gold passage holding the answer (the last one in reasoning order that does), its
      // last sentence holding it (a relation clause such as "part of: Italy" rather than a gloss
      // that happens to name it), after the passage's names; a two-hop question's summary first
      // states its first hop.
      std::string summary;
      for (auto g = it.qa.goldPassages.rbegin(); g != it.qa.goldPassages.rend() && summary.empty(); ++g) {
        const std::string text = model::passageText(*g).text;
        const std::vector<std::string> all = retrieval::passageSentences(text);
        for (auto s = all.rbegin(); s != all.rend(); ++s)
          if (corpus::answerMatches(*s, it.qa.answers)) {
            summary = retrieval::standaloneSentence(retrieval::passageNames(text), *s);
            break;
          }
      }
      if (summary.empty()) summary = fact;
      else if (hops) summary = firstFact + " " + summary;
      if (summary.back() != '.') summary += '.';
      if (role == Role::Compress) {
        RAG_ASSIGN_OR_RETURN(docs, search(m.compress, vars, false));
        completion = summary;
      } else {
        vars["summary"] = summary;
        completion = answer;
      }
      break;
    }
  }
  if (role != Role::AnswerGold && docs.size() > 1 && m.options.shufflePassages > 0 &&
      rng.uniform01() < m.options.shufflePassages)
    rng.shuffle(docs);
  docs.resize(docs.size() - std::min(dropPassages, docs.size() > 0 ? docs.size() - 1 : 0));
  std::string joined;
  for (const model::PassageText& p : docs) joined += p.text;
  vars[docsVar] = joined;
  model::PassageVariables passages;
  if (!docs.empty()) passages[docsVar] = docs;

  RoleExampleText out;
  out.role = role;
  out.qaId = qaId;
  out.completion = completion;
  out.query = retrievalQuery;
  RAG_ASSIGN_OR_RETURN(out.pieces, model::promptPieces(m.templates.at(role), vars, passages));
  for (const model::PromptPiece& p : out.pieces) out.prompt += p.text;
  for (const QaItem& q : followUpItems) {
    RoleExampleText::FollowUp f{.qaId = q.id, .pieces = {}, .completion = q.answers.front()};
    RAG_ASSIGN_OR_RETURN(f.pieces, model::promptPieces(m.templates.at(role), {{"question", q.question}, {docsVar, ""}}, {}));
    out.followUps.push_back(std::move(f));
  }
  return out;
}

Result<model::TrainingExample> RoleExampleSource::example(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) {
  // A draw that does not fit even with one passage (a ~110-token FOLDOC or WordNet gloss as the
  // question beside a long passage) is drawn again under derived seeds; every draw that fits the
  // first time is what it always was.
  for (uint64_t attempt = 0; attempt <= kRedraws; ++attempt) {
    const uint64_t drawSeed = attempt == 0 ? seed : deriveSeed(seed, kRedrawSalt + attempt);
    RAG_ASSIGN_OR_RETURN(std::optional<model::TrainingExample> ex, fitted(drawSeed, step, index, maxTokens));
    if (ex) return std::move(*ex);
  }
  return Status::invalidArgument("a role example does not fit " + std::to_string(maxTokens) + " tokens even with one passage (" +
                                 std::to_string(kRedraws + 1) + " draws); raise --seq-len (384 fits every role)");
}

Result<std::optional<model::TrainingExample>> RoleExampleSource::fitted(uint64_t seed, int64_t step, int64_t index,
                                                                        int64_t maxTokens) {
  for (size_t drop = 0; drop <= 5; ++drop) {
    RAG_ASSIGN_OR_RETURN(RoleExampleText t, exampleText(seed, step, index, drop));
    const RoleExampleOptions& o = m_impl->options;
    model::TrainingExample ex;
    // Appends a prompt (weighing promptLossWeight) and its completion with EOS (weighing 1, or
    // the budget spread over it); false, appending nothing, when they would pass maxTokens.
    auto append = [&](std::span<const model::PromptPiece> pieces, const std::string& text) {
      const std::vector<int32_t> prompt = model::tokenizePieces(m_tokenizer, pieces).tokens;
      std::vector<int32_t> completion = m_tokenizer.encode(" " + text, {.parseSpecial = false});
      if (auto eos = m_tokenizer.eosId()) completion.push_back(*eos);
      if (static_cast<int64_t>(ex.tokens.size() + prompt.size() + completion.size()) > maxTokens) return false;
      const size_t budget = static_cast<size_t>(std::max(o.completionBudget, 0));
      const float weight = budget == 0 || completion.size() <= budget
                               ? 1.0f
                               : static_cast<float>(budget) / static_cast<float>(completion.size());
      ex.tokens.insert(ex.tokens.end(), prompt.begin(), prompt.end());
      ex.lossWeights.insert(ex.lossWeights.end(), prompt.size(), o.promptLossWeight);
      ex.tokens.insert(ex.tokens.end(), completion.begin(), completion.end());
      ex.lossWeights.insert(ex.lossWeights.end(), completion.size(), weight);
      return true;
    };
    if (!append(t.pieces, t.completion)) continue;
    for (const RoleExampleText::FollowUp& f : t.followUps)
      if (!append(f.pieces, f.completion)) break;  // the questions that fit, in order
    return std::optional<model::TrainingExample>(std::move(ex));
  }
  return std::optional<model::TrainingExample>();
}

}  // namespace rag::knowledge
