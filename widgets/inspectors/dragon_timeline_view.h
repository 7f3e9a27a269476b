// The DRAGON page's timeline: one live run drawn from a DragonEventModel, fitted to the width.
//
//   device    ▕▇▇▏▕▇▇▏ ✓ ▕▇▇▏ ✗ ↺ ...     its drafts' decode spans, accept (✓) / reject (✗) of its
//              ╲      ╱                    drafts, rollbacks (↺)
//   link        ╲    ╱                     frames between the sides: drafts (the sender's colour,
//              ╱      ╲                    grey dashed when stale), verdicts (purple); hover one
//   cloud     ▕▇▇▏▕▇▇▏ ✓ ...               for its latency
//   aggregator ██ device ██│██ cloud ██    who held the aggregator
//
// Why not the pipeline timeline (timeline/): it draws spans of the engine's trace lanes with
// pixel folding for hundreds of thousands of spans; a DRAGON run is a few hundred events whose
// point is the marks and the frames between two lanes, which that painter has no notion of.
// A GUI-thread widget; repaints when the model changes.
#pragma once

#include <QWidget>
#include <vector>

namespace ragwb {

class DragonEventModel;

class DragonTimelineView : public QWidget {
  Q_OBJECT
public:
  explicit DragonTimelineView(DragonEventModel* model, QWidget* parent = nullptr);
  // The lanes have fixed heights: the view is as tall as they are.
  static constexpr int kHeight = 212;
  QSize sizeHint() const override { return {900, kHeight}; }
  QSize minimumSizeHint() const override { return {320, kHeight}; }
  // The tooltip text at a point (what hovering shows; empty where nothing is).
  QString toolTipAt(QPointF p) const;

protected:
  void paintEvent(QPaintEvent* e) override;
  bool event(QEvent* e) override;

private:
  struct Hit {
    QRectF rect;
    QString text;
  };
  DragonEventModel* m_model;
  mutable std::vector<Hit> m_hits;  // rebuilt by each paint
};

}  // namespace ragwb
