// Spelling rules shared by the workflow parts: what a variable name and a node id may be.
#pragma once

#include <string_view>

namespace rag::workflow {

// Letters, digits and '_', not starting with a digit: "docs", "sub_question2".
bool isVariableName(std::string_view name);
// Letters, digits, '_', '-' and '.', not empty, and not the pseudo-nodes START and END.
bool isNodeId(std::string_view id);

}  // namespace rag::workflow
