// The serving policies (rag/engine.h): HedraRAG, its two baselines and its ablations, each a
// named set of strategies.
#include <algorithm>
#include <vector>

#include "rag/engine.h"

namespace rag {

namespace {

const std::vector<ServePolicy>& policies() {
  static const std::vector<ServePolicy> all = [] {
    const ServePolicy hedra{
        .name = "hedra",
        .description = "HedraRAG: continuous decoding, retrieval in time-budgeted sub-stages (the oldest requests' searches "
                       "first, shared cluster scans, queries embedded ahead on their own thread), similarity-aware "
                       "cluster order, speculation, GPU cluster cache",
    };
    auto ablation = [&](const char* name, const char* what, auto change) {
      ServePolicy p = hedra;
      p.name = name;
      p.description = std::string("hedra ") + what;
      change(p);
      return p;
    };
    return std::vector<ServePolicy>{
        {.name = "sequential",
         .description = "LangChain-style (HedraRAG Fig. 5a): generation and retrieval take turns, each stage whole",
         .generation = GenerationPacing::Turns,
         .retrieval = RetrievalPacing::Turns,
         .sharedScans = false,
         .speculation = false,
         .reorder = false,
         .gpuCache = false,
         .embedAhead = false},
        {.name = "flashrag",
         .description = "FlashRAG, strengthened: asynchronous workers, each retrieval turn searches every queued "
                        "query to the end in one batch, generation runs stage batches",
         .generation = GenerationPacing::StageBatches,
         .retrieval = RetrievalPacing::Batches,
         .sharedScans = false,
         .speculation = false,
         .reorder = false,
         .gpuCache = false,
         .embedAhead = false},
        hedra,
        ablation("hedra-nospec", "without speculation", [](ServePolicy& p) { p.speculation = false; }),
        ablation("hedra-noreorder", "without the local cache and cluster reordering", [](ServePolicy& p) { p.reorder = false; }),
        ablation("hedra-nogpucache", "without the GPU cluster cache", [](ServePolicy& p) { p.gpuCache = false; }),
        ablation("hedra-roundrobin", "with round-robin sub-stages (one cluster of every search per round)",
                 [](ServePolicy& p) { p.planning = SubStagePlanning::RoundRobin; }),
        ablation("hedra-admissionorder",
                 "with sub-stages taking searches in the order they reached the worker, not by their request's age",
                 [](ServePolicy& p) { p.planning = SubStagePlanning::AdmissionOrder; }),
        ablation("hedra-noshare", "without shared cluster scans (every search reads its clusters alone)",
                 [](ServePolicy& p) { p.sharedScans = false; }),
        ablation("hedra-noembedahead", "with queries embedded on the search thread before each sub-stage",
                 [](ServePolicy& p) { p.embedAhead = false; }),
        ablation("hedra-searchbudget",
                 "with Eq. (1)'s sub-stage budget from one search's time, not the live searches' remaining work",
                 [](ServePolicy& p) { p.stageBudget = false; }),
    };
  }();
  return all;
}

}  // namespace

std::string servePolicyName(const ServePolicy& p) { return p.name; }

Result<ServePolicy> parseServePolicy(std::string_view name) {
  for (const ServePolicy& p : policies())
    if (p.name == name) return p;
  std::string known;
  for (const ServePolicy& p : policies()) known += (known.empty() ? "" : ", ") + p.name;
  return Status::invalidArgument("unknown serving mode '" + std::string(name) + "'; use one of " + known);
}

std::vector<std::string> servePolicyNames() {
  std::vector<std::string> out;
  for (const ServePolicy& p : policies()) out.push_back(p.name);
  return out;
}

}  // namespace rag
