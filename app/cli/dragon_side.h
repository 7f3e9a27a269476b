// What `ragraph dragon cloud|device` and `ragraph bench dragon` share: one side's loaded model,
// runner and retrieval (SideAssets, over engine/dragon/demo_side.h, which also serves the
// workbench's DRAGON page), the run settings read from the command line, pings.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "dragon/demo_side.h"
#include "dragon/session.h"
#include "dragon/transport.h"
#include "model_choice.h"

namespace rag::cli {

// One side's loaded model (its description for the log) and its runner and retrieval.
struct SideAssets {
  LoadedModel model;
  std::unique_ptr<dragon::DemoSide> demo;  // demo->res: the session's resources
};

struct SideOptions {
  ModelChoice model;
  std::string corpusPath;
  bool deterministic = false;
  bool kernels = true;
  double scoreTemperature = 1;
  int core = -1;
};

// --model, --dtype, --corpus, --deterministic, --kernels on|off, --score-temperature, --core.
Result<SideOptions> readSideOptions(Args& args);
// Pins the thread (--core), loads the model and the BM25 index, creates the runner, profiles
// its decode time (the profiler's offline fit).
Result<std::unique_ptr<SideAssets>> loadSide(dragon::Side side, const SideOptions& o);
// The answer's text, trimmed.
std::string textOf(const SideAssets& a, const std::vector<uint32_t>& tokens);
// --method, --policy, --max-tokens, --docs, --max-ahead, --temperature, --top-p, --seed, --latency,
// --jitter, --bandwidth, --ignore-eos, --answer, --scored; InvalidArgument naming the range.
Result<dragon::Hello> readRunSettings(Args& args);
// Round trips of `n` pings in ms (the link as the delay line makes it); the peer's loop answers.
Result<std::vector<double>> pingRtt(dragon::Transport& t, int n, int timeoutMs);

}  // namespace rag::cli
