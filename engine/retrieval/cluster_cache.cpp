#include "retrieval/cluster_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/clock.h"

namespace rag::retrieval {

const char* toString(ClusterResidency r) {
  switch (r) {
    case ClusterResidency::Absent: return "absent";
    case ClusterResidency::SwappingIn: return "swapping-in";
    case ClusterResidency::Resident: return "resident";
    case ClusterResidency::SwappingOut: return "swapping-out";
  }
  return "?";
}

std::vector<int64_t> selectHotClusters(std::span<const double> heat, std::span<const int64_t> bytes,
                                       int64_t capacityBytes, int32_t capacityClusters) {
  std::vector<int64_t> order;
  for (size_t c = 0; c < heat.size() && c < bytes.size(); ++c)
    if (heat[c] > 0) order.push_back(static_cast<int64_t>(c));
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return heat[static_cast<size_t>(a)] > heat[static_cast<size_t>(b)];
  });
  std::vector<int64_t> chosen;
  int64_t used = 0;
  for (int64_t c : order) {
    if (capacityClusters > 0 && static_cast<int32_t>(chosen.size()) >= capacityClusters) break;
    const int64_t b = bytes[static_cast<size_t>(c)];
    if (capacityBytes > 0 && used + b > capacityBytes) continue;  // a smaller one may still fit
    chosen.push_back(c);
    used += b;
  }
  return chosen;
}

ClusterCache::ClusterCache(const IvfIndex& index, ClusterStore& store, ClusterCacheParams params)
    : m_index(&index), m_store(&store), m_params(params) {
  const size_t n = static_cast<size_t>(index.nlist());
  m_bytes.resize(n);
  for (size_t c = 0; c < n; ++c)
    m_bytes[c] = clusterBytes(index.listSize(static_cast<int64_t>(c)), index.dim());
  m_heat.assign(n, 0.0);
  m_state.assign(n, ClusterResidency::Absent);
  m_lastUpdateNs = nowNs();
}

Result<ClusterCache> ClusterCache::create(const IvfIndex& index, ClusterStore& store,
                                          ClusterCacheParams params) {
  if (params.capacityBytes < 0 || params.capacityClusters < 0 ||
      (params.capacityBytes == 0 && params.capacityClusters == 0))
    return Status::invalidArgument(
        "cluster cache: set capacityBytes (device memory for clusters) or capacityClusters (gc), "
        "or both; negative values are not allowed");
  if (params.updateInterval < 1)
    return Status::invalidArgument("cluster cache: updateInterval must be at least 1 sub-stage "
                                   "(the paper uses 50)");
  if (!(params.decay > 0.0 && params.decay <= 1.0))
    return Status::invalidArgument("cluster cache: decay must be in (0, 1]; 1 keeps plain counts");
  if (params.minDeviceVisits < 0)
    return Status::invalidArgument("cluster cache: minDeviceVisits must be >= 0");
  if (!(params.maxUpdateSeconds >= 0.0))
    return Status::invalidArgument("cluster cache: maxUpdateSeconds must be >= 0 (0: by sub-stage count only)");
  ClusterCache cache(index, store, params);
  if (params.warmStart) {
    int64_t largest = 1;
    for (int64_t c = 0; c < index.nlist(); ++c) largest = std::max(largest, index.listSize(c));
    for (int64_t c = 0; c < index.nlist(); ++c)
      if (index.listSize(c) > 0)
        cache.m_heat[static_cast<size_t>(c)] =
            kPriorHeat * static_cast<double>(index.listSize(c)) / static_cast<double>(largest);
    RAG_RETURN_IF_ERROR(cache.update().withContext("filling the cluster cache"));
    RAG_RETURN_IF_ERROR(cache.pump().withContext("filling the cluster cache"));
  }
  return cache;
}

void ClusterCache::recordAccess(int64_t cluster) {
  if (cluster >= 0 && static_cast<size_t>(cluster) < m_heat.size())
    m_heat[static_cast<size_t>(cluster)] += 1.0;
}

ClusterResidency ClusterCache::residency(int64_t cluster) const {
  if (cluster < 0 || static_cast<size_t>(cluster) >= m_state.size()) return ClusterResidency::Absent;
  return m_state[static_cast<size_t>(cluster)];
}

std::vector<uint8_t> ClusterCache::residentMask() const {
  std::vector<uint8_t> mask(m_state.size());
  for (size_t c = 0; c < mask.size(); ++c) mask[c] = onDevice(static_cast<int64_t>(c));
  return mask;
}

bool ClusterCache::onDevice(int64_t cluster) const {
  return residency(cluster) == ClusterResidency::Resident;
}

Status ClusterCache::update() {
  const std::vector<int64_t> target =
      selectHotClusters(m_heat, m_bytes, m_params.capacityBytes, m_params.capacityClusters);
  std::vector<uint8_t> wanted(m_state.size(), 0);
  for (int64_t c : target) wanted[static_cast<size_t>(c)] = 1;
  Status first = Status::ok();
  for (size_t c = 0; c < m_state.size(); ++c) {
    ClusterResidency& st = m_state[c];
    if (wanted[c] || (st != ClusterResidency::Resident && st != ClusterResidency::SwappingIn))
      continue;
    Status s = m_store->beginEvict(static_cast<int64_t>(c));
    if (!s) {
      if (first) first = s.withContext("evicting cluster " + std::to_string(c));
      continue;
    }
    if (st == ClusterResidency::Resident) {
      m_inFlight.push_back(static_cast<int64_t>(c));
      --m_stats.residentClusters;
    }
    st = ClusterResidency::SwappingOut;
    ++m_stats.evictions;
  }
  m_uploadQueue.clear();
  for (int64_t c : target)
    if (m_state[static_cast<size_t>(c)] == ClusterResidency::Absent) m_uploadQueue.push_back(c);
  for (double& h : m_heat) h *= m_params.decay;
  ++m_stats.updates;
  m_lastUpdateNs = nowNs();
  return first;
}

Status ClusterCache::pump() {
  Status first = Status::ok();
  size_t kept = 0;
  for (int64_t c : m_inFlight) {
    ClusterResidency& st = m_state[static_cast<size_t>(c)];
    Result<bool> done = m_store->transferDone(c);
    if (!done && first) first = done.status().withContext("polling cluster " + std::to_string(c));
    if (done && !*done) {
      m_inFlight[kept++] = c;
      continue;
    }
    // Finished, or failed: a failed transfer leaves the cluster on the CPU, its memory released.
    if (done && st == ClusterResidency::SwappingIn) {
      st = ClusterResidency::Resident;
      ++m_stats.residentClusters;
    } else {
      st = ClusterResidency::Absent;
      m_stats.bytesHeld -= m_bytes[static_cast<size_t>(c)];
    }
  }
  m_inFlight.resize(kept);

  int64_t held = 0;
  for (ClusterResidency st : m_state) held += st != ClusterResidency::Absent;
  size_t next = 0;
  std::vector<float> vectors;
  std::vector<int64_t> ids;
  for (; next < m_uploadQueue.size(); ++next) {
    const int64_t c = m_uploadQueue[next];
    const int64_t b = m_bytes[static_cast<size_t>(c)];
    if (m_state[static_cast<size_t>(c)] != ClusterResidency::Absent) continue;
    // The target set fits once the evictions in flight finish; until then, wait, hottest first.
    if ((m_params.capacityBytes > 0 && m_stats.bytesHeld + b > m_params.capacityBytes) ||
        (m_params.capacityClusters > 0 && held >= m_params.capacityClusters))
      break;
    Status s = m_index->copyCluster(c, vectors, ids);
    if (s) s = m_store->beginUpload(c, m_index->dim(), vectors, ids);
    if (!s) {
      if (first) first = s.withContext("uploading cluster " + std::to_string(c));
      continue;
    }
    m_state[static_cast<size_t>(c)] = ClusterResidency::SwappingIn;
    m_inFlight.push_back(c);
    m_stats.bytesHeld += b;
    ++held;
    ++m_stats.uploads;
  }
  m_uploadQueue.erase(m_uploadQueue.begin(),
                      m_uploadQueue.begin() + static_cast<std::ptrdiff_t>(next));
  return first;
}

Status ClusterCache::onSubStage() {
  ++m_stats.subStages;
  Status s = Status::ok();
  const bool due = m_stats.subStages % static_cast<uint64_t>(m_params.updateInterval) == 0 ||
                   (m_params.maxUpdateSeconds > 0 &&
                    static_cast<double>(nowNs() - m_lastUpdateNs) * 1e-9 >= m_params.maxUpdateSeconds);
  if (due) s = update();
  Status p = pump();
  return s ? p : s;
}

Status ClusterCache::redoOnCpu(SearchTask& task, const std::vector<int64_t>& clusters) const {
  RAG_ASSIGN_OR_RETURN(SearchTask sub, m_index->makeTask(task.query(), task.k(), clusters));
  SearchTask* one[] = {&sub};
  RAG_RETURN_IF_ERROR(m_index->step(one, std::numeric_limits<double>::infinity()).status());
  std::vector<float> sims;
  std::vector<int64_t> ids;
  for (const SearchHit& h : sub.topK()) sims.push_back(h.similarity), ids.push_back(h.id);
  task.mergeHits(sims, ids);
  return Status::ok();
}

Result<HybridStepStats> ClusterCache::step(std::span<SearchTask* const> tasks, double budgetSeconds) {
  RAG_ASSIGN_OR_RETURN(SubStagePlan plan, planSubStage(*m_index, tasks, budgetSeconds,
                                                       {.order = PlanOrder::RoundRobin, .scan = ScanMode::Alone,
                                                        .threads = IvfIndex::searchThreads()}));
  return step(tasks, plan);
}

Result<HybridStepStats> ClusterCache::step(std::span<SearchTask* const> tasks, const SubStagePlan& plan) {
  Stopwatch whole;
  if (plan.scan != ScanMode::Alone)
    return Status::invalidArgument("a hybrid step splits clusters between devices; plan it with ScanMode::Alone");
  if (plan.take.size() != tasks.size())
    return Status::invalidArgument("a hybrid step was given a plan of " + std::to_string(plan.take.size()) +
                                   " searches for " + std::to_string(tasks.size()) + " tasks");
  const std::vector<int32_t>& take = plan.take;

  // Split each task's planned clusters by where they are now.
  HybridStepStats stats;
  std::vector<std::vector<int64_t>> deviceLists(tasks.size());
  uint64_t visits = 0, swapping = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const SearchTask& t = *tasks[i];
    for (size_t j = t.cursor(); j < t.cursor() + static_cast<size_t>(take[i]); ++j) {
      const int64_t c = t.clusters()[j];
      recordAccess(c);
      ++visits;
      const ClusterResidency st = residency(c);
      if (st == ClusterResidency::Resident) deviceLists[i].push_back(c);
      swapping += st == ClusterResidency::SwappingIn || st == ClusterResidency::SwappingOut;
    }
    stats.deviceVisits += static_cast<int64_t>(deviceLists[i].size());
  }
  if (stats.deviceVisits < m_params.minDeviceVisits) {
    for (auto& l : deviceLists) l.clear();
    stats.deviceVisits = 0;
  }

  // Start the device scan first, so that it overlaps the CPU part.
  std::vector<size_t> rows;  // task of each scanned row
  std::vector<float> queries;
  std::vector<std::vector<int64_t>> lists;
  std::vector<uint8_t> elsewhere;
  int32_t k = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (deviceLists[i].empty()) continue;
    rows.push_back(i);
    const std::span<const float> q = tasks[i]->query();
    queries.insert(queries.end(), q.begin(), q.end());
    lists.push_back(deviceLists[i]);
    k = std::max(k, tasks[i]->k());  // rows longer than a task's k merge just the same
  }
  Stopwatch device;
  if (!rows.empty()) {
    if (Status s = m_store->beginScan(queries, m_index->dim(), k, lists); s) {
      elsewhere.assign(static_cast<size_t>(m_index->nlist()), 0);
      for (const auto& l : lists)
        for (int64_t c : l) elsewhere[static_cast<size_t>(c)] = 1;
    } else {
      ++m_stats.deviceFailures;  // this step runs wholly on the CPU
      rows.clear();
      stats.deviceVisits = 0;
    }
  }
  Result<StepStats> cpu = m_index->execute(tasks, plan, elsewhere);
  if (!rows.empty()) {
    Result<SearchResults> found = m_store->finishScan();
    if (cpu && found) {
      for (size_t r = 0; r < rows.size(); ++r) {
        const size_t base = r * static_cast<size_t>(found->k);
        tasks[rows[r]]->mergeHits(
            std::span<const float>(found->similarities).subspan(base, static_cast<size_t>(found->k)),
            std::span<const int64_t>(found->ids).subspan(base, static_cast<size_t>(found->k)));
      }
    } else if (cpu) {
      ++m_stats.deviceFailures;  // the cursors moved past these clusters: scan them here
      for (size_t r = 0; r < rows.size(); ++r)
        RAG_RETURN_IF_ERROR(redoOnCpu(*tasks[rows[r]], lists[r]));
    }
    for (const auto& l : lists)
      for (int64_t c : l) stats.deviceVectors += m_index->listSize(c);
    stats.deviceSeconds = device.elapsedSeconds();
  }
  if (!cpu) return cpu.status();
  stats.cpu = *cpu;
  m_stats.deviceVisits += static_cast<uint64_t>(stats.deviceVisits);
  m_stats.cpuVisits += visits - static_cast<uint64_t>(stats.deviceVisits);
  m_stats.cpuVisitsWhileSwapping += swapping;
  Status s = onSubStage();
  stats.seconds = whole.elapsedSeconds();
  if (!s) return s.withContext("cluster cache update after a completed step");
  return stats;
}

}  // namespace rag::retrieval
