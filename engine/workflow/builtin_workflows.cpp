// The built-in workflows: resources/workflows/<name>.json, compiled in at configure time
// (engine/CMakeLists.txt), so no install path is needed to find them.
#include <string>

#include "rag/workflow.h"
#include "workflow/builtin_workflow_files.h"  // generated

namespace rag {

std::string_view builtinWorkflowJson(Workflow w) {
  for (const workflow::BuiltinWorkflowFile& f : workflow::kBuiltinWorkflowFiles)
    if (f.name == workflowName(w)) return f.json;
  return {};
}

Result<WorkflowGraph> builtinWorkflow(Workflow w) {
  const std::string name(workflowName(w));
  std::string_view json = builtinWorkflowJson(w);
  if (json.empty())
    return Status::internal("the built-in workflow '" + name +
                            "' was not compiled in; add "
                            "resources/workflows/" +
                            name + ".json to engine/CMakeLists.txt");
  Result<WorkflowGraph> g = WorkflowGraph::fromJson(json);
  if (!g) return g.status().withContext("built-in workflow resources/workflows/" + name + ".json");
  return g;
}

}  // namespace rag
