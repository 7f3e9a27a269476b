#include "model/training_data.h"

#include <algorithm>

#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "workload/trace_random.h"

namespace rag::model {

namespace {

using workload::deriveSeed;
using workload::TraceRng;

// Keeps the last maxTokens tokens; blocks that start inside the cut begin at 0.
void keepTail(TrainingExample& e, int64_t maxTokens) {
  const auto n = static_cast<int64_t>(e.tokens.size());
  if (n <= maxTokens) return;
  const auto cut = static_cast<int32_t>(n - maxTokens);
  e.tokens.erase(e.tokens.begin(), e.tokens.begin() + cut);
  e.lossWeights.erase(e.lossWeights.begin(), e.lossWeights.begin() + cut);
  if (e.mask.kind == MaskKind::Block) {
    std::vector<int32_t> starts = {0};
    for (int32_t s : e.mask.blockStarts)
      if (s - cut > 0) starts.push_back(s - cut);
    e.mask.blockStarts = std::move(starts);
  }
}

}  // namespace

std::string_view trainDataName(TrainData d) {
  switch (d) {
    case TrainData::Qa: return "qa";
    case TrainData::Passages: return "passages";
    case TrainData::Mixed: return "mixed";
  }
  return "qa";
}

Result<TrainData> parseTrainData(std::string_view name) {
  for (TrainData d : {TrainData::Qa, TrainData::Passages, TrainData::Mixed})
    if (name == trainDataName(d)) return d;
  return Status::invalidArgument("unknown training data '" + std::string(name) +
                                 "'; use qa (QA prompts), passages (plain text) or mixed");
}

Result<MaskKind> parseTrainMask(std::string_view name) {
  if (name == "causal") return MaskKind::Causal;
  if (name == "block") return MaskKind::Block;
  return Status::invalidArgument("unknown mask '" + std::string(name) +
                                 "'; use causal or block (one block per passage)");
}

Result<std::unique_ptr<CorpusExampleSource>> CorpusExampleSource::open(
    const std::filesystem::path& corpus, const Tokenizer& tokenizer,
    const CorpusExampleOptions& options) {
  if (options.mask != MaskKind::Causal && options.mask != MaskKind::Block)
    return Status::invalidArgument("training masks are causal or block");
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
  std::vector<int64_t> ids;
  if (options.data != TrainData::Passages) {
    RAG_ASSIGN_OR_RETURN(ids, reader.splitIds(options.split));
  }
  if (options.data != TrainData::Qa && reader.maxPassageId() == 0)
    return Status::notFound("corpus " + corpus.string() + " has no passages to train on; "
                            "rebuild it with `ragraph corpus build`");
  return std::unique_ptr<CorpusExampleSource>(
      new CorpusExampleSource(std::move(reader), tokenizer, options, std::move(ids)));
}

Result<TrainingExample> CorpusExampleSource::example(uint64_t seed, int64_t step, int64_t index,
                                                     int64_t maxTokens) {
  const uint64_t key = deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)),
                                  static_cast<uint64_t>(index));
  switch (m_options.data) {
    case TrainData::Qa: return qaExample(key, maxTokens);
    case TrainData::Passages: return passageExample(key, maxTokens);
    case TrainData::Mixed: {
      TraceRng rng(deriveSeed(key, 0));
      const bool qa = rng.uniform01() < m_options.qaFraction;
      return qa ? qaExample(key, maxTokens) : passageExample(key, maxTokens);
    }
  }
  return Status::internal("unknown training data kind");
}

Result<TrainingExample> CorpusExampleSource::qaExample(uint64_t key, int64_t maxTokens) {
  TraceRng rng(deriveSeed(key, 1));
  const int64_t qaId = m_qaIds[rng.below(m_qaIds.size())];
  const uint64_t salt = rng.below(UINT64_MAX);
  RAG_ASSIGN_OR_RETURN(rag::QaItem item, m_reader.item(qaId));
  RAG_ASSIGN_OR_RETURN(std::vector<rag::Passage> context,
                       m_reader.contextPassages(item, m_options.prompt, salt));
  corpus::QaTokens t;
  for (;;) {
    corpus::QaPrompt prompt = corpus::buildQaPrompt(item, context, m_options.prompt);
    t = corpus::tokenizeQaPrompt(m_tokenizer, prompt);
    if (static_cast<int64_t>(t.tokens.size()) <= maxTokens) break;
    // Too long: drop the last distractor, if any is left.
    auto distractor = std::find_if(context.rbegin(), context.rend(), [&](const rag::Passage& p) {
      return std::none_of(item.goldPassages.begin(), item.goldPassages.end(),
                          [&](const rag::Passage& g) { return g.id == p.id; });
    });
    if (distractor == context.rend()) break;
    context.erase(std::next(distractor).base());
  }
  TrainingExample e;
  e.tokens = std::move(t.tokens);
  e.lossWeights.assign(e.tokens.size(), m_options.promptLossWeight);
  std::fill(e.lossWeights.begin() + t.promptLength, e.lossWeights.end(), 1.0f);
  if (m_options.mask == MaskKind::Block) e.mask = AttentionMask::blocks(std::move(t.blockStarts));
  keepTail(e, maxTokens);
  return e;
}

Result<TrainingExample> CorpusExampleSource::passageExample(uint64_t key, int64_t maxTokens) {
  TraceRng rng(deriveSeed(key, 2));
  const EncodeOptions plain{.parseSpecial = false};
  TrainingExample e;
  const auto maxId = static_cast<uint64_t>(m_reader.maxPassageId());
  for (int attempts = 0; static_cast<int64_t>(e.tokens.size()) < maxTokens; ++attempts) {
    if (attempts > 64 * maxTokens)
      return Status::corrupt("corpus " + m_reader.db().path().string() +
                             " has passage ids with too many gaps to draw from; rebuild it with "
                             "`ragraph corpus build`");
    Result<rag::Passage> p = m_reader.passage(1 + static_cast<int64_t>(rng.below(maxId)));
    if (!p && p.status().code() == StatusCode::NotFound) continue;
    if (!p) return p.status();
    std::vector<int32_t> ids = m_tokenizer.encode(p->text, plain);
    e.tokens.insert(e.tokens.end(), ids.begin(), ids.end());
    if (auto eos = m_tokenizer.eosId()) e.tokens.push_back(*eos);
  }
  e.tokens.resize(static_cast<size_t>(maxTokens));
  e.lossWeights.assign(e.tokens.size(), 1.0f);
  return e;
}

Result<std::vector<std::string>> tokenizerTrainingTexts(const std::filesystem::path& corpus,
                                                        std::string_view split) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  std::vector<std::string> texts;
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT text FROM passages ORDER BY id"));
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      texts.push_back(st.columnText(0));
    }
  }
  if (texts.empty())
    return Status::notFound("corpus " + corpus.string() + " has no passages to train a tokenizer "
                            "on; rebuild it with `ragraph corpus build`");
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare(
      "SELECT id, question, answers FROM qa WHERE split = ? ORDER BY id"));
  st.bind(1, split);
  size_t items = 0;
  for (;; ++items) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    texts.push_back(st.columnText(1));
    RAG_ASSIGN_OR_RETURN(std::vector<std::string> answers,
                         corpus::parseJsonStrings(st.columnTextView(2),
                                                  "QA item " + std::to_string(st.columnInt64(0)) +
                                                      " answers"));
    for (std::string& a : answers) texts.push_back(std::move(a));
  }
  if (items == 0)
    return corpus::emptySplitError(db, split, "rebuild it with `ragraph corpus build`");
  return texts;
}

}  // namespace rag::model
