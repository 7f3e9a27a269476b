#include "workload/trace_file.h"

#include <sstream>
#include <unordered_set>

#include "core/fs.h"
#include "core/json.h"
#include "core/json_writer.h"

namespace rag::workload {

TraceHeader makeTraceHeader(const TraceParams& params, std::span<const QaItem> items) {
  TraceHeader h;
  h.params = params;
  h.qaItems = static_cast<int64_t>(items.size());
  std::unordered_set<int64_t> entities;
  for (const QaItem& q : items) entities.insert(q.topicEntity);
  h.topicEntities = static_cast<int64_t>(entities.size());
  return h;
}

std::string formatWorkloadTrace(const TraceHeader& header, std::span<const TraceRequest> trace) {
  std::ostringstream out;
  const TraceParams& p = header.params;
  {
    JsonWriter w(out);
    w.beginObject().key("trace").beginObject();
    w.key("version").value(kWorkloadTraceVersion);
    w.key("generator").value("ragraph trace make");
    w.key("rate").value(p.rate);
    w.key("requests").value(p.requests);
    w.key("popularity").value(formatPopularity(p.popularity));
    if (p.popularity.kind == PopularityKind::Temporal) w.key("window").value(p.popularity.window);
    w.key("mix").value(formatWorkflowMix(p.mix));
    w.key("seed").value(p.seed);
    w.key("split").value(p.split);
    w.key("qa_items").value(header.qaItems);
    w.key("topic_entities").value(header.topicEntities);
    w.endObject().endObject();
  }
  out << '\n';
  for (const TraceRequest& r : trace) {
    JsonWriter w(out);
    w.beginObject();
    w.key("id").value(r.id);
    w.key("arrival_s").value(r.arrivalS);
    w.key("workflow").value(workflowName(r.workflow));
    w.key("qa_id").value(r.qaId);
    w.key("topic_entity").value(r.topicEntity);
    w.key("question").value(r.question);
    w.key("answers").beginArray();
    for (const std::string& a : r.answers) w.value(a);
    w.endArray();
    w.key("type").value(r.type);
    w.endObject();
    out << '\n';
  }
  return std::move(out).str();
}

Status writeWorkloadTrace(const std::filesystem::path& path, const TraceHeader& header,
                          std::span<const TraceRequest> trace) {
  Status s = writeFileAtomic(path, formatWorkloadTrace(header, trace));
  if (!s) return s.withContext("writing trace " + path.string());
  return Status::ok();
}

namespace {

// Reads the fields of one request line; every error says which line and field.
class LineReader {
public:
  LineReader(std::string_view name, size_t line, const JsonValue& obj)
      : m_name(name), m_line(line), m_obj(obj) {}

  Status error(std::string_view what) const {
    return Status::corrupt("trace " + std::string(m_name) + " line " + std::to_string(m_line) +
                           ": " + std::string(what));
  }

  Status typeError(std::string_view field, std::string_view expected, const JsonValue& got) const {
    return error("field '" + std::string(field) + "' must be " + std::string(expected) + ", got " +
                 std::string(jsonTypeName(got.type())));
  }

  const JsonValue* optional(std::string_view field) const {
    const JsonValue* v = m_obj.find(field);
    return v && !v->isNull() ? v : nullptr;
  }

  Result<const JsonValue*> required(std::string_view field) const {
    const JsonValue* v = optional(field);
    if (!v) return error("missing field '" + std::string(field) + "'");
    return v;
  }

  Result<int64_t> integer(std::string_view field, const JsonValue& v) const {
    std::optional<int64_t> i = v.asInt64();
    if (!i) return v.isNumber() ? error("field '" + std::string(field) + "' must be an integer")
                                : typeError(field, "an integer", v);
    return *i;
  }

private:
  std::string_view m_name;
  size_t m_line;
  const JsonValue& m_obj;
};

Result<TraceRequest> readRequest(const LineReader& in) {
  TraceRequest r;
  RAG_ASSIGN_OR_RETURN(const JsonValue* id, in.required("id"));
  RAG_ASSIGN_OR_RETURN(r.id, in.integer("id", *id));
  if (r.id < 0) return in.error("field 'id' must be >= 0");

  RAG_ASSIGN_OR_RETURN(const JsonValue* arrival, in.required("arrival_s"));
  if (!arrival->isNumber()) return in.typeError("arrival_s", "a number of seconds", *arrival);
  r.arrivalS = arrival->asDouble();
  if (r.arrivalS < 0) return in.error("field 'arrival_s' must be >= 0");

  RAG_ASSIGN_OR_RETURN(const JsonValue* workflow, in.required("workflow"));
  if (!workflow->isString()) return in.typeError("workflow", "a string", *workflow);
  std::optional<Workflow> w = workflowFromName(workflow->asString());
  if (!w)
    return in.error("unknown workflow '" + workflow->asString() +
                    "'; known: oneshot, hyde, multistep, irg, recomp");
  r.workflow = *w;

  RAG_ASSIGN_OR_RETURN(const JsonValue* question, in.required("question"));
  if (!question->isString()) return in.typeError("question", "a string", *question);
  r.question = question->asString();

  if (const JsonValue* qa = in.optional("qa_id")) {
    RAG_ASSIGN_OR_RETURN(r.qaId, in.integer("qa_id", *qa));
  }
  if (const JsonValue* e = in.optional("topic_entity")) {
    RAG_ASSIGN_OR_RETURN(r.topicEntity, in.integer("topic_entity", *e));
  }
  if (const JsonValue* answers = in.optional("answers")) {
    if (!answers->isArray()) return in.typeError("answers", "an array of strings", *answers);
    for (const JsonValue& a : answers->asArray()) {
      if (!a.isString()) return in.error("field 'answers' must hold only strings");
      r.answers.push_back(a.asString());
    }
  }
  if (const JsonValue* type = in.optional("type")) {
    if (!type->isString()) return in.typeError("type", "a string", *type);
    r.type = type->asString();
  }
  return r;
}

}  // namespace

Result<std::vector<TraceRequest>> parseWorkloadTrace(std::string_view text, std::string_view name) {
  std::vector<TraceRequest> trace;
  std::unordered_set<int64_t> ids;
  bool sawContent = false;
  size_t lineNo = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;

    JsonError where;
    Result<JsonValue> doc = parseJson(line, &where);
    if (!doc)
      return Status::corrupt("trace " + std::string(name) + " line " + std::to_string(lineNo) +
                             ", column " + std::to_string(where.column) + ": " + where.what);
    LineReader in(name, lineNo, *doc);
    if (!doc->isObject()) return in.error("expected a JSON object, got " +
                                          std::string(jsonTypeName(doc->type())));
    const bool first = !sawContent;
    sawContent = true;
    if (const JsonValue* header = doc->find("trace")) {
      if (!first) return in.error("a trace header is allowed only on the first line");
      if (!header->isObject()) return in.typeError("trace", "an object", *header);
      const JsonValue* version = header->find("version");
      std::optional<int64_t> v = version ? version->asInt64() : std::nullopt;
      if (!v || *v < 1) return in.error("the trace header has no valid 'version'");
      if (*v > kWorkloadTraceVersion)
        return in.error("trace format version " + std::to_string(*v) + " is newer than this build's " +
                        std::to_string(kWorkloadTraceVersion) +
                        "; use a newer build or remake the trace with `ragraph trace make`");
      continue;
    }
    RAG_ASSIGN_OR_RETURN(TraceRequest r, readRequest(in));
    if (!ids.insert(r.id).second)
      return in.error("id " + std::to_string(r.id) + " appears twice; ids must be unique");
    if (!trace.empty() && r.arrivalS < trace.back().arrivalS)
      return in.error("arrival_s goes back in time; requests must be in arrival order");
    trace.push_back(std::move(r));
  }
  if (trace.empty())
    return Status::corrupt("trace " + std::string(name) +
                           " has no requests; make one with `ragraph trace make`");
  return trace;
}

Result<std::vector<TraceRequest>> readWorkloadTrace(const std::filesystem::path& path) {
  Result<std::string> text = readFile(path);
  if (!text) return text.status().withContext("reading workload trace");
  return parseWorkloadTrace(*text, path.string());
}

}  // namespace rag::workload
