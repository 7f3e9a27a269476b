// The workbench's main window: the RAGraph editor in the middle; tools in docks, registered
// through a ToolRegistry: the live pipeline timeline, the cluster heatmap, the run panel, the run
// history, the corpus overview, the KV-tree and knowledge-graph inspectors, the KV heatmap, the
// Block-attention and DepCache panels, the DRAGON and WindVE pages and the Reproduce page (the layout is saved with
// QSettings); the guided tour; menus and shortcuts; a status bar with the engine's state and
// the longest GUI-thread stall. The engine lives behind the EngineBridge, on its own threads.
#pragma once

#include <QLabel>
#include <QMainWindow>
#include <filesystem>
#include <string>

#include "bridge/engine_bridge.h"


namespace ragwb {

class OverviewPage;
class GraphEditor;
class LaneModel;
class TimelineView;
class ClusterHeatmap;
class BlockAttentionPanel;
class DepCachePanel;
class KvHeatmap;
class RunPanel;
class RunHistoryPanel;
class GuiStallMeter;
class KvTreeInspector;
class KgInspector;
class DragonPage;
class WindVePage;
class ReproducePage;
class GuidedTour;
class TourPanel;
class ToolRegistry;
struct ToolPlacement;

class MainWindow : public QMainWindow {
  Q_OBJECT
public:
  // `modelDir`: the language model the engine serves with (empty: the mode's default, see
  // EngineConfig::modelDir).
  // `device`: where generation runs (EngineConfig::device).
  explicit MainWindow(std::filesystem::path corpus, std::filesystem::path modelDir = {}, std::string device = "cpu",
                      QWidget* parent = nullptr);
  ~MainWindow() override;

  OverviewPage* overview() { return m_overview; }
  GraphEditor* editor() { return m_editor; }
  RunPanel* runPanel() { return m_runPanel; }
  TimelineView* timeline() { return m_timeline; }
  LaneModel* lanes() { return m_lanes; }
  ClusterHeatmap* heatmap() { return m_heatmap; }
  KvHeatmap* kvHeatmap() { return m_kvHeat; }
  BlockAttentionPanel* blockAttention() { return m_blocks; }
  DepCachePanel* depCache() { return m_depCache; }
  RunHistoryPanel* history() { return m_history; }
  KvTreeInspector* kvTree() { return m_kvTree; }
  KgInspector* knowledgeGraph() { return m_kg; }
  DragonPage* dragon() { return m_dragon; }
  WindVePage* windve() { return m_windve; }
  ReproducePage* reproduce() { return m_reproduce; }
  EngineBridge* bridge() { return &m_bridge; }
  GuiStallMeter* stallMeter() { return m_stall; }
  ToolRegistry* tools() { return m_tools; }
  GuidedTour* tour() { return m_tour; }
  TourPanel* tourPanel() { return m_tourPanel; }

public Q_SLOTS:
  // The guided tour (Help → Guided Tour, ragraph-workbench --tour): loads IRG into the editor,
  // runs 8 questions through it, then points at each view; skippable at every step.
  void startTour();

protected:
  void closeEvent(QCloseEvent* e) override;

private:
  void buildDocks();
  void buildMenus();
  void openCorpus();
  void exportTrace();
  void about();
  void updateStatus();
  void addTool(const QString& id, const QString& title, QWidget* widget, const ToolPlacement& where);

  std::filesystem::path m_corpus;
  EngineBridge m_bridge;
  OverviewPage* m_overview;
  GraphEditor* m_editor;
  LaneModel* m_lanes;
  TimelineView* m_timeline;
  ClusterHeatmap* m_heatmap;
  KvHeatmap* m_kvHeat;
  BlockAttentionPanel* m_blocks = nullptr;
  DepCachePanel* m_depCache = nullptr;
  RunPanel* m_runPanel;
  RunHistoryPanel* m_history;
  KvTreeInspector* m_kvTree = nullptr;
  KgInspector* m_kg = nullptr;
  DragonPage* m_dragon = nullptr;
  WindVePage* m_windve = nullptr;
  ReproducePage* m_reproduce = nullptr;
  GuidedTour* m_tour = nullptr;
  TourPanel* m_tourPanel = nullptr;
  GuiStallMeter* m_stall;
  ToolRegistry* m_tools = nullptr;
  QMenu* m_viewMenu = nullptr;
  QLabel* m_engineState;
  QLabel* m_servingState;
};

}  // namespace ragwb
