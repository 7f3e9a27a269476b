#include "sched/generation_worker.h"

#include <algorithm>
#include <chrono>

#include "core/clock.h"
#include "sched/kv_block_map.h"
#include "telemetry/trace_ring.h"
#include "telemetry/trace_zone.h"

namespace rag::sched {

GenerationWorker::GenerationWorker(std::unique_ptr<model::ModelRunner> runner, GenerationWorkerParams params)
    : m_runner(std::move(runner)), m_params(std::move(params)) {
  m_kvTotal = m_runner->kvStats().capacity;
  m_memory.pool = m_runner->kvStats();
  m_memory.cacheOn = m_runner->prefixCache() != nullptr;
  if (memory::PrefixCache* cache = m_runner->prefixCache()) {
    m_segments = std::make_unique<SegmentKvBuilder>(*m_runner, m_params.graphReencode, m_params.blockStore.get());
    cache->setPendingQueue([this] { return pendingPrompts(); });  // LACR's look-ahead (worker thread)
  }
  if (m_params.ring) {
    // On a GPU the lane says so ("generation · cuda:0"): the timeline's GPU lane.
    m_lane = m_params.ring->registerLane(deviceLaneName("generation", m_runner->device()), LaneKind::Generation);
  }
  m_thread = std::thread([this] { loop(); });
}

GenerationWorker::~GenerationWorker() {
  m_stop = true;
  m_inbox.poke();
  if (m_thread.joinable()) m_thread.join();
  m_segments.reset();
  // What this run computed stays for the next (a failure costs only recomputation then).
  if (m_params.blockStore && m_params.blockStore->stats().pending > 0) (void)m_params.blockStore->save();
}

void GenerationWorker::add(GenerationJob job) { m_inbox.push(Command{.kind = Command::Kind::Add, .job = std::move(job)}); }

void GenerationWorker::cancel(JobKey key) {
  Command c{.kind = Command::Kind::Cancel};
  c.job.key = key;
  m_inbox.push(std::move(c));
}

void GenerationWorker::retarget(GenerationJob job, int64_t keep, uint32_t epoch) {
  m_inbox.push(Command{.kind = Command::Kind::Retarget, .job = std::move(job), .keep = keep, .epoch = epoch});
}

GenerationWorker::MemoryStats GenerationWorker::memoryStats() const {
  std::lock_guard lock(m_memoryMutex);
  return m_memory;
}

std::vector<uint8_t> GenerationWorker::kvBlockOwners() const {
  m_kvBlocksAskedNs.store(nowNs(), std::memory_order_relaxed);
  std::lock_guard lock(m_memoryMutex);
  return m_kvBlocks;
}

std::vector<memory::BlockStoreRecordInfo> GenerationWorker::blockStoreRecords() const {
  m_storeAskedNs.store(nowNs(), std::memory_order_relaxed);
  std::lock_guard lock(m_memoryMutex);
  return m_storeRecords;
}

std::vector<memory::PrefixNodeInfo> GenerationWorker::kvTree() const {
  m_kvTreeAskedNs.store(nowNs(), std::memory_order_relaxed);
  std::lock_guard lock(m_memoryMutex);
  return m_kvTree;
}

void GenerationWorker::postError(const GenerationJob& job, uint32_t epoch, Status error,
                                 std::vector<GenerationUpdate>& out) {
  GenerationUpdate u;
  u.key = job.key;
  u.epoch = epoch;
  u.finished = true;
  u.reason = model::FinishReason::Error;
  u.error = std::move(error);
  out.push_back(std::move(u));
}

bool GenerationWorker::addToRunner(GenerationJob& job, uint32_t epoch, std::vector<GenerationUpdate>& out) {
  if (job.segmented && m_segments) {  // phase 1 first: the segments' KV through the prefix cache
    // arg0: segment tokens found (cache or block store), arg1: 1 (lookup).
    RAG_TRACE_ZONE(zone, m_params.ring, m_lane, TraceStage::KvAssemble, job.requestId);
    Result<SegmentKvBuilder::Ticket> t = m_segments->begin(std::move(*job.segmented));
    if (t) zone.setArgs(static_cast<uint32_t>(m_segments->hitTokens(*t)), 1);
    job.segmented.reset();
    if (!t) {
      postError(job, epoch, t.status(), out);
      return false;
    }
    m_building.push_back({*t, std::move(job), epoch});
    admitBuilt(out);
    return true;
  }
  Result<model::SeqId> id = m_runner->add(std::move(job.request));
  if (!id) {
    postError(job, epoch, id.status(), out);
    return false;
  }
  m_live.push_back({*id, Live{job.key, job.requestId, job.speculative, epoch, 0, {}}});
  return true;
}

void GenerationWorker::admitBuilt(std::vector<GenerationUpdate>& out) {
  std::erase_if(m_building, [&](Building& b) {
    if (!m_segments->ready(b.ticket)) return false;
    Result<model::SequenceRequest> q = m_segments->request(b.ticket);
    Result<model::SeqId> id = q ? Result<model::SeqId>(Status::ok()) : Result<model::SeqId>(q.status());
    if (q) {
      q->sampling = b.job.request.sampling;
      // Copying the segments' KV into the sequence and re-encoding their keys; arg0: tokens, arg1: 2.
      RAG_TRACE_ZONE(zone, m_params.ring, m_lane, TraceStage::KvAssemble, b.job.requestId);
      uint32_t placed = 0;
      for (const model::KvSegment& s : q->cached) placed += static_cast<uint32_t>(s.kv.numTokens);
      zone.setArgs(placed, 2);
      id = m_runner->add(std::move(*q));
      // No room yet to copy the segments in: retry after a step, while running sequences will
      // finish and free blocks (only a pool with nothing else to free is an error).
      if (!id && id.status().code() == StatusCode::Busy && m_runner->hasWork()) return false;
    }
    const int64_t hits = m_segments->hitTokens(b.ticket);
    std::vector<SegmentKvUse> uses = m_segments->uses(b.ticket);
    m_segments->finish(b.ticket);  // the sequence holds its own copies (or references) now
    if (!id) {
      postError(b.job, b.epoch, id.status(), out);
      return true;
    }
    m_live.push_back({*id, Live{b.job.key, b.job.requestId, b.job.speculative, b.epoch, 0, {}, hits, std::move(uses)}});
    return true;
  });
}

std::vector<memory::PendingPrompt> GenerationWorker::pendingPrompts() const {
  std::vector<memory::PendingPrompt> out;
  const int32_t vocab = m_segments ? m_segments->vocab() : 0;
  for (const GenerationJob& j : m_waiting) {
    if (j.segmented) {
      for (const model::ContextSegment& s : j.segmented->segments)
        out.push_back({segmentNamespace(j.segmented->attention), segmentKeys(s, j.segmented->attention, vocab)});
    } else {
      out.push_back({0, j.request.prompt});
    }
  }
  if (m_segments) m_segments->appendPending(out);
  return out;
}

// Truncates the live sequence to `keep` tokens and extends its prompt with the rest of the new
// one; anything else (it ended, nothing to keep) starts the new prompt afresh.
void GenerationWorker::applyRetarget(Command& c, std::vector<GenerationUpdate>& out) {
  auto it = std::find_if(m_live.begin(), m_live.end(), [&](const auto& l) { return l.second.key == c.job.key; });
  const std::vector<int32_t>& prompt = c.job.request.prompt;
  if (it != m_live.end() && c.keep >= 1 && c.keep <= static_cast<int64_t>(prompt.size())) {
    const model::SeqId id = it->first;
    if (m_runner->truncate(id, c.keep).isOk() &&
        m_runner->append(id, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(c.keep)), true).isOk()) {
      it->second.epoch = c.epoch;
      it->second.generated = 0;
      it->second.text.clear();
      it->second.speculative = false;
      return;
    }
  }
  if (it != m_live.end()) {
    (void)m_runner->cancel(it->first);  // its cancellation event finds no live entry: dropped
    m_live.erase(it);
  }
  addToRunner(c.job, c.epoch, out);
}

// Cancels and retargets at once; adds at once, or (StageBatches) when the runner has finished
// its batch.
void GenerationWorker::applyCommands(std::vector<Command>& commands, std::vector<GenerationUpdate>& out) {
  for (Command& c : commands) {
    switch (c.kind) {
      case Command::Kind::Add:
        m_waiting.push_back(std::move(c.job));
        break;
      case Command::Kind::Retarget:
        applyRetarget(c, out);
        break;
      case Command::Kind::Cancel: {
        std::erase_if(m_waiting, [&](const GenerationJob& j) { return j.key == c.job.key; });
        std::erase_if(m_building, [&](const Building& b) {
          if (b.job.key != c.job.key) return false;
          m_segments->cancel(b.ticket);
          return true;
        });
        auto it = std::find_if(m_live.begin(), m_live.end(), [&](const auto& l) { return l.second.key == c.job.key; });
        if (it != m_live.end()) (void)m_runner->cancel(it->first);  // reported (and released) by the next step
        break;
      }
    }
  }
  commands.clear();
  if (m_params.pacing == GenerationPacing::StageBatches && m_runner->hasWork()) return;
  std::vector<GenerationJob> later;
  for (GenerationJob& job : m_waiting) {
    if (job.segmented && m_segments && !roomForTicket(*job.segmented)) later.push_back(std::move(job));
    else addToRunner(job, 0, out);
  }
  m_waiting = std::move(later);
}

// A ticket holds its finished segments' KV until all of its segments are done, and no sequence
// can be preempted to free it: with hundreds of tickets building at once the pool fills with
// half-built tickets and none completes. So a dependency prompt starts building only while few
// do and the pool (free blocks, plus what the prefix cache holds and may give way) has room
// for twice its segments; the first always starts.
bool GenerationWorker::roomForTicket(const model::SegmentedPrompt& p) const {
  if (m_building.empty()) return true;
  if (m_building.size() >= kMaxBuildingTickets) return false;
  const memory::KvPool& pool = m_runner->kvPool();
  const int64_t bs = m_runner->params().blockSize;
  const int64_t need = 2 * (p.contextTokens() / bs + static_cast<int64_t>(p.segments.size()) + 1);
  const int64_t cached = m_runner->prefixCache() ? m_runner->prefixCache()->stats().computeBlocks : 0;
  return pool.freeBlocks() + cached >= need;
}

void GenerationWorker::stepOnce(std::vector<GenerationUpdate>& out) {
  model::StepResult r;
  const uint64_t t0 = nowNs();
  {
    // arg0: rows computed, arg1: sequences in the batch.
    RAG_TRACE_ZONE(zone, m_params.ring, m_lane, TraceStage::Decode, 0);
    r = m_runner->step();
    zone.setArgs(static_cast<uint32_t>(r.stats.decodeRows + r.stats.prefillRows),
                 static_cast<uint32_t>(r.stats.sequences));
  }
  if (m_segments) m_segments->absorb(r.events);
  for (model::SeqEvent& e : r.events) {
    auto it = std::find_if(m_live.begin(), m_live.end(), [&](const auto& l) { return l.first == e.id; });
    if (it == m_live.end()) continue;
    GenerationUpdate u;
    u.key = it->second.key;
    u.epoch = it->second.epoch;
    u.text = std::move(e.text);
    u.newTokens = static_cast<int32_t>(e.tokens.size());
    u.promptCachedTokens = e.promptCachedTokens >= 0 && it->second.segmentHitTokens >= 0 ? it->second.segmentHitTokens
                                                                                     : e.promptCachedTokens;
    if (e.promptCachedTokens >= 0) u.segments = std::move(it->second.segments);
    it->second.generated += u.newTokens;
    it->second.text += u.text;
    if (e.finished) {
      u.finished = true;
      u.reason = e.reason;
      if (e.reason == model::FinishReason::Error) u.error = m_runner->deviceStatus();  // ok: NaN logits
      u.generatedTokens = it->second.generated;
      u.output = std::move(it->second.text);
      (void)m_runner->release(e.id);
      m_live.erase(it);
    }
    if (u.finished || u.newTokens > 0 || !u.text.empty()) out.push_back(std::move(u));
  }
  if (m_segments && !m_building.empty()) admitBuilt(out);
  const uint64_t busyNs = nowNs() - t0;
  if (m_params.load) m_params.load->addBusy(busyNs);
  {
    std::lock_guard lock(m_totalsMutex);
    ++m_totals.steps;
    m_totals.rows += r.stats.decodeRows + r.stats.prefillRows;
    m_totals.forwardSeconds += r.stats.forwardSeconds;
    m_totals.runnerSeconds += r.stats.totalSeconds;
  }
  const double secs = static_cast<double>(busyNs) * 1e-9;
  const double prev = m_stepSeconds.load(std::memory_order_relaxed);
  m_stepSeconds.store(prev == 0 ? secs : prev + 0.1 * (secs - prev), std::memory_order_relaxed);
  m_running.store(static_cast<int32_t>(m_live.size()), std::memory_order_relaxed);
  const memory::KvPool& pool = m_runner->kvPool();
  m_kvUsed.store(pool.capacity() - pool.freeBlocks(), std::memory_order_relaxed);
  // The full snapshot walks the pool's and the prefix tree's tables: every 20 ms and whenever the
  // runner falls idle, not at every step.
  const uint64_t now = nowNs();
  if (now - m_memoryAtNs >= 20'000'000 || !m_runner->hasWork()) {
    refreshMemoryStats();
    m_memoryAtNs = now;
  }
}

GenerationWorker::StepTotals GenerationWorker::stepTotals() const {
  std::lock_guard lock(m_totalsMutex);
  return m_totals;
}

bool GenerationWorker::kvTreeDue(uint64_t now) const {
  return m_runner->prefixCache() && now - m_kvTreeAtNs >= kKvTreePeriodNs &&
         now - m_kvTreeAskedNs.load(std::memory_order_relaxed) < 1'000'000'000;
}

bool GenerationWorker::kvBlocksDue(uint64_t now) const {
  const uint64_t asked = m_kvBlocksAskedNs.load(std::memory_order_relaxed);
  return asked != 0 && now - m_kvBlocksAtNs >= kKvBlocksPeriodNs && now - asked < 1'000'000'000;
}

bool GenerationWorker::storeDue(uint64_t now) const {
  const uint64_t asked = m_storeAskedNs.load(std::memory_order_relaxed);
  return m_params.blockStore && asked != 0 && now - m_storeAtNs >= kStorePeriodNs && now - asked < 1'000'000'000;
}

void GenerationWorker::refreshMemoryStats() {
  MemoryStats mem;
  mem.pool = m_runner->kvStats();
  if (const memory::PrefixCache* cache = m_runner->prefixCache()) {
    mem.cache = cache->stats();
    mem.cacheOn = true;
  }
  if (m_segments) {
    mem.depSegments = m_segments->stats(model::SegmentAttention::Dependency);
    mem.blockSegments = m_segments->stats(model::SegmentAttention::Block);
  }
  if (m_params.blockStore) mem.blockStore = m_params.blockStore->stats();
  mem.prefillPerRow = m_runner->recomputeCost().perRow();
  mem.prefillPerPair = m_runner->recomputeCost().perPair();
  // The whole tree only for an inspector that asked lately, and at most every 200 ms.
  const uint64_t now = nowNs();
  std::vector<memory::PrefixNodeInfo> tree;
  const bool takeTree = kvTreeDue(now);
  if (takeTree) {
    tree = m_runner->prefixCache()->snapshot();
    m_kvTreeAtNs = now;
  }
  // The block map for a heatmap that asked lately, at most every 100 ms: one pass over the
  // pool's reference counts and the cache's nodes.
  std::vector<uint8_t> owners;
  const bool takeBlocks = kvBlocksDue(now);
  if (takeBlocks) {
    mapKvBlocks(m_runner->kvPool(), m_runner->prefixCache(), owners);
    m_kvBlocksAtNs = now;
  }
  std::vector<memory::BlockStoreRecordInfo> records;
  const bool takeStore = storeDue(now);
  if (takeStore) {
    records = m_params.blockStore->records();
    m_storeAtNs = now;
  }
  std::lock_guard lock(m_memoryMutex);
  m_memory = mem;
  if (takeTree) m_kvTree = std::move(tree);
  if (takeBlocks) m_kvBlocks = std::move(owners);
  if (takeStore) m_storeRecords = std::move(records);
}

void GenerationWorker::loop() {
  model::setComputeThreads(m_params.threads);
  std::vector<Command> commands;
  std::vector<GenerationUpdate> out;
  auto flush = [&] {
    if (!out.empty() && m_params.post) m_params.post(std::move(out));
    out.clear();
  };
  while (!m_stop.load()) {
    m_inbox.takeAll(commands, m_runner->hasWork() ? std::chrono::milliseconds(0) : std::chrono::milliseconds(50));
    applyCommands(commands, out);
    flush();
    if (!m_runner->hasWork()) {
      const uint64_t now = nowNs();  // an inspector or heatmap opened after the last step
      if (kvTreeDue(now) || kvBlocksDue(now) || storeDue(now)) refreshMemoryStats();
      continue;
    }
    if (m_params.pacing != GenerationPacing::Turns) {
      stepOnce(out);
      flush();
      continue;
    }
    // Turns: one turn decodes until the sequences present at its start have finished;
    // sequences added meanwhile join the batch ("generation still batched by the runner").
    TurnGuard turn(m_params.turns);
    std::vector<model::SeqId> turnSeqs;
    for (const auto& l : m_live) turnSeqs.push_back(l.first);
    while (!m_stop.load() && m_runner->hasWork()) {
      m_inbox.takeAll(commands);
      applyCommands(commands, out);
      stepOnce(out);
      flush();
      const bool turnDone = std::none_of(turnSeqs.begin(), turnSeqs.end(), [&](model::SeqId s) {
        return std::any_of(m_live.begin(), m_live.end(), [&](const auto& l) { return l.first == s; });
      });
      if (turnDone) break;
    }
  }
}

}  // namespace rag::sched
