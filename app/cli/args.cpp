#include "args.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/clock.h"
#include "core/fs.h"

namespace rag::cli {

Args::Args(std::vector<std::string> argv, std::set<std::string> flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a.substr(2);
      Opt opt{"", false};
      if (auto eq = key.find('='); eq != std::string::npos) {
        opt.value = key.substr(eq + 1);
        opt.hasValue = true;
        key = key.substr(0, eq);
      } else if (!flags.count(key)) {
        if (i + 1 >= argv.size()) {
          m_parseError = Status::invalidArgument("option --" + key + " needs a value");
          continue;
        }
        opt.value = argv[++i];
        opt.hasValue = true;
      }
      m_opts.emplace_back(std::move(key), std::move(opt));
    } else {
      m_positionals.push_back(a);
    }
  }
}

Args::Opt* Args::find(const std::string& key) {
  Opt* found = nullptr;
  for (auto& [k, o] : m_opts)
    if (k == key) {
      o.used = true;
      found = &o;  // the last occurrence wins
    }
  return found;
}

std::optional<std::string> Args::get(const std::string& key) {
  Opt* o = find(key);
  if (!o) return std::nullopt;
  return o->value;
}

std::string Args::getOr(const std::string& key, const std::string& fallback) {
  return get(key).value_or(fallback);
}

bool Args::flag(const std::string& key) {
  Opt* o = find(key);
  if (!o) return false;
  if (o->hasValue) return o->value != "0" && o->value != "false" && o->value != "no";
  return true;
}

Result<int64_t> Args::getInt(const std::string& key, int64_t fallback) {
  auto v = get(key);
  if (!v) return fallback;
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size())
    return Status::invalidArgument("--" + key + " expects a whole number, got '" + *v + "'");
  return out;
}

Result<double> Args::getDouble(const std::string& key, double fallback) {
  auto v = get(key);
  if (!v) return fallback;
  try {
    size_t used = 0;
    double d = std::stod(*v, &used);
    if (used == v->size()) return d;
  } catch (...) {
  }
  return Status::invalidArgument("--" + key + " expects a number, got '" + *v + "'");
}

Status Args::finish() const {
  if (!m_parseError.isOk()) return m_parseError;
  for (const auto& [k, o] : m_opts)
    if (!o.used)
      return Status::invalidArgument("unknown option --" + k + "; see `ragraph help` for the options");
  return Status::ok();
}

ProgressPrinter::ProgressPrinter(bool quiet) : m_quiet(quiet), m_tty(::isatty(2) != 0) {}

ProgressPrinter::~ProgressPrinter() { finish(); }

void ProgressPrinter::finish() {
  if (m_open && m_tty) std::fputc('\n', stderr);
  m_open = false;
}

void ProgressPrinter::operator()(std::string_view phase, uint64_t done, uint64_t total) {
  if (m_quiet) return;
  uint64_t now = nowNs();
  if (phase != m_phase) {
    finish();
    m_phase = std::string(phase);
    m_lastPermille = -1;
    m_phaseStartNs = now;
  }
  int permille = total ? static_cast<int>(std::min<uint64_t>(1000, done * 1000 / total)) : 0;
  const bool last = total && done >= total;
  if (m_tty) {
    if (!last && now - m_lastDrawNs < 100'000'000) return;  // 10 redraws a second at most
    m_lastDrawNs = now;
    double secs = static_cast<double>(now - m_phaseStartNs) * 1e-9;
    if (total) {
      int filled = permille * 30 / 1000;
      std::fprintf(stderr, "\r%-28.28s [%.*s%*s] %5.1f%% %llu/%llu %.1fs", m_phase.c_str(), filled,
                   "##############################", 30 - filled, "", permille / 10.0,
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total), secs);
    } else {
      std::fprintf(stderr, "\r%-28.28s %llu %.1fs", m_phase.c_str(),
                   static_cast<unsigned long long>(done), secs);
    }
    std::fflush(stderr);
    m_open = true;
  } else {
    int decile = permille / 100;
    if (decile == m_lastPermille && !last) return;
    if (last && m_lastPermille == 10) return;
    m_lastPermille = last ? 10 : decile;
    double secs = static_cast<double>(now - m_phaseStartNs) * 1e-9;
    std::fprintf(stderr, "%s: %llu/%llu (%.0f%%) %.1fs\n", m_phase.c_str(),
                 static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                 permille / 10.0, secs);
  }
}

namespace {
char** g_argv = nullptr;
}  // namespace

void rememberArgv(char** argv) { g_argv = argv; }

void restartWithPassiveOpenMp() {
  if (!g_argv || std::getenv("OMP_WAIT_POLICY")) return;
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", g_argv);  // returns only on failure: then run as we are
}

int fail(const Status& s) {
  std::cerr << "ragraph: error: " << s.message() << std::endl;
  return s.code() == StatusCode::InvalidArgument ? 2 : 1;
}

std::string builtinWorkflowNames() {
  std::string s;
  for (Workflow w : kAllWorkflows) s += (s.empty() ? "" : ", ") + std::string(workflowName(w));
  return s;
}

std::string workflowVariantNames() {
  std::string s;
  for (std::string_view v : kWorkflowVariants) s += (s.empty() ? "" : ", ") + std::string(v);
  return s;
}

Result<WorkflowGraph> loadWorkflowChoice(const std::optional<std::string>& builtin, const std::string& file) {
  if (!builtin) return WorkflowGraph::load(file);
  if (isCompiledInWorkflow(*builtin)) return builtinWorkflowFile(*builtin);
  return Status::invalidArgument("no built-in workflow '" + *builtin + "'; the built-ins are " + builtinWorkflowNames() +
                                 ", and their variants " + workflowVariantNames() + " (resources/workflows/)");
}

namespace {
// An optional option whose value names one of an enum's values: nullopt when absent,
// InvalidArgument naming the choices when the value is none of them.
template <class E>
Result<std::optional<E>> namedArg(Args& args, const std::string& key, std::optional<E> (*fromName)(std::string_view),
                                  const char* choices) {
  const std::optional<std::string> name = args.get(key);
  if (!name) return std::optional<E>();
  const std::optional<E> value = fromName(*name);
  if (!value) return Status::invalidArgument("--" + key + " " + *name + ": use " + choices);
  return value;
}
}  // namespace

Result<std::optional<RetrievalMethod>> retrievalMethodArg(Args& args) {
  return namedArg(args, "method", retrievalMethodFromName, "dense, bm25 or hybrid");
}

Result<std::optional<RetrievalRerank>> retrievalRerankArg(Args& args) {
  return namedArg(args, "rerank", retrievalRerankFromName, "none or bm25");
}

WorkflowGraph benchBuiltin(Workflow w, std::optional<RetrievalMethod> method) {
  WorkflowGraph g = *builtinWorkflow(w);  // compiled in and tested: always parses
  g.setRetrievalMethod(method.value_or(RetrievalMethod::Dense));
  g.setRetrievalRerank(RetrievalRerank::None);  // the paper's workflows: the search's own order
  return g;
}

int emitJson(const std::string& json, const std::string& jsonPath) {
  if (jsonPath.empty()) {
    std::cout << json;
    return 0;
  }
  if (Status st = writeFileAtomic(jsonPath, json); !st) return fail(st);
  std::fprintf(stderr, "results written to %s\n", jsonPath.c_str());
  return 0;
}

std::vector<int64_t> spreadEvenly(const std::vector<int64_t>& all, int64_t limit) {
  const size_t n = limit > 0 ? std::min<size_t>(static_cast<size_t>(limit), all.size()) : all.size();
  std::vector<int64_t> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(all[i * all.size() / n]);
  return out;
}

Result<bool> onOff(Args& args, const std::string& name, bool fallback, std::string_view what) {
  const std::string v = args.getOr(name, fallback ? "on" : "off");
  if (v != "on" && v != "off")
    return Status::invalidArgument("--" + name + " takes " + std::string(what) + ", not '" + v + "'");
  return v == "on";
}

}  // namespace rag::cli
