// Training a Llama-family decoder with libtorch: batches of token sequences with per-token loss
// weights and per-sequence attention masks, AdamW, linear warm-up + cosine decay, gradient
// clipping, checkpoints that a resumed run continues from bit for bit, and a Hugging Face
// model directory at the end (config.json, model.safetensors, tokenizer.json) that
// LlamaModel::load and Tokenizer::load read.
//
//   TrainSetup setup;
//   setup.outDir = "out/lm";
//   setup.tokenizerDir = "out/tok";              // copied next to the model
//   setup.model.config = smallConfig;            // or setup.model.initFrom = "some/hf/dir"
//   setup.params.steps = 1000;
//   MyExamples source;                           // an ExampleSource
//   RAG_ASSIGN_OR_RETURN(TrainResult r, trainLanguageModel(setup, source, nullptr, {}));
//
// This header is torch-free (the CLI includes it); trainer.cpp is one of the few files that
// include torch.
//
// Determinism: example (step, index) of a run is asked of the source by its key alone, the
// model starts from initRandom(config, seed) or a checkpoint, and the optimizer state is saved
// exactly, so with the same thread count N steps straight and N/2 + resume + N/2 give equal
// weights.
//
// Output directory layout:
//   <out>/config.json, model.safetensors, tokenizer.json   the final model (after the last step)
//   <out>/checkpoint/          the last checkpoint: the model in HF layout, optimizer.pt
//                              (torch::save of the AdamW state), trainer_state.json (step,
//                              seed, params, run options, loss history), tokenizer files;
//                              replaced as a whole (core/fs.h stageDirectory), so an
//                              interrupted write never destroys the previous one
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/attention_mask.h"
#include "model/lexical_words.h"
#include "model/model_config.h"
#include "rag/status.h"

namespace rag::model {

enum class TrainDType { F32, BF16 };

struct TrainParams {
  int64_t steps = 1000;
  int64_t batch = 16;          // sequences per step
  int64_t seqLen = 256;        // the padded length of a batch; examples must fit
  double lr = 1e-3;            // peak learning rate, reached at the end of warm-up
  double minLr = 1e-4;         // the learning rate of the last step
  int64_t warmupSteps = 100;   // linear from lr/warmup to lr
  double weightDecay = 0.1;    // AdamW decoupled decay, on matrices only (not norms, biases, embeddings)
  double clipNorm = 1.0;       // global gradient L2 norm bound; <= 0: no clipping
  uint64_t seed = 1;           // model init and example draws
  int64_t checkpointEvery = 200;  // steps between checkpoints; 0: only at the end and on a stop
  int64_t logEvery = 10;       // steps between progress reports (the last step always reports)
  int64_t evalEvery = 0;       // steps between held-out evaluations; 0: none
  int64_t evalExamples = 64;   // held-out examples per evaluation (the same ones each time)
  // F32: weights, activations and optimizer in F32. BF16: the forward and backward run in
  // BF16 from F32 master weights, which the optimizer updates and checkpoints hold.
  TrainDType dtype = TrainDType::F32;
  int threads = 0;             // libtorch intra-op threads; 0: every core
};

// InvalidArgument naming the first bad value (what `--name` it comes from in the CLI).
Status validateTrainParams(const TrainParams& params);

// The learning rate of step `step` (0-based): linear warm-up to params.lr over warmupSteps
// (step warmupSteps-1 is at the peak), then cosine decay from lr at step warmupSteps to minLr
// at step steps-1.
double learningRate(const TrainParams& params, int64_t step);

// One training sequence.
struct TrainingExample {
  std::vector<int32_t> tokens;
  // Per token: the weight of predicting tokens[t] from tokens[0, t); 0 = no loss. Same length
  // as tokens; lossWeights[0] is ignored (nothing predicts the first token).
  std::vector<float> lossWeights;
  AttentionMask mask;  // over tokens; validated against tokens.size()
};

// Where training sequences come from. example() must be a pure function of its key: the same
// (seed, step, index) gives the same example whatever was asked before, which is what lets a
// resumed run see exactly the batches the uninterrupted run would have seen. step is -1 for
// held-out examples (index 0..evalExamples-1). An example must hold 2..maxTokens tokens.
class ExampleSource {
public:
  virtual ~ExampleSource() = default;
  virtual Result<TrainingExample> example(uint64_t seed, int64_t step, int64_t index,
                                          int64_t maxTokens) = 0;
};

// One query -> passage pair for embedder training, with an optional hard negative: a passage
// that looks relevant to the query but is not (BM25-mined), scored against every query of the
// batch beside the in-batch passages.
struct TrainingPair {
  std::vector<int32_t> query, passage;  // token ids, 1..maxTokens each
  // The passage's identity: pairs of a batch sharing it are not each other's negatives.
  int64_t passageId = 0;
  std::vector<int32_t> negative;  // empty: none; else 1..maxTokens token ids
  int64_t negativeId = 0;
};

// Where embedder pairs come from; the same contract as ExampleSource (a pure function of the
// key; step -1 for held-out pairs).
class PairSource {
public:
  virtual ~PairSource() = default;
  virtual Result<TrainingPair> pair(uint64_t seed, int64_t step, int64_t index, int64_t maxTokens) = 0;
};

// The model to start from when not resuming.
struct ModelSpec {
  std::filesystem::path initFrom;  // an HF model directory; empty: initRandom(config, params.seed)
  LlamaConfig config;              // trainLanguageModel: used when initFrom is empty
  BertConfig encoder;              // trainEmbedder: used when initFrom is empty
  // trainEmbedder: when lexicalDim > 0, a lexical branch (BertModel::withLexical) of lexicalDim
  // components for a collection of `lexical` statistics, weighted lexicalWeight, is added to the
  // model a run starts from (random or initFrom). Training it needs setup.tokenizerDir (words
  // come from token bytes).
  LexicalStatistics lexical;
  int64_t lexicalDim = 0;
  double lexicalWeight = kLexicalWeight;
};

struct TrainSetup {
  std::filesystem::path outDir;
  std::filesystem::path tokenizerDir;  // its tokenizer.json (+ tokenizer_config.json) is copied
                                       // next to the model; empty: none
  ModelSpec model;
  TrainParams params;
  bool resume = false;  // continue from <outDir>/checkpoint
  // What else defines the run (data, context, mask, model shape, ...), by CLI option name.
  // Stored in the checkpoint; a resume with any other value (or other params) is refused.
  std::vector<std::pair<std::string, std::string>> runOptions;
};

struct TrainProgress {
  int64_t step = 0;        // steps done
  int64_t steps = 0;       // of the run
  double loss = 0;         // mean loss of the steps since the last report
  double lr = 0;           // of the last step
  double gradNorm = 0;     // of the last step, before clipping
  double tokensPerSecond = 0;  // non-padding tokens since the last report
  double elapsedSeconds = 0;   // this process's training time
};

struct EvalPoint {
  int64_t step = 0;
  double loss = 0;  // weighted mean loss over the held-out examples
};

struct TrainCallbacks {
  // Once the model and optimizer are ready (a resume's checkpoint read), before the first step.
  std::function<void(int64_t startStep, int64_t parameters)> started;
  std::function<void(const TrainProgress&)> progress;                   // every logEvery steps
  std::function<void(const EvalPoint&)> evaluated;                       // every evalEvery steps
  std::function<void(int64_t step, const std::filesystem::path&)> checkpointed;
  // Polled after each step; true: write a checkpoint and return (TrainResult::completed false).
  std::function<bool()> stopRequested;
};

struct TrainResult {
  std::filesystem::path outDir;
  int64_t startStep = 0;      // 0, or the checkpoint's step when resumed
  int64_t step = 0;           // steps done at the end
  bool completed = false;     // step == params.steps and the final model was written
  int64_t parameters = 0;     // distinct weights
  std::vector<double> lossHistory;  // one per step since step 0 (resumed runs include the past)
  std::vector<EvalPoint> evalHistory;
  double finalLoss = 0;       // mean over the last logEvery steps
  int64_t tokens = 0;         // non-padding tokens trained on in this process
  double seconds = 0;         // this process's training time
  double tokensPerSecond = 0;
};

// Runs the training. It sets glibc's malloc to keep freed memory in the process heap (no mmap
// for large blocks, no trimming), which makes a CPU step several times faster; the setting
// stays for the life of the process. Errors: InvalidArgument for bad params, a source breaking its contract or
// a token outside the model's vocabulary; AlreadyExists when outDir holds a checkpoint and
// resume is off; NotFound when resume is on and there is no checkpoint; InvalidArgument for a
// checkpoint of another run (naming the option that differs); Internal when the loss stops
// being finite (naming the step; lower the learning rate).
Result<TrainResult> trainLanguageModel(const TrainSetup& setup, ExampleSource& train,
                                       ExampleSource* heldOut, const TrainCallbacks& callbacks);

// Trains a BERT encoder (model/bert.h) for dense retrieval with the in-batch contrastive loss:
// each query's positive is its passage, every other passage of the batch a negative (but not
// one with the same passageId); loss = cross-entropy of query . passage / temperature over the
// batch's passages (embeddings mean-pooled and L2-normalised). params.seqLen bounds each text.
// Everything else (schedule, checkpoints, resume, callbacks, errors) as trainLanguageModel.
Result<TrainResult> trainEmbedder(const TrainSetup& setup, PairSource& train, PairSource* heldOut,
                                  const TrainCallbacks& callbacks, double temperature = 0.05);

}  // namespace rag::model
