// The OpenAI wire format of `ragraph serve`: request bodies of POST /v1/chat/completions and
// /v1/completions read into a CompletionRequest (every problem named, with the field at fault),
// and the JSON of responses, stream chunks and error objects. No HTTP here (openai_server.h).
//
//   CompletionRequest req;
//   if (std::optional<ApiError> e = parseCompletionRequest(body, Endpoint::ChatCompletions, req))
//     return reply(e->status, errorJson(*e));
//   WorkflowGraph g = applySamplingOptions(served.graph, req);   // max_tokens, temperature, stop
//   ... engine->submit(req.question, g) ...
//   std::string body = completionJson(req, reply, graph, result);
//
// A RAGraph request is one question through a workflow: the question is the prompt of
// /v1/completions, or the last user message of /v1/chat/completions (earlier turns and system
// messages are accepted and not used). max_tokens, temperature and stop apply to the generation
// nodes that write the workflow's answer variable; the other nodes keep the workflow's settings.
// Responses carry an extension object "ragraph" (request id, passages, stage timings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rag/request.h"
#include "rag/workflow.h"

namespace rag::server {

enum class Endpoint { ChatCompletions, Completions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::ChatCompletions;
  std::string model;
  std::string question;
  bool stream = false;
  bool includeUsage = false;  // stream_options.include_usage: a usage chunk before [DONE]
  std::optional<int64_t> maxTokens;
  std::optional<double> temperature;
  std::vector<std::string> stop;
};

// An OpenAI error object with its HTTP status: {"error": {message, type, param, code}}.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the request field at fault; empty: null
  std::string code;   // a machine-readable code; empty: null
};

ApiError invalidRequest(std::string message, std::string param = {});

inline constexpr int64_t kMaxTokensLimit = 4096;  // max_tokens above this is refused

// Reads a request body. nullopt on success (`out` filled); else the 400 error to send.
std::optional<ApiError> parseCompletionRequest(std::string_view body, Endpoint endpoint, CompletionRequest& out);

// `graph` with the request's max_tokens, temperature and stop on its answer-writing generation
// nodes (stop strings are added to the node's own).
WorkflowGraph applySamplingOptions(const WorkflowGraph& graph, const CompletionRequest& req);

// What every response of one request shares.
struct ReplyInfo {
  std::string id;       // "chatcmpl-7" / "cmpl-7"
  int64_t created = 0;  // Unix seconds
};

std::string errorJson(const ApiError& e);
// "length" when the last answer-writing generation stopped at its max_tokens, else "stop".
std::string finishReason(const WorkflowGraph& graph, const RequestResult& r);
// The whole (non-streamed) response.
std::string completionJson(const CompletionRequest& req, const ReplyInfo& reply, const WorkflowGraph& graph,
                           const RequestResult& r);

// Stream chunks (the JSON after "data: "). contentChunk: `text` as the delta (chat: the first
// chunk also carries the role); progressChunk: a workflow event in the extension field with an
// empty delta; finalChunk: finish_reason and the "ragraph" extension; usageChunk: empty choices
// and usage.
std::string contentChunk(const CompletionRequest& req, const ReplyInfo& reply, std::string_view text, bool withRole);
std::string progressChunk(const CompletionRequest& req, const ReplyInfo& reply, std::string_view event,
                          std::string_view node);
std::string finalChunk(const CompletionRequest& req, const ReplyInfo& reply, const WorkflowGraph& graph,
                       const RequestResult& r);
std::string usageChunk(const CompletionRequest& req, const ReplyInfo& reply, const RequestResult& r);

}  // namespace rag::server
