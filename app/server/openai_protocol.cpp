#include "server/openai_protocol.h"

#include <cmath>
#include <sstream>

#include "core/json.h"
#include "core/json_writer.h"
#include "server/utf8_stream.h"

namespace rag::server {

namespace {

std::string_view typeName(const JsonValue& v) { return jsonTypeName(v.type()); }

// A message's content: a string, null, or an array of parts of which the "text" ones count.
std::optional<ApiError> readContent(const JsonValue& content, size_t index, std::string& out) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.isNull()) return std::nullopt;
  if (content.isString()) {
    out = content.asString();
    return std::nullopt;
  }
  if (!content.isArray())
    return invalidRequest(where + " must be a string or an array of content parts, not " + std::string(typeName(content)),
                          where);
  out.clear();
  for (size_t p = 0; p < content.asArray().size(); ++p) {
    const JsonValue& part = content.asArray()[p];
    const JsonValue* type = part.find("type");
    if (!part.isObject() || !type || !type->isString())
      return invalidRequest(where + "[" + std::to_string(p) + "] must be an object with a string \"type\"", where);
    if (type->asString() != "text")
      return invalidRequest(where + "[" + std::to_string(p) + "] is of type '" + type->asString() +
                                "'; this server reads text parts only",
                            where);
    const JsonValue* text = part.find("text");
    if (!text || !text->isString())
      return invalidRequest(where + "[" + std::to_string(p) + "].text must be a string", where);
    out += text->asString();
  }
  return std::nullopt;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

bool writesAnswer(const WorkflowGraph& g, const WorkflowNode& n) {
  return n.kind == NodeKind::Generation && n.outputVar == g.answerVar();
}

void writeUsage(JsonWriter& w, const RequestResult& r) {
  int64_t prompt = 0, completion = 0;
  for (const StageTiming& s : r.stages)
    if (s.kind == NodeKind::Generation) {
      prompt += s.promptTokens;
      completion += s.work;
    }
  w.key("usage").beginObject();
  w.key("prompt_tokens").value(prompt).key("completion_tokens").value(completion);
  w.key("total_tokens").value(prompt + completion);
  w.endObject();
}

// The last retrieval's passages: ids, with their text when the node's output variable holds one
// line per passage (the retrieval node's format).
void writePassages(JsonWriter& w, const WorkflowGraph& g, const RequestResult& r) {
  std::vector<std::string> lines;
  for (auto s = r.stages.rbegin(); s != r.stages.rend(); ++s) {
    if (s->kind != NodeKind::Retrieval) continue;
    const WorkflowNode* n = g.findNode(s->node);
    auto v = n ? r.variables.find(n->outputVar) : r.variables.end();
    if (v != r.variables.end()) {
      std::istringstream in(v->second);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    break;
  }
  const bool withText = lines.size() == r.lastPassages.size();
  w.key("passages").beginArray();
  for (size_t i = 0; i < r.lastPassages.size(); ++i) {
    w.beginObject().key("id").value(r.lastPassages[i]);
    if (withText) w.key("text").value(sanitizeUtf8(lines[i]));
    w.endObject();
  }
  w.endArray();
}

void writeExtension(JsonWriter& w, const WorkflowGraph& g, const RequestResult& r) {
  w.key("ragraph").beginObject();
  w.key("request_id").value(static_cast<int64_t>(r.id)).key("workflow").value(g.name());
  w.key("latency_s").value(r.latencySeconds);
  w.key("speculations").value(static_cast<int64_t>(r.speculations));
  w.key("speculations_accepted").value(static_cast<int64_t>(r.specAccepted));
  w.key("rollbacks").value(static_cast<int64_t>(r.rollbacks));
  writePassages(w, g, r);
  w.key("stages").beginArray();
  for (const StageTiming& s : r.stages) {
    w.beginObject().key("node").value(s.node).key("kind").value(nodeKindName(s.kind));
    w.key("begin_s").value(s.beginSeconds).key("end_s").value(s.endSeconds);
    w.key(nodeWorkUnit(s.kind)).value(s.work);
    w.key("speculative").value(s.speculative);
    if (s.kind == NodeKind::Generation) {
      w.key("first_token_s");
      if (s.firstTokenSeconds >= 0) w.value(s.firstTokenSeconds);
      else w.null();
      w.key("prompt_tokens").value(s.promptTokens).key("cached_prompt_tokens").value(s.cachedPromptTokens);
      w.key("attention").value(s.attention);
    }
    w.endObject();
  }
  w.endArray();
  w.endObject();
}

void beginReply(JsonWriter& w, const CompletionRequest& req, const ReplyInfo& reply, bool chunk) {
  w.beginObject();
  w.key("id").value(reply.id);
  const bool chat = req.endpoint == Endpoint::ChatCompletions;
  w.key("object").value(chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion");
  w.key("created").value(reply.created).key("model").value(req.model);
}

// One choice of a stream chunk; `text` null: an empty delta.
void writeChunkChoice(JsonWriter& w, const CompletionRequest& req, const std::string* text, bool withRole,
                      const std::string* finish) {
  w.beginObject().key("index").value(0);
  if (req.endpoint == Endpoint::ChatCompletions) {
    w.key("delta").beginObject();
    if (withRole) w.key("role").value("assistant");
    if (text) w.key("content").value(*text);
    w.endObject();
  } else {
    w.key("text").value(text ? *text : std::string()).key("logprobs").null();
  }
  w.key("finish_reason");
  if (finish) w.value(*finish);
  else w.null();
  w.endObject();
}

}  // namespace

ApiError invalidRequest(std::string message, std::string param) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

std::optional<ApiError> parseCompletionRequest(std::string_view body, Endpoint endpoint, CompletionRequest& out) {
  out = CompletionRequest{};
  out.endpoint = endpoint;
  if (blank(body)) return invalidRequest("the request body is empty; send a JSON object (Content-Type: application/json)");
  Result<JsonValue> doc = parseJson(body);
  if (!doc) {
    ApiError e = invalidRequest("the request body is not valid JSON: " + doc.status().message());
    e.code = "invalid_json";
    return e;
  }
  if (!doc->isObject())
    return invalidRequest("the request body must be a JSON object, not " + std::string(typeName(*doc)));
  const JsonValue& d = *doc;

  const JsonValue* model = d.find("model");
  if (!model) return invalidRequest("missing required field 'model' (a workflow: GET /v1/models lists them)", "model");
  if (!model->isString() || model->asString().empty())
    return invalidRequest("'model' must be a non-empty string naming a workflow (GET /v1/models lists them)", "model");
  out.model = model->asString();

  if (endpoint == Endpoint::ChatCompletions) {
    const JsonValue* messages = d.find("messages");
    if (!messages) return invalidRequest("missing required field 'messages'", "messages");
    if (!messages->isArray() || messages->size() == 0)
      return invalidRequest("'messages' must be a non-empty array of {role, content} objects", "messages");
    bool found = false;
    for (size_t i = 0; i < messages->asArray().size(); ++i) {
      const JsonValue& m = messages->asArray()[i];
      const std::string where = "messages[" + std::to_string(i) + "]";
      if (!m.isObject()) return invalidRequest(where + " must be an object with 'role' and 'content'", where);
      const JsonValue* role = m.find("role");
      if (!role || !role->isString()) return invalidRequest(where + ".role must be a string", where + ".role");
      const JsonValue* content = m.find("content");
      if (!content) return invalidRequest("missing required field " + where + ".content", where + ".content");
      std::string text;
      if (std::optional<ApiError> e = readContent(*content, i, text)) return e;
      if (role->asString() == "user") {
        out.question = std::move(text);
        found = true;
      }
    }
    if (!found) return invalidRequest("'messages' has no message with role 'user': the last one is the question", "messages");
    if (blank(out.question)) return invalidRequest("the last user message is empty; give the question to answer", "messages");
  } else {
    const JsonValue* prompt = d.find("prompt");
    if (!prompt) return invalidRequest("missing required field 'prompt'", "prompt");
    const JsonValue* p = prompt;
    if (prompt->isArray()) {
      if (prompt->size() != 1)
        return invalidRequest("'prompt' as an array must hold exactly one string; send one prompt per request", "prompt");
      p = &prompt->asArray()[0];
    }
    if (!p->isString()) return invalidRequest("'prompt' must be a string (token arrays are not accepted)", "prompt");
    out.question = p->asString();
    if (blank(out.question)) return invalidRequest("'prompt' is empty; give the question to answer", "prompt");
  }

  if (const JsonValue* s = d.find("stream"); s && !s->isNull()) {
    if (!s->isBool()) return invalidRequest("'stream' must be true or false", "stream");
    out.stream = s->asBool();
  }
  if (const JsonValue* so = d.find("stream_options"); so && !so->isNull()) {
    if (!so->isObject()) return invalidRequest("'stream_options' must be an object", "stream_options");
    if (const JsonValue* u = so->find("include_usage"); u && !u->isNull()) {
      if (!u->isBool()) return invalidRequest("'stream_options.include_usage' must be true or false", "stream_options");
      out.includeUsage = u->asBool();
    }
  }
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const JsonValue* m = d.find(key);
    if (!m || m->isNull()) continue;
    const std::optional<int64_t> n = m->asInt64();
    if (!n || *n < 1 || *n > kMaxTokensLimit)
      return invalidRequest("'" + std::string(key) + "' must be a whole number from 1 to " + std::to_string(kMaxTokensLimit),
                            key);
    out.maxTokens = *n;
  }
  if (const JsonValue* t = d.find("temperature"); t && !t->isNull()) {
    if (!t->isNumber() || !(t->asDouble() >= 0.0 && t->asDouble() <= 2.0))
      return invalidRequest("'temperature' must be a number from 0 to 2", "temperature");
    out.temperature = t->asDouble();
  }
  if (const JsonValue* s = d.find("stop"); s && !s->isNull()) {
    if (s->isString()) {
      out.stop.push_back(s->asString());
    } else if (s->isArray() && s->size() <= 4) {
      for (const JsonValue& x : s->asArray()) {
        if (!x.isString()) return invalidRequest("'stop' must be a string or an array of up to 4 strings", "stop");
        out.stop.push_back(x.asString());
      }
    } else {
      return invalidRequest("'stop' must be a string or an array of up to 4 strings", "stop");
    }
    for (const std::string& x : out.stop)
      if (x.empty()) return invalidRequest("'stop' strings must not be empty", "stop");
  }
  if (const JsonValue* n = d.find("n"); n && !n->isNull()) {
    if (n->asInt64() != std::optional<int64_t>(1))
      return invalidRequest("'n' must be 1: a workflow run gives one answer per request", "n");
  }
  return std::nullopt;
}

WorkflowGraph applySamplingOptions(const WorkflowGraph& graph, const CompletionRequest& req) {
  if (!req.maxTokens && !req.temperature && req.stop.empty()) return graph;
  // WorkflowGraph exposes its nodes read-only: rebuild it with the adjusted options.
  WorkflowGraph g(graph.name(), graph.description());
  g.setAnswerVar(graph.answerVar());
  g.setMaxNodeRuns(graph.maxNodeRuns());
  for (WorkflowNode n : graph.nodes()) {
    if (writesAnswer(graph, n)) {
      GenerationOptions& o = n.generation;
      if (req.maxTokens) o.maxTokens = *req.maxTokens;
      if (req.temperature) o.temperature = *req.temperature;
      o.stop.insert(o.stop.end(), req.stop.begin(), req.stop.end());
    }
    g.addNode(std::move(n));
  }
  for (const WorkflowEdge& e : graph.edges()) g.addEdge(e.from, e.to, e.when);
  return g;
}

std::string errorJson(const ApiError& e) {
  std::ostringstream out;
  JsonWriter w(out);
  w.beginObject().key("error").beginObject();
  w.key("message").value(sanitizeUtf8(e.message)).key("type").value(e.type);
  w.key("param");
  if (e.param.empty()) w.null();
  else w.value(e.param);
  w.key("code");
  if (e.code.empty()) w.null();
  else w.value(e.code);
  w.endObject().endObject();
  return out.str();
}

std::string finishReason(const WorkflowGraph& graph, const RequestResult& r) {
  for (auto s = r.stages.rbegin(); s != r.stages.rend(); ++s) {
    const WorkflowNode* n = graph.findNode(s->node);
    if (!n || !writesAnswer(graph, *n)) continue;
    return s->work >= n->generation.maxTokens ? "length" : "stop";
  }
  return "stop";
}

std::string completionJson(const CompletionRequest& req, const ReplyInfo& reply, const WorkflowGraph& graph,
                           const RequestResult& r) {
  std::ostringstream out;
  JsonWriter w(out);
  beginReply(w, req, reply, false);
  const std::string answer = sanitizeUtf8(r.answer);
  w.key("choices").beginArray().beginObject().key("index").value(0);
  if (req.endpoint == Endpoint::ChatCompletions) {
    w.key("message").beginObject().key("role").value("assistant").key("content").value(answer).endObject();
  } else {
    w.key("text").value(answer).key("logprobs").null();
  }
  w.key("finish_reason").value(finishReason(graph, r));
  w.endObject().endArray();
  writeUsage(w, r);
  writeExtension(w, graph, r);
  w.endObject();
  return out.str();
}

std::string contentChunk(const CompletionRequest& req, const ReplyInfo& reply, std::string_view text, bool withRole) {
  std::ostringstream out;
  JsonWriter w(out);
  beginReply(w, req, reply, true);
  const std::string t(text);
  w.key("choices").beginArray();
  writeChunkChoice(w, req, &t, withRole, nullptr);
  w.endArray().endObject();
  return out.str();
}

std::string progressChunk(const CompletionRequest& req, const ReplyInfo& reply, std::string_view event,
                          std::string_view node) {
  std::ostringstream out;
  JsonWriter w(out);
  beginReply(w, req, reply, true);
  w.key("choices").beginArray();
  writeChunkChoice(w, req, nullptr, false, nullptr);
  w.endArray();
  w.key("ragraph").beginObject().key("event").value(event).key("node").value(node).endObject();
  w.endObject();
  return out.str();
}

std::string finalChunk(const CompletionRequest& req, const ReplyInfo& reply, const WorkflowGraph& graph,
                       const RequestResult& r) {
  std::ostringstream out;
  JsonWriter w(out);
  beginReply(w, req, reply, true);
  const std::string finish = finishReason(graph, r);
  w.key("choices").beginArray();
  writeChunkChoice(w, req, nullptr, false, &finish);
  w.endArray();
  writeExtension(w, graph, r);
  w.endObject();
  return out.str();
}

std::string usageChunk(const CompletionRequest& req, const ReplyInfo& reply, const RequestResult& r) {
  std::ostringstream out;
  JsonWriter w(out);
  beginReply(w, req, reply, true);
  w.key("choices").beginArray().endArray();
  writeUsage(w, r);
  w.endObject();
  return out.str();
}

}  // namespace rag::server
