// The engine facade: what the workbench and the CLI hold. One Engine owns the worker pool,
// the trace ring and the corpus it serves from; every call that does work runs on a background
// thread and returns a future or a handle, so a GUI thread never waits on it.
//
//   rag::EngineParams params = rag::defaultEngineParams();
//   params.corpus = "/path/corpus.db";
//   params.serving.modelDir = "datasets/models/rag-llama";        // enables submit()
//   params.serving.policy = *rag::parseServePolicy("hedra");
//   rag::Result<std::unique_ptr<rag::Engine>> engine = rag::Engine::create(params);
//   if (!engine) return fail(engine.status());
//   rag::Result<rag::RequestHandle> h = (*engine)->submit("What is a dog a kind of?",
//                                                         *rag::builtinWorkflow(rag::Workflow::OneShot));
//   rag::Result<rag::RequestResult> r = h->wait();   // r->answer, r->variables, r->stages
//   ...
//   std::vector<rag::TraceEvent> spans;
//   (*engine)->drainTrace(spans);   // what the workers did, for a timeline or a JSON export
//
// Serving (HedraRAG): a scheduler thread runs every live request's RAGraph; each cycle it takes
// the wavefront of ready nodes, splits and reorders them, starts speculative work, and hands
// sub-stages to a generation worker (ModelRunner, continuous batching) and a retrieval worker
// (query embedding + step-wise IVF search), which run on their own threads so generation and
// retrieval overlap. The baselines are policies of the same engine (ServePolicy).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rag/corpus.h"
#include "rag/request.h"
#include "rag/status.h"
#include "rag/trace.h"
#include "rag/workflow.h"

namespace rag {

// ---- serving policies ------------------------------------------------------------------------

// How the generation worker paces its sequences.
enum class GenerationPacing : uint8_t {
  Turns,         // takes turns with retrieval (no overlap): decodes until its turn's sequences end
  StageBatches,  // the sequences waiting when the runner falls idle form one batch, run to its end
  EveryStep,     // continuous batching: sequences join at every decode step (one sub-stage)
};

// How the retrieval worker paces its searches.
enum class RetrievalPacing : uint8_t {
  Turns,      // one search at a time, to its end, taking turns with generation
  Batches,    // every queued search embedded together and searched to the end in one call
  SubStages,  // time-budgeted sub-stages (HedraRAG Eq. 1); searches join at every one
};

// Which searches a retrieval sub-stage advances (sched/substage_planner.h).
enum class SubStagePlanning : uint8_t {
  // Whole searches, oldest request first (a request's later retrieval before a newer request's
  // first: earliest deadline first, since every request has the same SLO), speculative ones
  // last, until the budget is full.
  OldestFirst,
  AdmissionOrder,  // as OldestFirst, but in the order the searches reached the worker
  RoundRobin,      // one cluster of every live search per round (processor sharing)
};

// A serving policy: a named set of strategies. The baselines and HedraRAG are policies of one
// engine (parseServePolicy lists them); the switches only matter where the pacing uses them.
struct ServePolicy {
  std::string name;
  std::string description;
  GenerationPacing generation = GenerationPacing::EveryStep;
  RetrievalPacing retrieval = RetrievalPacing::SubStages;
  SubStagePlanning planning = SubStagePlanning::OldestFirst;
  // SubStages with OldestFirst and no GPU cluster cache: the searches of a sub-stage that visit
  // the same cluster read it once for all of them (HedraRAG §5). Results are bit-identical.
  bool sharedScans = true;
  bool speculation = true;  // speculative generation and retrieval (§4.3)
  bool reorder = true;      // local cache + H_v-first cluster order (§4.3)
  bool gpuCache = true;     // hot clusters on the GPU (§4.4; no effect without one)
  // SubStages: queries embedded on a thread of their own, overlapping the sub-stages in
  // progress (sched/retrieval_worker.h); off, the search thread embeds before each turn.
  bool embedAhead = true;
  // SubStages: Eq. (1)'s t_R is the live searches' remaining work, so sub-stages grow with the
  // backlog (sched/stage_budget.h); off, one search's time (a budget blind to the queue).
  bool stageBudget = true;
  bool operator==(const ServePolicy&) const = default;
};

// "sequential" (LangChain-style, Fig. 5a), "flashrag" (the paper's strengthened FlashRAG),
// "hedra", and hedra's ablations "hedra-nospec", "hedra-noreorder", "hedra-nogpucache",
// "hedra-roundrobin", "hedra-admissionorder", "hedra-noshare", "hedra-noembedahead",
// "hedra-searchbudget".
std::string servePolicyName(const ServePolicy& p);
Result<ServePolicy> parseServePolicy(std::string_view name);
std::vector<std::string> servePolicyNames();

struct ServingParams {
  std::filesystem::path modelDir;     // HF Llama-family directory; empty: serving is off
  std::filesystem::path embedderDir;  // HF BERT directory (the one the index was built with)
  std::filesystem::path indexBase;    // empty: <corpus>.index
  std::string dtype = "f32";          // model dtype: f32 | bf16
  // Where generation runs: cpu, or cuda / cuda:N (the GPU backend, kernels/llama_step.h; F32).
  std::string device = "cpu";
  // Where the retrieval worker's query encoder runs: cpu (the worker's threads), or cuda / cuda:N
  // (kernels/bert_encoder.h). The CPU by default, measured on a lent H200 with the model there
  // (README, *On a GPU*): on the GPU a call costs ~0.5 ms of launches and a sync whatever its
  // size, which FlashRAG's large per-turn batches amortise (its highest rates 1.1-2x) and hedra's
  // queries embedded as they arrive (1-2 a call) do not (One-shot 0.71x).
  std::string encoderDevice = "cpu";
  // With the encoder on a device: batches of fewer texts stay on the CPU (TextEmbedder::
  // useBackend's minTexts; 1: every batch on the device).
  int32_t encoderDeviceMinTexts = 1;
  ServePolicy policy = *parseServePolicy("hedra");
  int64_t nprobe = 128;               // IVF clusters per retrieval (a node's nprobe overrides)
  int32_t generationThreads = 1;      // BLAS threads of the generation worker
  int32_t retrievalThreads = 1;       // OpenMP threads of the retrieval worker
  bool deterministic = false;         // batch-invariant numerics: results independent of policy
  int32_t maxLiveRequests = 256;      // submit() answers Busy beyond this many
  // The generation batch: at most maxRunningSequences sequences admitted and maxBatchTokens rows
  // (decode rows + prefill chunks) per step; 0 takes the device's default (runningSequences(),
  // batchTokens()). On the CPU a step's cost grows with its rows, so 64 and 512; on a GPU a small
  // model's step is mostly launch and sync, so 256 and 2048 (vLLM's max_num_seqs and a few
  // chunked prompts per step): more rows per step is more tokens per second there.
  int32_t maxRunningSequences = 0;
  int32_t maxBatchTokens = 0;
  bool onGpu() const { return device != "cpu"; }
  int32_t runningSequences() const { return maxRunningSequences > 0 ? maxRunningSequences : onGpu() ? 256 : 64; }
  int32_t batchTokens() const { return maxBatchTokens > 0 ? maxBatchTokens : onGpu() ? 2048 : 512; }
  int64_t kvBudgetBytes = 256ll << 20;
  // Automatic prefix caching (engine/memory/): a prompt reuses the KV blocks of the longest
  // prefix an earlier prompt computed, and prefills only the rest. Answers do not change.
  bool prefixCache = true;
  std::string evictionPolicy = "lru";  // lru | lfu | pgdsf | lacr
  double lacrAlpha = 0.2;              // LACR's weight of look-ahead accesses, in [0, 1]
  int64_t hostKvBytes = 0;             // host tier that evicted prefixes move to; 0: none
  // How a generation prompt reads a knowledge node's subgraphs (DepCache). Dependency: as prefix
  // trees of their paths under the ancestor mask (model/dep_prompt.h); with prefixCache each
  // subgraph's KV is also reused across requests at its new offset (GKVR). Causal: as flat
  // paths under causal attention (what vLLM and SGLang serve).
  bool dependencyAttention = true;
  // GKVR: cached subgraph KV is re-encoded to its offset in the prompt. false: the paper's
  // ablation (KV reused at the positions it was computed at).
  bool graphReencode = true;
  // Block-Attention: a generation prompt holding retrieved passages reads each passage as a block
  // that sees only itself (model/segmented_prompt.h); with prefixCache each block's KV is computed
  // once, kept in the prefix cache and the block store, and re-encoded to its offset, and only the
  // last block (the question) is prefilled. Meant for a block-fine-tuned model.
  bool blockAttention = false;
  // Block-Attention's disk tier: <blockStoreDir>/<model fingerprint>.kvblocks (empty dir:
  // <corpus>.blocks), at most this many bytes (0: no disk tier; blocks live in the prefix cache
  // only, and a passage's partial last KV block is recomputed at every use).
  int64_t blockStoreBytes = 512ll << 20;
  std::filesystem::path blockStoreDir;
  // Speculation triggers (§4.3): speculate while fewer than this many requests are in the
  // stage that would do the speculative work (T_curr < τ·T_max).
  int32_t specGenerationLimit = 16;
  int32_t specRetrievalLimit = 32;
  int32_t specRetrievalMinTokens = 8;  // partial generation length before a speculative search
  // ... and while the worker that would do the speculative work (the generation worker for a
  // speculative generation, the retrieval worker for a speculative retrieval) was busy less than
  // this share of the last 100 ms (sched/load_gauge.h): speculative work is only worth its cost
  // on an idle thread. Above 1: the counts alone decide (the paper's rule).
  double specLoadThreshold = 0.5;
  // Speculative generation starts once per retrieval, on the first partial top-k that covers
  // this share of the retrieval's clusters (0: as soon as the local cache answers).
  double specMinSearchedShare = 0.5;
  // Retrieval sub-stage budget in seconds; 0: Eq. (1) from run-time measurements.
  double subStageSeconds = 0;
  // Device memory for the partial GPU cluster cache (Hedra with gpuCache, a CUDA build and a
  // device); retrieval/gpu_budget.h's Eq. (2) split is the way to choose it.
  int64_t gpuCacheBytes = 512ll << 20;
};

// Pool and queue counters, for status bars and tests (cancel frees everything: all zero).
struct ServingStats {
  int32_t liveRequests = 0;
  int32_t runningSequences = 0;   // in the ModelRunner
  int32_t kvBlocksUsed = 0;
  int32_t kvBlocksTotal = 0;
  int32_t searchTasks = 0;        // live IVF search tasks
  int64_t finishedRequests = 0;
  int64_t subStages = 0;          // retrieval sub-stages run
  double subStageBudgetSeconds = 0;
  bool gpuCacheActive = false;    // hot clusters are searched on a GPU
  double gpuCacheHitRate = 0;     // share of cluster visits served by it
  double generationLoad = 0;      // busy share of the generation worker's threads (a speculation gauge)
  double retrievalLoad = 0;       // busy share of the retrieval worker's threads (the other)
  double embeddingLoad = 0;       // busy share of its embedding thread (the policy's embedAhead; else 0)
  // Wall time each worker thread has spent working since serving started (retrieval: the search,
  // and the queries' embedding unless the embedding thread did it): over the requests finished,
  // what one request costs each thread.
  double generationBusySeconds = 0;
  double retrievalBusySeconds = 0;
  // With the policy's embedAhead: the embedding thread's (then not in retrievalBusySeconds).
  double embeddingBusySeconds = 0;
  // The generation worker's steps since serving started: how many, their rows, and their time in
  // the model's forward pass (on a GPU: launch, device work and the copies back) and in the
  // runner's whole step (+ batch planning, sampling, stop rules); the rest of
  // generationBusySeconds is the worker's own (its updates to the scheduler).
  int64_t generationSteps = 0;
  int64_t generationRows = 0;
  double generationForwardSeconds = 0;
  double generationRunnerSeconds = 0;
  // The KV memory: host tier, prefix cache (tokens offered to it and found in it), tier moves.
  int32_t kvHostBlocksUsed = 0;
  int32_t kvHostBlocksTotal = 0;
  bool prefixCacheOn = false;
  int64_t prefixQueriedTokens = 0;
  int64_t prefixHitTokens = 0;
  int64_t prefixEvictedBlocks = 0;
  int32_t prefixCachedBlocks = 0;  // compute blocks the prefix cache holds (part of kvBlocksUsed)
  int64_t kvBlocksToHost = 0;
  int64_t kvBlocksToCompute = 0;
  // The measured prefill speed: a pass of n rows attending p (query, key) pairs takes about
  // n·perToken + p·perPair seconds (what PGDSF prices a cached prefix at).
  double prefillSecondsPerToken = 0;
  double prefillSecondsPerPair = 0;
  // Segmented prompts' segments through the prefix cache: tokens looked up and found.
  int64_t depSegmentTokens = 0, depHitTokens = 0;        // DepCache's subgraphs
  int64_t blockTokens = 0, blockHitTokens = 0;           // Block-Attention's passage blocks
  int64_t blockStoreHitTokens = 0;                       // ... of the hits, loaded from the block store
  int64_t blockStoreRecords = 0;                         // passages the block store holds
  std::string blockStoreNotice;  // why an old block store file was set aside at start (empty: it was not)
  double prefixHitRate() const {
    return prefixQueriedTokens > 0 ? static_cast<double>(prefixHitTokens) / static_cast<double>(prefixQueriedTokens) : 0.0;
  }
};

// IVF cluster activity for heatmaps: visits per cluster since the index was loaded (all
// engines sharing it), and where each cluster lives (empty without a GPU cluster cache; else
// 0 absent, 1 swapping in, 2 resident on the GPU, 3 swapping out).
struct ClusterHeat {
  std::vector<uint64_t> accesses;
  std::vector<uint8_t> residency;
};

// One node of the generation worker's prefix KV tree (the radix tree of cached prompt prefixes),
// as an inspector shows it. Node ids are unique within one snapshot.
struct KvTreeNode {
  int32_t id = -1;
  int32_t parent = -1;          // -1: a child of its namespace's root
  uint64_t ns = 0;              // the key space (plain prompts and dependency segments differ)
  std::vector<int32_t> tokens;  // this node's edge
  std::string text;             // the tokens decoded (special tokens shown)
  int64_t depthTokens = 0;      // tokens from the root to the end of this node
  bool hostTier = false;        // its KV is in the host tier (false: compute)
  int32_t locks = 0;            // sequences using it now (locked nodes are never evicted)
  int64_t hits = 0;
  double priority = 0;          // the eviction policy's, now (lowest goes first)
};

// Who holds a compute block of the KV pool (KvBlockMap::owners), as the KV heatmap colours it.
// A block a running sequence uses is Sequence even when the prefix cache holds it too (a cached
// prefix in use); the other owners are blocks only the prefix cache holds, by its namespace.
enum class KvBlockOwner : uint8_t {
  Free = 0,
  Sequence = 1,  // a running (or building) sequence's
  Prefix = 2,    // a cached prompt prefix (causal prompts' namespace)
  Subgraph = 3,  // a cached DepCache subgraph
  Passage = 4,   // a cached Block-Attention passage block
};
inline constexpr int kKvBlockOwnerCount = 5;
std::string_view kvBlockOwnerName(KvBlockOwner owner);  // "free" | "sequence" | "prefix" | "subgraph" | "passage"

// The compute tier of the KV pool block by block, for the KV heatmap.
struct KvBlockMap {
  std::vector<uint8_t> owners;  // [compute blocks] a KvBlockOwner per block, by block index
  int32_t hostUsed = 0;         // the host tier, in blocks (not mapped block by block)
  int32_t hostTotal = 0;
  // Blocks per owner ([kKvBlockOwnerCount], by KvBlockOwner value).
  std::vector<int32_t> counts() const {
    std::vector<int32_t> c(kKvBlockOwnerCount, 0);
    for (uint8_t o : owners) ++c[o < kKvBlockOwnerCount ? o : 0];
    return c;
  }
};

// One passage block in Block-Attention's block store (the disk tier of passage KV).
struct BlockStoreEntry {
  int64_t passageId = -1;
  int64_t tokens = 0;
  int64_t bytes = 0;     // its record on disk
  int64_t hits = 0;      // times a prompt found it there since the engine started
  bool saved = false;    // in the file (false: computed this session, written when serving stops)
};

// ---- the engine ------------------------------------------------------------------------------

// The loaded model, tokenizer, embedder and passage index (opaque): loaded once and shared by
// engines, e.g. a benchmark that runs every policy over one set, or a GUI that restarts serving.
class ServingAssets;
// Loads what `params` names for `corpus`. NotFound (naming the command that makes it) for a
// missing model, embedder or index; SchemaMismatch for an index built by another embedder.
Result<std::shared_ptr<const ServingAssets>> loadServingAssets(const ServingParams& params,
                                                               const std::filesystem::path& corpus);

struct EngineParams {
  std::filesystem::path corpus;   // the corpus database to serve from
  size_t workerThreads = 0;       // 0: one per core (corpus lookups)
  size_t traceCapacity = 1 << 16; // events buffered between drains; more are dropped and counted
  ServingParams serving;          // serving is off while serving.modelDir is empty
  // Already loaded assets to serve with (from loadServingAssets or another engine's assets());
  // null: load what `serving` names.
  std::shared_ptr<const ServingAssets> assets;
  RequestEventFn onEvent;         // optional
};

EngineParams defaultEngineParams();  // corpus = defaultCorpusLocation()

// The models shipped in datasets/models (found next to the sources or the installed binaries);
// empty paths when there is no datasets directory. The default model is the wide role model,
// the best reader through the built-in workflows (its PROVENANCE.md); the smaller rag-llama,
// the base the DepCache / Block-Attention fine-tunes grew from, is --model datasets/models/rag-llama.
std::filesystem::path defaultModelDirectory();     // datasets/models/rag-llama-roles-wide
std::filesystem::path defaultEmbedderDirectory();  // datasets/models/rag-embedder

class Engine {
public:
  // Opens the corpus (checking its schema) and starts the workers; with serving.modelDir set,
  // also loads the model, the embedder and the passage index and starts the scheduler.
  static Result<std::unique_ptr<Engine>> create(const EngineParams& params);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const CorpusStats& corpusStats() const;

  // Ids of QA items of a split ("train" | "dev" | "test"), optionally of one type, in id order.
  std::future<Result<std::vector<int64_t>>> listQa(std::string split, std::string type = {});
  // One QA item with its gold passages, read on a worker (traced as a "user" span).
  std::future<Result<QaItem>> lookupQa(int64_t qaId, uint32_t requestId = 0);

  // Starts `graph` for `question`. InvalidArgument for an invalid graph (validate()'s
  // message) or an empty question; Busy when maxLiveRequests are live; Unavailable when
  // serving is off. Never blocks on running work.
  Result<RequestHandle> submit(std::string question, const WorkflowGraph& graph);
  Status cancel(uint32_t requestId);
  ServingStats servingStats() const;
  ClusterHeat clusterHeat() const;  // empty while serving is off
  // The prefix KV tree, copied from a snapshot the generation worker takes at most every 200 ms
  // while this is being called (so the first call after a pause may be empty or old), tokens
  // decoded here on the caller's thread. Empty while serving or the prefix cache is off.
  std::vector<KvTreeNode> kvTreeSnapshot() const;
  // Who holds each compute block of the KV pool, copied from a map the generation worker takes
  // at most every 100 ms while this is being called (the first call after a pause may be empty
  // or old). Empty while serving is off.
  KvBlockMap kvBlockMap() const;
  // Block-Attention's block store, most recently used first, copied from a list the generation
  // worker takes at most every 500 ms while this is being called (the first call after a pause
  // may be empty or old). Empty without a block store (blockAttention off, or blockStoreBytes 0).
  std::vector<BlockStoreEntry> blockStoreEntries() const;
  bool serving() const;
  // What this engine serves with (null while serving is off), to share with another engine.
  std::shared_ptr<const ServingAssets> assets() const;

  // Moves buffered trace events (oldest first) to `out`; returns how many.
  size_t drainTrace(std::vector<TraceEvent>& out);
  std::vector<TraceLane> traceLanes() const;  // by lane id (TraceEvent::lane)
  uint64_t droppedTraceEvents() const;

  // Cancels live requests, finishes queued lookups and stops the workers; later calls fail
  // with Cancelled.
  void shutdown();

private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace rag
