// The guided tour: navigation (Next, Back, Skip, Finish), each step's action requested once per
// tour however the user moves, the default steps (a workflow loaded, then run, then the views,
// one sentence each), and the panel: each step raises and frames its view, Skip hides it all.
#include <QtTest>

#include <QDockWidget>
#include <QLabel>
#include <QMainWindow>
#include <QPushButton>
#include <QSignalSpy>
#include <QTextEdit>

#include "tools/tool_registry.h"
#include "tour/guided_tour.h"

using ragwb::GuidedTour;
using ragwb::TourStep;

class TestGuidedTour : public QObject {
  Q_OBJECT

  static std::vector<TourStep> threeSteps() {
    return {{QString(), "Editor", "The graph.", TourStep::Action::LoadWorkflow},
            {"a", "Run", "Run it.", TourStep::Action::RunWorkflow},
            {"b", "View", "What it shows.", TourStep::Action::None}};
  }

private Q_SLOTS:
  void nextBackAndFinish() {
    GuidedTour tour(threeSteps());
    QSignalSpy steps(&tour, &GuidedTour::stepChanged);
    QSignalSpy actions(&tour, &GuidedTour::actionRequested);
    QSignalSpy done(&tour, &GuidedTour::finished);
    QVERIFY(!tour.active());
    tour.next();  // not started: nothing
    QCOMPARE(steps.size(), 0);
    tour.start();
    QCOMPARE(tour.current(), 0);
    tour.back();  // first step: stays
    QCOMPARE(tour.current(), 0);
    tour.next();
    tour.back();
    tour.next();  // the run step entered twice: run once
    QCOMPARE(tour.current(), 1);
    QCOMPARE(actions.size(), 2);
    QCOMPARE(actions[0][0].value<TourStep::Action>(), TourStep::Action::LoadWorkflow);
    QCOMPARE(actions[1][0].value<TourStep::Action>(), TourStep::Action::RunWorkflow);
    tour.next();
    QCOMPARE(done.size(), 0);
    tour.next();  // past the last step
    QCOMPARE(done.size(), 1);
    QCOMPARE(done[0][0].toBool(), false);
    QVERIFY(!tour.active());
    tour.start();  // a second tour acts again
    QCOMPARE(actions.size(), 3);
  }

  void skipEndsAtOnce() {
    GuidedTour tour(threeSteps());
    QSignalSpy done(&tour, &GuidedTour::finished);
    tour.start();
    tour.skip();
    QCOMPARE(done.size(), 1);
    QCOMPARE(done[0][0].toBool(), true);
    QVERIFY(!tour.active());
    tour.skip();  // once only
    QCOMPARE(done.size(), 1);
  }

  void defaultStepsLoadRunThenShowEachView() {
    const auto steps = ragwb::defaultTourSteps();
    QVERIFY(steps.size() >= 4);
    QCOMPARE(steps[0].action, TourStep::Action::LoadWorkflow);
    QVERIFY(steps[0].target.isEmpty());  // the editor
    QCOMPARE(steps[1].action, TourStep::Action::RunWorkflow);
    QStringList targets;
    for (const TourStep& s : steps) {
      QVERIFY(!s.title.isEmpty());
      QVERIFY2(s.text.endsWith(QLatin1Char('.')), qPrintable(s.text));  // a sentence each
      QVERIFY2(!targets.contains(s.target), qPrintable(s.target));      // each view once
      targets << s.target;
    }
    for (const char* view : {"runDock", "timelineDock", "heatmapDock", "historyDock"}) QVERIFY(targets.contains(view));
  }

  void panelRaisesAndFramesEachView() {
    QMainWindow window;
    auto* editor = new QTextEdit;
    window.setCentralWidget(editor);
    ragwb::ToolRegistry tools(&window);
    QVERIFY(tools.add("a", "A", new QLabel("a"), ragwb::ToolPlacement::inArea(Qt::RightDockWidgetArea)).isOk());
    QVERIFY(tools.add("b", "B", new QLabel("b"), ragwb::ToolPlacement::tabbedWith("a")).isOk());
    window.resize(1000, 700);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    GuidedTour tour(threeSteps());
    ragwb::TourPanel panel(&tour, &window, [&](const QString& id) -> QWidget* {
      if (id.isEmpty()) return editor;
      tools.raise(id);
      return tools.dock(id);
    });
    QVERIFY(!panel.isVisible());
    tour.start();
    QVERIFY(panel.isVisible());
    QCOMPARE(panel.framed(), editor);
    QVERIFY(!panel.backButton()->isEnabled());
    QCOMPARE(panel.textLabel()->text(), QStringLiteral("The graph."));
    panel.nextButton()->click();
    panel.nextButton()->click();
    QCOMPARE(panel.framed(), tools.dock("b"));
    QVERIFY(!tools.dock("b")->visibleRegion().isEmpty());  // its tab brought to the front
    QCOMPARE(panel.nextButton()->text(), QStringLiteral("Finish"));
    QTest::qWait(50);
    QVERIFY(window.rect().contains(panel.geometry()));  // the card stays inside the window
    panel.skipButton()->click();
    QVERIFY(!panel.isVisible());
    QVERIFY(!tour.active());
  }
};

QTEST_MAIN(TestGuidedTour)
#include "test_guided_tour.moc"
