// ragraph: the command-line face of the engine (corpus, traces, training, evaluation,
// benchmarks, headless runs, workflow files). Benchmarks print JSON; errors are one line on
// stderr.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "core/blas_info.h"
#include "core/crash_report.h"

namespace {

struct Command {
  std::string_view group;
  std::string_view name;  // empty: the group is the whole command
  std::string_view usage;
  std::set<std::string> flags;  // options that take no value
  int (*run)(rag::cli::Args&);
};

const std::vector<Command>& commands() {
  using namespace rag::cli;
  static const std::vector<Command> table = {
      {"corpus", "build", "[--out PATH] [--wordnet DIR] [--foldoc DIR] [--seed N] [--quiet]",
       {"quiet"}, cmdCorpusBuild},
      {"corpus", "stats", "[--corpus PATH] [--json]", {"json"}, cmdCorpusStats},
      {"trace", "make",
       "--rate R --requests N [--popularity uniform|zipf:S|temporal[:P]] [--window W] "
       "[--mix oneshot:1,multistep:1] [--seed N] [--split test] [--corpus PATH] --out FILE",
       {}, cmdTraceMake},
      {"train", "tokenizer", "[--corpus PATH] [--vocab 4096] --out DIR [--quiet]", {"quiet"},
       cmdTrainTokenizer},
      {"train", "lm",
       "--out DIR [--corpus PATH] [--tokenizer DIR] [--init DIR | --layers 4 --hidden 256 "
       "--heads 4 --kv-heads 4 --ffn 704] [--data qa|passages|mixed|recall|graph|roles] [--roles answer_gold:2,answer:3,...] [--completion-budget N] [--no-gold-share 0.15] [--two-hop-share 0.5] [--shuffle-passages 0] [--irg-guess-share 0] [--gold-questions 1] [--question-types definition:3,...] [--subgraphs 5] [--paths 30] [--context gold|none] "
       "[--passages 5] [--min-passages N] [--questions 1] [--recall-name-tokens N] "
       "[--recall-pairs N] [--show-examples N] [--mask causal|block|ancestor] [--prompt-loss 0.1] "
       "[--steps 1000] [--batch 16] "
       "[--seq-len 256] [--lr 1e-3] [--min-lr LR/10] [--warmup 100] [--weight-decay 0.1] "
       "[--clip-norm 1] [--seed 1] [--dtype f32|bf16] [--threads N] [--checkpoint-every 200] "
       "[--log-every 10] [--eval-every N --eval-examples 64] [--resume] [--json]",
       {"resume", "json"}, cmdTrainLm},
      {"train", "embedder",
       "--out DIR [--corpus PATH] [--tokenizer DIR] [--init DIR | --layers 4 --hidden 256 "
       "--heads 4 --ffn 1024] [--temperature 0.05] [--title-pairs 0.3] [--span-pairs 0] [--hard-negatives 0] "
       "[--self-negatives 0 [--index BASE]] [--lexical-buckets 0 [--lexical-dim 512] [--lexical-weight 0.05]] [--steps 1000] "
       "[--batch 64] [--seq-len 128] [--lr 5e-4] [--min-lr LR/10] [--warmup 100] "
       "[--weight-decay 0.1] [--clip-norm 1] [--seed 1] [--dtype f32|bf16] [--threads N] "
       "[--checkpoint-every 200] [--log-every 10] [--eval-every N --eval-examples 64] [--resume] "
       "[--json]",
       {"resume", "json"}, cmdTrainEmbedder},
      {"workflow", "validate", "FILE|--builtin oneshot|hyde|multistep|irg|recomp|graphrag|irg-bridge|recomp-abstractive [--json]", {"json"},
       cmdWorkflowValidate},
      {"workflow", "show", "FILE|--builtin oneshot|hyde|multistep|irg|recomp|graphrag|irg-bridge|recomp-abstractive", {}, cmdWorkflowShow},
      {"demo", "", "[--corpus PATH] [--requests N] [--trace-out FILE] [--model DIR] [--method dense|bm25|hybrid]", {}, cmdDemo},
      {"run", "",
       "\"QUESTION\" | --qa ID [--context gold|none|retrieved [--embedder DIR] [--index BASE] "
       "[--nprobe N]] [--mask causal|block] [--extractive [--copy-floor P]] [--rerank none|bm25] [--model DIR] "
       "[--dtype f32|bf16] [--device cpu|cuda] [--max-tokens N] [--corpus PATH] [--json]",
       {"json", "extractive"}, cmdRun},
      {"eval", "qa",
       "[--split test] [--context gold|none|retrieved [--embedder DIR] [--index BASE] [--nprobe N]] "
       "[--limit N] [--mask causal|block] [--extractive [--copy-floor P]] [--orders N] [--rerank none|bm25] [--model DIR] "
       "[--dtype f32|bf16] [--device cpu|cuda] [--max-tokens N] [--batch N] [--examples N] [--corpus PATH] [--json]",
       {"json", "extractive"}, cmdEvalQa},
      {"index", "build",
       "[--corpus PATH] [--embedder DIR] [--index BASE] [--nlist N] [--batch 64] [--dtype f32|bf16] [--threads N] "
       "[--if-needed] [--quiet] [--json]",
       {"if-needed", "quiet", "json"}, cmdIndexBuild},
      {"index", "calibrate",
       "[--corpus PATH] [--embedder DIR] [--index BASE] [--split dev] [--queries 2000] [--target 0.95] "
       "[--confidence 0.95] [--force] [--quiet] [--json]",
       {"force", "quiet", "json"}, cmdIndexCalibrate},
      {"eval", "retrieval",
       "[--split test] [--limit N] [--corpus PATH] [--embedder DIR] [--index BASE] [--nprobe N] "
       "[--threads N] [--reworded] [--fusion-sweep] [--json]",
       {"json", "reworded", "fusion-sweep"}, cmdEvalRetrieval},
      {"bench", "retrieval",
       "[--split test] [--limit 500] [--k 5] [--patience 8] [--nprobe N] [--corpus PATH] "
       "[--embedder DIR] [--index BASE] [--json]",
       {"json"}, cmdBenchRetrieval},
      {"bench", "llm",
       "[--model DIR | --synthetic] [--dtype f32|bf16] [--device cpu|cuda] [--prompt N] [--prefill N] [--steps N] [--threads N] [--save DIR] [--llama-bench PATH/llama-bench] [--json]",
       {"json", "synthetic"}, cmdBenchLlm},
      {"model", "gguf", "--model DIR --out FILE.gguf [--tokenizer FILE] [--name NAME] [--json]", {"json"}, cmdModelGguf},
      {"model", "grow", "--model DIR --out DIR [--layers N] [--hidden N --ffn N --heads N [--kv-heads N] --seed S] [--json]", {"json"}, cmdModelGrow},
      {"model", "lexical",
       "--embedder DIR --out DIR [--corpus PATH] [--buckets 524288] [--dim 512] [--weight 0.05] [--json]", {"json"},
       cmdModelLexical},
      {"workflow", "run",
       "FILE|--builtin NAME \"question\" [--mode hedra] [--nprobe 128] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] "
       "[--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] "
       "[--index BASE] [--corpus PATH] [--deterministic] [--prefix-cache on|off] [--graph-attention dependency|causal] [--block-attention on|off] "
       "[--gkvr on|off] [--json]",
       {"json", "deterministic"}, cmdWorkflowRun},
      {"bench", "serve",
       "[--workflows oneshot,hyde,multistep,irg,recomp,graphrag] [--modes sequential,flashrag,hedra] [--rps 2,4,8,16,32] "
       "[--requests 40] [--min-seconds 10xSLO] [--warmup 2] [--prime on|off] [--method dense|bm25|hybrid (built-ins: dense)] [--rerank none|bm25 (built-ins: none)] [--nprobe 128] [--slo 1] [--json FILE] [--trace FILE] [--quick] "
       "[--split test] [--find-max [--search-steps 4]] [--generation-threads 1] [--retrieval-threads 1] "
       "[--substage-ms MS] [--spec-load 0.5] [--deterministic] [--trace-in FILE] [--prefix-cache on|off] "
       "[--max-running 64|256 (cpu|cuda)] [--max-batch-tokens 512|2048] "
       "[--eviction lru|lfu|pgdsf|lacr] [--host-kv-mb 0] [--kv-mb 256] [--gpu-cache-mb 512] [--graph-attention dependency|causal] [--block-attention on|off] [--gkvr on|off] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] "
       "[--index BASE] [--corpus PATH]",
       {"quick", "deterministic", "find-max"}, cmdBenchServe},
      {"eval", "workflow",
       "--builtin oneshot|hyde|multistep|irg|recomp|graphrag|irg-bridge|recomp-abstractive | --file FILE [--split test] [--limit 400] [--method dense|bm25|hybrid] [--rerank none|bm25] [--mode hedra] "
       "[--nprobe 128] [--deterministic] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] [--index BASE] "
       "[--corpus PATH] [--prefix-cache on|off] [--graph-attention dependency|causal] [--block-attention on|off] [--gkvr on|off] "
       "[--answers FILE.jsonl] [--json]",
       {"json", "deterministic"}, cmdEvalWorkflow},
      {"bench", "prefix",
       "[--quick] [--requests 800] [--rps 16] [--popularity zipf:1.1] [--sim-requests 2000] "
       "[--policies lru,lfu,pgdsf] [--seed 1] [--nprobe 128] [--split test] [--json FILE] [--mode hedra] "
       "[--eviction lru] [--host-kv-mb 0] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] [--index BASE] "
       "[--corpus PATH]",
       {"quick", "deterministic"}, cmdBenchPrefix},
      {"kg", "retrieve",
       "\"question\" [--subgraphs 5] [--hops 2] [--fanout 8] [--paths 30] [--show-pruned 3] [--embedder DIR] "
       "[--tokenizer FILE] [--corpus PATH] [--json]",
       {"json"}, cmdKgRetrieve},
      {"bench", "depcache",
       "[--quick] [--tables ttft,hit] [--window 16] [--questions 500] [--requests 2000] [--serve-requests 300] [--rps 8] [--paths 30] [--seed 1] "
       "[--json FILE] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] [--index BASE] [--corpus PATH]",
       {"quick"}, cmdBenchDepcache},
      {"blocks", "precompute",
       "[--passages hot|all|N] [--questions 2000] [--split test] [--max-mb 512] [--batch 32] [--model DIR] "
       "[--dtype f32|bf16] [--device cpu|cuda] [--embedder DIR] [--index BASE] [--nprobe N] [--corpus PATH] [--quiet] [--json]",
       {"quiet", "json"}, cmdBlocksPrecompute},
      {"bench", "blocks",
       "[--quick] [--tables ttft,accuracy,serving] [--lengths 128,256,512,1024,1984] [--question-tokens 32] "
       "[--repeats 5] [--questions 400] [--contexts gold,retrieved] [--rows vanilla,block_noft,block_ft,block_ft_full,shipped_full] [--vanilla-model datasets/models/rag-llama-vanilla] [--block-model datasets/models/rag-llama-block] "
       "[--requests 200] [--rps 16] [--slo 1] [--json FILE] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] "
       "[--index BASE] [--corpus PATH]",
       {"quick"}, cmdBenchBlocks},
      {"bench", "ivf",
       "[--vectors 131072] [--dim 128] [--nlist N] [--nprobe 32] [--queries 1024] [--k 10] "
       "[--repeats 7] [--budget-ms 5] [--seed 1] [--json]",
       {"json"}, cmdBenchIvf},
      {"bench", "embed",
       "[--slo 1.0] [--calibrate | --stress [--stress-step N]] [--json] [--embedder DIR] [--corpus PATH] "
       "[--main-cores LIST --aux-cores LIST] [--no-hetero] [--max-batch 32] [--repeats 3] "
       "[--max-concurrency 1024]",
       {"calibrate", "stress", "json", "no-hetero"}, cmdBenchEmbed},
      {"dragon", "cloud",
       "[--listen 127.0.0.1:7410] [--once] [--timeout-ms 30000] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--corpus PATH] "
       "[--deterministic] [--kernels on|off] [--score-temperature 1] [--core N]",
       {"once", "deterministic"}, cmdDragonCloud},
      {"dragon", "device",
       "--connect HOST:PORT \"QUESTION\" [--method dragon|drdg_tw|drdg_sw|device_only|cloud_only|drcg_text|drcg_kv|score] "
       "[--latency MS] [--jitter MS] [--bandwidth MBIT] [--max-tokens 20] [--docs 2] [--max-ahead 3] "
       "[--policy greedy|device|cloud|random] [--temperature 0] [--top-p 0.8] [--seed 1] [--timeout-ms 30000] "
       "[--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--corpus PATH] [--deterministic] [--kernels on|off] "
       "[--score-temperature 1] [--core N] [--ignore-eos] [--method score --answer TEXT [--scored dragon|device_only|cloud_only]] [--json [--events]]",
       {"json", "events", "deterministic", "ignore-eos"}, cmdDragonDevice},
      {"bench", "dragon",
       "[--quick] [--json] [--out FILE] [--latencies 0,25,50,100,200,300] [--questions 8] "
       "[--methods dragon,drdg_tw,drdg_sw,device_only,cloud_only,drcg_text,drcg_kv] [--max-tokens 20] [--docs 2] "
       "[--max-ahead 3] [--policy greedy] [--kernels on|off] [--cloud-kernels on|off] [--deterministic] "
       "[--accuracy-questions 40] [--accuracy-docs 0,1,2,4,8] [--model DIR] [--corpus PATH] "
       "[--device-core 0] [--cloud-core 1] (-1: not pinned)",
       {"quick", "json", "deterministic", "ignore-eos"}, cmdBenchDragon},
      {"serve", "",
       "--listen HOST:PORT [--workflows FILE,...] [--max-inflight 32] [--retry-after 1] [--nprobe 128] "
       "[--mode hedra] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] [--encoder-device cpu|cuda [--encoder-gpu-min 1]] [--embedder DIR] [--index BASE] [--corpus PATH] "
       "[--generation-threads 1] [--retrieval-threads 1] [--prefix-cache on|off] [--eviction lru] "
       "[--host-kv-mb 0] [--graph-attention dependency|causal] [--block-attention on|off] [--deterministic]",
       {"deterministic"}, cmdServeHttp},
      {"bench", "http",
       "[--workflow oneshot] [--concurrency 4] [--requests 64] [--rounds 2] [--rps R [--slo 1]] [--stream] [--max-tokens N] "
       "[--split test] [--nprobe 128] [--json FILE] [--mode hedra] [--model DIR] [--dtype f32|bf16] [--device cpu|cuda] "
       "[--embedder DIR] [--index BASE] [--corpus PATH] [--generation-threads 1] [--retrieval-threads 1] "
       "[--graph-attention dependency|causal] [--block-attention on|off] [--deterministic]",
       {"stream", "deterministic"}, cmdBenchHttp},
  };
  return table;
}

// "ragraph GROUP [NAME] USAGE"
std::string usageLine(const Command& c) {
  std::string line = "ragraph ";
  line.append(c.group);
  if (!c.name.empty()) line.append(" ").append(c.name);
  return line.append(" ").append(c.usage);
}

void printHelp(std::FILE* to) {
  std::fprintf(to,
               "ragraph - RAGraph Workbench command line\n\n"
               "usage: ragraph <command> [options]\n\n");
  for (const Command& c : commands()) std::fprintf(to, "  %s\n", usageLine(c).c_str());
  std::fprintf(to,
               "\nThe corpus is found at $RAGRAPH_CORPUS, else <build>/data/corpus.db next to a\n"
               "build tree, else $XDG_DATA_HOME/ragraph/corpus.db; --corpus PATH overrides.\n"
               "Retrieval without --nprobe searches the nprobe `ragraph index calibrate` measured for\n"
               "the index (else 64).\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty() || words[0] == "help" || words[0] == "--help" || words[0] == "-h") {
    printHelp(words.empty() ? stderr : stdout);
    return words.empty() ? 2 : 0;
  }
  rag::restartWithBetterBlasKernels(argv);  // core/blas_info.h: before any command runs a thread
  rag::installCrashReport("ragraph");        // core/crash_report.h: a fatal signal says where
  rag::cli::rememberArgv(argv);
  for (const Command& c : commands()) {
    if (words[0] != c.group) continue;
    size_t consumed = 1;
    if (!c.name.empty()) {
      if (words.size() < 2 || words[1] != c.name) continue;
      consumed = 2;
    }
    // `ragraph GROUP NAME --help` (or -h) anywhere among the options: that command's usage.
    if (std::any_of(words.begin() + static_cast<std::ptrdiff_t>(consumed), words.end(),
                    [](const std::string& w) { return w == "--help" || w == "-h"; })) {
      std::printf("usage: %s\n", usageLine(c).c_str());
      return 0;
    }
    rag::cli::Args args(std::vector<std::string>(words.begin() + consumed, words.end()), c.flags);
    try {
      return c.run(args);
    } catch (const std::exception& e) {
      return rag::cli::fail(rag::Status::internal(std::string("unexpected exception: ") + e.what()));
    }
  }
  std::string what = words[0] + (words.size() > 1 ? " " + words[1] : "");
  std::cerr << "ragraph: error: unknown command '" << what << "'; run `ragraph help` for the list"
            << std::endl;
  return 2;
}
