// The built-in workflows: resources/workflows/<name>.json, compiled in at configure time
// (engine/CMakeLists.txt), so no install path is needed to find them.
#include <string>

#include "rag/workflow.h"
#include "workflow/builtin_workflow_files.h"  // generated

namespace rag {

std::string_view builtinWorkflowFileJson(std::string_view name) {
  for (const workflow::BuiltinWorkflowFile& f : workflow::kBuiltinWorkflowFiles)
    if (f.name == name) return f.json;
  return {};
}

bool isCompiledInWorkflow(std::string_view name) { return !builtinWorkflowFileJson(name).empty(); }

std::string_view builtinWorkflowJson(Workflow w) { return builtinWorkflowFileJson(workflowName(w)); }

Result<WorkflowGraph> builtinWorkflowFile(std::string_view name) {
  const std::string_view json = builtinWorkflowFileJson(name);
  const std::string file = "resources/workflows/" + std::string(name) + ".json";
  if (json.empty())
    return Status::internal("the workflow file " + file + " was not compiled in; add it to engine/CMakeLists.txt");
  Result<WorkflowGraph> g = WorkflowGraph::fromJson(json);
  if (!g) return g.status().withContext("compiled-in workflow " + file);
  return g;
}

Result<WorkflowGraph> builtinWorkflow(Workflow w) { return builtinWorkflowFile(workflowName(w)); }

}  // namespace rag
