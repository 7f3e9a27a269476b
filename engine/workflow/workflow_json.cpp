// The workflow file format: toJson, fromJson, load, save.
//
// {
//   "format": "ragraph-workflow", "version": 1,
//   "name": "...", "description": "...", "answer": "answer", "max_node_runs": 16,
//   "nodes": [
//     {"id": "g", "kind": "generation", "prompt": "...", "output": "v",
//      "max_tokens": 64, "temperature": 0, "stop": ["\n"]},
//     {"id": "r", "kind": "retrieval", "query": "v", "output": "docs", "topk": 5, "nprobe": 0}],
//   "edges": [
//     {"from": "START", "to": "g"},
//     {"from": "g", "to": "r", "when": {"kind": "contains", "var": "v", "text": "DONE"}},
//     {"from": "g", "to": "r", "when": {"kind": "runs_below", "node": "g", "limit": 3}},
//     {"from": "g", "to": "r", "when": {"kind": "empty" | "non_empty", "var": "v"}}]
// }
//
// toJson writes every field (an edge without a condition has no "when"), so its output is
// canonical. fromJson is strict: an unknown or repeated key is an error rather than a setting
// silently ignored; optional keys (name, description, answer, max_node_runs, max_tokens,
// temperature, stop, nprobe) take the defaults of rag/workflow.h.
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"
#include "rag/workflow.h"

namespace rag {

namespace {

// "\"key\": example", built by appending (GCC 12 warns falsely, -Wrestrict, on
// "\"" + std::string(key)).
std::string keyExample(std::string_view key, std::string_view example) {
  std::string s = "\"";
  s.append(key).append("\": ").append(example);
  return s;
}

Status errorAt(const std::string& path, const std::string& what) {
  return Status::invalidArgument("invalid workflow JSON at " + path + ": " + what);
}

std::string describeValue(const JsonValue& v) {
  switch (v.type()) {
    case JsonValue::Type::Null: return "null";
    case JsonValue::Type::Bool: return v.asBool() ? "true" : "false";
    case JsonValue::Type::Number: {
      std::ostringstream s;
      JsonWriter(s).value(v.asDouble());
      return "the number " + s.str();
    }
    case JsonValue::Type::String: {
      std::ostringstream s;
      JsonWriter::writeEscaped(s, v.asString().substr(0, 40));
      return "the string " + s.str();
    }
    case JsonValue::Type::Array: return "an array";
    case JsonValue::Type::Object: return "an object";
  }
  return "a value";
}

Status typeError(const std::string& path, const JsonValue& got, const std::string& expected,
                 const std::string& example) {
  return errorAt(
      path, "expected " + expected + ", got " + describeValue(got) + "; write e.g. " + example);
}

// The members of one JSON object, read by key, with errors that name their JSON path.
class ObjectReader {
public:
  ObjectReader(const JsonValue& object, std::string path)
      : m_object(object), m_path(std::move(path)) {}

  const std::string& path() const { return m_path; }
  std::string pathOf(std::string_view key) const { return m_path + "." + std::string(key); }

  // Unknown keys and keys given twice are errors.
  Status checkKeys(std::initializer_list<std::string_view> known, std::string_view what) const {
    std::vector<std::string_view> seen;
    for (const auto& [key, value] : m_object.asObject()) {
      bool isKnown = false;
      for (std::string_view k : known) isKnown = isKnown || k == key;
      if (!isKnown) {
        std::string list;
        for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return errorAt(pathOf(key), "unknown key in " + std::string(what) +
                                        "; remove it or fix its spelling (known keys: " + list +
                                        ")");
      }
      for (std::string_view s : seen)
        if (s == key) return errorAt(pathOf(key), "the key appears twice; keep one");
      seen.push_back(key);
    }
    return Status::ok();
  }

  const JsonValue* find(std::string_view key) const { return m_object.find(key); }

  Result<const JsonValue*> required(std::string_view key, const std::string& example) const {
    const JsonValue* v = m_object.find(key);
    if (!v) return errorAt(pathOf(key), "missing; add e.g. " + example);
    return v;
  }

  Result<std::string> string(std::string_view key, const std::string& example) const {
    RAG_ASSIGN_OR_RETURN(const JsonValue* v, required(key, keyExample(key, example)));
    return asString(*v, pathOf(key), example);
  }

  Result<std::string> stringOr(std::string_view key, std::string fallback,
                               const std::string& example) const {
    const JsonValue* v = m_object.find(key);
    if (!v) return fallback;
    return asString(*v, pathOf(key), example);
  }

  Result<int64_t> integer(std::string_view key, const std::string& example) const {
    RAG_ASSIGN_OR_RETURN(const JsonValue* v, required(key, keyExample(key, example)));
    return asInteger(*v, pathOf(key), example);
  }

  Result<int64_t> integerOr(std::string_view key, int64_t fallback,
                            const std::string& example) const {
    const JsonValue* v = m_object.find(key);
    if (!v) return fallback;
    return asInteger(*v, pathOf(key), example);
  }

  Result<double> numberOr(std::string_view key, double fallback, const std::string& example) const {
    const JsonValue* v = m_object.find(key);
    if (!v) return fallback;
    if (!v->isNumber()) return typeError(pathOf(key), *v, "a number", example);
    return v->asDouble();
  }

  Result<std::vector<std::string>> stringsOr(std::string_view key,
                                             const std::string& example) const {
    std::vector<std::string> out;
    const JsonValue* v = m_object.find(key);
    if (!v) return out;
    if (!v->isArray()) return typeError(pathOf(key), *v, "an array of strings", example);
    for (size_t i = 0; i < v->size(); ++i) {
      std::string at = pathOf(key) + "[" + std::to_string(i) + "]";
      RAG_ASSIGN_OR_RETURN(std::string s, asString(v->asArray()[i], at, example));
      out.push_back(std::move(s));
    }
    return out;
  }

private:
  const JsonValue& m_object;
  std::string m_path;

  static Result<std::string> asString(const JsonValue& v, const std::string& path,
                                      const std::string& example) {
    if (!v.isString()) return typeError(path, v, "a string", example);
    return v.asString();
  }

  static Result<int64_t> asInteger(const JsonValue& v, const std::string& path,
                                   const std::string& example) {
    if (!v.isNumber() || !v.asInt64()) return typeError(path, v, "an integer", example);
    return *v.asInt64();
  }
};

Result<ObjectReader> objectAt(const JsonValue& v, std::string path, const std::string& example) {
  if (!v.isObject()) return typeError(path, v, "an object", example);
  return ObjectReader(v, std::move(path));
}

Status checkFormat(const ObjectReader& top) {
  const JsonValue* format = top.find("format");
  const std::string header = "{\"format\": \"" + std::string(kWorkflowFormat) +
                             "\", \"version\": " + std::to_string(kWorkflowFormatVersion) +
                             ", ...}";
  if (!format)
    return errorAt(top.pathOf("format"), "missing; a workflow file starts with " + header);
  if (!format->isString() || format->asString() != kWorkflowFormat)
    return errorAt(
        top.pathOf("format"),
        "is " + describeValue(*format) + ", not a workflow; a workflow file starts with " + header);
  RAG_ASSIGN_OR_RETURN(int64_t version,
                       top.integer("version", std::to_string(kWorkflowFormatVersion)));
  if (version > kWorkflowFormatVersion)
    return errorAt(top.pathOf("version"),
                   "the file has format version " + std::to_string(version) +
                       ", newer than this build reads (" + std::to_string(kWorkflowFormatVersion) +
                       "); update ragraph, or save the workflow as version " +
                       std::to_string(kWorkflowFormatVersion));
  if (version < 1)
    return errorAt(top.pathOf("version"), std::to_string(version) +
                                              " is not a format version; use " +
                                              std::to_string(kWorkflowFormatVersion));
  return Status::ok();
}

Result<WorkflowNode> readNode(const JsonValue& v, const std::string& path) {
  const std::string example =
      "{\"id\": \"retrieve\", \"kind\": \"retrieval\", \"query\": \"question\", \"output\": "
      "\"docs\", \"topk\": 5}";
  RAG_ASSIGN_OR_RETURN(ObjectReader r, objectAt(v, path, example));
  WorkflowNode n;
  RAG_ASSIGN_OR_RETURN(n.id, r.string("id", "\"retrieve\""));
  RAG_ASSIGN_OR_RETURN(std::string kind, r.string("kind", "\"generation\", \"retrieval\", \"knowledge\" or \"compression\""));
  if (kind == nodeKindName(NodeKind::Generation)) {
    n.kind = NodeKind::Generation;
    RAG_RETURN_IF_ERROR(
        r.checkKeys({"id", "kind", "prompt", "output", "max_tokens", "temperature", "stop", "copy_from", "copy_floor"},
                    "a generation node"));
    const GenerationOptions defaults;
    RAG_ASSIGN_OR_RETURN(n.promptTemplate, r.string("prompt", "\"Answer {question}\""));
    RAG_ASSIGN_OR_RETURN(n.outputVar, r.string("output", "\"answer\""));
    RAG_ASSIGN_OR_RETURN(n.generation.maxTokens,
                         r.integerOr("max_tokens", defaults.maxTokens, "64"));
    RAG_ASSIGN_OR_RETURN(n.generation.temperature,
                         r.numberOr("temperature", defaults.temperature, "0.7"));
    RAG_ASSIGN_OR_RETURN(n.generation.stop, r.stringsOr("stop", "[\"\\n\"]"));
    RAG_ASSIGN_OR_RETURN(n.generation.copyFrom, r.stringOr("copy_from", std::string(), "\"docs\""));
    RAG_ASSIGN_OR_RETURN(n.generation.copyFloor, r.numberOr("copy_floor", defaults.copyFloor, "0.1"));
  } else if (kind == nodeKindName(NodeKind::Retrieval)) {
    n.kind = NodeKind::Retrieval;
    RAG_RETURN_IF_ERROR(
        r.checkKeys({"id", "kind", "query", "output", "topk", "method", "nprobe", "rerank"}, "a retrieval node"));
    RAG_ASSIGN_OR_RETURN(n.query, r.string("query", "\"question\""));
    RAG_ASSIGN_OR_RETURN(n.outputVar, r.string("output", "\"docs\""));
    RAG_ASSIGN_OR_RETURN(n.topk, r.integer("topk", "5"));
    RAG_ASSIGN_OR_RETURN(const std::string method,
                         r.stringOr("method", std::string(retrievalMethodName(RetrievalOptions{}.method)), "\"hybrid\""));
    const std::optional<RetrievalMethod> m = retrievalMethodFromName(method);
    if (!m) return errorAt(r.pathOf("method"), "\"" + method + "\" is not a retrieval method; use \"dense\", \"bm25\" or \"hybrid\"");
    n.retrieval.method = *m;
    RAG_ASSIGN_OR_RETURN(n.retrieval.nprobe,
                         r.integerOr("nprobe", RetrievalOptions{}.nprobe, "128"));
    RAG_ASSIGN_OR_RETURN(const std::string rerank, r.stringOr("rerank", std::string(retrievalRerankName(RetrievalOptions{}.rerank)), "\"bm25\""));
    const std::optional<RetrievalRerank> rr = retrievalRerankFromName(rerank);
    if (!rr) return errorAt(r.pathOf("rerank"), "\"" + rerank + "\" is not a rerank; use \"none\" or \"bm25\"");
    n.retrieval.rerank = *rr;
  } else if (kind == nodeKindName(NodeKind::Knowledge)) {
    n.kind = NodeKind::Knowledge;
    RAG_RETURN_IF_ERROR(
        r.checkKeys({"id", "kind", "query", "output", "subgraphs", "hops", "fanout", "paths"}, "a knowledge node"));
    const KnowledgeOptions defaults;
    RAG_ASSIGN_OR_RETURN(n.query, r.string("query", "\"question\""));
    RAG_ASSIGN_OR_RETURN(n.outputVar, r.string("output", "\"graph\""));
    RAG_ASSIGN_OR_RETURN(n.topk, r.integer("subgraphs", "5"));
    RAG_ASSIGN_OR_RETURN(n.knowledge.hops, r.integerOr("hops", defaults.hops, "2"));
    RAG_ASSIGN_OR_RETURN(n.knowledge.fanout, r.integerOr("fanout", defaults.fanout, "8"));
    RAG_ASSIGN_OR_RETURN(n.knowledge.paths, r.integerOr("paths", defaults.paths, "30"));
  } else if (kind == nodeKindName(NodeKind::Compression)) {
    n.kind = NodeKind::Compression;
    RAG_RETURN_IF_ERROR(
        r.checkKeys({"id", "kind", "passages", "query", "output", "sentences"}, "a compression node"));
    RAG_ASSIGN_OR_RETURN(n.compression.passages, r.string("passages", "\"docs\""));
    RAG_ASSIGN_OR_RETURN(n.query, r.string("query", "\"question\""));
    RAG_ASSIGN_OR_RETURN(n.outputVar, r.string("output", "\"summary\""));
    RAG_ASSIGN_OR_RETURN(n.topk, r.integer("sentences", "1"));
  } else {
    return errorAt(r.pathOf("kind"), "\"" + kind +
                                         "\" is not a node kind; use \"generation\", \"retrieval\", \"knowledge\" "
                                         "or \"compression\"");
  }
  return n;
}

Result<EdgeCondition> readCondition(const JsonValue& v, const std::string& path) {
  RAG_ASSIGN_OR_RETURN(ObjectReader r,
                       objectAt(v, path, "{\"kind\": \"non_empty\", \"var\": \"subquestion\"}"));
  RAG_ASSIGN_OR_RETURN(std::string kind,
                       r.string("kind", "\"non_empty\" (or always, empty, contains, runs_below)"));
  EdgeCondition c;
  if (kind == "always") {
    RAG_RETURN_IF_ERROR(r.checkKeys({"kind"}, "an 'always' condition"));
  } else if (kind == "empty" || kind == "non_empty") {
    c.kind = kind == "empty" ? ConditionKind::Empty : ConditionKind::NonEmpty;
    RAG_RETURN_IF_ERROR(r.checkKeys({"kind", "var"}, "an '" + kind + "' condition"));
    RAG_ASSIGN_OR_RETURN(c.var, r.string("var", "\"subquestion\""));
  } else if (kind == "contains") {
    c.kind = ConditionKind::Contains;
    RAG_RETURN_IF_ERROR(r.checkKeys({"kind", "var", "text"}, "a 'contains' condition"));
    RAG_ASSIGN_OR_RETURN(c.var, r.string("var", "\"subquestion\""));
    RAG_ASSIGN_OR_RETURN(c.text, r.string("text", "\"DONE\""));
  } else if (kind == "runs_below") {
    c.kind = ConditionKind::RunsBelow;
    RAG_RETURN_IF_ERROR(r.checkKeys({"kind", "node", "limit"}, "a 'runs_below' condition"));
    RAG_ASSIGN_OR_RETURN(c.node, r.string("node", "\"generate\""));
    RAG_ASSIGN_OR_RETURN(c.limit, r.integer("limit", "3"));
  } else {
    return errorAt(r.pathOf("kind"), "\"" + kind +
                                         "\" is not a condition; use always, empty, non_empty, "
                                         "contains or runs_below");
  }
  return c;
}

Result<WorkflowEdge> readEdge(const JsonValue& v, const std::string& path) {
  RAG_ASSIGN_OR_RETURN(ObjectReader r,
                       objectAt(v, path, "{\"from\": \"START\", \"to\": \"retrieve\"}"));
  RAG_RETURN_IF_ERROR(r.checkKeys({"from", "to", "when"}, "an edge"));
  WorkflowEdge e;
  RAG_ASSIGN_OR_RETURN(e.from, r.string("from", "\"START\""));
  RAG_ASSIGN_OR_RETURN(e.to, r.string("to", "\"END\""));
  if (const JsonValue* when = r.find("when")) {
    RAG_ASSIGN_OR_RETURN(e.when, readCondition(*when, r.pathOf("when")));
  }
  return e;
}

template <typename T>
Result<std::vector<T>> readArray(const ObjectReader& top, std::string_view key,
                                 Result<T> (*readOne)(const JsonValue&, const std::string&)) {
  RAG_ASSIGN_OR_RETURN(const JsonValue* v, top.required(key, keyExample(key, "[]")));
  if (!v->isArray()) return typeError(top.pathOf(key), *v, "an array", keyExample(key, "[...]"));
  std::vector<T> out;
  for (size_t i = 0; i < v->size(); ++i) {
    RAG_ASSIGN_OR_RETURN(T item,
                         readOne(v->asArray()[i], top.pathOf(key) + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(item));
  }
  return out;
}

void writeCondition(JsonWriter& w, const EdgeCondition& c) {
  w.beginObject();
  w.key("kind").value(conditionKindName(c.kind));
  switch (c.kind) {
    case ConditionKind::Always: break;
    case ConditionKind::Empty:
    case ConditionKind::NonEmpty: w.key("var").value(c.var); break;
    case ConditionKind::Contains: w.key("var").value(c.var).key("text").value(c.text); break;
    case ConditionKind::RunsBelow: w.key("node").value(c.node).key("limit").value(c.limit); break;
  }
  w.endObject();
}

}  // namespace

std::string WorkflowGraph::toJson() const {
  std::ostringstream out;
  JsonWriter w(out, /*pretty=*/true);
  w.beginObject();
  w.key("format").value(kWorkflowFormat);
  w.key("version").value(kWorkflowFormatVersion);
  w.key("name").value(m_name);
  w.key("description").value(m_description);
  w.key("answer").value(m_answerVar);
  w.key("max_node_runs").value(m_maxNodeRuns);
  w.key("nodes").beginArray();
  for (const WorkflowNode& n : m_nodes) {
    w.beginObject();
    w.key("id").value(n.id);
    w.key("kind").value(nodeKindName(n.kind));
    if (n.kind == NodeKind::Generation) {
      w.key("prompt").value(n.promptTemplate);
      w.key("output").value(n.outputVar);
      w.key("max_tokens").value(n.generation.maxTokens);
      w.key("temperature").value(n.generation.temperature);
      w.key("stop").beginArray();
      for (const std::string& s : n.generation.stop) w.value(s);
      w.endArray();
      if (!n.generation.copyFrom.empty()) {
        w.key("copy_from").value(n.generation.copyFrom);
        w.key("copy_floor").value(n.generation.copyFloor);
      }
    } else if (n.kind == NodeKind::Knowledge) {
      w.key("query").value(n.query);
      w.key("output").value(n.outputVar);
      w.key("subgraphs").value(n.topk);
      w.key("hops").value(n.knowledge.hops);
      w.key("fanout").value(n.knowledge.fanout);
      w.key("paths").value(n.knowledge.paths);
    } else if (n.kind == NodeKind::Compression) {
      w.key("passages").value(n.compression.passages);
      w.key("query").value(n.query);
      w.key("output").value(n.outputVar);
      w.key("sentences").value(n.topk);
    } else {
      w.key("query").value(n.query);
      w.key("output").value(n.outputVar);
      w.key("topk").value(n.topk);
      w.key("method").value(retrievalMethodName(n.retrieval.method));
      w.key("nprobe").value(n.retrieval.nprobe);
      if (n.retrieval.rerank != RetrievalRerank::None) w.key("rerank").value(retrievalRerankName(n.retrieval.rerank));
    }
    w.endObject();
  }
  w.endArray();
  w.key("edges").beginArray();
  for (const WorkflowEdge& e : m_edges) {
    w.beginObject();
    w.key("from").value(e.from);
    w.key("to").value(e.to);
    if (e.when.kind != ConditionKind::Always) {
      w.key("when");
      writeCondition(w, e.when);
    }
    w.endObject();
  }
  w.endArray();
  w.endObject();
  out << '\n';
  return out.str();
}

Result<WorkflowGraph> WorkflowGraph::fromJson(std::string_view text) {
  Result<JsonValue> doc = parseJson(text);
  if (!doc)
    return Status::invalidArgument("invalid workflow JSON: " + doc.status().message() +
                                   "; fix the syntax there");
  const std::string header = "{\"format\": \"" + std::string(kWorkflowFormat) +
                             "\", \"version\": " + std::to_string(kWorkflowFormatVersion) +
                             ", \"nodes\": [...], \"edges\": [...]}";
  RAG_ASSIGN_OR_RETURN(ObjectReader top, objectAt(*doc, "$", header));
  RAG_RETURN_IF_ERROR(checkFormat(top));
  RAG_RETURN_IF_ERROR(top.checkKeys(
      {"format", "version", "name", "description", "answer", "max_node_runs", "nodes", "edges"},
      "a workflow"));
  WorkflowGraph g;
  RAG_ASSIGN_OR_RETURN(g.m_name, top.stringOr("name", "", "\"hyde\""));
  RAG_ASSIGN_OR_RETURN(g.m_description, top.stringOr("description", "", "\"what it does\""));
  RAG_ASSIGN_OR_RETURN(g.m_answerVar, top.stringOr("answer", g.m_answerVar, "\"answer\""));
  RAG_ASSIGN_OR_RETURN(g.m_maxNodeRuns, top.integerOr("max_node_runs", g.m_maxNodeRuns, "16"));
  RAG_ASSIGN_OR_RETURN(g.m_nodes, readArray<WorkflowNode>(top, "nodes", readNode));
  RAG_ASSIGN_OR_RETURN(g.m_edges, readArray<WorkflowEdge>(top, "edges", readEdge));
  return g;
}

Result<WorkflowGraph> WorkflowGraph::load(const std::filesystem::path& path) {
  Result<std::string> text = readFile(path);
  if (!text) return text.status();
  Result<WorkflowGraph> g = fromJson(*text);
  if (!g) return g.status().withContext(path.string());
  return g;
}

Status WorkflowGraph::save(const std::filesystem::path& path) const {
  return writeFileAtomic(path, toJson());
}

}  // namespace rag
