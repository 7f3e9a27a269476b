// The `ragraph` sub-commands. Each lives in its own cmd_<group>.cpp and returns the process
// exit code (0 success, 1 failure, 2 bad command line).
#pragma once

#include "args.h"

namespace rag::cli {

int cmdCorpusBuild(Args& args);   // cmd_corpus.cpp
int cmdCorpusStats(Args& args);   // cmd_corpus.cpp
int cmdTraceMake(Args& args);     // cmd_trace.cpp
int cmdTrainTokenizer(Args& args);  // cmd_train.cpp
int cmdTrainLm(Args& args);       // cmd_train.cpp
int cmdTrainEmbedder(Args& args);  // cmd_train.cpp
int cmdDemo(Args& args);          // cmd_demo.cpp
int cmdRun(Args& args);           // cmd_llm.cpp
int cmdEvalQa(Args& args);        // cmd_llm.cpp
int cmdBenchLlm(Args& args);      // cmd_llm.cpp
int cmdIndexBuild(Args& args);    // cmd_retrieval.cpp
int cmdIndexCalibrate(Args& args);  // cmd_retrieval.cpp
int cmdEvalRetrieval(Args& args);  // cmd_retrieval.cpp
int cmdBenchRetrieval(Args& args);  // cmd_retrieval.cpp
int cmdBenchIvf(Args& args);      // cmd_bench_ivf.cpp
int cmdBenchEmbed(Args& args);    // cmd_bench_embed.cpp
int cmdWorkflowValidate(Args& args);  // cmd_workflow.cpp
int cmdWorkflowShow(Args& args);      // cmd_workflow.cpp
int cmdWorkflowRun(Args& args);       // cmd_serve.cpp
int cmdBenchServe(Args& args);        // cmd_serve.cpp
int cmdBenchPrefix(Args& args);       // cmd_bench_prefix.cpp
int cmdBenchDepcache(Args& args);     // cmd_bench_depcache.cpp
int cmdKgRetrieve(Args& args);        // cmd_kg.cpp
int cmdEvalWorkflow(Args& args);      // cmd_eval_workflow.cpp
int cmdDragonCloud(Args& args);       // cmd_dragon.cpp
int cmdDragonDevice(Args& args);      // cmd_dragon.cpp
int cmdBenchDragon(Args& args);       // cmd_bench_dragon.cpp
int cmdServeHttp(Args& args);         // cmd_serve_http.cpp
int cmdBenchHttp(Args& args);         // cmd_bench_http.cpp
int cmdBlocksPrecompute(Args& args);  // cmd_blocks.cpp
int cmdBenchBlocks(Args& args);       // cmd_bench_blocks.cpp
int cmdModelGguf(Args& args);         // cmd_model.cpp
int cmdModelLexical(Args& args);      // cmd_model.cpp
int cmdModelGrow(Args& args);         // cmd_model.cpp

// The lexical branch's options (`model lexical --buckets`, `train embedder --lexical-buckets`:
// `flag` is "--" or "--lexical-"): minBuckets..2^24 buckets (train takes 0: no branch), a dim of
// 1..8192, a weight in [0, 10]; InvalidArgument naming the option.
Status checkLexicalOptions(const std::string& flag, int64_t minBuckets, int64_t buckets, int64_t dim,
                           double weight);  // cmd_model.cpp

}  // namespace rag::cli
