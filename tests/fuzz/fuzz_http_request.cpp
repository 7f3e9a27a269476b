// The body of POST /v1/chat/completions and /v1/completions (parseCompletionRequest in
// app/server/openai_protocol.h, what the server calls on every request body). The first byte
// picks the endpoint, the rest is the body. A body is either refused with a 400 error object
// that is valid JSON, or accepted as a request whose sampling options, applied to each shipped
// workflow (resources/workflows/), still give a valid graph, and whose response chunks are JSON.
#include <filesystem>
#include <vector>

#include "core/json.h"
#include "fuzz_check.h"
#include "server/openai_protocol.h"

namespace {

const std::vector<rag::WorkflowGraph>& shippedWorkflows() {
  static const std::vector<rag::WorkflowGraph> graphs = [] {
    std::vector<rag::WorkflowGraph> out;
    for (const auto& e : std::filesystem::directory_iterator(RAGWB_WORKFLOWS_DIR)) {
      rag::Result<rag::WorkflowGraph> g = rag::WorkflowGraph::load(e.path());
      RAG_FUZZ_CHECK(g.isOk() && g->validate().isOk());
      out.push_back(std::move(*g));
    }
    RAG_FUZZ_CHECK(!out.empty());
    return out;
  }();
  return graphs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rag::server;
  if (size == 0) return 0;
  const Endpoint endpoint = data[0] % 2 == 0 ? Endpoint::ChatCompletions : Endpoint::Completions;
  const std::string_view body = rag::fuzz::asText(data + 1, size - 1);
  CompletionRequest req;
  if (std::optional<ApiError> e = parseCompletionRequest(body, endpoint, req)) {
    RAG_FUZZ_CHECK(e->status == 400 && !e->message.empty());
    RAG_FUZZ_CHECK(rag::parseJson(errorJson(*e)).isOk());
    return 0;
  }
  RAG_FUZZ_CHECK(req.endpoint == endpoint && !req.model.empty() && !req.question.empty());
  RAG_FUZZ_CHECK(!req.maxTokens || (*req.maxTokens >= 1 && *req.maxTokens <= kMaxTokensLimit));
  for (const rag::WorkflowGraph& g : shippedWorkflows())
    RAG_FUZZ_CHECK(applySamplingOptions(g, req).validate().isOk());
  const ReplyInfo reply{"chatcmpl-1", 0};
  RAG_FUZZ_CHECK(rag::parseJson(contentChunk(req, reply, req.question, true)).isOk());
  RAG_FUZZ_CHECK(rag::parseJson(progressChunk(req, reply, "started", req.model)).isOk());
  return 0;
}
