// Training examples for every role the built-in workflows ask of the model (`ragraph train lm
// --data roles`, issue 21): each prompt is built from the built-in workflow's own node template
// (resources/workflows/*.json, through model/prompt.h's promptPieces, the serving path), over a
// question of the split and passages a retriever really returns (BM25 over the corpus's FTS5
// index), and its completion is what a good run of that node would write:
//
//   role              node (workflow)               completion
//   answer_gold       answer (oneshot)              the answer, from its gold passages among random ones
//                                                   (with `goldQuestions` > 1, further questions over the
//                                                   same passages, each after the previous answer)
//   answer            answer (oneshot, irg round 1) the answer, from the question's top-5 BM25 passages;
//                                                   `noGoldShare` of them with the gold ones left out
//   irg               generate (irg, later rounds)  the answer, from the top-5 for the previous round's
//                                                   output (two-hop: the intermediate entity, or with
//                                                   `irgGuessShare` the answer or the topic; else the
//                                                   answer or the topic)
//   hyde              hypothesis (hyde)             the gold passage as prompts show it
//   decompose         decompose (multistep)         two-hop: the first hop's question (from the KG path);
//                                                   else the question itself
//   subanswer         subanswer (multistep)         the sub-question's fact in one sentence, from the
//                                                   sub-question's top-2 passages (the second hop's
//                                                   retrieved with the first hop's fact, as
//                                                   retrieve_next does)
//   next              next (multistep)              two-hop after the first hop: the second hop's
//                                                   question; otherwise DONE
//   multistep_answer  answer (multistep)            the answer, from the last hop's passages and fact
//   compress          compress (recomp-abstractive) the sentence of the gold passage that holds the
//                                                   answer, after the topic's name (extractive)
//   recomp_answer     answer (recomp)               the answer, from that summary
//
// Retrieved passages keep the retriever's order unless `shufflePassages` shuffles a share of them.
// Everything is drawn from one split (train by default): no question, answer or KG path of
// another split is ever a target. Each example is a pure function of (seed, step, index).
// Completions are " <text>" + EOS, weighted 1; prompt tokens weigh `promptLossWeight`. A prompt
// that does not fit drops passages from its end (never below one), then is drawn again, before it
// fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/qa_prompt.h"
#include "core/random.h"
#include "model/prompt.h"
#include "model/tokenizer.h"
#include "model/trainer.h"
#include "retrieval/bm25_index.h"

namespace rag::knowledge {

enum class Role : uint8_t {
  AnswerGold, Answer, Irg, Hyde, Decompose, SubAnswer, Next, MultistepAnswer, Compress, RecompAnswer
};
inline constexpr Role kAllRoles[] = {Role::AnswerGold, Role::Answer,    Role::Irg,  Role::Hyde,
                                     Role::Decompose,  Role::SubAnswer, Role::Next, Role::MultistepAnswer,
                                     Role::Compress,   Role::RecompAnswer};
std::string_view roleName(Role r);

struct RoleWeight {
  Role role;
  double weight;
};
// "answer_gold:2,answer:3,..." (roles not named get 0); InvalidArgument naming the roles.
Result<std::vector<RoleWeight>> parseRoleMix(std::string_view text);
// Answering (the role every workflow ends with) weighs most; the other roles share the rest.
std::vector<RoleWeight> defaultRoleMix();

// How often each question type (the qa table's `type`: single_hop, two_hop, definition, foldoc)
// is drawn, relative to its share of the split: "definition:3" draws definition questions three
// times as often as the split holds them, types not named weigh 1 and 0 leaves a type out.
struct TypeWeight {
  std::string type;
  double weight;
};
// "definition:3,foldoc:0" (a type without a weight weighs 1); InvalidArgument for a weight that
// is not a number or is negative. Whether the types exist is the split's to say (open()).
Result<std::vector<TypeWeight>> parseQuestionTypes(std::string_view text);

struct RoleExampleOptions {
  std::string split = "train";
  std::vector<RoleWeight> mix = defaultRoleMix();
  double noGoldShare = 0.15;     // answer/irg prompts whose passages leave the gold ones out
  double twoHopShare = 0.5;      // multistep roles: the share of two-hop questions
  // The question draw of every example but the multistep roles' two-hop share. Empty (the shipped
  // models' setting): every question of the split is equally likely.
  std::vector<TypeWeight> questionTypes;
  // The share of retrieved-passage prompts (every role but answer_gold, whose gold passage already
  // sits at a random place) whose passages are shuffled. BM25 puts the passage that answers first
  // so often that a model trained on its order learns to read the first passage best:
  // rag-llama-roles answers 22 of 30 definition questions with the gold passage first, 14 of 120
  // with it elsewhere. Shuffling half of them (0.5) raised gold-passage reading 0.543 -> 0.565 but
  // cost One-shot 0.570 -> 0.478 over BM25's ranking, where the prior is right (README, issue 21),
  // so 0, the shipped model's setting, is the default. 0 draws nothing.
  double shufflePassages = 0;
  // The share of two-hop IRG examples whose previous round wrote the final answer or the topic
  // (half each) rather than the entity between them. Served, IRG's first round mostly writes a
  // guess at the final answer, and retrieving with it puts that answer's own passage, one hop too
  // far ("member of: Charadrii" for Phalaropidae), among the next round's passages; examples that
  // only ever retrieved with the intermediate entity never show it. 0 (the shipped model's
  // setting) draws nothing.
  double irgGuessShare = 0;
  float promptLossWeight = 0.0f;
  // Completion tokens an example's loss may weigh at most: a longer completion (HyDE's passage,
  // RECOMP's summary) has its tokens' weights scaled so they sum to this, so the few-token
  // answers every workflow ends with are not outweighed by the long roles. 0: every completion
  // token weighs 1.
  int32_t completionBudget = 0;
  // answer_gold: questions asked over one set of passages, as `train lm --data qa --questions N`
  // does (rag-llama's training): the passages hold the gold ones of every question, and each
  // further question follows the previous answer's EOS as "Question: ...\nAnswer:" and its answer.
  // With several questions over one context a passage's place cannot tell which question it
  // answers; its names must. 1 (the shipped role models' setting) asks one.
  int32_t goldQuestions = 1;
};

// One example as text, before tokenization (what --show-examples prints, what tests read).
struct RoleExampleText {
  Role role = Role::Answer;
  int64_t qaId = 0;
  std::string prompt;      // the node's template rendered
  std::string completion;  // without the leading space and EOS
  std::vector<model::PromptPiece> pieces;  // the prompt as serving tokenizes it
  std::string query;       // the query its passages were retrieved with; empty when none were
  // answer_gold with goldQuestions > 1: the further questions, in order, each trained after the
  // previous completion's EOS (example() leaves off those that do not fit).
  struct FollowUp {
    int64_t qaId = 0;
    std::vector<model::PromptPiece> pieces;  // the node's template without passages
    std::string completion;
  };
  std::vector<FollowUp> followUps;
};

class RoleExampleSource final : public model::ExampleSource {
public:
  // Errors: the corpus's (missing, not a corpus), a split without questions, a mix with no
  // positive weight, a question type the split does not hold or types that leave no question, a built-in workflow without the node a role needs, BM25's (no FTS5).
  static Result<std::unique_ptr<RoleExampleSource>> open(const std::filesystem::path& corpus,
                                                         const model::Tokenizer& tokenizer,
                                                         const RoleExampleOptions& options);
  ~RoleExampleSource() override;

  // A draw whose prompt does not fit maxTokens even with one passage is drawn again under a
  // seed derived from `seed` (at most kRedraws times) before it fails.
  Result<model::TrainingExample> example(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) override;
  static constexpr uint64_t kRedraws = 4;
  // The same draw as example(seed, step, index, ...) as text; `dropPassages` leaves that many
  // passages off the end of the passage variable (what example() does when a prompt is too long).
  Result<RoleExampleText> exampleText(uint64_t seed, int64_t step, int64_t index, size_t dropPassages = 0);

  size_t items() const;

private:
  static constexpr uint64_t kRedrawSalt = 0x7265647261770000;  // "redraw"
  // The draw (seed, step, index) tokenized, dropping passages until it fits; nullopt when even one
  // passage does not.
  Result<std::optional<model::TrainingExample>> fitted(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens);
  struct Impl;
  RoleExampleSource(std::unique_ptr<Impl> impl, model::Tokenizer tokenizer);
  std::unique_ptr<Impl> m_impl;
  model::Tokenizer m_tokenizer;
};

// The sentence a multistep sub-answer states: "Dog is a kind of canine." for the relations the
// two-hop questions walk, "The answer to "<question>" is <answer>." otherwise.
std::string factSentence(std::string_view relation, std::string_view topic, std::string_view answer,
                         std::string_view question);

}  // namespace rag::knowledge
