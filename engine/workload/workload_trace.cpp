#include "workload/workload_trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "corpus/corpus_db.h"
#include "corpus/qa_reader.h"
#include "storage/sqlite.h"
#include "core/random.h"

namespace rag::workload {

namespace {

// Stream numbers for deriveSeed: one per independent random choice.
enum Stream : uint64_t { kArrivals = 0, kEntities = 1, kQaPicks = 2, kWorkflows = 3 };

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

Result<std::vector<QaItem>> loadQaItems(const std::filesystem::path& corpus, std::string_view split) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  RAG_ASSIGN_OR_RETURN(
      sql::Stmt q, db.prepare("SELECT id, topic_entity, type, question, answers FROM qa "
                              "WHERE split = ? ORDER BY id"));
  q.bind(1, split);
  std::vector<QaItem> items;
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, q.step());
    if (!row) break;
    QaItem item;
    item.id = q.columnInt64(0);
    item.topicEntity = q.columnInt64(1);
    item.type = q.columnText(2);
    item.question = q.columnText(3);
    Result<std::vector<std::string>> answers = corpus::parseJsonStrings(q.columnTextView(4), "answers");
    if (!answers)
      return Status::corrupt("corpus " + corpus.string() + ": qa item " + std::to_string(item.id) +
                             " has answers that are not a JSON array of strings (" +
                             answers.status().message() + "); rebuild it with `ragraph corpus build`");
    item.answers = std::move(*answers);
    items.push_back(std::move(item));
  }
  if (items.empty()) return corpus::emptySplitError(db, split, "pass --split");
  return items;
}

Status validateTraceParams(const TraceParams& params) {
  if (!(params.rate > 0) || !std::isfinite(params.rate))
    return Status::invalidArgument("--rate must be a number of requests per second > 0 (got " +
                                   formatNumber(params.rate) + ")");
  if (params.requests < 1 || params.requests > kMaxTraceRequests)
    return Status::invalidArgument("--requests must be between 1 and " +
                                   std::to_string(kMaxTraceRequests) + " (got " +
                                   std::to_string(params.requests) + ")");
  RAG_RETURN_IF_ERROR(validatePopularity(params.popularity));
  double total = 0;
  for (const MixEntry& e : params.mix) {
    if (!(e.weight >= 0) || !std::isfinite(e.weight))
      return Status::invalidArgument("workflow mix weights must be finite numbers >= 0");
    total += e.weight;
  }
  if (!(total > 0))
    return Status::invalidArgument("the workflow mix needs at least one workflow with weight > 0");
  return Status::ok();
}

Result<std::vector<TraceRequest>> makeWorkloadTrace(const TraceParams& params,
                                                    std::span<const QaItem> items) {
  RAG_RETURN_IF_ERROR(validateTraceParams(params));
  if (items.empty())
    return Status::invalidArgument("no QA items to build a trace from");

  // Group items by topic entity; order by (entity, id) so the grouping is independent of the
  // order the caller passes.
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (items[a].topicEntity != items[b].topicEntity)
      return items[a].topicEntity < items[b].topicEntity;
    return items[a].id < items[b].id;
  });
  struct Group {
    size_t begin, end;  // into `order`
  };
  std::vector<Group> groups;
  for (size_t i = 0; i < order.size(); ++i) {
    if (groups.empty() || items[order[i]].topicEntity != items[order[groups.back().begin]].topicEntity)
      groups.push_back({i, i});
    groups.back().end = i + 1;
  }

  Rng arrivals(deriveSeed(params.seed, kArrivals));
  EntitySampler entities(params.popularity, groups.size(), deriveSeed(params.seed, kEntities));
  Rng qaPicks(deriveSeed(params.seed, kQaPicks));
  Rng workflows(deriveSeed(params.seed, kWorkflows));
  std::vector<double> weights;
  for (const MixEntry& e : params.mix) weights.push_back(e.weight);
  DiscreteSampler mix(weights);

  std::vector<TraceRequest> trace;
  trace.reserve(static_cast<size_t>(params.requests));
  double t = 0;
  for (int64_t i = 0; i < params.requests; ++i) {
    t += arrivals.exponential(params.rate);
    const Group& g = groups[entities.next()];
    const QaItem& qa = items[order[g.begin + qaPicks.below(g.end - g.begin)]];
    TraceRequest r;
    r.id = i;
    r.arrivalS = t;
    r.workflow = params.mix[mix.sample(workflows)].workflow;
    r.qaId = qa.id;
    r.topicEntity = qa.topicEntity;
    r.question = qa.question;
    r.answers = qa.answers;
    r.type = qa.type;
    trace.push_back(std::move(r));
  }
  return trace;
}

TraceSummary summarizeWorkloadTrace(std::span<const TraceRequest> trace) {
  TraceSummary s;
  s.requests = static_cast<int64_t>(trace.size());
  if (trace.empty()) return s;
  s.durationS = trace.back().arrivalS;
  s.meanRate = s.durationS > 0 ? static_cast<double>(s.requests) / s.durationS : 0;
  std::unordered_map<int64_t, int64_t> counts;
  int64_t withEntity = 0;
  for (const TraceRequest& r : trace) {
    s.perWorkflow[static_cast<size_t>(r.workflow)]++;
    if (r.topicEntity < 0) continue;
    ++counts[r.topicEntity];
    ++withEntity;
  }
  s.distinctEntities = static_cast<int64_t>(counts.size());
  if (withEntity == 0) return s;
  std::vector<int64_t> sorted;
  sorted.reserve(counts.size());
  for (const auto& [entity, n] : counts) sorted.push_back(n);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  // The top 20% of the distinct entities, rounded up so a tiny trace still has one.
  size_t top = (sorted.size() + 4) / 5;
  int64_t inTop = std::accumulate(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(top),
                                  int64_t{0});
  s.top20EntityShare = static_cast<double>(inTop) / static_cast<double>(withEntity);
  return s;
}

}  // namespace rag::workload
