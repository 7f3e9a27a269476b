// Workflow JSON (WorkflowGraph::fromJson, engine/workflow/workflow_json.cpp): any text either
// reads as a graph or gives an error; a graph read writes back in the canonical form that reads
// to the same graph and writes the same text again (the contract in rag/workflow.h), and
// validate() answers without crashing. The same text, read as passages one per line and as the
// query, goes through a compression node's extractive summary (retrieval/extractive_summary.h),
// and as a retrieval node's query it has one part per '|' (queryTexts), with any values.
#include <algorithm>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "rag/workflow.h"
#include "retrieval/extractive_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(rag::fuzz::asText(data, size));
  for (int64_t keep : {1, 2}) {
    const rag::retrieval::ExtractiveSummary s =
        rag::retrieval::extractiveSummary(input, rag::retrieval::passageLines(input), keep);
    RAG_FUZZ_CHECK(s.kept <= s.scored && s.kept <= keep + 1);
    RAG_FUZZ_CHECK(s.text.empty() == (s.kept == 0));
    RAG_FUZZ_CHECK(!s.bridged || s.kept == std::min<int64_t>(keep, s.scored) + 1);
  }
  const size_t parts = static_cast<size_t>(std::count(input.begin(), input.end(), '|')) + 1;
  RAG_FUZZ_CHECK(rag::queryTexts(input, {}).size() == parts);
  if (rag::Result<std::vector<std::string>> names = rag::queryVariables(input); names) {
    RAG_FUZZ_CHECK(!names->empty());
    rag::Variables vars;
    for (const std::string& n : *names) vars[n] = "a | value";  // a value's '|' is text, not a separator
    RAG_FUZZ_CHECK(rag::queryTexts(input, vars).size() == parts);
  }
  rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::fromJson(input);
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
