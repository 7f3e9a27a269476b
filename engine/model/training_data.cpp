#include "model/training_data.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "corpus/corpus_db.h"
#include "model/lexical_words.h"
#include "model/prompt.h"
#include "corpus/qa_reader.h"
#include "retrieval/bm25_index.h"
#include "core/random.h"

namespace rag::model {

namespace {

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
    case TrainData::Recall: return "recall";
    case TrainData::Graph: return "graph";
    case TrainData::Roles: return "roles";
  }
  return "qa";
}

Result<TrainData> parseTrainData(std::string_view name) {
  for (TrainData d :
       {TrainData::Qa, TrainData::Passages, TrainData::Mixed, TrainData::Recall, TrainData::Graph, TrainData::Roles})
    if (name == trainDataName(d)) return d;
  return Status::invalidArgument("unknown training data '" + std::string(name) +
                                 "'; use qa (QA prompts), passages (plain text), mixed (both), "
                                 "recall (synthetic key: value recall), graph (GraphRAG prompts over the knowledge graph) or "
                                 "roles (every role of the built-in workflows, over retrieved passages)");
}

Result<MaskKind> parseTrainMask(std::string_view name) {
  if (name == "causal") return MaskKind::Causal;
  if (name == "block") return MaskKind::Block;
  if (name == "ancestor") return MaskKind::Ancestor;
  return Status::invalidArgument("unknown mask '" + std::string(name) +
                                 "'; use causal, block (one block per passage) or ancestor (graph data: dependency trees)");
}

Result<std::unique_ptr<CorpusExampleSource>> CorpusExampleSource::open(
    const std::filesystem::path& corpus, const Tokenizer& tokenizer,
    const CorpusExampleOptions& options) {
  if (options.data == TrainData::Graph || options.data == TrainData::Roles)
    return Status::invalidArgument(std::string(trainDataName(options.data)) +
                                   " data has its own example source (knowledge/), not the corpus example source");
  if (options.mask != MaskKind::Causal && options.mask != MaskKind::Block)
    return Status::invalidArgument("the ancestor mask is for graph data (--data graph); QA and passage data train "
                                   "under causal or block");
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
  std::vector<int64_t> ids;
  if (options.data == TrainData::Qa || options.data == TrainData::Mixed) {
    RAG_ASSIGN_OR_RETURN(ids, reader.splitIds(options.split));
  }
  if (options.data != TrainData::Qa && reader.maxPassageId() == 0)
    return Status::notFound("corpus " + corpus.string() + " has no passages to train on; "
                            "rebuild it with `ragraph corpus build`");
  std::unique_ptr<CorpusExampleSource> source(
      new CorpusExampleSource(std::move(reader), tokenizer, options, std::move(ids)));
  if (options.data == TrainData::Recall) RAG_RETURN_IF_ERROR(source->loadRecallNames());
  return source;
}

Result<TrainingExample> CorpusExampleSource::example(uint64_t seed, int64_t step, int64_t index,
                                                     int64_t maxTokens) {
  const uint64_t key = deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)),
                                  static_cast<uint64_t>(index));
  switch (m_options.data) {
    case TrainData::Qa: return qaExample(key, maxTokens);
    case TrainData::Passages: return passageExample(key, maxTokens);
    case TrainData::Recall: return recallExample(key, maxTokens);
    case TrainData::Graph:
    case TrainData::Roles: return Status::internal("graph and role data have their own example sources");
    case TrainData::Mixed: {
      Rng rng(deriveSeed(key, 0));
      const bool qa = rng.uniform01() < m_options.qaFraction;
      return qa ? qaExample(key, maxTokens) : passageExample(key, maxTokens);
    }
  }
  return Status::internal("unknown training data kind");
}

Result<TrainingExample> CorpusExampleSource::qaExample(uint64_t key, int64_t maxTokens) {
  Rng rng(deriveSeed(key, 1));
  const int64_t qaId = m_qaIds[rng.below(m_qaIds.size())];
  const uint64_t salt = rng.below(UINT64_MAX);
  std::vector<rag::QaItem> items;
  RAG_ASSIGN_OR_RETURN(rag::QaItem first, m_reader.item(qaId));
  items.push_back(std::move(first));
  for (size_t q = 1; q < m_options.questions; ++q) {
    RAG_ASSIGN_OR_RETURN(rag::QaItem more, m_reader.item(m_qaIds[rng.below(m_qaIds.size())]));
    items.push_back(std::move(more));
  }
  corpus::QaPromptOptions promptOptions = m_options.prompt;
  if (m_options.minPassages > 0 && m_options.minPassages < promptOptions.passages)
    promptOptions.passages = m_options.minPassages +
        rng.below(promptOptions.passages - m_options.minPassages + 1);

  // One context for every question: the first item with the gold passages of all of them.
  // A passage is gold while a question still asked needs it.
  auto isGold = [&](const rag::Passage& p) {
    return std::any_of(items.begin(), items.end(), [&](const rag::QaItem& item) {
      return std::any_of(item.goldPassages.begin(), item.goldPassages.end(),
                         [&](const rag::Passage& g) { return g.id == p.id; });
    });
  };
  rag::QaItem all = items.front();
  all.goldPassages.clear();
  for (const rag::QaItem& item : items) corpus::addGoldPassages(all, item);
  RAG_ASSIGN_OR_RETURN(std::vector<rag::Passage> context,
                       m_reader.contextPassages(all, promptOptions, salt));

  QaTokens t;
  std::vector<std::pair<size_t, size_t>> answers;  // [begin, end) of each completion + EOS
  for (;;) {
    t = tokenizeQaPrompt(m_tokenizer, corpus::buildQaPrompt(items.front(), context, promptOptions));
    answers = {{static_cast<size_t>(t.promptLength), t.tokens.size()}};
    for (size_t i = 1; i < items.size(); ++i) {
      const QaTokens more =
          tokenizeQaPrompt(m_tokenizer, corpus::buildQaPrompt(items[i], {}, promptOptions));
      answers.emplace_back(t.tokens.size() + static_cast<size_t>(more.promptLength),
                           t.tokens.size() + more.tokens.size());
      t.tokens.insert(t.tokens.end(), more.tokens.begin(), more.tokens.end());
    }
    if (static_cast<int64_t>(t.tokens.size()) <= maxTokens) break;
    // Too long: drop the last extra question, then the last distractor, while any is left.
    if (items.size() > 1) {
      items.pop_back();
      continue;
    }
    auto distractor = std::find_if(context.rbegin(), context.rend(),
                                   [&](const rag::Passage& p) { return !isGold(p); });
    if (distractor == context.rend()) break;
    context.erase(std::next(distractor).base());
  }
  TrainingExample e;
  e.tokens = std::move(t.tokens);
  e.lossWeights.assign(e.tokens.size(), m_options.promptLossWeight);
  for (auto [begin, end] : answers)
    std::fill(e.lossWeights.begin() + static_cast<std::ptrdiff_t>(begin),
              e.lossWeights.begin() + static_cast<std::ptrdiff_t>(end), 1.0f);
  if (m_options.mask == MaskKind::Block) e.mask = AttentionMask::blocks(std::move(t.blockStarts));
  keepTail(e, maxTokens);
  return e;
}

Result<rag::Passage> CorpusExampleSource::randomPassage(Rng& rng) {
  const auto maxId = static_cast<uint64_t>(m_reader.maxPassageId());
  for (int attempts = 0; attempts < 4096; ++attempts) {
    Result<rag::Passage> p = m_reader.passage(1 + static_cast<int64_t>(rng.below(maxId)));
    if (p || p.status().code() != StatusCode::NotFound) return p;
  }
  return Status::corrupt("corpus " + m_reader.db().path().string() +
                         " has passage ids with too many gaps to draw from; rebuild it with "
                         "`ragraph corpus build`");
}

// Passage titles without their part of speech ("southern flounder (noun)" -> "southern
// flounder"), each once, in passage order, keeping those of at most recallNameTokens tokens
// both at a line start and after a space (where a key and a value stand).
Status CorpusExampleSource::loadRecallNames() {
  const EncodeOptions plain{.parseSpecial = false};
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_reader.db().prepare("SELECT title FROM passages ORDER BY id"));
  std::unordered_set<std::string> seen;
  const size_t limit = m_options.recallNameTokens;
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    std::string_view title = plainTitle(st.columnTextView(0));
    if (title.empty() || title.find('\n') != std::string_view::npos) continue;
    std::string t(title);
    if (limit > 0 && (m_tokenizer.encode(t, plain).size() > limit ||
                      m_tokenizer.encode(" " + t, plain).size() > limit))
      continue;
    if (seen.insert(t).second) m_recallNames.push_back(std::move(t));
  }
  if (m_recallNames.size() < 2)
    return Status::notFound("corpus " + m_reader.db().path().string() + " has " +
                            std::to_string(m_recallNames.size()) + " passage titles of at most " +
                            std::to_string(limit) + " tokens; recall data needs at least 2 (raise "
                            "--recall-name-tokens or rebuild the corpus)");
  return Status::ok();
}

Result<TrainingExample> CorpusExampleSource::recallExample(uint64_t key, int64_t maxTokens) {
  Rng rng(deriveSeed(key, 3));
  const EncodeOptions plain{.parseSpecial = false};
  auto name = [&] { return m_recallNames[rng.below(m_recallNames.size())]; };
  struct Pair {
    std::vector<int32_t> line, question, answer;
  };
  std::vector<Pair> pairs;
  std::unordered_set<std::string> keys;
  const std::optional<int32_t> eos = m_tokenizer.eosId();
  int64_t total = 0;
  for (int attempts = 0; attempts < 256; ++attempts) {
    if (m_options.recallPairs > 0 && pairs.size() >= m_options.recallPairs) break;
    const std::string k = name(), v = name();
    if (!keys.insert(k).second) continue;
    Pair p{m_tokenizer.encode(k + ": " + v + ".\n", plain),
           m_tokenizer.encode("Question: " + k + "?\nAnswer:", plain),
           m_tokenizer.encode(" " + v, plain)};
    if (eos) p.answer.push_back(*eos);
    const auto cost = static_cast<int64_t>(p.line.size() + p.question.size() + p.answer.size());
    if (total + cost > maxTokens) break;
    total += cost;
    pairs.push_back(std::move(p));
  }
  if (pairs.empty())
    return Status::invalidArgument("--seq-len " + std::to_string(maxTokens) +
                                   " is too short for one recall pair; use at least 64");
  TrainingExample e;
  std::vector<int32_t> starts;
  for (const Pair& p : pairs) {
    starts.push_back(static_cast<int32_t>(e.tokens.size()));
    e.tokens.insert(e.tokens.end(), p.line.begin(), p.line.end());
  }
  starts.push_back(static_cast<int32_t>(e.tokens.size()));
  e.lossWeights.assign(e.tokens.size(), m_options.promptLossWeight);
  std::vector<size_t> order(pairs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  rng.shuffle(order);
  for (size_t i : order) {
    e.tokens.insert(e.tokens.end(), pairs[i].question.begin(), pairs[i].question.end());
    e.tokens.insert(e.tokens.end(), pairs[i].answer.begin(), pairs[i].answer.end());
    e.lossWeights.resize(e.tokens.size() - pairs[i].answer.size(), m_options.promptLossWeight);
    e.lossWeights.resize(e.tokens.size(), 1.0f);
  }
  if (m_options.mask == MaskKind::Block) e.mask = AttentionMask::blocks(std::move(starts));
  return e;
}

Result<TrainingExample> CorpusExampleSource::passageExample(uint64_t key, int64_t maxTokens) {
  Rng rng(deriveSeed(key, 2));
  const EncodeOptions plain{.parseSpecial = false};
  TrainingExample e;
  while (static_cast<int64_t>(e.tokens.size()) < maxTokens) {
    RAG_ASSIGN_OR_RETURN(rag::Passage p, randomPassage(rng));
    std::vector<int32_t> ids = m_tokenizer.encode(p.text, plain);
    e.tokens.insert(e.tokens.end(), ids.begin(), ids.end());
    if (auto eos = m_tokenizer.eosId()) e.tokens.push_back(*eos);
  }
  e.tokens.resize(static_cast<size_t>(maxTokens));
  e.lossWeights.assign(e.tokens.size(), 1.0f);
  return e;
}

std::string_view plainTitle(std::string_view title) {
  if (title.ends_with(")")) {
    const size_t open = title.rfind(" (");
    if (open != std::string_view::npos) title = title.substr(0, open);
  }
  return title;
}

Result<std::unique_ptr<CorpusPairSource>> CorpusPairSource::open(const std::filesystem::path& corpus,
                                                                 const Tokenizer& tokenizer,
                                                                 const CorpusPairOptions& options) {
  auto share = [](double x) { return x >= 0 && x <= 1; };
  if (!share(options.titleFraction) || !share(options.spanFraction) ||
      !(options.titleFraction + options.spanFraction <= 1))
    return Status::invalidArgument("the shares of title and span pairs must each be between 0 and 1, and "
                                   "together at most 1 (the rest are question pairs)");
  RAG_ASSIGN_OR_RETURN(corpus::QaPromptReader reader, corpus::QaPromptReader::open(corpus));
  std::vector<int64_t> ids;
  if (options.titleFraction + options.spanFraction < 1) {
    RAG_ASSIGN_OR_RETURN(ids, reader.splitIds(options.split));
  }
  if (reader.maxPassageId() == 0)
    return Status::notFound("corpus " + corpus.string() + " has no passages to train on; "
                            "rebuild it with `ragraph corpus build`");
  if (!share(options.hardNegatives) || !share(options.selfNegatives))
    return Status::invalidArgument("the shares of pairs with a hard negative and of self-mined ones among them "
                                   "must be between 0 and 1");
  if (options.hardNegativeDepth < 2)
    return Status::invalidArgument("hard negatives are mined from a query's top 2 or more passages");
  if (options.hardNegatives > 0 && options.selfNegatives > 0 && !options.denseSearch)
    return Status::invalidArgument("self-mined negatives need a dense search over the embedder's passage index");
  std::unique_ptr<retrieval::Bm25Index> bm25;
  if (options.hardNegatives > 0 && options.selfNegatives < 1) {
    RAG_ASSIGN_OR_RETURN(retrieval::Bm25Index index, retrieval::Bm25Index::openOrBuild(corpus));
    bm25 = std::make_unique<retrieval::Bm25Index>(std::move(index));
  }
  // Passages that answer a held-out question: never the passage of a title or span pair.
  std::vector<uint8_t> heldOut(static_cast<size_t>(reader.maxPassageId()) + 1, 0);
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, reader.db().prepare(
        "SELECT DISTINCT g.value FROM qa, json_each(qa.gold_passages) g WHERE qa.split IN ('dev', 'test')"));
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      const int64_t id = st.columnInt64(0);
      if (id > 0 && id < static_cast<int64_t>(heldOut.size())) heldOut[static_cast<size_t>(id)] = 1;
    }
  }
  // A corpus whose every passage answers a held-out question (a test fixture) draws from them all.
  if (std::count(heldOut.begin() + 1, heldOut.end(), uint8_t{1}) == static_cast<std::ptrdiff_t>(heldOut.size()) - 1)
    heldOut.assign(heldOut.size(), 0);
  std::unique_ptr<CorpusPairSource> source(
      new CorpusPairSource(std::move(reader), tokenizer, options, std::move(ids), std::move(bm25)));
  source->m_heldOut = std::move(heldOut);
  if (options.hardNegatives > 0 && options.selfNegatives > 0 && !source->m_qaIds.empty()) {
    // Every question of the split searched once, in batches (a batched search runs as a matrix
    // product; one query at a time would read every passage vector per query).
    // The questions in one query (their items, read one by one, would load their passages too).
    std::vector<std::pair<int64_t, std::string>> questions;
    {
      RAG_ASSIGN_OR_RETURN(sql::Stmt st, source->m_reader.db().prepare(
          "SELECT id, question FROM qa WHERE split = ?1 ORDER BY id"));
      st.bind(1, options.split);
      for (;;) {
        RAG_ASSIGN_OR_RETURN(bool row, st.step());
        if (!row) break;
        questions.emplace_back(st.columnInt64(0), st.columnText(1));
      }
    }
    constexpr size_t kBatch = 512;
    for (size_t start = 0; start < questions.size(); start += kBatch) {
      const size_t end = std::min(questions.size(), start + kBatch);
      std::vector<std::string> texts;
      for (size_t i = start; i < end; ++i) texts.push_back(questions[i].second);
      RAG_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> ranked,
                           options.denseSearch(texts, options.hardNegativeDepth));
      if (ranked.size() != texts.size())
        return Status::internal("the dense search answered " + std::to_string(ranked.size()) + " of " +
                                std::to_string(texts.size()) + " queries");
      for (size_t i = start; i < end; ++i) source->m_selfMined[questions[i].first] = std::move(ranked[i - start]);
      if (options.progress) options.progress("mining", end, questions.size());
    }
  }
  source->m_options.denseSearch = nullptr;  // mined: the embedder and index it holds can go
  return source;
}

CorpusPairSource::CorpusPairSource(corpus::QaPromptReader reader, Tokenizer tokenizer, CorpusPairOptions options,
                                   std::vector<int64_t> qaIds, std::unique_ptr<retrieval::Bm25Index> bm25)
    : m_reader(std::move(reader)), m_tokenizer(std::move(tokenizer)), m_options(std::move(options)),
      m_qaIds(std::move(qaIds)), m_bm25(std::move(bm25)) {}
CorpusPairSource::~CorpusPairSource() = default;

Result<rag::Passage> CorpusPairSource::trainingPassage(Rng& rng) {
  const auto maxId = static_cast<uint64_t>(m_reader.maxPassageId());
  for (int attempts = 0;; ++attempts) {
    const auto id = 1 + static_cast<int64_t>(rng.below(maxId));
    if (static_cast<size_t>(id) < m_heldOut.size() && m_heldOut[static_cast<size_t>(id)] && attempts < 4096)
      continue;
    Result<rag::Passage> p = m_reader.passage(id);
    if (p || p.status().code() != StatusCode::NotFound || attempts > 4096) return p;
  }
}

Result<rag::Passage> CorpusPairSource::negativeFrom(std::vector<int64_t> ranked, const std::vector<int64_t>& gold,
                                                    const std::vector<std::string>& goldNames, Rng& rng) {
  std::erase_if(ranked, [&](int64_t id) { return id <= 0 || std::find(gold.begin(), gold.end(), id) != gold.end(); });
  while (!ranked.empty()) {
    const size_t pick = rng.below(ranked.size());
    RAG_ASSIGN_OR_RETURN(rag::Passage negative, m_reader.passage(ranked[pick]));
    const std::string_view name = plainTitle(negative.title);
    if (std::find(goldNames.begin(), goldNames.end(), name) == goldNames.end() && !negative.text.empty())
      return negative;
    ranked.erase(ranked.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  return Status::notFound("no hard negative among the query's top passages");
}

std::string passageSpan(std::string_view text, size_t start, size_t words) {
  if (const size_t colon = text.find(": "); colon != std::string_view::npos) text.remove_prefix(colon + 2);
  std::vector<std::string_view> all;
  for (size_t i = 0; i < text.size();) {
    const size_t end = std::min(text.find(' ', i), text.size());
    if (end > i) all.push_back(text.substr(i, end - i));
    i = end + 1;
  }
  if (all.empty()) return {};
  words = std::clamp<size_t>(words, 1, all.size());
  start = std::min(start, all.size() - words);
  std::string out;
  for (size_t k = start; k < start + words; ++k) {
    if (!out.empty()) out += ' ';
    out += all[k];
  }
  return out;
}

Result<TrainingPair> CorpusPairSource::pair(uint64_t seed, int64_t step, int64_t index,
                                            int64_t maxTokens) {
  Rng rng(deriveSeed(deriveSeed(deriveSeed(seed, static_cast<uint64_t>(step)),
                                     static_cast<uint64_t>(index)), 4));
  const EncodeOptions plain{.parseSpecial = false};
  auto cut = [&](std::string_view text) {
    std::vector<int32_t> ids = m_tokenizer.encode(text, plain);
    if (static_cast<int64_t>(ids.size()) > maxTokens) ids.resize(static_cast<size_t>(maxTokens));
    return ids;
  };
  rag::Passage passage;
  std::string query;
  std::vector<int64_t> gold;  // passages that answer the query: never its negative
  std::vector<std::string> goldNames;  // nor a passage of one of their names
  int64_t questionId = 0;
  const double kind = rng.uniform01();
  if (m_qaIds.empty() || kind < m_options.titleFraction + m_options.spanFraction) {
    // Passages no question asks about are seen too: by their titles, and by spans of their words.
    RAG_ASSIGN_OR_RETURN(passage, trainingPassage(rng));
    const bool title = m_options.spanFraction <= 0 || kind < m_options.titleFraction;
    query = title ? std::string(plainTitle(passage.title))
                  : passageSpan(passage.text, rng.below(64), 4 + rng.below(9));
    gold.push_back(passage.id);
    goldNames.emplace_back(plainTitle(passage.title));
  } else {
    questionId = m_qaIds[rng.below(m_qaIds.size())];
    RAG_ASSIGN_OR_RETURN(rag::QaItem item, m_reader.item(questionId));
    if (item.goldPassages.empty())
      return Status::corrupt("QA item " + std::to_string(item.id) + " has no gold passage; "
                             "rebuild the corpus with `ragraph corpus build`");
    query = item.question;
    for (const rag::Passage& g : item.goldPassages) {
      gold.push_back(g.id);
      goldNames.emplace_back(plainTitle(g.title));
    }
    passage = std::move(item.goldPassages.front());
  }
  TrainingPair out{cut(query), cut(corpus::embeddingText(passage)), passage.id, {}, 0};
  if (out.query.empty() || out.passage.empty())
    return Status::corrupt("passage " + std::to_string(passage.id) + " has an empty title or text; "
                           "rebuild the corpus with `ragraph corpus build`");
  if (m_options.hardNegatives <= 0 || rng.uniform01() >= m_options.hardNegatives) return out;
  // A hard negative: one of the query's top passages (BM25's or, for questions, the embedder's
  // own), drawn uniformly, gold ones and their namesakes left out.
  std::vector<int64_t> ranked;
  const auto mined = questionId != 0 ? m_selfMined.find(questionId) : m_selfMined.end();
  if (mined != m_selfMined.end() && (!m_bm25 || rng.uniform01() < m_options.selfNegatives)) {
    ranked = mined->second;
  } else if (m_bm25) {
    RAG_ASSIGN_OR_RETURN(ranked, m_bm25->search(query, m_options.hardNegativeDepth));
  }
  Result<rag::Passage> negative = negativeFrom(std::move(ranked), gold, goldNames, rng);
  if (!negative) return negative.status().code() == StatusCode::NotFound ? Result<TrainingPair>(std::move(out))
                                                                         : Result<TrainingPair>(negative.status());
  out.negative = cut(corpus::embeddingText(*negative));
  out.negativeId = out.negative.empty() ? 0 : negative->id;
  return out;
}

namespace {

// Every passage's text, in id order; NotFound naming `forWhat` when there is none.
Result<std::vector<std::string>> passageTexts(sql::Db& db, const std::filesystem::path& corpus, std::string_view forWhat) {
  std::vector<std::string> texts;
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT text FROM passages ORDER BY id"));
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    texts.push_back(st.columnText(0));
  }
  if (texts.empty())
    return Status::notFound("corpus " + corpus.string() + " has no passages " + std::string(forWhat) +
                            "; rebuild it with `ragraph corpus build`");
  return texts;
}

}  // namespace

Result<LexicalStatistics> passageWordStatistics(const std::filesystem::path& corpus, int64_t buckets) {
  if (buckets < 1) return Status::invalidArgument("a lexical branch needs at least one word bucket");
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  RAG_ASSIGN_OR_RETURN(std::vector<std::string> texts, passageTexts(db, corpus, "to weigh words by"));
  return lexicalStatistics(texts, buckets);
}

Result<std::vector<std::string>> tokenizerTrainingTexts(const std::filesystem::path& corpus,
                                                        std::string_view split) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  RAG_ASSIGN_OR_RETURN(std::vector<std::string> texts, passageTexts(db, corpus, "to train a tokenizer on"));
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
