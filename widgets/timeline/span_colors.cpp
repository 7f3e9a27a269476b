#include "timeline/span_colors.h"

#include <algorithm>
#include <array>

namespace ragwb {

namespace {

struct StageStyle {
  int hue;
  int saturation;
  int value;
};

StageStyle stageStyle(rag::TraceStage s) {
  switch (s) {
    case rag::TraceStage::Request: return {210, 60, 215};
    case rag::TraceStage::Schedule: return {268, 120, 200};
    case rag::TraceStage::Prefill: return {28, 170, 235};
    case rag::TraceStage::Decode: return {140, 150, 190};
    case rag::TraceStage::Embed: return {178, 160, 185};
    case rag::TraceStage::RetrievalStep: return {214, 165, 225};
    case rag::TraceStage::ClusterScan: return {45, 190, 230};
    case rag::TraceStage::CacheSwap: return {322, 140, 210};
    case rag::TraceStage::KvTransfer: return {95, 150, 185};
    case rag::TraceStage::Aggregate: return {192, 150, 200};
    case rag::TraceStage::CorpusBuild: return {20, 110, 160};
    case rag::TraceStage::User: return {0, 40, 190};
    case rag::TraceStage::KvAssemble: return {60, 170, 215};
    case rag::TraceStage::Compress: return {270, 110, 170};
    case rag::TraceStage::Unknown:
    case rag::TraceStage::Count_: break;
  }
  return {0, 0, 170};
}

}  // namespace

QColor spanColor(const rag::TraceEvent& e) {
  StageStyle st = stageStyle(e.stage);
  if (e.requestId != 0) {
    static constexpr std::array<int, 7> kShade = {0, -34, 20, -18, 32, -48, 10};
    const uint32_t h = e.requestId * 2654435761u;
    st.value = std::clamp(st.value + kShade[(h >> 13) % kShade.size()], 70, 255);
    st.saturation = std::clamp(st.saturation + int((h >> 7) % 5) * 12 - 24, 20, 255);
  }
  return QColor::fromHsv(st.hue, st.saturation, st.value);
}

QColor foldedColor(rag::TraceStage dominant) {
  rag::TraceEvent e;
  e.stage = dominant;  // requestId 0: the stage's own colour
  return spanColor(e).lighter(125);
}

}  // namespace ragwb
