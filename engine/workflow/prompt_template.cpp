// Prompt templates: {name} is a variable, {{ and }} are literal braces (as in Python's
// str.format, which is what Listing 1's prompts look like).
#include <algorithm>
#include <string>
#include <vector>

#include "rag/workflow.h"
#include "workflow/workflow_names.h"

namespace rag {

namespace workflow {

bool isVariableName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bool isNodeId(std::string_view id) {
  if (id.empty() || id == kStart || id == kEnd) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

}  // namespace workflow

namespace {

using Piece = TemplatePiece;

const char* const kBraceHelp = "; write {{ and }} for literal braces";

}  // namespace

Result<std::vector<TemplatePiece>> parseTemplate(std::string_view tmpl) {
  std::vector<Piece> pieces;
  std::string literal;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == '}') {
      if (i + 1 < tmpl.size() && tmpl[i + 1] == '}') {
        literal += '}';
        ++i;
        continue;
      }
      return Status::invalidArgument("prompt template has a lone '}' at character " +
                                     std::to_string(i) + kBraceHelp);
    }
    if (c != '{') {
      literal += c;
      continue;
    }
    if (i + 1 < tmpl.size() && tmpl[i + 1] == '{') {
      literal += '{';
      ++i;
      continue;
    }
    size_t close = tmpl.find('}', i + 1);
    size_t nextOpen = tmpl.find('{', i + 1);
    if (close == std::string_view::npos || nextOpen < close)
      return Status::invalidArgument("prompt template has an unclosed '{' at character " +
                                     std::to_string(i) + "; close it as {name}" + kBraceHelp);
    std::string_view name = tmpl.substr(i + 1, close - i - 1);
    if (!workflow::isVariableName(name))
      return Status::invalidArgument(
          "prompt template has '{" + std::string(name) + "}' at character " + std::to_string(i) +
          ", which is not a variable name (letters, digits and '_', not starting with a digit)" +
          kBraceHelp);
    if (!literal.empty()) pieces.push_back({false, std::move(literal)});
    literal.clear();
    pieces.push_back({true, std::string(name)});
    i = close;
  }
  if (!literal.empty()) pieces.push_back({false, std::move(literal)});
  return pieces;
}

Result<std::vector<std::string>> templateVariables(std::string_view tmpl) {
  RAG_ASSIGN_OR_RETURN(std::vector<Piece> pieces, parseTemplate(tmpl));
  std::vector<std::string> names;
  for (Piece& p : pieces)
    if (p.isVariable && std::find(names.begin(), names.end(), p.text) == names.end())
      names.push_back(std::move(p.text));
  return names;
}

Result<std::string> renderTemplate(std::string_view tmpl, const Variables& vars) {
  RAG_ASSIGN_OR_RETURN(std::vector<Piece> pieces, parseTemplate(tmpl));
  std::string out;
  for (const Piece& p : pieces) {
    if (!p.isVariable) {
      out += p.text;
      continue;
    }
    auto it = vars.find(p.text);
    if (it == vars.end()) {
      std::string set;
      for (const auto& [name, value] : vars) set += (set.empty() ? "" : ", ") + name;
      return Status::invalidArgument(
          "prompt template uses {" + p.text +
          "}, which is not set (set: " + (set.empty() ? std::string("none") : set) +
          "); a node must write it before this one runs");
    }
    out += it->second;
  }
  return out;
}

namespace {

// A query as a template: a bare variable's name is "{name}".
std::string queryTemplate(std::string_view query) {
  if (!workflow::isVariableName(query)) return std::string(query);
  std::string name(1, '{');  // (not "{" + std::string(query): GCC 12 warns of a false -Wrestrict there)
  name.append(query).push_back('}');
  return name;
}

// The query's parts, separated by '|' (never part of a variable's name), each trimmed of spaces.
std::vector<std::string_view> queryParts(std::string_view query) {
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t bar = query.find('|', start);
    std::string_view part = query.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    parts.push_back(part);
    if (bar == std::string_view::npos) return parts;
    start = bar + 1;
  }
}

std::string renderQueryPart(std::string_view part, const Variables& vars) {
  Result<std::vector<Piece>> pieces = parseTemplate(queryTemplate(part));
  std::string out;
  if (!pieces) return out;
  for (const Piece& p : *pieces) {
    if (!p.isVariable) {
      out += p.text;
    } else if (auto it = vars.find(p.text); it != vars.end()) {
      out += it->second;
    }
  }
  return out;
}

}  // namespace

Result<std::vector<std::string>> queryVariables(std::string_view query) {
  const std::vector<std::string_view> parts = queryParts(query);
  std::vector<std::string> all;
  for (std::string_view part : parts) {
    if (part.empty() && parts.size() > 1)
      return Status::invalidArgument("the query '" + std::string(query) +
                                     "' has an empty part; separate several queries with a single '|', as in "
                                     "\"{hypothesis} {question} | {question}\"");
    Result<std::vector<std::string>> names = templateVariables(queryTemplate(part));
    if (!names || names->empty())
      return Status::invalidArgument("the query '" + std::string(parts.size() > 1 ? part : query) +
                                     "' is neither a variable's name (letters, digits and '_', not starting with a "
                                     "digit) nor a template of variables such as \"{answer} {question}\"" +
                                     (names ? std::string() : ": " + names.status().message()));
    for (std::string& n : *names)
      if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(std::move(n));
  }
  return all;
}

std::vector<std::string> queryTexts(std::string_view query, const Variables& vars) {
  std::vector<std::string> out;
  for (std::string_view part : queryParts(query)) out.push_back(renderQueryPart(part, vars));
  return out;
}

Result<std::vector<std::string>> copySourceVariables(std::string_view copyFrom) {
  Result<std::vector<std::string>> names = templateVariables(queryTemplate(copyFrom));
  if (!names || names->empty())
    return Status::invalidArgument("copy_from '" + std::string(copyFrom) +
                                   "' is neither a variable's name nor a template of variables such as "
                                   "\"{docs}{hop}\"" +
                                   (names ? std::string() : ": " + names.status().message()));
  return names;
}

std::string copySourceText(std::string_view copyFrom, const Variables& vars) {
  return renderQueryPart(copyFrom, vars);
}

std::string queryText(std::string_view query, const Variables& vars) {
  std::string out;
  for (const std::string& text : queryTexts(query, vars)) out += (out.empty() ? "" : " ") + text;
  return out;
}

}  // namespace rag
