// The mix of workflows a synthetic trace draws from (HedraRAG §6.1), as `ragraph trace make
// --mix` and the trace file's header spell it: "oneshot:3,multistep:1".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "rag/workflow.h"

namespace rag::workload {

struct MixEntry {
  Workflow workflow;
  double weight;  // relative, >= 0
};
using WorkflowMix = std::vector<MixEntry>;

// "oneshot:1,multistep:1" (a bare name means weight 1). Names must be known and not repeated;
// weights finite and >= 0 with at least one > 0.
Result<WorkflowMix> parseWorkflowMix(std::string_view text);
// Canonical text that parseWorkflowMix reads back.
std::string formatWorkflowMix(const WorkflowMix& mix);

}  // namespace rag::workload
