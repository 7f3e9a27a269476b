#include "retrieval/substage_planner.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace rag::retrieval {

namespace {

// The step's running cost: per task (Alone's costliest) and in total, and each cluster's visits
// so far (Shared prices a cluster's later visits lower).
class StepCost {
public:
  StepCost(const IvfIndex& index, std::span<SearchTask* const> tasks, const PlannerParams& p)
      : m_index(index), m_params(p), m_perTask(tasks.size(), 0.0) {
    if (p.scan == ScanMode::Shared) m_visits.assign(static_cast<size_t>(index.nlist()), 0);
  }
  // A visit of cluster c runs on the device (Alone plans with an onDevice mask).
  bool onDevice(int64_t c) const {
    return m_params.scan == ScanMode::Alone && static_cast<size_t>(c) < m_params.onDevice.size() &&
           m_params.onDevice[static_cast<size_t>(c)] != 0;
  }
  // Single-thread CPU seconds of task i visiting cluster c next (none on the device).
  double of(int64_t c) const {
    const int64_t n = m_index.listSize(c);
    if (onDevice(c)) return 0.0;
    if (m_params.scan == ScanMode::Alone) return m_index.costModel().seconds(n);
    const SharedScanCostModel& m = m_index.sharedCostModel();
    return m_visits[static_cast<size_t>(c)] == 0 ? m.firstSeconds(n) : m.extraSeconds(n);
  }
  // The step's wall-time estimate if task i also took a cluster costing `c`.
  double estimateWith(size_t i, double c) const {
    const double total = (m_total + c) / m_params.threads;
    return m_params.scan == ScanMode::Shared ? total : std::max(total, std::max(m_costliest, m_perTask[i] + c));
  }
  void add(size_t i, int64_t cluster, double c) {
    m_total += c;
    m_perTask[i] += c;
    m_costliest = std::max(m_costliest, m_perTask[i]);
    if (!m_visits.empty()) ++m_visits[static_cast<size_t>(cluster)];
  }
  double estimate() const {
    const double total = m_total / m_params.threads;
    return m_params.scan == ScanMode::Shared ? total : std::max(total, m_costliest);
  }

private:
  const IvfIndex& m_index;
  PlannerParams m_params;
  std::vector<double> m_perTask;
  std::vector<int32_t> m_visits;
  double m_total = 0, m_costliest = 0;
};

int64_t nextCluster(const SearchTask& t, int32_t taken) { return t.clusters()[t.cursor() + static_cast<size_t>(taken)]; }

}  // namespace

Result<SubStagePlan> planSubStage(const IvfIndex& index, std::span<SearchTask* const> tasks, double budgetSeconds,
                                  const PlannerParams& params) {
  if (std::isnan(budgetSeconds) || budgetSeconds < 0)
    return Status::invalidArgument("step budget must be >= 0 seconds (got " + std::to_string(budgetSeconds) +
                                   "); pass 0 for the minimum step or infinity to finish every search");
  if (params.threads < 1) return Status::invalidArgument("a sub-stage plan needs at least one search thread");
  for (const SearchTask* t : tasks) {
    if (!t) return Status::invalidArgument("a sub-stage plan was given a null search task");
    for (size_t j = t->cursor(); j < t->clusters().size(); ++j)
      if (t->clusters()[j] < 0 || t->clusters()[j] >= index.nlist())
        return Status::invalidArgument("a search task's cluster " + std::to_string(t->clusters()[j]) +
                                       " is outside the index's clusters; the task was made by another index");
  }
  SubStagePlan plan;
  plan.scan = params.scan;
  plan.take.assign(tasks.size(), 0);
  StepCost cost(index, tasks, params);
  const bool unlimited = std::isinf(budgetSeconds);
  // Gives task i its next cluster when `force` or when the estimate stays within the budget.
  auto tryTake = [&](size_t i, bool force) {
    const int64_t c = nextCluster(*tasks[i], plan.take[i]);
    const double s = cost.of(c);
    if (!force && !unlimited && !cost.onDevice(c) && cost.estimateWith(i, s) > budgetSeconds) return false;
    cost.add(i, c, s);
    ++plan.take[i];
    return true;
  };
  auto left = [&](size_t i) { return tasks[i]->clustersLeft() - static_cast<size_t>(plan.take[i]); };

  if (params.order == PlanOrder::RoundRobin) {
    std::vector<size_t> open;
    for (size_t i = 0; i < tasks.size(); ++i)
      if (!tasks[i]->done()) {
        tryTake(i, /*force=*/true);
        if (left(i) > 0) open.push_back(i);
      }
    while (!open.empty()) {  // a task that does not fit stays full: estimates only grow
      size_t kept = 0;
      for (size_t i : open)
        if (tryTake(i, false) && left(i) > 0) open[kept++] = i;
      open.resize(kept);
    }
  } else {
    // Once the CPU budget is spent, searches still take their next clusters while those are on
    // the device (free: device visits never wait for the CPU). Without a mask: the first
    // cluster that does not fit ends the plan, as before.
    bool first = true, full = false;
    for (size_t i = 0; i < tasks.size(); ++i) {
      while (left(i) > 0) {
        if (full && !cost.onDevice(nextCluster(*tasks[i], plan.take[i]))) break;
        if (!tryTake(i, first)) {
          full = true;
          break;
        }
        first = false;
      }
    }
  }
  plan.estimatedSeconds = cost.estimate();
  return plan;
}

}  // namespace rag::retrieval
