#include "timeline/timeline_bench.h"

#include <QElapsedTimer>
#include <QImage>
#include <QJsonArray>
#include <algorithm>
#include <random>

#include "timeline/lane_model.h"
#include "timeline/timeline_view.h"

namespace ragwb {

namespace {

enum SyntheticLane : uint16_t { kScheduler, kRequests, kGeneration, kRetrieval, kEmbedding, kGpu, kCache };

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

class TraceSynth {
public:
  TraceSynth(uint64_t seed, uint64_t start) : m_rng(seed), m_start(start) {}

  std::vector<rag::TraceEvent> run(size_t spans) {
    std::vector<rag::TraceEvent> out;
    out.reserve(spans + spans / 8);
    uint64_t nextArrival = m_start, nextSched = m_start, nextGen = m_start + 2 * kMs;
    uint64_t nextRetr = m_start + 5 * kMs, nextGpu = m_start + 6 * kMs, nextCache = m_start + 40 * kMs;
    for (uint64_t chunk = m_start; out.size() < spans; chunk += 10 * kMs) {
      const uint64_t chunkEnd = chunk + 10 * kMs;
      while (nextArrival < chunkEnd) {
        request(nextArrival, out);
        nextArrival += expo(25 * kMs);
      }
      while (nextSched < chunkEnd) {
        const double p = unit();
        const uint64_t d = p < 0.9 ? range(3 * kUs, 60 * kUs) : p < 0.99 ? range(60 * kUs, 400 * kUs)
                                                                         : range(1 * kMs, 3 * kMs);
        push(out, kScheduler, rag::TraceStage::Schedule, nextSched, d, 0, 0,
             uint32_t(range(0, 9)), 1);
        nextSched += d + expo(220 * kUs);
      }
      while (nextGen < chunkEnd) {  // batched model steps: not tied to one request
        const uint64_t d = range(2 * kMs, 7 * kMs);
        const auto batch = uint32_t(range(1, 33));
        push(out, kGeneration, rag::TraceStage::Decode, nextGen, d, 0, 0, batch, batch);
        nextGen += d + range(20 * kUs, 200 * kUs);
      }
      while (nextRetr < chunkEnd) {
        const uint64_t d = unit() < 0.95 ? range(40 * kUs, 500 * kUs) : range(1 * kMs, 4 * kMs);
        uint8_t flags = 0;
        if (unit() < 0.12) flags = rag::kTraceSpeculative | (unit() < 0.2 ? rag::kTraceRollback : 0);
        push(out, kRetrieval, rag::TraceStage::RetrievalStep, nextRetr, d, liveRequest(nextRetr),
             flags, uint32_t(range(1, 17)), uint32_t(range(1, 9)));
        nextRetr += d + expo(150 * kUs);
      }
      while (nextGpu < chunkEnd) {
        const uint64_t d = range(20 * kUs, 180 * kUs);
        push(out, kGpu, rag::TraceStage::ClusterScan, nextGpu, d, liveRequest(nextGpu),
             rag::kTraceGpu, uint32_t(range(1, 9)), 0);
        nextGpu += d + expo(400 * kUs);
      }
      while (nextCache < chunkEnd) {
        const uint64_t d = range(800 * kUs, 4 * kMs);
        const bool kv = unit() < 0.3;
        push(out, kCache, kv ? rag::TraceStage::KvTransfer : rag::TraceStage::CacheSwap, nextCache,
             d, 0, rag::kTraceGpu, uint32_t(range(4, 65)), 0);
        nextCache += d + expo(150 * kMs);
      }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.beginNs < b.beginNs; });
    out.resize(spans);
    return out;
  }

private:
  struct Live {
    uint32_t id;
    uint64_t begin, end;
  };

  // One request of a multistep workflow: embed, then 1-3 rounds of retrieval and decode; some
  // retrievals start speculatively before their input is final, and some of those roll back.
  void request(uint64_t t, std::vector<rag::TraceEvent>& out) {
    const uint32_t id = ++m_lastId;
    uint32_t node = 0;
    uint64_t cur = t + range(50 * kUs, 500 * kUs);
    const uint64_t embed = range(1500 * kUs, 4 * kMs);
    push(out, kRequests, rag::TraceStage::Embed, cur, embed, id, 0, 1, node++);
    push(out, kEmbedding, rag::TraceStage::Embed, cur, embed, id, 0, uint32_t(range(1, 5)), 0);
    cur += embed;
    const int rounds = int(range(1, 4));
    for (int r = 0; r < rounds; ++r) {
      const uint64_t dur = range(15 * kMs, 90 * kMs);
      const auto clusters = uint32_t(32 * range(1, 9));
      if (r > 0 && unit() < 0.3) {
        const uint64_t specBegin = std::max(t, cur - range(5 * kMs, 20 * kMs));
        if (unit() < 0.35) {  // the guess was wrong: thrown away, retrieval runs again
          const uint64_t stop = cur + range(2 * kMs, 10 * kMs);
          push(out, kRequests, rag::TraceStage::RetrievalStep, specBegin, stop - specBegin, id,
               rag::kTraceSpeculative | rag::kTraceRollback, clusters / 2, node);
          cur = stop;
          push(out, kRequests, rag::TraceStage::RetrievalStep, cur, dur, id, 0, clusters, node++);
          cur += dur;
        } else {
          push(out, kRequests, rag::TraceStage::RetrievalStep, specBegin, cur + dur - specBegin, id,
               rag::kTraceSpeculative, clusters, node++);
          cur += dur;
        }
      } else {
        push(out, kRequests, rag::TraceStage::RetrievalStep, cur, dur, id, 0, clusters, node++);
        cur += dur;
      }
      cur += range(100 * kUs, 2 * kMs);
      const uint64_t decode = range(40 * kMs, 220 * kMs);
      push(out, kRequests, rag::TraceStage::Decode, cur, decode, id, 0, uint32_t(range(8, 65)),
           node++);
      cur += decode + range(100 * kUs, 1 * kMs);
    }
    push(out, kRequests, rag::TraceStage::Request, t, cur - t, id, 0, node, 0);
    m_live.push_back(Live{id, t, cur});
  }

  uint32_t liveRequest(uint64_t t) {
    std::erase_if(m_live, [t](const Live& l) { return l.end < t; });
    size_t n = 0;
    for (const Live& l : m_live) n += l.begin <= t;
    if (n == 0) return 0;
    size_t pick = size_t(range(0, n));
    for (const Live& l : m_live)
      if (l.begin <= t && pick-- == 0) return l.id;
    return 0;
  }

  static void push(std::vector<rag::TraceEvent>& out, uint16_t lane, rag::TraceStage stage,
                   uint64_t begin, uint64_t dur, uint32_t request, uint8_t flags, uint32_t arg0,
                   uint32_t arg1) {
    out.push_back(rag::TraceEvent{.beginNs = begin, .endNs = begin + dur, .requestId = request,
                                  .lane = lane, .stage = stage, .flags = flags, .arg0 = arg0,
                                  .arg1 = arg1});
  }

  double unit() { return std::uniform_real_distribution<double>(0, 1)(m_rng); }
  uint64_t range(uint64_t lo, uint64_t hi) {  // [lo, hi)
    return lo + std::uniform_int_distribution<uint64_t>(0, hi - lo - 1)(m_rng);
  }
  uint64_t expo(uint64_t mean) {
    return uint64_t(std::exponential_distribution<double>(1.0 / double(mean))(m_rng)) + 1;
  }

  std::mt19937_64 m_rng;
  uint64_t m_start;
  uint32_t m_lastId = 0;
  std::vector<Live> m_live;
};

template <typename T>
T median(std::vector<T> v) {
  if (v.empty()) return T{};
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<rag::TraceLane> syntheticLanes() {
  using K = rag::LaneKind;
  return {{"scheduler", K::Scheduler}, {"requests", K::Requests},   {"generation", K::Generation},
          {"retrieval", K::Retrieval}, {"embedding", K::Embedding}, {"gpu", K::Gpu},
          {"cache", K::GpuCacheSwaps}};
}

std::vector<rag::TraceEvent> syntheticServingTrace(size_t spans, uint64_t seed, uint64_t startNs) {
  if (spans == 0) return {};
  return TraceSynth(seed, startNs).run(spans);
}

QJsonObject TimelineBenchResult::toJson() const {
  QJsonArray lv;
  for (const TimelineZoomResult& z : levels) {
    lv.append(QJsonObject{{"zoom", z.name},
                          {"fraction", z.fraction},
                          {"frames", z.frames},
                          {"frames_per_second", z.framesPerSecond},
                          {"median_frame_ms", z.medianFrameMs},
                          {"median_draw_items", double(z.medianDrawItems)},
                          {"median_folded_spans", double(z.medianFoldedSpans)}});
  }
  return QJsonObject{{"spans", double(spans)},
                     {"width", frameSize.width()},
                     {"height", frameSize.height()},
                     {"append_ms", appendMs},
                     {"levels", lv}};
}

TimelineBenchResult benchmarkTimeline(int spans, int frames, QSize size) {
  TimelineBenchResult result;
  result.frameSize = size;
  const std::vector<rag::TraceEvent> trace = syntheticServingTrace(size_t(std::max(spans, 0)));
  result.spans = trace.size();

  LaneModel model;
  model.setLanes(syntheticLanes());
  QElapsedTimer timer;
  timer.start();
  model.append(trace);
  result.appendMs = double(timer.nsecsElapsed()) / 1e6;

  TimelineView view(&model);
  view.setFollowLive(false);
  view.resize(size);
  for (const rag::TraceEvent& e : trace)  // a selection, so highlights are part of the cost
    if (e.lane == kRequests && e.beginNs >= trace[trace.size() / 2].beginNs) {
      view.setSelectedRequest(e.requestId);
      break;
    }
  QImage image(size, QImage::Format_ARGB32_Premultiplied);
  const TimeRange ext = model.extent();
  frames = std::max(frames, 1);

  for (auto [name, fraction] : {std::pair{"whole", 1.0}, {"10%", 0.1}, {"1%", 0.01}}) {
    TimelineZoomResult z;
    z.name = QString::fromLatin1(name);
    z.fraction = fraction;
    z.frames = frames;
    std::vector<double> ms;
    std::vector<size_t> items, folded;
    const auto len = std::max<uint64_t>(uint64_t(double(ext.length()) * fraction), 1000);
    const uint64_t travel = ext.length() > len ? ext.length() - len : uint64_t(frames);
    double total = 0;
    for (int i = -1; i < frames; ++i) {  // i = -1 warms up
      const uint64_t start = ext.begin + travel * uint64_t(std::max(i, 0)) / uint64_t(frames);
      view.setVisibleRange({start, start + len});
      timer.restart();
      view.render(&image);
      const double f = double(timer.nsecsElapsed()) / 1e6;
      if (i < 0) continue;
      total += f;
      ms.push_back(f);
      items.push_back(view.drawList().items.size());
      folded.push_back(view.drawList().foldedSpans);
    }
    z.framesPerSecond = total > 0 ? frames / (total / 1000.0) : 0;
    z.medianFrameMs = median(ms);
    z.medianDrawItems = median(items);
    z.medianFoldedSpans = median(folded);
    result.levels.push_back(z);
  }
  return result;
}

}  // namespace ragwb
