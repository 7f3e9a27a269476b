// The timeline's colours, apart from the widget so they can be checked on their own: the stage
// picks the hue, the request the shade, and a folded block (a run of spans narrower than 3 px)
// takes the colour of the stage that dominates it, paled (Tracy draws folded zones in their own
// colour), so the whole-run view still shows where the time goes.
#pragma once

#include <QColor>

#include "rag/trace.h"

namespace ragwb {

// A span's fill: its stage's hue; a request id shifts brightness and saturation so neighbouring
// requests of one stage tell apart while the stage stays recognisable.
QColor spanColor(const rag::TraceEvent& e);
// A folded block whose time is mostly `dominant` (LaneModel's DrawItem::dominant): that stage's
// hue, no request shade, paled. The view dots it on top so it reads as folded.
QColor foldedColor(rag::TraceStage dominant);

}  // namespace ragwb
