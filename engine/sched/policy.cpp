// Serving policy names (rag/engine.h): the modes and HedraRAG's ablations.
#include <array>

#include "rag/engine.h"

namespace rag {

namespace {

struct NamedPolicy {
  std::string_view name;
  ServePolicy policy;
};

constexpr std::array<NamedPolicy, 8> kPolicies = {{
    {"sequential", {ServeMode::Sequential, false, false, false}},
    {"flashrag", {ServeMode::FlashRag, false, false, false}},
    {"hedra", {ServeMode::Hedra, true, true, true}},
    {"hedra-nospec", {ServeMode::Hedra, false, true, true}},
    {"hedra-noreorder", {ServeMode::Hedra, true, false, true}},
    {"hedra-nogpucache", {ServeMode::Hedra, true, true, false}},
    {"hedra-roundrobin", {ServeMode::Hedra, true, true, true, false}},
    {"hedra-noshare", {ServeMode::Hedra, true, true, true, true, false}},
}};

}  // namespace

std::string servePolicyName(const ServePolicy& p) {
  for (const NamedPolicy& n : kPolicies)
    if (n.policy == p) return std::string(n.name);
  // Baselines ignore the Hedra switches; any other combination is spelled out.
  if (p.mode == ServeMode::Sequential) return "sequential";
  if (p.mode == ServeMode::FlashRag) return "flashrag";
  std::string s = "hedra";
  if (!p.speculation) s += "-nospec";
  if (!p.reorder) s += "-noreorder";
  if (!p.gpuCache) s += "-nogpucache";
  if (!p.oldestFirst) s += "-roundrobin";
  if (!p.sharedScans) s += "-noshare";
  return s;
}

Result<ServePolicy> parseServePolicy(std::string_view name) {
  for (const NamedPolicy& n : kPolicies)
    if (n.name == name) return n.policy;
  std::string known;
  for (const NamedPolicy& n : kPolicies) known += (known.empty() ? "" : ", ") + std::string(n.name);
  return Status::invalidArgument("unknown serving mode '" + std::string(name) + "'; use one of " + known);
}

std::vector<std::string> servePolicyNames() {
  std::vector<std::string> out;
  for (const NamedPolicy& n : kPolicies) out.emplace_back(n.name);
  return out;
}

}  // namespace rag
