// ToolRegistry: a tool registered by id becomes a placed dock the saved layout can find, the View
// menu lists the tools in order, and a bad registration is refused with a message naming the tool.
#include <QtTest>

#include <QAction>
#include <QDockWidget>
#include <QLabel>
#include <QMainWindow>
#include <QPointer>
#include <QSignalSpy>

#include "tools/tool_registry.h"

using ragwb::ToolRegistry;
using ragwb::ToolPlacement;
using P = ragwb::ToolPlacement;

namespace {

// The three tools of a small window: a bottom one, one beside it, and two tabbed on the right.
void registerTools(ToolRegistry& tools) {
  QVERIFY(tools.add("a", "Alpha", new QLabel("a"), P::inArea(Qt::BottomDockWidgetArea)).isOk());
  QVERIFY(tools.add("b", "Beta", new QLabel("b"), P::besideOf("a")).isOk());
  QVERIFY(tools.add("c", "Gamma", new QLabel("c"), P::inArea(Qt::RightDockWidgetArea)).isOk());
  QVERIFY(tools.add("d", "Delta", new QLabel("d"), P::tabbedWith("c")).isOk());
}

}  // namespace

class TestToolRegistry : public QObject {
  Q_OBJECT
private Q_SLOTS:
  void registersAndPlacesTools() {
    QMainWindow w;
    ToolRegistry tools(&w);
    QSignalSpy added(&tools, &ToolRegistry::toolAdded);
    registerTools(tools);
    QCOMPARE(added.count(), 4);
    QCOMPARE(added.at(3).at(0).toString(), QString("d"));
    QCOMPARE(tools.ids(), QStringList({"a", "b", "c", "d"}));

    QDockWidget* a = tools.dock("a");
    QVERIFY(a);
    QCOMPARE(a->objectName(), QString("a"));  // what saveState keys on
    QCOMPARE(a->windowTitle(), QString("Alpha"));
    QCOMPARE(qobject_cast<QLabel*>(a->widget())->text(), QString("a"));
    QCOMPARE(w.dockWidgetArea(a), Qt::BottomDockWidgetArea);
    QCOMPARE(w.dockWidgetArea(tools.dock("b")), Qt::BottomDockWidgetArea);  // beside a
    QVERIFY(!w.tabifiedDockWidgets(a).contains(tools.dock("b")));
    QCOMPARE(w.dockWidgetArea(tools.dock("d")), Qt::RightDockWidgetArea);  // tabbed with c
    QVERIFY(w.tabifiedDockWidgets(tools.dock("c")).contains(tools.dock("d")));
    QCOMPARE(tools.dock("nope"), nullptr);

    // The View menu's actions, in order; they hide and show their tool.
    const QList<QAction*> actions = tools.toggleActions();
    QCOMPARE(actions.size(), 4);
    QCOMPARE(actions[1]->text(), QString("Beta"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(tools.dock("b")->isVisible());
    actions[1]->trigger();
    QVERIFY(!tools.dock("b")->isVisible());
    QVERIFY(tools.raise("b"));
    QVERIFY(tools.dock("b")->isVisible());
    QVERIFY(!tools.raise("nope"));
  }

  void refusesBadRegistrations() {
    QMainWindow w;
    ToolRegistry tools(&w);
    QSignalSpy added(&tools, &ToolRegistry::toolAdded);
    QVERIFY(tools.add("a", "Alpha", new QLabel, P::inArea(Qt::LeftDockWidgetArea)).isOk());
    auto refused = [&tools](const QString& id, const QString& title, QWidget* w, const ToolPlacement& where,
                            const char* why) {
      QPointer<QWidget> widget = w;
      auto r = tools.add(id, title, w, where);
      QVERIFY2(!r.isOk(), why);
      const QString message = QString::fromStdString(r.status().message());
      QVERIFY2(message.contains(QString("'%1'").arg(id)), qPrintable(message));
      QVERIFY2(message.contains(why), qPrintable(message));
      QVERIFY(widget.isNull() || widget->parent() == nullptr);  // not taken: the caller keeps it
      delete widget.data();
    };
    const P left = P::inArea(Qt::LeftDockWidgetArea);
    refused("a", "Again", new QLabel, left, "another tool has this id");
    refused("", "No id", new QLabel, left, "no id");
    refused("t", "", new QLabel, left, "no title");
    refused("w", "No widget", nullptr, left, "no widget");
    refused("x", "X", new QLabel, P::tabbedWith("later"), "'later', which is not registered before it");
    refused("y", "Y", new QLabel, P::besideOf("missing"), "'missing', which is not registered before it");
    QCOMPARE(added.count(), 1);
    QCOMPARE(tools.ids(), QStringList({"a"}));
    QCOMPARE(w.findChildren<QDockWidget*>().size(), 1);
  }

  // The ids are what a saved layout refers to: a window built again with the same tools gets
  // back what the user hid.
  void savedLayoutRestoresByToolId() {
    QByteArray state;
    {
      QMainWindow w;
      ToolRegistry tools(&w);
      registerTools(tools);
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      tools.dock("c")->hide();
      state = w.saveState();
    }
    QMainWindow w;
    ToolRegistry tools(&w);
    registerTools(tools);
    QVERIFY(w.restoreState(state));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QVERIFY(!tools.dock("c")->isVisible());
    QVERIFY(tools.dock("a")->isVisible());
  }
};

QTEST_MAIN(TestToolRegistry)
#include "test_tool_registry.moc"
