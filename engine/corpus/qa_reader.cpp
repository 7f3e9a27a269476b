#include "corpus/qa_reader.h"

#include <string>

#include "core/json.h"

namespace rag::corpus {

namespace {

Result<std::vector<int64_t>> jsonIds(std::string_view text, std::string_view what) {
  RAG_ASSIGN_OR_RETURN(JsonValue v, parseJson(text));
  if (!v.isArray()) return Status::corrupt(std::string(what) + " is not a JSON array");
  std::vector<int64_t> out;
  for (const JsonValue& e : v.asArray()) {
    auto id = e.asInt64();
    if (!id) return Status::corrupt(std::string(what) + " holds a non-integer id");
    out.push_back(*id);
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> parseJsonStrings(std::string_view text, std::string_view what) {
  RAG_ASSIGN_OR_RETURN(JsonValue v, parseJson(text));
  if (!v.isArray()) return Status::corrupt(std::string(what) + " is not a JSON array");
  std::vector<std::string> out;
  for (const JsonValue& e : v.asArray()) {
    if (!e.isString()) return Status::corrupt(std::string(what) + " holds a non-string");
    out.push_back(e.asString());
  }
  return out;
}

Result<::rag::Passage> readPassage(sql::Db& db, int64_t passageId) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt p, db.prepare(
      "SELECT title, text, source, source_file, source_offset FROM passages WHERE id = ?"));
  p.bind(1, passageId);
  RAG_ASSIGN_OR_RETURN(bool row, p.step());
  if (!row) return Status::notFound("no passage with id " + std::to_string(passageId));
  return ::rag::Passage{passageId, p.columnText(0), p.columnText(1), p.columnText(2),
                        p.columnText(3), p.columnInt64(4)};
}

Result<::rag::QaItem> readQaItem(sql::Db& db, int64_t qaId) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt q, db.prepare(
      "SELECT split, type, coalesce(relation, ''), question, answers, gold_passages, kg_path "
      "FROM qa WHERE id = ?"));
  q.bind(1, qaId);
  RAG_ASSIGN_OR_RETURN(bool row, q.step());
  if (!row) return Status::notFound("no QA item with id " + std::to_string(qaId));
  ::rag::QaItem item;
  item.id = qaId;
  item.split = q.columnText(0);
  item.type = q.columnText(1);
  item.relation = q.columnText(2);
  item.question = q.columnText(3);
  const std::string ctx = "QA item " + std::to_string(qaId);
  RAG_ASSIGN_OR_RETURN(item.answers, parseJsonStrings(q.columnTextView(4), ctx + " answers"));
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> gold,
                       jsonIds(q.columnTextView(5), ctx + " gold_passages"));
  item.kgPath = q.columnText(6);
  for (int64_t pid : gold) {
    Result<::rag::Passage> p = readPassage(db, pid);
    if (!p && p.status().code() == StatusCode::NotFound)
      return Status::corrupt(ctx + " names passage " + std::to_string(pid) +
                             ", which does not exist");
    if (!p) return p.status();
    item.goldPassages.push_back(std::move(*p));
  }
  return item;
}

Result<std::vector<int64_t>> listQaIds(sql::Db& db, std::string_view split, std::string_view type) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt q, db.prepare(
      "SELECT id FROM qa WHERE split = ?1 AND (?2 = '' OR type = ?2) ORDER BY id"));
  q.bind(1, split).bind(2, std::string(type));  // an empty view may carry nullptr: SQL NULL
  std::vector<int64_t> ids;
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) break;
    ids.push_back(q.columnInt64(0));
  }
  return ids;
}

Status emptySplitError(sql::Db& db, std::string_view split, std::string_view fix) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt s, db.prepare("SELECT DISTINCT split FROM qa ORDER BY split"));
  std::string present;
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    present += (present.empty() ? "" : ", ") + s.columnText(0);
  }
  const std::string corpus = db.path().string();
  if (present.empty())
    return Status::notFound("corpus " + corpus +
                            " has no QA items at all; rebuild it with `ragraph corpus build`");
  return Status::notFound("corpus " + corpus + " has no QA items in split '" + std::string(split) +
                          "'; it has: " + present + " (" + std::string(fix) + ")");
}

}  // namespace rag::corpus
