// `ragraph bench ivf`: the cost of step-wise IVF search (retrieval/ivf_index.h) against FAISS's
// own IndexIVF::search over the same clusters, as JSON.
//
// Both sides answer the same queries over the same nprobe clusters each: FAISS with one
// search() call; step-wise with makeTasks (one batched coarse-quantizer call) and one step()
// with an unbounded budget, i.e. every query's clusters in a single step, batched over the
// queries. The two are timed alternately (ABBA order) in one run, after a warm-up each, and the
// medians compared (goal: step-wise ≤ 1.10 × FAISS). A budgeted run then steps the same queries
// in sub-stages of --budget-ms and compares the cost model's estimate with the measured time.
// Last, shared steps (IvfIndex::stepShared) against FAISS steps for groups of 1-16 queries.
//
// The vectors are synthetic (unit vectors around random centres): the corpus embedder does not
// exist yet. Memory: the vectors once in the index plus once while it is built.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <thread>

#include "commands.h"
#include "core/clock.h"
#include "core/json_writer.h"
#include "core/vector_math.h"
#include "retrieval/ivf_index.h"

namespace rag::cli {

namespace {

using retrieval::IvfIndex;
using retrieval::SearchHit;
using retrieval::SearchTask;

// `count` unit vectors, each a random row of `bases` (size rows * d) plus Gaussian noise of
// standard deviation `noise` per component, renormalised.
std::vector<float> noisyUnitVectors(const std::vector<float>& bases, int64_t d, int64_t count,
                                    float noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::uniform_int_distribution<int64_t> pick(0, static_cast<int64_t>(bases.size()) / d - 1);
  std::vector<float> out(static_cast<size_t>(count * d));
  for (int64_t i = 0; i < count; ++i) {
    const float* base = bases.data() + pick(rng) * d;
    for (int64_t j = 0; j < d; ++j) out[static_cast<size_t>(i * d + j)] = base[j] + noise * g(rng);
  }
  l2NormalizeRows(out.data(), static_cast<size_t>(count), static_cast<size_t>(d));
  return out;
}

// n unit vectors of dimension d around `topics` Gaussian centres.
std::vector<float> syntheticVectors(int64_t n, int64_t d, int64_t topics, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> centres(static_cast<size_t>(topics * d));
  for (float& c : centres) c = g(rng);
  return noisyUnitVectors(centres, d, n, 0.6f, seed + 1);
}

// Queries: random corpus vectors nudged off their place (a paraphrase of a passage).
std::vector<float> syntheticQueries(const std::vector<float>& corpus, int64_t d, int64_t q,
                                    uint64_t seed) {
  return noisyUnitVectors(corpus, d, q, 0.3f / std::sqrt(static_cast<float>(d)),
                          seed ^ 0x51ed2701);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double minimum(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// Queries whose step-wise top-k differs from FAISS's row (ids, or similarity beyond 1e-5).
int64_t countDiffering(const retrieval::SearchResults& faiss, const std::vector<SearchTask>& tasks) {
  int64_t differ = 0;
  for (int64_t i = 0; i < faiss.n; ++i) {
    const std::vector<SearchHit> a = faiss.row(i);
    const std::vector<SearchHit> b = tasks[static_cast<size_t>(i)].topK();
    bool same = a.size() == b.size();
    for (size_t j = 0; same && j < a.size(); ++j)
      same = a[j].id == b[j].id && std::abs(a[j].similarity - b[j].similarity) <= 1e-5f;
    differ += same ? 0 : 1;
  }
  return differ;
}

struct StepwiseRun {
  std::vector<SearchTask> tasks;
  double makeSeconds = 0;
  double stepSeconds = 0;
  double totalSeconds = 0;
};

Result<StepwiseRun> runStepwise(const IvfIndex& index, std::span<const float> queries, int32_t k,
                                int64_t nprobe) {
  StepwiseRun run;
  Stopwatch total;
  RAG_ASSIGN_OR_RETURN(run.tasks, index.makeTasks(queries, k, nprobe));
  run.makeSeconds = total.elapsedSeconds();
  std::vector<SearchTask*> ptrs;
  ptrs.reserve(run.tasks.size());
  for (SearchTask& t : run.tasks) ptrs.push_back(&t);
  Stopwatch step;
  RAG_ASSIGN_OR_RETURN(retrieval::StepStats s,
                       index.step(ptrs, std::numeric_limits<double>::infinity()));
  (void)s;
  run.stepSeconds = step.elapsedSeconds();
  run.totalSeconds = total.elapsedSeconds();
  return run;
}

// Shared steps against FAISS steps: groups of `m` queries searched together (one step with an
// unbounded budget each), so every cluster that several of a group's queries visit is read once
// by stepShared. Both sides start from the same tasks and must end bit-identical.
struct SharedRow {
  int64_t m = 0;
  double faissPerQuery = 0, sharedPerQuery = 0;  // medians, seconds
  double clustersReadPerQuery = 0;
  int64_t differing = 0;  // queries whose heap differs in an id or a similarity bit
};

Result<SharedRow> timeShared(const IvfIndex& index, std::span<const float> queries, int32_t k,
                             int64_t nprobe, int64_t m, int64_t repeats) {
  const int64_t d = index.dim();
  const int64_t groups = static_cast<int64_t>(queries.size()) / d / m;
  SharedRow row{.m = m};
  std::vector<double> faissSecs, sharedSecs;
  double read = 0;
  for (int64_t r = 0; r < repeats; ++r) {
    double faissT = 0, sharedT = 0;
    for (int64_t g = 0; g < groups; ++g) {
      RAG_ASSIGN_OR_RETURN(std::vector<SearchTask> a,
                           index.makeTasks(queries.subspan(static_cast<size_t>(g * m * d), static_cast<size_t>(m * d)), k, nprobe));
      std::vector<SearchTask> b = a;
      std::vector<SearchTask*> pa, pb;
      for (size_t i = 0; i < a.size(); ++i) pa.push_back(&a[i]), pb.push_back(&b[i]);
      const double inf = std::numeric_limits<double>::infinity();
      for (int side = 0; side < 2; ++side) {  // alternating order
        if ((side == 0) == (g % 2 == 0)) {
          Stopwatch w;
          RAG_ASSIGN_OR_RETURN(retrieval::StepStats s, index.step(pa, inf));
          (void)s;
          faissT += w.elapsedSeconds();
        } else {
          Stopwatch w;
          RAG_ASSIGN_OR_RETURN(retrieval::StepStats s, index.stepShared(pb, inf));
          sharedT += w.elapsedSeconds();
          if (r == 0) read += static_cast<double>(s.clustersRead);
        }
      }
      if (r == 0)
        for (size_t i = 0; i < a.size(); ++i) {
          const std::vector<SearchHit> x = a[i].topK(), y = b[i].topK();
          bool same = x.size() == y.size();
          for (size_t j = 0; same && j < x.size(); ++j)
            same = x[j].id == y[j].id && x[j].similarity == y[j].similarity;
          row.differing += same ? 0 : 1;
        }
    }
    faissSecs.push_back(faissT / static_cast<double>(groups * m));
    sharedSecs.push_back(sharedT / static_cast<double>(groups * m));
  }
  row.faissPerQuery = median(faissSecs);
  row.sharedPerQuery = median(sharedSecs);
  row.clustersReadPerQuery = read / static_cast<double>(groups * m);
  return row;
}

double loadAverage1() {
  std::ifstream in("/proc/loadavg");
  double v = -1;
  in >> v;
  return v;
}

}  // namespace

int cmdBenchIvf(Args& args) {
  auto vectors = args.getInt("vectors", 131072);
  auto dim = args.getInt("dim", 128);
  auto nlistArg = args.getInt("nlist", 0);
  auto nprobe = args.getInt("nprobe", 32);
  auto queries = args.getInt("queries", 1024);
  auto k = args.getInt("k", 10);
  auto repeats = args.getInt("repeats", 7);
  auto seed = args.getInt("seed", 1);
  auto budgetMs = args.getDouble("budget-ms", 5.0);
  args.flag("json");  // JSON is the only output; accepted for symmetry with the other benches
  for (auto* r : {&vectors, &dim, &nlistArg, &nprobe, &queries, &k, &repeats, &seed})
    if (!*r) return fail(r->status());
  if (!budgetMs) return fail(budgetMs.status());
  if (*vectors < 1 || *dim < 1 || *nprobe < 1 || *queries < 1 || *k < 1 || *repeats < 1 || *seed < 0)
    return fail(Status::invalidArgument(
        "--vectors, --dim, --nprobe, --queries, --k and --repeats must be positive, --seed >= 0"));
  if (*k > std::numeric_limits<int32_t>::max())
    return fail(Status::invalidArgument("--k is too large"));
  if (*nlistArg < 0) return fail(Status::invalidArgument("--nlist must be positive (0: default)"));
  if (!(*budgetMs > 0)) return fail(Status::invalidArgument("--budget-ms must be positive"));
  if (Status s = args.finish(); !s) return fail(s);
  const int64_t nlist = *nlistArg > 0 ? *nlistArg : IvfIndex::defaultNlist(*vectors);
  const int32_t topK = static_cast<int32_t>(*k);
  const int64_t topics = std::max<int64_t>(1, *vectors / 64);

  std::fprintf(stderr, "generating %lld x %lld synthetic vectors ...\n",
               static_cast<long long>(*vectors), static_cast<long long>(*dim));
  std::vector<float> data = syntheticVectors(*vectors, *dim, topics, static_cast<uint64_t>(*seed));
  const std::vector<float> qs = syntheticQueries(data, *dim, *queries, static_cast<uint64_t>(*seed));

  ProgressPrinter printer;
  Stopwatch buildWatch;
  auto built = IvfIndex::build(data, *dim, nlist, static_cast<uint64_t>(*seed),
                               [&printer](std::string_view phase, uint64_t done, uint64_t total) {
                                 printer(phase, done, total);
                               });
  printer.finish();
  if (!built) return fail(built.status());
  const double buildSeconds = buildWatch.elapsedSeconds();
  std::vector<float>().swap(data);  // the index holds its own copy
  IvfIndex& index = *built;

  // Warm-up (page in the lists, start the OpenMP threads), then alternate the two.
  std::fprintf(stderr, "timing %lld repeats ...\n", static_cast<long long>(*repeats));
  auto faissFirst = index.search(qs, topK, *nprobe);
  if (!faissFirst) return fail(faissFirst.status());
  auto stepFirst = runStepwise(index, qs, topK, *nprobe);
  if (!stepFirst) return fail(stepFirst.status());
  const int64_t differing = countDiffering(*faissFirst, stepFirst->tasks);

  std::vector<double> faissSecs, stepTotal, stepMake, stepOnly;
  for (int64_t r = 0; r < *repeats; ++r) {
    for (int side = 0; side < 2; ++side) {
      if ((side == 0) == (r % 2 == 0)) {
        Stopwatch w;
        auto res = index.search(qs, topK, *nprobe);
        faissSecs.push_back(w.elapsedSeconds());
        if (!res) return fail(res.status());
      } else {
        auto run = runStepwise(index, qs, topK, *nprobe);
        if (!run) return fail(run.status());
        stepTotal.push_back(run->totalSeconds);
        stepMake.push_back(run->makeSeconds);
        stepOnly.push_back(run->stepSeconds);
      }
    }
  }

  // Budgeted sub-stages over the same queries, --repeats times from fresh tasks: what searching in
  // sub-stages costs against one unbounded step (HedraRAG's pacing against a whole batch). The
  // last repeat's steps, estimates and cluster visits are reported.
  const double budget = *budgetMs * 1e-3;
  int64_t steps = 0;
  double estimated = 0, measured = 0;
  std::vector<double> stepMeasured, budgetedTotals;
  int64_t budgetDiffering = 0;
  for (int64_t r = 0; r < *repeats; ++r) {
    auto budgetTasks = index.makeTasks(qs, topK, *nprobe);
    if (!budgetTasks) return fail(budgetTasks.status());
    std::vector<SearchTask*> live;
    for (SearchTask& t : *budgetTasks) live.push_back(&t);
    index.resetClusterAccessCounts();
    steps = 0;
    estimated = measured = 0;
    stepMeasured.clear();
    while (std::any_of(live.begin(), live.end(), [](const SearchTask* t) { return !t->done(); })) {
      auto s = index.step(live, budget);
      if (!s) return fail(s.status());
      ++steps;
      estimated += s->estimatedSeconds;
      measured += s->seconds;
      stepMeasured.push_back(s->seconds);
    }
    budgetedTotals.push_back(measured);
    budgetDiffering = std::max(budgetDiffering, countDiffering(*faissFirst, *budgetTasks));
  }

  std::vector<SharedRow> shared;
  const int64_t sharedQueries = std::min<int64_t>(*queries, 64);
  for (int64_t m : {1, 2, 4, 8, 16}) {
    if (m > sharedQueries) break;
    std::fprintf(stderr, "shared steps of %lld queries ...\n", static_cast<long long>(m));
    auto row = timeShared(index, std::span<const float>(qs).first(static_cast<size_t>(sharedQueries * *dim)),
                          topK, *nprobe, m, *repeats);
    if (!row) return fail(row.status());
    shared.push_back(*row);
  }
  uint64_t visits = 0, hottest = 0;
  for (uint64_t c : index.clusterAccessCounts()) visits += c, hottest = std::max(hottest, c);

  const std::vector<int64_t> sizes = index.listSizes();
  const auto [minList, maxList] = std::minmax_element(sizes.begin(), sizes.end());
  const double ratio = median(stepTotal) / median(faissSecs);
  const retrieval::ClusterCostModel& cost = index.costModel();

  JsonWriter w(std::cout, true);
  w.beginObject();
  w.key("data").value("synthetic: " + std::to_string(*vectors) + " unit vectors of dimension " +
                      std::to_string(*dim) + " around " + std::to_string(topics) +
                      " random Gaussian centres; queries are corpus vectors plus noise (a "
                      "stand-in for passage embeddings whose size and spread are set "
                      "by the flags; `bench serve` searches the real corpus index)");
  w.key("vectors").value(*vectors);
  w.key("dim").value(*dim);
  w.key("nlist").value(nlist);
  w.key("nprobe").value(std::min(*nprobe, nlist));
  w.key("queries").value(*queries);
  w.key("k").value(*k);
  w.key("repeats").value(*repeats);
  w.key("cpu_threads").value(static_cast<int64_t>(std::thread::hardware_concurrency()));
  w.key("load_average_1min").value(loadAverage1());
  w.key("build_seconds").value(buildSeconds);
  w.key("list_size").beginObject();
  w.key("min").value(*minList);
  w.key("mean").value(static_cast<double>(index.size()) / static_cast<double>(nlist));
  w.key("max").value(*maxList);
  w.endObject();
  w.key("cost_model").beginObject();
  w.key("a_seconds").value(cost.a);
  w.key("b_seconds_per_vector").value(cost.b);
  w.key("samples").value(static_cast<int64_t>(cost.samples));
  w.key("mean_cluster_seconds").value(
      cost.seconds(static_cast<int64_t>(std::llround(static_cast<double>(index.size()) / static_cast<double>(nlist)))));
  w.endObject();
  w.key("faiss_search_seconds").beginObject();
  w.key("median").value(median(faissSecs));
  w.key("min").value(minimum(faissSecs));
  w.endObject();
  w.key("stepwise_seconds").beginObject();
  w.key("median").value(median(stepTotal));
  w.key("min").value(minimum(stepTotal));
  w.key("make_tasks_median").value(median(stepMake));
  w.key("step_median").value(median(stepOnly));
  w.endObject();
  w.key("stepwise_over_faiss").value(ratio);
  w.key("stepwise_over_faiss_min").value(minimum(stepTotal) / minimum(faissSecs));
  w.key("goal_stepwise_over_faiss").value(1.10);
  w.key("meets_goal").value(ratio <= 1.10);
  w.key("queries_differing_from_faiss").value(differing);
  w.key("budgeted").beginObject();
  w.key("budget_seconds").value(budget);
  w.key("steps").value(steps);
  w.key("step_seconds_median").value(median(stepMeasured));
  w.key("step_seconds_max").value(*std::max_element(stepMeasured.begin(), stepMeasured.end()));
  w.key("estimated_seconds_total").value(estimated);
  w.key("measured_seconds_total").value(measured);
  w.key("measured_over_estimated").value(measured / estimated);
  w.key("measured_seconds_total_median").value(median(budgetedTotals));
  // Sub-stages against one unbounded step over the same queries (medians over the repeats).
  w.key("over_unbounded_step").value(median(budgetedTotals) / median(stepOnly));
  w.key("openmp_threads").value(static_cast<int64_t>(retrieval::IvfIndex::searchThreads()));
  w.key("cluster_visits").value(visits);
  w.key("hottest_cluster_visits").value(hottest);
  w.key("queries_differing_from_faiss").value(budgetDiffering);
  w.endObject();
  const retrieval::SharedScanCostModel& sc = index.sharedCostModel();
  w.key("shared").beginObject();
  w.key("what").value("queries searched m at a time, one unbounded step each: FAISS's scan per "
                      "query (step) against one read of each cluster for the group (stepShared); "
                      "seconds per query, medians over the repeats; stepShared spreads even one "
                      "search over the OpenMP threads, so set OMP_NUM_THREADS=1 to compare the "
                      "scan kernels thread for thread");
  w.key("cost_model").beginObject();
  w.key("a_seconds").value(sc.a);
  w.key("b_seconds_per_vector").value(sc.b);
  w.key("extra_seconds_per_vector").value(sc.extra);
  w.endObject();
  w.key("groups").beginArray();
  for (const SharedRow& r : shared) {
    w.beginObject();
    w.key("queries_per_step").value(r.m);
    w.key("faiss_seconds_per_query").value(r.faissPerQuery);
    w.key("shared_seconds_per_query").value(r.sharedPerQuery);
    w.key("faiss_over_shared").value(r.faissPerQuery / r.sharedPerQuery);
    w.key("clusters_read_per_query").value(r.clustersReadPerQuery);
    w.key("queries_differing").value(r.differing);
    w.endObject();
  }
  w.endArray();
  w.endObject();
  w.endObject();
  std::cout << std::endl;
  return 0;
}

}  // namespace rag::cli
