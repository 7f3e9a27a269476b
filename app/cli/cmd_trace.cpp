// `ragraph trace make`: a synthetic request trace (JSON lines, format in
// engine/workload/trace_file.h) drawn from the corpus's QA items, for the serving benchmarks.
//
//   ragraph trace make --rate 4 --requests 1000 --popularity zipf:1.0
//                      --mix oneshot:1,multistep:1 --seed 7 --out traces/zipf.jsonl
//
// --popularity temporal[:P] takes --window W (default 16); see engine/workload/popularity.h.
// Options are all checked before the corpus is read, and the file is written atomically, so a
// failed run leaves no output behind.
#include <cmath>
#include <cstdio>
#include <limits>

#include "commands.h"
#include "core/fs.h"
#include "workload/trace_file.h"
#include "workload/workload_trace.h"

namespace rag::cli {

namespace {

using namespace rag::workload;

struct MakeOptions {
  TraceParams params;
  std::filesystem::path corpus;
  std::filesystem::path out;
};

Result<MakeOptions> readOptions(Args& args) {
  MakeOptions o;
  const double kUnset = std::numeric_limits<double>::quiet_NaN();
  RAG_ASSIGN_OR_RETURN(double rate, args.getDouble("rate", kUnset));
  RAG_ASSIGN_OR_RETURN(int64_t requests, args.getInt("requests", -1));
  std::optional<std::string> popularity = args.get("popularity");
  std::string mix = args.getOr("mix", "oneshot:1");
  RAG_ASSIGN_OR_RETURN(int64_t seed, args.getInt("seed", 1));
  std::string split = args.getOr("split", "test");
  std::optional<std::string> corpus = args.get("corpus");
  RAG_ASSIGN_OR_RETURN(int64_t window, args.getInt("window", -1));
  std::optional<std::string> out = args.get("out");
  RAG_RETURN_IF_ERROR(args.finish());

  if (std::isnan(rate))
    return Status::invalidArgument("--rate R is required (mean requests per second, e.g. --rate 4)");
  if (requests == -1)
    return Status::invalidArgument("--requests N is required (number of requests, e.g. --requests 1000)");
  if (!out || out->empty())
    return Status::invalidArgument("--out FILE is required (where to write the JSON-lines trace)");
  if (seed < 0) return Status::invalidArgument("--seed must be >= 0 (got " + std::to_string(seed) + ")");
  if (split.empty()) return Status::invalidArgument("--split must name a QA split, e.g. --split test");

  o.params.rate = rate;
  o.params.requests = requests;
  o.params.seed = static_cast<uint64_t>(seed);
  o.params.split = split;
  if (popularity) {
    RAG_ASSIGN_OR_RETURN(o.params.popularity, parsePopularity(*popularity));
  }
  if (window != -1) {
    if (o.params.popularity.kind != PopularityKind::Temporal)
      return Status::invalidArgument("--window applies only to --popularity temporal; drop it or "
                                     "use --popularity temporal");
    o.params.popularity.window = window;
  }
  RAG_ASSIGN_OR_RETURN(o.params.mix, parseWorkflowMix(mix));
  RAG_RETURN_IF_ERROR(validateTraceParams(o.params));
  o.corpus = corpus ? std::filesystem::path(*corpus) : defaultCorpusPath();
  o.out = *out;
  return o;
}

void printSummary(const TraceSummary& s, const std::filesystem::path& out) {
  std::fprintf(stderr, "wrote %lld requests to %s\n", static_cast<long long>(s.requests),
               out.c_str());
  std::fprintf(stderr, "  duration %.1f s (mean rate %.3g req/s)\n", s.durationS, s.meanRate);
  std::fprintf(stderr,
               "  distinct topic entities %lld; top 20%% of them draw %.1f%% of requests "
               "(DepCache's datasets: 41-70%%)\n",
               static_cast<long long>(s.distinctEntities), 100.0 * s.top20EntityShare);
  std::string mix;
  for (size_t i = 0; i < kAllWorkflows.size(); ++i) {
    if (s.perWorkflow[i] == 0) continue;
    if (!mix.empty()) mix += ", ";
    mix += std::string(workflowName(kAllWorkflows[i])) + " " + std::to_string(s.perWorkflow[i]);
  }
  std::fprintf(stderr, "  workflows: %s\n", mix.c_str());
}

}  // namespace

int cmdTraceMake(Args& args) {
  Result<MakeOptions> options = readOptions(args);
  if (!options) return fail(options.status());
  const MakeOptions& o = *options;

  Result<std::vector<QaItem>> items = loadQaItems(o.corpus, o.params.split);
  if (!items) return fail(items.status());
  Result<std::vector<TraceRequest>> trace = makeWorkloadTrace(o.params, *items);
  if (!trace) return fail(trace.status());
  if (Status s = writeWorkloadTrace(o.out, makeTraceHeader(o.params, *items), *trace); !s)
    return fail(s);
  printSummary(summarizeWorkloadTrace(*trace), o.out);
  return 0;
}

}  // namespace rag::cli
