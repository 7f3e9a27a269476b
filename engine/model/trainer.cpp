#include "model/trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <future>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>

#include "core/clock.h"
#include "core/fs.h"
#include "core/heap.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "model/bert.h"
#include "model/lexical_words.h"
#include "model/llama.h"
#include "model/tokenizer.h"

namespace fs = std::filesystem;

namespace rag::model {

namespace {

constexpr const char* kStateFormat = "ragraph-trainer-state";
constexpr int kStateVersion = 1;
constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.pt";

// The shortest text that reads back as the same double.
std::string exact(double v) {
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

std::string_view dtypeName(TrainDType d) { return d == TrainDType::F32 ? "f32" : "bf16"; }

// Everything that decides the trajectory of a run, by CLI option name: what a resumed run must
// repeat. Thread count, logging and checkpoint cadence do not change the weights and are free.
std::vector<std::pair<std::string, std::string>> runSignature(const TrainSetup& setup) {
  const TrainParams& p = setup.params;
  std::vector<std::pair<std::string, std::string>> sig = {
      {"steps", std::to_string(p.steps)},        {"batch", std::to_string(p.batch)},
      {"seq-len", std::to_string(p.seqLen)},     {"lr", exact(p.lr)},
      {"min-lr", exact(p.minLr)},                {"warmup", std::to_string(p.warmupSteps)},
      {"weight-decay", exact(p.weightDecay)},    {"clip-norm", exact(p.clipNorm)},
      {"seed", std::to_string(p.seed)},          {"dtype", std::string(dtypeName(p.dtype))},
  };
  sig.insert(sig.end(), setup.runOptions.begin(), setup.runOptions.end());
  return sig;
}

// ---- Batches -----------------------------------------------------------------------------------

struct Batch {
  torch::Tensor tokens;     // I64 [B, T]
  torch::Tensor positions;  // I64 [B, T]
  torch::Tensor allowed;    // Bool [B, T, T]; undefined when every sequence is causal
  torch::Tensor targets;    // I64 [B, T-1]: tokens shifted left
  torch::Tensor weights;    // F32 [B, T-1]: the loss weight of each target
  int64_t realTokens = 0;   // tokens that are not padding
};

Status checkExample(const TrainingExample& e, int64_t maxTokens, int64_t vocab, int64_t step,
                    int64_t index) {
  const auto where = [&] {
    return "training example " + std::to_string(index) + " of step " + std::to_string(step);
  };
  const auto n = static_cast<int64_t>(e.tokens.size());
  if (n < 2 || n > maxTokens)
    return Status::invalidArgument(where() + " has " + std::to_string(n) +
                                   " tokens; it must have 2 to " + std::to_string(maxTokens) +
                                   " (--seq-len)");
  if (e.lossWeights.size() != e.tokens.size())
    return Status::invalidArgument(where() + " has " + std::to_string(e.lossWeights.size()) +
                                   " loss weights for " + std::to_string(n) + " tokens");
  for (float w : e.lossWeights)
    if (!(w >= 0) || !std::isfinite(w))
      return Status::invalidArgument(where() + " has a loss weight that is not a finite number >= 0");
  for (int32_t t : e.tokens)
    if (t < 0 || t >= vocab)
      return Status::invalidArgument(where() + " holds token id " + std::to_string(t) +
                                     ", outside the model's vocabulary of " + std::to_string(vocab) +
                                     "; train with the tokenizer the model was made for");
  return e.mask.validate(n).withContext(where());
}

// Pads every sequence to the longest one. Padding has zero loss weight and is invisible to the
// real tokens (they come first and attend only to earlier positions); a padding row attends
// causally so that no softmax row is empty.
Batch collate(const std::vector<TrainingExample>& examples) {
  const auto b = static_cast<int64_t>(examples.size());
  int64_t t = 0;
  bool causal = true;
  for (const TrainingExample& e : examples) {
    t = std::max<int64_t>(t, static_cast<int64_t>(e.tokens.size()));
    causal = causal && e.mask.isCausal();
  }
  std::vector<int64_t> tokens(static_cast<size_t>(b * t), 0);
  std::vector<float> weights(static_cast<size_t>(b * t), 0.0f);
  std::vector<uint8_t> allowed;
  if (!causal) allowed.assign(static_cast<size_t>(b * t * t), 0);
  Batch batch;
  for (int64_t i = 0; i < b; ++i) {
    const TrainingExample& e = examples[static_cast<size_t>(i)];
    const auto n = static_cast<int64_t>(e.tokens.size());
    batch.realTokens += n;
    for (int64_t j = 0; j < n; ++j) {
      tokens[static_cast<size_t>(i * t + j)] = e.tokens[static_cast<size_t>(j)];
      weights[static_cast<size_t>(i * t + j)] = j == 0 ? 0.0f : e.lossWeights[static_cast<size_t>(j)];
    }
    if (causal) continue;
    const std::vector<uint8_t> dense = e.mask.dense(n);
    uint8_t* base = allowed.data() + i * t * t;
    for (int64_t r = 0; r < t; ++r)
      for (int64_t c = 0; c <= r; ++c)
        base[r * t + c] = r < n ? dense[static_cast<size_t>(r * n + c)] : 1;
  }
  torch::Tensor tok = torch::tensor(tokens, torch::kLong).view({b, t});
  batch.tokens = tok;
  batch.positions = torch::arange(t, torch::kLong).unsqueeze(0).expand({b, t}).contiguous();
  if (!causal)
    batch.allowed = torch::from_blob(allowed.data(), {b, t, t}, torch::kUInt8).to(torch::kBool);
  batch.targets = tok.narrow(1, 1, t - 1);
  batch.weights = torch::tensor(weights, torch::kFloat32).view({b, t}).narrow(1, 1, t - 1);
  return batch;
}

// Sum over targets of weight * cross-entropy, and the sum of weights: loss = first / second.
// Only the targets that weigh get logits: with the prompt's loss weight 0 (role and QA training)
// a few completion tokens of a few hundred do, and the vocabulary projection, its softmax and their
// backward over every other position were thrown away. A zero-weight target adds nothing to the
// loss or its gradient, so the loss is the full computation's.
std::pair<torch::Tensor, torch::Tensor> weightedLoss(const LlamaModel& model, const Batch& batch) {
  torch::Tensor x = model.hiddenDense(batch.tokens, batch.positions, batch.allowed);
  const int64_t t = batch.tokens.size(1);
  torch::Tensor weights = batch.weights.reshape({-1});  // F32 [B*(T-1)]
  torch::Tensor rows = weights.gt(0).nonzero().squeeze(1);  // I64 [R]: the targets that weigh
  torch::Tensor h = x.narrow(1, 0, t - 1).reshape({-1, x.size(-1)}).index_select(0, rows);
  torch::Tensor ce = torch::nn::functional::cross_entropy(
      model.logits(h), batch.targets.reshape({-1}).index_select(0, rows),  // F32 [R, vocab]
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  return {(ce * weights.index_select(0, rows)).sum(), weights.sum()};
}

Result<std::vector<TrainingExample>> drawExamples(ExampleSource& source, uint64_t seed, int64_t step,
                                                  int64_t first, int64_t count, int64_t seqLen, int64_t vocab) {
  std::vector<TrainingExample> examples;
  examples.reserve(static_cast<size_t>(count));
  for (int64_t i = first; i < first + count; ++i) {
    RAG_ASSIGN_OR_RETURN(TrainingExample e, source.example(seed, step, i, seqLen));
    RAG_RETURN_IF_ERROR(checkExample(e, seqLen, vocab, step, i));
    examples.push_back(std::move(e));
  }
  return examples;
}

// What one more forward group is taken to cost, in padded tokens: the per-call overhead of a
// step's operators (a rough figure, not tuned; any value gives the same loss).
constexpr int64_t kGroupCostTokens = 256;

// The examples split into groups of similar length, each padded only to its own longest: a
// batch's lengths vary (role prompts 40 to 384 tokens), and padding all of them to the longest
// spent the forward and backward on padding. Examples are sorted by length (ties by index) and cut into contiguous
// groups minimising padded tokens + kGroupCostTokens per group (a small exact DP). The loss is a
// sum over targets, so the groups' sums add up to the whole batch's: the same loss and gradient.
std::vector<std::vector<TrainingExample>> lengthGroups(std::vector<TrainingExample> examples) {
  std::stable_sort(examples.begin(), examples.end(), [](const TrainingExample& a, const TrainingExample& b) {
    return a.tokens.size() < b.tokens.size();
  });
  const size_t n = examples.size();
  std::vector<int64_t> best(n + 1, std::numeric_limits<int64_t>::max());
  std::vector<size_t> cut(n + 1, 0);
  best[0] = 0;
  for (size_t end = 1; end <= n; ++end)  // the group [begin, end) pads to examples[end - 1]'s length
    for (size_t begin = 0; begin < end; ++begin) {
      const auto cost = best[begin] + kGroupCostTokens +
                        static_cast<int64_t>((end - begin) * examples[end - 1].tokens.size());
      if (cost < best[end]) best[end] = cost, cut[end] = begin;
    }
  std::vector<std::vector<TrainingExample>> groups;
  for (size_t end = n; end > 0; end = cut[end])
    groups.emplace_back(std::make_move_iterator(examples.begin() + static_cast<std::ptrdiff_t>(cut[end])),
                        std::make_move_iterator(examples.begin() + static_cast<std::ptrdiff_t>(end)));
  return groups;
}

// ---- Checkpoint state --------------------------------------------------------------------------

struct TrainerState {
  int64_t step = 0;
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<double> lossHistory;
  std::vector<EvalPoint> evalHistory;
};

std::string stateJson(const TrainerState& s) {
  std::ostringstream os;
  JsonWriter w(os);
  w.beginObject();
  w.key("format").value(kStateFormat);
  w.key("version").value(kStateVersion);
  w.key("step").value(s.step);
  w.key("options").beginObject();
  for (const auto& [k, v] : s.options) w.key(k).value(v);
  w.endObject();
  w.key("loss_history").beginArray();
  for (double l : s.lossHistory) w.value(l);
  w.endArray();
  w.key("eval_history").beginArray();
  for (const EvalPoint& e : s.evalHistory) w.beginArray().value(e.step).value(e.loss).endArray();
  w.endArray();
  w.endObject();
  os << '\n';
  return os.str();
}

Result<TrainerState> readState(const fs::path& file) {
  RAG_ASSIGN_OR_RETURN(std::string text, readFile(file));
  const auto bad = [&](std::string_view what) {
    return Status::corrupt("checkpoint state " + file.string() + " " + std::string(what) +
                           "; delete the checkpoint directory and train again");
  };
  Result<JsonValue> doc = parseJson(text);
  if (!doc) return bad("is not valid JSON (" + doc.status().message() + ")");
  const JsonValue* format = doc->find("format");
  const JsonValue* version = doc->find("version");
  if (!format || !format->isString() || format->asString() != kStateFormat)
    return bad("is not a ragraph trainer state");
  if (!version || version->asInt64() != kStateVersion)
    return bad("has another version than this build's " + std::to_string(kStateVersion));
  TrainerState s;
  const JsonValue* step = doc->find("step");
  if (!step || !step->asInt64() || *step->asInt64() < 0) return bad("has no valid step");
  s.step = *step->asInt64();
  const JsonValue* options = doc->find("options");
  if (!options || !options->isObject()) return bad("has no options");
  for (const auto& [k, v] : options->asObject()) {
    if (!v.isString()) return bad("has a non-string option");
    s.options.emplace_back(k, v.asString());
  }
  const JsonValue* losses = doc->find("loss_history");
  if (!losses || !losses->isArray()) return bad("has no loss history");
  for (const JsonValue& l : losses->asArray())
    s.lossHistory.push_back(l.isNumber() ? l.asDouble() : std::numeric_limits<double>::quiet_NaN());
  if (const JsonValue* evals = doc->find("eval_history"); evals && evals->isArray())
    for (const JsonValue& e : evals->asArray()) {
      if (!e.isArray() || e.size() != 2 || !e.asArray()[0].asInt64() || !e.asArray()[1].isNumber())
        return bad("has a malformed eval history");
      s.evalHistory.push_back({*e.asArray()[0].asInt64(), e.asArray()[1].asDouble()});
    }
  return s;
}

// InvalidArgument naming the first option whose value differs.
Status checkSameRun(const std::vector<std::pair<std::string, std::string>>& saved,
                    const std::vector<std::pair<std::string, std::string>>& now,
                    const fs::path& checkpoint) {
  std::map<std::string, std::string> a(saved.begin(), saved.end());
  std::map<std::string, std::string> b(now.begin(), now.end());
  for (const auto& m : {a, b})
    for (const auto& [key, unused] : m) {
      auto ia = a.find(key), ib = b.find(key);
      const std::string va = ia == a.end() ? "(not set)" : ia->second;
      const std::string vb = ib == b.end() ? "(not set)" : ib->second;
      if (va == vb) continue;
      return Status::invalidArgument("the checkpoint in " + checkpoint.string() +
                                     " was made with --" + key + " " + va + ", this run asks for --" +
                                     key + " " + vb + "; repeat the first run's options with "
                                     "--resume, or train into another --out");
    }
  return Status::ok();
}

// ---- What is trained -----------------------------------------------------------------------

// The model a Run trains and the loss it minimises: the language model (next-token loss over
// ExampleSource sequences) and the embedder (in-batch contrastive loss over PairSource pairs)
// share the rest of the run: optimizer, schedule, clipping, checkpoints, resume and progress.
class Objective {
public:
  virtual ~Objective() = default;
  // A new model (random from the spec's config and seed, or the spec's initFrom directory).
  virtual Status fresh(uint64_t seed) = 0;
  virtual Status load(const fs::path& dir) = 0;  // a checkpoint's model
  virtual Status save(const fs::path& dir) const = 0;
  virtual std::vector<torch::Tensor> parameters() const = 0;
  // Whether the optimizer decays a parameter (matrices, not norms, biases or embeddings).
  virtual bool decays(const torch::Tensor& p) const = 0;
  struct Loss {
    torch::Tensor sum, weight;  // loss = sum / weight
    int64_t tokens = 0;         // non-padding tokens the loss saw
  };
  // The loss over examples [first, first + count) of `step` (-1: the held-out set), computed
  // in BF16 from the F32 master weights when bf16 is set.
  virtual Result<Loss> loss(int64_t step, int64_t first, int64_t count, bool bf16) = 0;
};

// The model half of an objective: a new, loaded or saved Model (LlamaModel, BertModel) with
// F32 master weights.
template <typename Model, typename Config>
class ModelObjective : public Objective {
public:
  ModelObjective(const TrainSetup& setup, const Config& config) : m_setup(setup), m_config(config) {}
  Status fresh(uint64_t seed) override {
    Result<Model> m = m_setup.model.initFrom.empty() ? Model::initRandom(m_config, seed)
                                                     : Model::load(m_setup.model.initFrom);
    if (!m) return m.status();
    m_model.emplace(std::move(*m));
    return Status::ok();
  }
  Status load(const fs::path& dir) override {
    RAG_ASSIGN_OR_RETURN(Model m, Model::load(dir));
    m_model.emplace(std::move(m));
    return Status::ok();
  }
  Status save(const fs::path& dir) const override { return m_model->save(dir); }
  std::vector<torch::Tensor> parameters() const override { return m_model->parameters(); }

protected:
  const TrainSetup& m_setup;
  const Config& m_config;
  std::optional<Model> m_model;
};

class LanguageModelObjective final : public ModelObjective<LlamaModel, LlamaConfig> {
public:
  LanguageModelObjective(const TrainSetup& setup, ExampleSource& train, ExampleSource* heldOut)
      : ModelObjective(setup, setup.model.config), m_train(train), m_heldOut(heldOut) {}

  bool decays(const torch::Tensor& p) const override {
    return p.dim() >= 2 && !p.is_same(m_model->weights().embed);  // often tied to lm_head
  }
  ~LanguageModelObjective() override {
    if (m_ahead.valid()) m_ahead.wait();
  }

  Result<Loss> loss(int64_t step, int64_t first, int64_t count, bool bf16) override {
    RAG_ASSIGN_OR_RETURN(std::vector<TrainingExample> examples, draw(step, first, count));
    const LlamaModel work = bf16 ? m_model->to(torch::kBFloat16) : *m_model;
    Loss out;
    for (const std::vector<TrainingExample>& group : lengthGroups(std::move(examples))) {
      const Batch batch = collate(group);
      auto [sum, weight] = weightedLoss(work, batch);
      out.sum = out.sum.defined() ? out.sum + sum : sum;
      out.weight = out.weight.defined() ? out.weight + weight : weight;
      out.tokens += batch.realTokens;
    }
    return out;
  }

private:
  using Examples = Result<std::vector<TrainingExample>>;
  struct Key {
    int64_t step, first, count;
    bool operator==(const Key&) const = default;
  };

  // A step's examples, drawn one step ahead on a thread of the objective's own while the model
  // computes: drawing (BM25 retrieval, prompt rendering, tokenizing) 320 role examples took about
  // 5 s on one core, a quarter of their 20 steps, with the compute's threads idle meanwhile. Examples are a pure function of
  // their key, so what is drawn ahead is what would be drawn now; the source is never asked from
  // two threads at once (the held-out draws wait for the draw in flight, in case it is the same
  // source).
  Examples draw(int64_t step, int64_t first, int64_t count) {
    const TrainParams& p = m_setup.params;
    const int64_t vocab = m_model->config().vocabSize;
    if (step < 0) {
      if (m_ahead.valid()) m_ahead.wait();
      return drawExamples(*m_heldOut, p.seed, step, first, count, p.seqLen, vocab);
    }
    Examples now = Status::internal("unset");
    if (m_ahead.valid() && m_aheadKey == Key{step, first, count}) {
      now = m_ahead.get();
    } else {
      if (m_ahead.valid()) m_ahead.wait();  // another key's draw (a resume, another batch split): dropped
      now = drawExamples(m_train, p.seed, step, first, count, p.seqLen, vocab);
    }
    if (step + 1 < p.steps) {
      m_aheadKey = Key{step + 1, first, count};
      m_ahead = std::async(std::launch::async, [this, key = m_aheadKey, seed = p.seed, seqLen = p.seqLen, vocab] {
        return drawExamples(m_train, seed, key.step, key.first, key.count, seqLen, vocab);
      });
    }
    return now;
  }

  ExampleSource& m_train;
  ExampleSource* m_heldOut;
  std::future<Examples> m_ahead;
  Key m_aheadKey{};
};

// Rows of one padded group when the embedder objective embeds a batch's texts (grouped by length).
constexpr size_t kEmbedGroupRows = 16;

class EmbedderObjective final : public ModelObjective<BertModel, BertConfig> {
public:
  EmbedderObjective(const TrainSetup& setup, PairSource& train, PairSource* heldOut, double temperature)
      : ModelObjective(setup, setup.model.encoder), m_train(train), m_heldOut(heldOut),
        m_temperature(temperature) {}

  Status fresh(uint64_t seed) override {
    RAG_RETURN_IF_ERROR(ModelObjective::fresh(seed));
    const ModelSpec& spec = m_setup.model;
    if (spec.lexicalDim > 0) {
      Result<BertModel> m = m_model->withLexical(spec.lexical, spec.lexicalDim, spec.lexicalWeight);
      if (!m) return m.status().withContext(spec.initFrom.empty() ? "the new embedder" : spec.initFrom.string());
      m_model.emplace(std::move(*m));
    }
    return prepareWords();
  }
  Status load(const fs::path& dir) override {
    RAG_RETURN_IF_ERROR(ModelObjective::load(dir));
    return prepareWords();
  }
  bool decays(const torch::Tensor& p) const override {
    const BertWeights& w = m_model->weights();
    return p.dim() >= 2 && !p.is_same(w.word) && !p.is_same(w.position) && !p.is_same(w.tokenType);
  }
  Result<Loss> loss(int64_t step, int64_t first, int64_t count, bool bf16) override {
    const TrainParams& p = m_setup.params;
    PairSource& source = step < 0 ? *m_heldOut : m_train;
    std::vector<TrainingPair> pairs;
    Loss out;
    const int64_t vocab = m_model->config().vocabSize;
    const int64_t maxLen = std::min(p.seqLen, m_model->config().maxPositionEmbeddings);
    for (int64_t i = first; i < first + count; ++i) {
      RAG_ASSIGN_OR_RETURN(TrainingPair pair, source.pair(p.seed, step, i, maxLen));
      const std::string where = "training pair " + std::to_string(i) + " of step " + std::to_string(step);
      for (const std::vector<int32_t>* text : {&pair.query, &pair.passage, &pair.negative}) {
        if (text == &pair.negative && text->empty()) continue;  // no hard negative
        if (text->empty() || static_cast<int64_t>(text->size()) > maxLen)
          return Status::invalidArgument(where + " has a text of " + std::to_string(text->size()) +
                                         " tokens; it must have 1 to " + std::to_string(maxLen) +
                                         " (--seq-len, max_position_embeddings)");
        for (int32_t t : *text)
          if (t < 0 || t >= vocab)
            return Status::invalidArgument(where + " holds token id " + std::to_string(t) +
                                           ", outside the model's vocabulary of " + std::to_string(vocab));
        out.tokens += static_cast<int64_t>(text->size());
      }
      pairs.push_back(std::move(pair));
    }
    const BertModel work = bf16 ? m_model->to(torch::kBFloat16) : *m_model;
    // Texts are embedded in groups of similar length, each padded only to its own longest: a
    // batch of short passages with one long one padded to the long one spent ~3x the compute.
    // Rows are independent (per-text attention and pooling), so grouping changes no value.
    auto embedGroup = [&](const std::vector<const std::vector<int32_t>*>& texts) {
      int64_t len = 0;
      for (const std::vector<int32_t>* t : texts) len = std::max<int64_t>(len, static_cast<int64_t>(t->size()));
      const auto n = static_cast<int64_t>(texts.size());
      std::vector<int64_t> ids(static_cast<size_t>(n * len), 0);
      std::vector<uint8_t> valid(static_cast<size_t>(n * len), 0);
      for (int64_t r = 0; r < n; ++r) {
        const std::vector<int32_t>& t = *texts[static_cast<size_t>(r)];
        for (size_t j = 0; j < t.size(); ++j) {
          ids[static_cast<size_t>(r * len) + j] = t[j];
          valid[static_cast<size_t>(r * len) + j] = 1;
        }
      }
      std::vector<Words> words;
      if (m_words)
        for (const std::vector<int32_t>* t : texts) words.push_back(m_words->words(*t));
      return work.embed(torch::tensor(ids, torch::kLong).view({n, len}),
                        torch::from_blob(valid.data(), {n, len}, torch::kUInt8).to(torch::kBool), words);
    };
    auto embed = [&](const std::vector<const std::vector<int32_t>*>& texts) {
      std::vector<int64_t> order(texts.size());
      std::iota(order.begin(), order.end(), int64_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return texts[static_cast<size_t>(a)]->size() < texts[static_cast<size_t>(b)]->size(); });
      std::vector<torch::Tensor> parts;
      for (size_t start = 0; start < order.size(); start += kEmbedGroupRows) {
        std::vector<const std::vector<int32_t>*> group;
        for (size_t k = start; k < std::min(order.size(), start + kEmbedGroupRows); ++k)
          group.push_back(texts[static_cast<size_t>(order[k])]);
        parts.push_back(embedGroup(group));
      }
      // Back to the texts' order: row order[k] of the result is row k of the sorted groups.
      std::vector<int64_t> inverse(order.size());
      for (size_t k = 0; k < order.size(); ++k) inverse[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
      return torch::cat(parts, 0).index_select(0, torch::tensor(inverse, torch::kLong));
    };
    // Candidates: every pair's passage (row i's positive is column i), then the hard negatives.
    std::vector<const std::vector<int32_t>*> queries, candidates;
    std::vector<int64_t> candidateIds;
    for (const TrainingPair& pr : pairs) {
      queries.push_back(&pr.query);
      candidates.push_back(&pr.passage);
      candidateIds.push_back(pr.passageId);
    }
    for (const TrainingPair& pr : pairs)
      if (!pr.negative.empty()) {
        candidates.push_back(&pr.negative);
        candidateIds.push_back(pr.negativeId);
      }
    torch::Tensor q = embed(queries);
    torch::Tensor d = embed(candidates);
    torch::Tensor logits = torch::matmul(q, d.t()) / m_temperature;  // F32 [B, candidates]
    // Another copy of a query's positive passage is no negative.
    const auto b = static_cast<int64_t>(pairs.size());
    const auto c = static_cast<int64_t>(candidates.size());
    std::vector<uint8_t> same(static_cast<size_t>(b * c), 0);
    for (int64_t i = 0; i < b; ++i) {
      const int64_t positive = pairs[static_cast<size_t>(i)].passageId;
      for (int64_t j = 0; j < c; ++j)
        same[static_cast<size_t>(i * c + j)] = i != j && positive != 0 && candidateIds[static_cast<size_t>(j)] == positive;
    }
    logits = logits.masked_fill(torch::from_blob(same.data(), {b, c}, torch::kUInt8).to(torch::kBool),
                                -std::numeric_limits<float>::infinity());
    out.sum = torch::nn::functional::cross_entropy(
        logits, torch::arange(b, torch::kLong),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    out.weight = torch::tensor(static_cast<double>(b), torch::kFloat32);
    return out;
  }

private:
  // The lexical branch reads whole words from the texts' token bytes: its tokenizer.
  Status prepareWords() {
    m_words.reset();
    if (m_model->config().lexicalBuckets == 0) return Status::ok();
    if (m_setup.tokenizerDir.empty())
      return Status::invalidArgument("an embedder with a lexical branch trains with its tokenizer (words come from "
                                     "token bytes); give the run a tokenizer directory");
    RAG_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::load(m_setup.tokenizerDir / "tokenizer.json"));
    m_words.emplace(tokenizer);
    return Status::ok();
  }

  PairSource& m_train;
  PairSource* m_heldOut;
  double m_temperature;
  std::optional<TokenWords> m_words;
};

// ---- The run -----------------------------------------------------------------------------------

class Run {
public:
  Run(const TrainSetup& setup, Objective& objective, bool hasHeldOut,
      const TrainCallbacks& callbacks)
      : m_setup(setup), m_p(setup.params), m_objective(objective), m_hasHeldOut(hasHeldOut),
        m_cb(callbacks), m_checkpointDir(setup.outDir / "checkpoint") {}

  Result<TrainResult> run();

private:
  Status prepare();
  Status buildOptimizer();
  Status step(int64_t step);
  Result<double> evaluate();
  Status writeCheckpoint();

  const TrainSetup& m_setup;
  const TrainParams& m_p;
  Objective& m_objective;
  bool m_hasHeldOut;
  const TrainCallbacks& m_cb;
  const fs::path m_checkpointDir;

  std::vector<torch::Tensor> m_params;
  std::unique_ptr<torch::optim::AdamW> m_opt;
  TrainerState m_state;
  int64_t m_lastCheckpoint = -1;
  TrainResult m_result;

  // The window since the last progress report.
  double m_windowLoss = 0;
  int64_t m_windowSteps = 0;
  int64_t m_windowTokens = 0;
  double m_windowSeconds = 0;
  double m_lastGradNorm = 0;
};

Status Run::prepare() {
  const fs::path found = committedDirectory(m_checkpointDir);
  if (!m_setup.resume) {
    if (!found.empty())
      return Status::alreadyExists(m_setup.outDir.string() + " already holds a checkpoint of an "
                                   "earlier run (" + found.string() + "); pass --resume to "
                                   "continue it, or choose another --out");
    RAG_RETURN_IF_ERROR(m_objective.fresh(m_p.seed));
    m_state.options = runSignature(m_setup);
    return buildOptimizer();
  }
  if (found.empty())
    return Status::notFound("no checkpoint to resume in " + m_checkpointDir.string() +
                            "; run without --resume to start training");
  RAG_ASSIGN_OR_RETURN(m_state, readState(found / kStateFile));
  RAG_RETURN_IF_ERROR(checkSameRun(m_state.options, runSignature(m_setup), found));
  if (m_state.step > m_p.steps || static_cast<int64_t>(m_state.lossHistory.size()) != m_state.step)
    return Status::corrupt("checkpoint state in " + found.string() + " is inconsistent (step " +
                           std::to_string(m_state.step) + "); delete the checkpoint and train again");
  RAG_RETURN_IF_ERROR(m_objective.load(found).withContext("loading the checkpoint model"));
  RAG_RETURN_IF_ERROR(buildOptimizer());
  try {
    torch::load(*m_opt, (found / kOptimizerFile).string());
  } catch (const c10::Error& e) {
    return Status::corrupt("optimizer state " + (found / kOptimizerFile).string() +
                           " cannot be read (" + e.what_without_backtrace() +
                           "); delete the checkpoint directory and train again");
  }
  m_lastCheckpoint = m_state.step;
  return Status::ok();
}

Status Run::buildOptimizer() {
  m_params = m_objective.parameters();
  std::vector<torch::Tensor> decay, noDecay;
  for (torch::Tensor& p : m_params) {
    p.requires_grad_(true);
    (m_objective.decays(p) ? decay : noDecay).push_back(p);
  }
  m_result.parameters = 0;
  for (const torch::Tensor& p : m_params) m_result.parameters += p.numel();
  auto options = torch::optim::AdamWOptions(m_p.lr).betas({0.9, 0.95}).eps(1e-8);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::AdamWOptions>(
                                 torch::optim::AdamWOptions(options).weight_decay(m_p.weightDecay)));
  groups.emplace_back(noDecay, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(options).weight_decay(0.0)));
  m_opt = std::make_unique<torch::optim::AdamW>(std::move(groups), options);
  return Status::ok();
}

Status Run::step(int64_t step) {
  Stopwatch watch;
  const double lr = learningRate(m_p, step);
  for (auto& group : m_opt->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  m_opt->zero_grad();
  RAG_ASSIGN_OR_RETURN(Objective::Loss l, m_objective.loss(step, 0, m_p.batch, m_p.dtype == TrainDType::BF16));
  const double w = l.weight.item<double>();
  if (!(w > 0))
    return Status::invalidArgument("no token of step " + std::to_string(step) +
                                   "'s batch has a loss weight; the training data gives nothing to learn");
  torch::Tensor loss = l.sum / l.weight;
  const double lossValue = loss.item<double>();
  if (!std::isfinite(lossValue))
    return Status::internal("the loss stopped being finite at step " + std::to_string(step + 1) +
                            " (learning rate " + exact(lr) + "); lower --lr or raise --warmup");
  loss.backward();
  const double maxNorm = m_p.clipNorm > 0 ? m_p.clipNorm : std::numeric_limits<double>::infinity();
  m_lastGradNorm = torch::nn::utils::clip_grad_norm_(m_params, maxNorm);
  if (!std::isfinite(m_lastGradNorm))
    return Status::internal("the gradient stopped being finite at step " + std::to_string(step + 1) +
                            "; lower --lr or raise --warmup");
  m_opt->step();

  m_state.lossHistory.push_back(lossValue);
  m_state.step = step + 1;
  const double seconds = watch.elapsedSeconds();
  m_windowLoss += lossValue;
  ++m_windowSteps;
  m_windowTokens += l.tokens;
  m_windowSeconds += seconds;
  m_result.tokens += l.tokens;
  m_result.seconds += seconds;
  return Status::ok();
}

Result<double> Run::evaluate() {
  torch::NoGradGuard noGrad;
  double sum = 0, weight = 0;
  for (int64_t first = 0; first < m_p.evalExamples; first += m_p.batch) {
    const int64_t count = std::min(m_p.batch, m_p.evalExamples - first);
    RAG_ASSIGN_OR_RETURN(Objective::Loss l, m_objective.loss(-1, first, count, m_p.dtype == TrainDType::BF16));
    sum += l.sum.item<double>();
    weight += l.weight.item<double>();
  }
  if (!(weight > 0))
    return Status::invalidArgument("no held-out token has a loss weight; nothing to evaluate");
  return sum / weight;
}

Status Run::writeCheckpoint() {
  RAG_ASSIGN_OR_RETURN(fs::path staging, stageDirectory(m_checkpointDir));
  RAG_RETURN_IF_ERROR(m_objective.save(staging));
  try {
    torch::save(*m_opt, (staging / kOptimizerFile).string());
  } catch (const c10::Error& e) {
    return Status::ioError("cannot write the optimizer state to " + staging.string() + ": " +
                           e.what_without_backtrace());
  }
  RAG_RETURN_IF_ERROR(copyTokenizerFiles(m_setup.tokenizerDir, staging));
  RAG_RETURN_IF_ERROR(writeFileAtomic(staging / kStateFile, stateJson(m_state)));
  RAG_RETURN_IF_ERROR(commitStagedDirectory(staging, m_checkpointDir));
  m_lastCheckpoint = m_state.step;
  if (m_cb.checkpointed) m_cb.checkpointed(m_state.step, m_checkpointDir);
  return Status::ok();
}

Result<TrainResult> Run::run() {
  RAG_RETURN_IF_ERROR(validateTrainParams(m_p));
  if (m_p.evalEvery > 0 && !m_hasHeldOut)
    return Status::invalidArgument("evaluation every " + std::to_string(m_p.evalEvery) +
                                   " steps needs held-out examples");
  // A step's large tensors (the logits alone are B x T x vocab floats) would otherwise be
  // mmapped anew every step; the page faults cost 3-4x the step time.
  keepFreedMemoryInHeap();
  torch::set_num_threads(m_p.threads > 0 ? m_p.threads
                                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  std::error_code ec;
  fs::create_directories(m_setup.outDir, ec);
  if (ec)
    return Status::ioError("cannot create the output directory " + m_setup.outDir.string() + ": " +
                           ec.message());
  RAG_RETURN_IF_ERROR(prepare());
  m_result.outDir = m_setup.outDir;
  m_result.startStep = m_state.step;
  if (m_cb.started) m_cb.started(m_state.step, m_result.parameters);

  bool stopped = false;
  for (int64_t s = m_state.step; s < m_p.steps && !stopped; ++s) {
    RAG_RETURN_IF_ERROR(step(s));
    const int64_t done = s + 1;
    if (m_cb.progress && (done % m_p.logEvery == 0 || done == m_p.steps)) {
      TrainProgress pr;
      pr.step = done;
      pr.steps = m_p.steps;
      pr.loss = m_windowLoss / static_cast<double>(m_windowSteps);
      pr.lr = learningRate(m_p, s);
      pr.gradNorm = m_lastGradNorm;
      pr.tokensPerSecond = m_windowSeconds > 0 ? static_cast<double>(m_windowTokens) / m_windowSeconds : 0;
      pr.elapsedSeconds = m_result.seconds;
      m_cb.progress(pr);
      m_windowLoss = 0;
      m_windowSteps = m_windowTokens = 0;
      m_windowSeconds = 0;
    }
    if (m_p.evalEvery > 0 && (done % m_p.evalEvery == 0 || done == m_p.steps)) {
      RAG_ASSIGN_OR_RETURN(double evalLoss, evaluate());
      m_state.evalHistory.push_back({done, evalLoss});
      if (m_cb.evaluated) m_cb.evaluated(m_state.evalHistory.back());
    }
    stopped = m_cb.stopRequested && m_cb.stopRequested() && done < m_p.steps;
    if (stopped || (m_p.checkpointEvery > 0 && done % m_p.checkpointEvery == 0 && done < m_p.steps))
      RAG_RETURN_IF_ERROR(writeCheckpoint());
  }

  if (!stopped) {
    // The final checkpoint first: if writing the model fails, a resume only writes it again.
    if (m_lastCheckpoint != m_state.step) RAG_RETURN_IF_ERROR(writeCheckpoint());
    RAG_RETURN_IF_ERROR(m_objective.save(m_setup.outDir));
    RAG_RETURN_IF_ERROR(copyTokenizerFiles(m_setup.tokenizerDir, m_setup.outDir));
    m_result.completed = true;
  }
  m_result.step = m_state.step;
  m_result.lossHistory = m_state.lossHistory;
  m_result.evalHistory = m_state.evalHistory;
  const size_t tail = std::min<size_t>(static_cast<size_t>(m_p.logEvery), m_result.lossHistory.size());
  double sum = 0;
  for (size_t i = m_result.lossHistory.size() - tail; i < m_result.lossHistory.size(); ++i)
    sum += m_result.lossHistory[i];
  m_result.finalLoss = tail ? sum / static_cast<double>(tail) : 0;
  m_result.tokensPerSecond =
      m_result.seconds > 0 ? static_cast<double>(m_result.tokens) / m_result.seconds : 0;
  return m_result;
}

}  // namespace

Status validateTrainParams(const TrainParams& p) {
  const auto positive = [](int64_t v, std::string_view name) -> Status {
    if (v < 1) return Status::invalidArgument("--" + std::string(name) + " must be at least 1 (got " + std::to_string(v) + ")");
    return Status::ok();
  };
  RAG_RETURN_IF_ERROR(positive(p.steps, "steps"));
  RAG_RETURN_IF_ERROR(positive(p.batch, "batch"));
  RAG_RETURN_IF_ERROR(positive(p.logEvery, "log-every"));
  if (p.seqLen < 2) return Status::invalidArgument("--seq-len must be at least 2 (got " + std::to_string(p.seqLen) + ")");
  if (!(p.lr > 0) || !std::isfinite(p.lr))
    return Status::invalidArgument("--lr must be a number > 0 (got " + exact(p.lr) + ")");
  if (!(p.minLr >= 0) || p.minLr > p.lr)
    return Status::invalidArgument("--min-lr must be between 0 and --lr (got " + exact(p.minLr) + ")");
  if (p.warmupSteps < 0 || p.warmupSteps >= p.steps)
    return Status::invalidArgument("--warmup must be between 0 and --steps - 1 (got " +
                                   std::to_string(p.warmupSteps) + ")");
  if (!(p.weightDecay >= 0) || !std::isfinite(p.weightDecay))
    return Status::invalidArgument("--weight-decay must be a number >= 0");
  if (!std::isfinite(p.clipNorm)) return Status::invalidArgument("--clip-norm must be a finite number");
  if (p.checkpointEvery < 0) return Status::invalidArgument("--checkpoint-every must not be negative");
  if (p.evalEvery < 0) return Status::invalidArgument("--eval-every must not be negative");
  if (p.evalEvery > 0 && p.evalExamples < 1)
    return Status::invalidArgument("--eval-examples must be at least 1");
  if (p.threads < 0) return Status::invalidArgument("--threads must not be negative");
  return Status::ok();
}

double learningRate(const TrainParams& p, int64_t step) {
  if (step < p.warmupSteps)
    return p.lr * static_cast<double>(step + 1) / static_cast<double>(p.warmupSteps);
  const int64_t span = p.steps - 1 - p.warmupSteps;
  if (span <= 0) return p.lr;
  const double f = std::clamp(static_cast<double>(step - p.warmupSteps) / static_cast<double>(span), 0.0, 1.0);
  return p.minLr + (p.lr - p.minLr) * 0.5 * (1.0 + std::cos(std::numbers::pi * f));
}

namespace {

Result<TrainResult> runGuarded(const TrainSetup& setup, Objective& objective, bool hasHeldOut,
                               const TrainCallbacks& callbacks) {
  try {
    Run run(setup, objective, hasHeldOut, callbacks);
    return run.run();
  } catch (const c10::Error& e) {
    return Status::internal(std::string("libtorch failed while training: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    return Status::internal(std::string("training failed: ") + e.what());
  }
}

}  // namespace

Result<TrainResult> trainLanguageModel(const TrainSetup& setup, ExampleSource& train,
                                       ExampleSource* heldOut, const TrainCallbacks& callbacks) {
  LanguageModelObjective objective(setup, train, heldOut);
  return runGuarded(setup, objective, heldOut != nullptr, callbacks);
}

Result<TrainResult> trainEmbedder(const TrainSetup& setup, PairSource& train, PairSource* heldOut,
                                  const TrainCallbacks& callbacks, double temperature) {
  if (!(temperature > 0) || !std::isfinite(temperature))
    return Status::invalidArgument("--temperature must be a number > 0 (got " + exact(temperature) + ")");
  EmbedderObjective objective(setup, train, heldOut, temperature);
  return runGuarded(setup, objective, heldOut != nullptr, callbacks);
}

}  // namespace rag::model
