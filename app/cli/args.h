// Command-line arguments of one `ragraph` sub-command: --key value, --key=value, --flag and
// positionals. Every option a command reads is declared by reading it, and finish() reports
// any option that was given but never read, so a typo is an error instead of being ignored.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "rag/workflow.h"

namespace rag::cli {

class Args {
public:
  // argv excludes the program and sub-command words. Options listed in `flags` take no value.
  Args(std::vector<std::string> argv, std::set<std::string> flags = {});

  std::optional<std::string> get(const std::string& key);
  std::string getOr(const std::string& key, const std::string& fallback);
  bool flag(const std::string& key);
  Result<int64_t> getInt(const std::string& key, int64_t fallback);
  Result<double> getDouble(const std::string& key, double fallback);
  const std::vector<std::string>& positionals() const { return m_positionals; }

  // Errors for a malformed command line or options that no one read.
  Status finish() const;

private:
  struct Opt { std::string value; bool hasValue; bool used = false; };
  std::vector<std::pair<std::string, Opt>> m_opts;
  std::vector<std::string> m_positionals;
  Status m_parseError;
  Opt* find(const std::string& key);
};

// --NAME on|off (absent: `fallback`); InvalidArgument naming what each value means otherwise.
Result<bool> onOff(Args& args, const std::string& name, bool fallback, std::string_view what);

// Draws a progress bar on stderr (a line per ~10% when stderr is not a terminal).
class ProgressPrinter {
public:
  explicit ProgressPrinter(bool quiet = false);
  ~ProgressPrinter();
  void operator()(std::string_view phase, uint64_t done, uint64_t total);
  void finish();

private:
  bool m_quiet;
  bool m_tty;
  std::string m_phase;
  int m_lastPermille = -1;
  uint64_t m_lastDrawNs = 0;
  uint64_t m_phaseStartNs = 0;
  bool m_open = false;
};

// libtorch's OpenMP threads spin after each parallel region while OpenBLAS runs the next matrix
// multiply on threads of its own; on a CPU the two pools then fight over the cores, and the
// spinning costs a third of a training step (measured: 5,600 -> 9,700 tokens/s on 2 cores).
// libgomp reads OMP_WAIT_POLICY once, when it is loaded, so a command about to compute with
// libtorch calls restartWithPassiveOpenMp() once its options are checked: unless the user chose
// a policy, the process starts again (same arguments) with OMP_WAIT_POLICY=passive. main()
// remembers argv for it.
void rememberArgv(char** argv);
void restartWithPassiveOpenMp();

// Prints "ragraph: error: <message>" and returns the exit code for a failed command.
int fail(const Status& s);

// The workflow a command names: --builtin NAME, a built-in or one of the compiled-in variants
// (kWorkflowVariants; InvalidArgument listing both when unknown), or else a workflow file.
Result<WorkflowGraph> loadWorkflowChoice(const std::optional<std::string>& builtin, const std::string& file);
std::string builtinWorkflowNames();  // "oneshot, hyde, multistep, irg, recomp, graphrag"
std::string workflowVariantNames();  // "recomp-abstractive, irg-bridge"

// --method dense|bm25|hybrid when given (a method for every retrieval node of the workflows a
// command runs), InvalidArgument naming the methods otherwise; nullopt when absent.
Result<std::optional<RetrievalMethod>> retrievalMethodArg(Args& args);
// --rerank none|bm25: every retrieval node's rerank (unset: each node's own).
Result<std::optional<RetrievalRerank>> retrievalRerankArg(Args& args);

// A built-in as the serving benchmarks run it: every retrieval node searches with `method`, by
// default dense. The built-ins themselves retrieve hybrid (chosen by measurement, RetrievalOptions);
// the benchmarks keep HedraRAG's setting, IVF vector search alone (what its sub-stage pipelining
// and GPU cluster cache act on), which the README's serving figures were measured with, and
// without the built-ins' BM25 rerank, in the search's own order.
WorkflowGraph benchBuiltin(Workflow w, std::optional<RetrievalMethod> method = std::nullopt);

// A benchmark's JSON: to stdout, or with --json FILE written atomically (and said on stderr).
// The exit code: 0, or fail()'s when the file cannot be written.
int emitJson(const std::string& json, const std::string& jsonPath);

// `limit` ids spread evenly over `all` (all of them for limit 0): QA ids are grouped by type,
// so every type keeps its share.
std::vector<int64_t> spreadEvenly(const std::vector<int64_t>& all, int64_t limit);

}  // namespace rag::cli
