#include "workload/workflow_mix.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

namespace rag::workload {

namespace {

constexpr const char* kWorkflowList = "oneshot, hyde, multistep, irg, recomp";

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<WorkflowMix> parseWorkflowMix(std::string_view text) {
  const std::string example = "; write it as name:weight pairs, e.g. --mix oneshot:3,multistep:1";
  WorkflowMix mix;
  if (trim(text).empty()) return Status::invalidArgument("--mix is empty" + example);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty())
      return Status::invalidArgument("--mix '" + std::string(text) + "' has an empty entry" + example);
    std::string_view name = item, weightText = "1";
    if (auto colon = item.find(':'); colon != std::string_view::npos) {
      name = trim(item.substr(0, colon));
      weightText = trim(item.substr(colon + 1));
    }
    std::optional<Workflow> w = workflowFromName(name);
    if (!w)
      return Status::invalidArgument("unknown workflow '" + std::string(name) + "' in --mix; known: " +
                                     kWorkflowList);
    double weight = 0;
    auto [p, ec] = std::from_chars(weightText.data(), weightText.data() + weightText.size(), weight);
    if (weightText.empty() || ec != std::errc() || p != weightText.data() + weightText.size() ||
        !std::isfinite(weight) || weight < 0)
      return Status::invalidArgument("workflow '" + std::string(name) + "' in --mix has weight '" +
                                     std::string(weightText) + "'; a weight is a number >= 0" +
                                     example);
    for (const MixEntry& e : mix)
      if (e.workflow == *w)
        return Status::invalidArgument("workflow '" + std::string(name) +
                                       "' appears twice in --mix; give each workflow once");
    mix.push_back({*w, weight});
    if (comma == text.size()) break;
  }
  double total = 0;
  for (const MixEntry& e : mix) total += e.weight;
  if (!(total > 0))
    return Status::invalidArgument("--mix '" + std::string(text) +
                                   "' gives every workflow weight 0; give at least one a positive weight");
  return mix;
}

std::string formatWorkflowMix(const WorkflowMix& mix) {
  std::string out;
  for (const MixEntry& e : mix) {
    if (!out.empty()) out += ',';
    out += workflowName(e.workflow);
    out += ':';
    out += formatNumber(e.weight);
  }
  return out;
}

}  // namespace rag::workload
