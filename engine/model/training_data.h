// Training examples drawn from a corpus for `ragraph train lm`: QA prompts built by
// corpus/qa_prompt.h (the format evaluation uses), passages as plain language-model text, or a
// mix. Torch-free; the trainer (trainer.h) asks for examples by key.
//
//   RAG_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(tokenizerDir));
//   CorpusExampleOptions opts;                  // QA, gold passage among 5, causal
//   opts.mask = MaskKind::Block;                // one block per passage, the question last
//   RAG_ASSIGN_OR_RETURN(auto source, CorpusExampleSource::open(corpusPath, tok, opts));
//   RAG_ASSIGN_OR_RETURN(TrainingExample e, source->example(seed, step, index, 256));
#pragma once

#include <filesystem>
#include <functional>
#include <span>
#include <unordered_map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "corpus/qa_prompt.h"
#include "rag/progress.h"
#include "model/tokenizer.h"
#include "model/trainer.h"
#include "core/random.h"

namespace rag::retrieval {
class Bm25Index;
}

namespace rag::model {

// Qa: QA prompts. Passages: plain passage text. Mixed: both, by qaFraction. Recall: synthetic
// associative recall over corpus names ("key: value." lines, then "Question: key?\nAnswer:
// value" for each), a dense copying signal that makes induction heads form before QA training.
// Graph: GraphRAG prompts over the knowledge graph (knowledge/graph_examples.h, DepCache's
// dependency fine-tuning), built by their own source. Roles: every role the built-in workflows
// ask of the model (knowledge/role_examples.h), built by its own source.
enum class TrainData { Qa, Passages, Mixed, Recall, Graph, Roles };
std::string_view trainDataName(TrainData d);  // "qa" | "passages" | "mixed" | "recall" | "graph" | "roles"
Result<TrainData> parseTrainData(std::string_view name);
Result<MaskKind> parseTrainMask(std::string_view name);  // "causal" | "block" | "ancestor"

struct CorpusExampleOptions {
  TrainData data = TrainData::Qa;
  std::string split = "train";   // the QA split to draw from
  corpus::QaPromptOptions prompt;
  // Causal, or Block: each passage of a QA prompt is one block and the question with its answer
  // the last block (Block-Attention fine-tuning). Passage text is always causal.
  MaskKind mask = MaskKind::Causal;
  // QA: the weight of predicting a prompt token; the answer and EOS tokens weigh 1.
  float promptLossWeight = 0.1f;
  double qaFraction = 0.5;       // Mixed: the share of QA examples
  // QA: questions asked over one context. The context holds the gold passages of all of them
  // (plus distractors); each question follows the previous answer and its EOS, so one sequence
  // carries `questions` answers to learn from.
  size_t questions = 1;
  // QA curriculum: the passages of each example are drawn uniformly from [minPassages,
  // prompt.passages] (never fewer than the gold ones); 0 means always prompt.passages.
  size_t minPassages = 0;
  // Recall difficulty: names of at most this many tokens (0: any; 1 makes single-token keys and
  // values, the easiest associative recall) and at most this many pairs per example (0: as many
  // as fit).
  size_t recallNameTokens = 0;
  size_t recallPairs = 0;
};

// QA examples: a random item of the split, its context drawn with a salt from the key (so the
// distractors and their order vary from draw to draw), tokenized by tokenizeQaPrompt. When the
// prompt does not fit, distractors are dropped first; a prompt still too long keeps its last
// maxTokens tokens. Passage examples: random passages, each followed by EOS, packed to
// maxTokens tokens, every token weighted 1. Recall examples: distinct passage titles paired at
// random, as many pairs as fit, each asked once in shuffled order; answers and EOS weigh 1.
// With the block mask every "key: value." line is a block and the questions the last one.
class CorpusExampleSource final : public ExampleSource {
public:
  // Errors: the corpus's (missing, wrong schema), an empty split (naming those present), a
  // corpus without passages for passage data.
  static Result<std::unique_ptr<CorpusExampleSource>> open(const std::filesystem::path& corpus,
                                                           const Tokenizer& tokenizer,
                                                           const CorpusExampleOptions& options);

  Result<TrainingExample> example(uint64_t seed, int64_t step, int64_t index,
                                  int64_t maxTokens) override;

  size_t qaItems() const { return m_qaIds.size(); }

private:
  CorpusExampleSource(corpus::QaPromptReader reader, Tokenizer tokenizer,
                      CorpusExampleOptions options, std::vector<int64_t> qaIds)
      : m_reader(std::move(reader)), m_tokenizer(std::move(tokenizer)),
        m_options(std::move(options)), m_qaIds(std::move(qaIds)) {}
  Result<TrainingExample> qaExample(uint64_t key, int64_t maxTokens);
  Result<TrainingExample> passageExample(uint64_t key, int64_t maxTokens);
  Result<TrainingExample> recallExample(uint64_t key, int64_t maxTokens);
  Result<rag::Passage> randomPassage(Rng& rng);
  Status loadRecallNames();

  corpus::QaPromptReader m_reader;
  Tokenizer m_tokenizer;
  CorpusExampleOptions m_options;
  std::vector<int64_t> m_qaIds;
  std::vector<std::string> m_recallNames;  // distinct passage titles within recallNameTokens
};

// Top-`depth` passage ids of each query by dense search, best first (the CLI's embedder over its
// passage index): how self-mined negatives are found without this torch-free file embedding text.
using DenseSearch = std::function<Result<std::vector<std::vector<int64_t>>>(std::span<const std::string> queries,
                                                                              int32_t depth)>;

struct CorpusPairOptions {
  std::string split = "train";  // the QA split whose questions are queries
  // The share of pairs whose query is a passage's title, and the share whose query is a span of
  // its own words (4 to 12 running words after its name: Contriever's cropping, the passages'
  // wording without a question template). The rest: a question and its first gold passage, the
  // passage the question's topic entity names. Title and span pairs are drawn only from passages
  // that answer no dev or test question, which the retrieval figures are measured on.
  double titleFraction = 0.3;
  double spanFraction = 0;
  // The share of pairs that also carry a hard negative: a passage ranked among the query's top
  // `hardNegativeDepth` that is none of its gold passages and has none of their names (a query
  // cannot tell senses of one name apart). Mined by BM25 (retrieval/bm25_index.h, the corpus's
  // FTS index, built when missing), or for question pairs, with probability `selfNegatives`, by
  // `denseSearch`: ANCE's self-mined negatives, the embedder's own confusions, mined once when the
  // source opens (every question of the split in one batch). 0: in-batch negatives only.
  double hardNegatives = 0;
  int32_t hardNegativeDepth = 10;
  double selfNegatives = 0;
  DenseSearch denseSearch;  // required when selfNegatives > 0
  ProgressFn progress;      // mining self negatives: ("mining", done, total)
};

// Embedder training pairs (trainer.h PairSource) from a corpus: query -> passage text as the
// index embeds it (embeddingText), each cut to maxTokens tokens.
class CorpusPairSource final : public PairSource {
public:
  // Errors as CorpusExampleSource::open (missing corpus, wrong schema, empty split).
  static Result<std::unique_ptr<CorpusPairSource>> open(const std::filesystem::path& corpus,
                                                        const Tokenizer& tokenizer,
                                                        const CorpusPairOptions& options);
  ~CorpusPairSource() override;
  Result<TrainingPair> pair(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) override;

private:
  CorpusPairSource(corpus::QaPromptReader reader, Tokenizer tokenizer, CorpusPairOptions options,
                   std::vector<int64_t> qaIds, std::unique_ptr<retrieval::Bm25Index> bm25);
  // A random passage that answers no held-out question (title and span pairs).
  Result<rag::Passage> trainingPassage(Rng& rng);
  // One of `ranked` that is not gold and shares no gold passage's name, drawn uniformly; NotFound
  // when none is.
  Result<rag::Passage> negativeFrom(std::vector<int64_t> ranked, const std::vector<int64_t>& gold,
                                    const std::vector<std::string>& goldNames, Rng& rng);
  corpus::QaPromptReader m_reader;
  Tokenizer m_tokenizer;
  CorpusPairOptions m_options;
  std::vector<int64_t> m_qaIds;
  std::unique_ptr<retrieval::Bm25Index> m_bm25;  // when options.hardNegatives > 0
  std::vector<uint8_t> m_heldOut;                 // by passage id: gold to a dev or test question
  std::unordered_map<int64_t, std::vector<int64_t>> m_selfMined;  // question id -> dense top passages
};

// The query of a span pair: `words` running words of the passage text after its name ("walker
// (noun): a shoe designed ..." -> "a shoe designed"), starting at word `start` (both clamped to
// what the passage has).
std::string passageSpan(std::string_view text, size_t start, size_t words);

// A passage title without its part of speech: "southern flounder (noun)" -> "southern flounder".
std::string_view plainTitle(std::string_view title);

// What an embedder's lexical branch needs from the corpus (BertModel::withLexical): the inverse
// document frequency of each word bucket over its passages and their mean length in words
// (lexical_words.h). Errors as CorpusExampleSource::open, NotFound for a corpus without passages.
Result<LexicalStatistics> passageWordStatistics(const std::filesystem::path& corpus, int64_t buckets);

// The texts a tokenizer for this corpus is trained on: every passage, and the questions and
// answers of `split`. Errors as CorpusExampleSource::open.
Result<std::vector<std::string>> tokenizerTrainingTexts(const std::filesystem::path& corpus,
                                                        std::string_view split = "train");

}  // namespace rag::model
