// Synthetic request traces for serving benchmarks: Poisson arrivals, topic-entity popularity
// (popularity.h, after DepCache §6.1) and a mix of RAG workflows (HedraRAG §6.1: One-shot,
// HyDE, Multistep, IRG, RECOMP). Questions come from the corpus's QA sets, so every request
// carries its acceptable answers and can be scored.
//
//   RAG_ASSIGN_OR_RETURN(std::vector<QaItem> qa, loadQaItems(corpusPath, "test"));
//   TraceParams params{.rate = 4.0, .requests = 1000};
//   RAG_ASSIGN_OR_RETURN(params.popularity, parsePopularity("zipf:1.0"));
//   RAG_ASSIGN_OR_RETURN(params.mix, parseWorkflowMix("oneshot:1,multistep:1"));
//   RAG_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace, makeWorkloadTrace(params, qa));
//   RAG_RETURN_IF_ERROR(writeWorkloadTrace(outPath, makeTraceHeader(params, qa), trace));
//   // trace_file.h: the JSON-lines format, its writer and its reader
//
// Determinism: the same params and QA items give the same trace, bit for bit, with any
// standard library (trace_random.h). Arrivals, entities, QA picks and workflows use separate
// seeded streams, so e.g. two traces that differ only in their mix share arrival times and
// questions, request by request.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "rag/workflow.h"
#include "workload/popularity.h"
#include "workload/workflow_mix.h"

namespace rag::workload {

// The workflows of HedraRAG's evaluation (rag/workflow.h, where their built-in graphs are).
// Names are the lower-case words used on the command line and in trace files.
using ::rag::kAllWorkflows;
using ::rag::Workflow;
using ::rag::workflowFromName;
using ::rag::workflowName;

// One QA item of the corpus, as a trace request needs it.
struct QaItem {
  int64_t id = 0;
  int64_t topicEntity = 0;
  std::string type;  // 'single_hop' | 'definition' | 'two_hop' | 'foldoc'
  std::string question;
  std::vector<std::string> answers;
};

// The QA items of one split, by ascending id. Errors: the corpus is missing (fix: build it or
// pass --corpus), has another schema version (fix: rebuild), or has no items in `split` (the
// message lists the splits it has).
Result<std::vector<QaItem>> loadQaItems(const std::filesystem::path& corpus, std::string_view split);

inline constexpr int64_t kMaxTraceRequests = 10'000'000;

struct TraceParams {
  double rate = 1.0;       // mean arrivals per second, > 0
  int64_t requests = 100;  // in [1, kMaxTraceRequests]
  PopularitySpec popularity;
  WorkflowMix mix = {{Workflow::OneShot, 1.0}};
  uint64_t seed = 1;
  std::string split = "test";  // recorded in the file header; loadQaItems does the selecting
};

Status validateTraceParams(const TraceParams& params);

struct TraceRequest {
  int64_t id = 0;         // 0, 1, 2, ... in arrival order
  double arrivalS = 0;    // seconds since the trace starts; non-decreasing
  Workflow workflow = Workflow::OneShot;
  int64_t qaId = -1;         // qa.id in the corpus; -1 for a hand-written question
  int64_t topicEntity = -1;  // entities.id; -1 when unknown
  std::string question;
  std::vector<std::string> answers;
  std::string type;  // the QA item's type; empty when unknown
};

// Builds the trace. `items` must be non-empty. Candidate entities are the distinct topic
// entities of `items`; after the entity is drawn, one of its QA items is picked uniformly.
Result<std::vector<TraceRequest>> makeWorkloadTrace(const TraceParams& params,
                                                    std::span<const QaItem> items);

// What `ragraph trace make` reports, so a trace can be compared with the DepCache paper's
// datasets (their top 20% of entities draw 41%, 60% and 70% of requests).
struct TraceSummary {
  int64_t requests = 0;
  double durationS = 0;     // arrival of the last request
  double meanRate = 0;      // requests / duration
  int64_t distinctEntities = 0;
  // Share of the requests whose topic entity is among the top 20% (rounded up) of the
  // trace's distinct entities, ranked by request count.
  double top20EntityShare = 0;
  std::array<int64_t, kAllWorkflows.size()> perWorkflow{};  // indexed like kAllWorkflows
};
TraceSummary summarizeWorkloadTrace(std::span<const TraceRequest> trace);

}  // namespace rag::workload
