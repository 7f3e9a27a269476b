// QA sets generated from the corpus's knowledge graph, split train/dev/test without leaks.
//
// Question types:
//   single_hop  one WordNet relation read off the topic's passage ("What is X a kind of?",
//               "What is X a part of?", "What is the opposite of X?", ...)
//   definition  "Which term means: <gloss>?" (answers: every lemma of the synset)
//   two_hop     X -r1-> Y -r2-> Z asked about X without naming Y ("What kind of thing is X a
//               part of?"); Z is not in X's passage and is in Y's, so two retrievals are needed
//   foldoc      "Which computing term means: <first sentence of the FOLDOC entry>?"
//
// Ambiguity is avoided by naming a topic only by a lemma that has one sense in its part of
// speech, asking only about relations with one target, and skipping glosses or FOLDOC
// sentences shared by several entries or that contain an answer.
//
// Split guarantee (checked by tests on the built database), for every test or dev item T and
// every train item R:
//   1. T.topic_entity != R.topic_entity, and T's topic name != R's topic name (case-folded);
//   2. no entity on T's kg_path (topic, intermediate, answer) is R's topic entity;
//   3. no answer string of T and no lemma of T's intermediate entity is R's topic name.
// Groups of items that share a topic entity or a topic name are assigned to one split together
// by a seeded hash; train items that would break 2 or 3 are dropped (not moved).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/corpus_model.h"
#include "rag/progress.h"

namespace rag::corpus {

struct QaParams {
  uint64_t seed = 42;
  double devFraction = 0.1;
  double testFraction = 0.1;
  // Upper bounds on generated items, drawn by a seeded hash so the selection is stable.
  size_t maxPerSingleHopRelation = 12000;
  size_t maxDefinition = 40000;
  size_t maxPerTwoHopRelation = 8000;  // per relation pair, e.g. hypernym+hypernym
  size_t maxFoldoc = 20000;
  size_t maxTwoHopPerTopic = 2;
};

struct QaItem {
  std::string split;          // train | dev | test
  std::string_view type;      // single_hop | definition | two_hop | foldoc
  std::string relation;       // "hypernym", "part_holonym+hypernym", "gloss", "foldoc_definition"
  int64_t topicEntity = 0;
  std::string topicName;      // the name the question uses (definitions: the first lemma)
  std::string question;
  std::vector<std::string> answers;      // every acceptable answer
  std::vector<int64_t> goldPassages;     // reasoning order
  std::vector<int64_t> pathEntities;     // kg path: e0 r0 e1 r1 e2 ...
  std::vector<std::string_view> pathRelations;
  std::vector<int64_t> intermediates;    // entities on the path that are neither topic nor answer
};

// Builds every QA item from `model`, split and filtered as documented above, in a
// deterministic order (the same seed and data give the same rows).
std::vector<QaItem> buildQa(const CorpusModel& model, const QaParams& params,
                            const ProgressFn& progress = {});

// The single-hop question the builder asks about `name` over `relation` for a synset whose part
// of speech is `pos` (n, v, a, r): "What is Dog a kind of?"; empty when it asks none.
std::string singleHopQuestion(std::string_view relation, char pos, std::string_view name);

// JSON text of the path: [e0, "r0", e1, ...].
std::string kgPathJson(const QaItem& item);

// True when `phrase` occurs in `text` as whole words, ignoring ASCII case.
bool containsPhrase(std::string_view text, std::string_view phrase);

}  // namespace rag::corpus
