// A synthetic serving trace shaped like the engine's (same lanes, stages and argument meanings,
// plus "gpu" and "cache" lanes), and the timeline's frame-rate benchmark over it.
//
//   QApplication app(argc, argv);   // the benchmark paints a widget: needs a QApplication
//   ragwb::TimelineBenchResult r = ragwb::benchmarkTimeline(200000, 60);
//   std::cout << QJsonDocument(r.toJson()).toJson().toStdString();
#pragma once

#include <QJsonObject>
#include <QSize>
#include <QString>
#include <cstdint>
#include <string>
#include <vector>

#include "rag/trace.h"

namespace ragwb {

// Lane names of syntheticServingTrace(), by lane id: scheduler, requests, generation, retrieval,
// embedding, gpu, cache.
std::vector<rag::TraceLane> syntheticLanes();

// `spans` events of a busy serving run (about 7 spans per ms of trace, ~40 requests/s with
// tens live at once), sorted by begin, starting at `startNs`. Requests lane: a Request span
// and one span per node run (embed, retrieval with speculative runs and rollbacks, decode).
// Deterministic for a given seed.
std::vector<rag::TraceEvent> syntheticServingTrace(size_t spans, uint64_t seed = 1,
                                                   uint64_t startNs = 1'000'000'000);

struct TimelineZoomResult {
  QString name;           // "whole", "10%", "1%"
  double fraction = 1;    // of the trace's duration on screen
  int frames = 0;
  double framesPerSecond = 0;    // frames / total paint time
  double medianFrameMs = 0;
  size_t medianDrawItems = 0;    // draw list size
  size_t medianFoldedSpans = 0;  // spans merged into folded rects
};

struct TimelineBenchResult {
  size_t spans = 0;
  QSize frameSize;
  double appendMs = 0;  // LaneModel::append of the whole trace
  std::vector<TimelineZoomResult> levels;
  QJsonObject toJson() const;
};

// Builds syntheticServingTrace(spans), then for each zoom level (whole trace, 10 %, 1 %) paints
// `frames` frames of a TimelineView into a QImage of `size`, panning across the trace so every
// frame rebuilds its draw list. Needs a QApplication.
TimelineBenchResult benchmarkTimeline(int spans = 200000, int frames = 60,
                                      QSize size = QSize(1600, 600));

}  // namespace ragwb
