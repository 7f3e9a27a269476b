// `ragraph workflow validate|show`: check a RAGraph workflow file (or a built-in) and print
// workflows in their canonical JSON form.
//
//   ragraph workflow validate my_workflow.json        # exit 0 valid, 2 with every problem listed
//   ragraph workflow validate --builtin multistep --json
//   ragraph workflow show --builtin hyde > hyde.json   # a starting point for a custom workflow
//
// Every failure (a missing or malformed file, an unknown built-in, an invalid graph) is bad
// input and exits with 2.
#include <iostream>
#include <optional>
#include <string>

#include "commands.h"
#include "core/json_writer.h"
#include "rag/workflow.h"

namespace rag::cli {

namespace {


struct Chosen {
  std::string source;  // the file, or "built-in NAME"
  Result<WorkflowGraph> graph = Status::internal("not loaded");
};

// FILE or --builtin NAME, exactly one. Reads the options; the caller calls args.finish().
Result<std::string> readSource(Args& args, std::optional<std::string>& builtin) {
  builtin = args.get("builtin");
  const std::vector<std::string>& files = args.positionals();
  const std::string usage =
      "give one workflow: a JSON file, or --builtin NAME (" + builtinWorkflowNames() + "; variants: " +
      workflowVariantNames() + ")";
  if (files.size() > 1) return Status::invalidArgument("more than one file given; " + usage);
  if (builtin && !files.empty())
    return Status::invalidArgument("both a file and --builtin given; " + usage);
  if (!builtin && files.empty()) return Status::invalidArgument(usage);
  return builtin ? "built-in " + *builtin : files.front();
}

Chosen load(const std::optional<std::string>& builtin, const std::string& source) {
  Chosen c{source};
  c.graph = loadWorkflowChoice(builtin, source);
  return c;
}

int badInput(const Status& s) {
  std::cerr << "ragraph: error: " << s.message() << std::endl;
  return 2;
}

void printJsonReport(const Chosen& c, const std::vector<WorkflowIssue>& issues) {
  JsonWriter w(std::cout, /*pretty=*/true);
  w.beginObject();
  w.key("source").value(c.source);
  w.key("valid").value(c.graph.isOk() && issues.empty());
  if (!c.graph.isOk()) {
    w.key("error").value(c.graph.status().message());
  } else {
    w.key("name").value(c.graph->name());
    w.key("nodes").value(static_cast<int64_t>(c.graph->nodes().size()));
    w.key("edges").value(static_cast<int64_t>(c.graph->edges().size()));
    w.key("issues").beginArray();
    for (const WorkflowIssue& i : issues) {
      w.beginObject();
      w.key("node").value(i.node);
      w.key("edge").value(i.edge);
      w.key("message").value(i.message);
      w.endObject();
    }
    w.endArray();
  }
  w.endObject();
  std::cout << std::endl;
}

}  // namespace

int cmdWorkflowValidate(Args& args) {
  std::optional<std::string> builtin;
  Result<std::string> source = readSource(args, builtin);
  bool json = args.flag("json");
  if (Status s = args.finish(); !s) return badInput(s);
  if (!source) return badInput(source.status());

  Chosen c = load(builtin, *source);
  std::vector<WorkflowIssue> issues;
  if (c.graph) issues = c.graph->issues();
  if (json) {
    printJsonReport(c, issues);
    return c.graph.isOk() && issues.empty() ? 0 : 2;
  }
  if (!c.graph) return badInput(c.graph.status());
  const WorkflowGraph& g = *c.graph;
  if (issues.empty()) {
    std::cout << c.source << ": valid workflow '" << g.name() << "' (" << g.nodes().size()
              << " nodes, " << g.edges().size() << " edges)" << std::endl;
    return 0;
  }
  std::cerr << "ragraph: error: " << c.source << ": workflow '" << g.name() << "' has "
            << issues.size() << " problem" << (issues.size() > 1 ? "s" : "") << ":" << std::endl;
  for (const WorkflowIssue& i : issues) std::cerr << "  - " << i.message << std::endl;
  return 2;
}

int cmdWorkflowShow(Args& args) {
  std::optional<std::string> builtin;
  Result<std::string> source = readSource(args, builtin);
  if (Status s = args.finish(); !s) return badInput(s);
  if (!source) return badInput(source.status());
  Chosen c = load(builtin, *source);
  if (!c.graph) return badInput(c.graph.status());
  std::cout << c.graph->toJson() << std::flush;
  return 0;
}

}  // namespace rag::cli
