// A guided tour for teaching: a few steps, each bringing one view to the front with a sentence
// on what it shows; two steps act (load a workflow into the editor, run it) so the views that
// follow have something to show. The data half (GuidedTour: the steps, where the user is, what
// to do on entering a step) is apart from the widget half (TourPanel: the floating card with
// Back / Next / Skip and the frame drawn around the view the step is about).
//
//   auto* tour = new ragwb::GuidedTour(ragwb::defaultTourSteps(), window);
//   connect(tour, &GuidedTour::actionRequested, window, [](GuidedTour::Action a) { ... });
//   auto* panel = new ragwb::TourPanel(tour, window, [&](const QString& id) { return dockOrEditor(id); });
//   tour->start();
//
// GUI-thread objects.
#pragma once

#include <QFrame>
#include <QObject>
#include <QPointer>
#include <QString>
#include <cstdint>
#include <functional>
#include <vector>

class QLabel;
class QPushButton;

namespace ragwb {

struct TourStep {
  enum class Action : uint8_t { None, LoadWorkflow, RunWorkflow };
  QString target;  // the tool id (ToolRegistry) the step points at; "" for the central editor
  QString title;
  QString text;    // one sentence: what the view shows
  Action action = Action::None;  // done once, the first time the step is entered
};

// The workbench's tour: the editor with a workflow loaded, the run, then each view.
std::vector<TourStep> defaultTourSteps();

class GuidedTour : public QObject {
  Q_OBJECT
public:
  using Action = TourStep::Action;
  explicit GuidedTour(std::vector<TourStep> steps, QObject* parent = nullptr);

  const std::vector<TourStep>& steps() const { return m_steps; }
  int current() const { return m_current; }  // -1 before start and after the end
  bool active() const { return m_current >= 0; }

public Q_SLOTS:
  void start();  // to the first step (again, if it ran before)
  void next();   // past the last step: finished(false)
  void back();   // no-op on the first step
  void skip();   // ends now: finished(true)

Q_SIGNALS:
  void stepChanged(int index);
  // Emitted once per tour run for a step with an action, as the step is entered.
  void actionRequested(ragwb::TourStep::Action action);
  void finished(bool skipped);

private:
  void enter(int index);

  std::vector<TourStep> m_steps;
  std::vector<bool> m_acted;
  int m_current = -1;
};

// The card: "Step i of n", the step's title and sentence, Back / Next (Finish on the last) /
// Skip tour; while a step is shown, its view is raised (through `raise`) and framed.
class TourPanel : public QFrame {
  Q_OBJECT
public:
  // `resolve` gives the widget a step's target names (and raises it); nullptr: nothing to frame.
  TourPanel(GuidedTour* tour, QWidget* window, std::function<QWidget*(const QString&)> resolve);

  QLabel* textLabel() const { return m_text; }
  QPushButton* nextButton() const { return m_next; }
  QPushButton* backButton() const { return m_back; }
  QPushButton* skipButton() const { return m_skip; }
  QWidget* framed() const { return m_target; }  // the view framed now

protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

private:
  class Frame;
  void showStep(int index);
  void place();

  GuidedTour* m_tour;
  std::function<QWidget*(const QString&)> m_resolve;
  QLabel* m_step;
  QLabel* m_title;
  QLabel* m_text;
  QPushButton* m_back;
  QPushButton* m_next;
  QPushButton* m_skip;
  Frame* m_frame;
  QPointer<QWidget> m_target;
};

}  // namespace ragwb
