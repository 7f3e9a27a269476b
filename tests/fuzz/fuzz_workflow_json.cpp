// Workflow JSON (WorkflowGraph::fromJson, engine/workflow/workflow_json.cpp): any text either
// reads as a graph or gives an error; a graph read writes back in the canonical form that reads
// to the same graph and writes the same text again (the contract in rag/workflow.h), and
// validate() answers without crashing.
#include <string>

#include "fuzz_check.h"
#include "rag/workflow.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::fromJson(rag::fuzz::asText(data, size));
  if (!g) {
    RAG_FUZZ_CHECK(!g.status().message().empty());
    return 0;
  }
  (void)g->validate();
  const std::string text = g->toJson();
  rag::Result<rag::WorkflowGraph> again = rag::WorkflowGraph::fromJson(text);
  RAG_FUZZ_CHECK(again.isOk());
  RAG_FUZZ_CHECK(*again == *g);
  RAG_FUZZ_CHECK(again->toJson() == text);
  return 0;
}
