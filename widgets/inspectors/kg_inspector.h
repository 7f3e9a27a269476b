// The knowledge-graph inspector: search an entity (completion over the graph's entity names;
// a name with several senses offers them with their glosses), see its neighbourhood laid out
// (kg_graph_view.h), filter the typed, coloured relations, double-click a node to expand it,
// click one to read its passages; and, for each finished request of a workflow with a knowledge
// node, the entities it linked and the paths of its subgraphs, kept or pruned, with their scores
// (select a row to draw that subgraph; a path row is drawn highlighted).
//
// Everything that touches the graph runs on Qt's thread pool: opening the explorer (reading the
// whole graph), neighbourhoods, passages and glosses, and the layout. The GUI thread only swaps
// results in. Name completion reads the explorer's sorted name list in place (a binary search).
//
//   auto* kg = new ragwb::KgInspector(&bridge);
//   kg->setCorpus(corpusPath);                 // opened when first shown
//   tools.add("kgDock", tr("Knowledge graph"), kg, ToolPlacement::tabbedWith("kvTreeDock"));
#pragma once

#include <QPersistentModelIndex>
#include <QWidget>
#include <filesystem>
#include <memory>
#include <vector>

#include "inspectors/kg_graph_model.h"
#include "inspectors/kg_graph_view.h"
#include "inspectors/kg_request_model.h"
#include "rag/knowledge.h"
#include "rag/run_store.h"

class QCheckBox;
class QComboBox;
class QCompleter;
class QLabel;
class QLineEdit;
class QListView;
class QSpinBox;
class QStringListModel;
class QTextBrowser;
class QTreeView;

namespace ragwb {

class EngineBridge;

class KgInspector : public QWidget {
  Q_OBJECT
public:
  explicit KgInspector(EngineBridge* bridge, QWidget* parent = nullptr);
  ~KgInspector() override;

  // The corpus whose graph to explore; opened in the background now if the inspector is
  // visible, else when it is first shown (or by openExplorer()).
  void setCorpus(std::filesystem::path corpus);
  void openExplorer();
  // Use an explorer opened elsewhere (tests share one).
  void setExplorer(std::shared_ptr<const rag::KnowledgeExplorer> explorer);
  const rag::KnowledgeExplorer* explorer() const { return m_explorer.get(); }

  // Looks `name` up and shows the neighbourhood of its first sense (its other senses go into the
  // sense box); an unknown name leaves the view as it is and says so (failed()).
  void search(const QString& name);
  void showEntity(int32_t id);     // a fresh neighbourhood
  void expandEntity(int32_t id);   // merges the entity's neighbourhood into the view
  void showPassages(int32_t id);
  // A request row of requests(): its first expanded subgraph (a link or path row: that one).
  void showRequestRow(const QModelIndex& index);
  // Adds a finished request (when it used a knowledge node); with "Follow" on, shows it.
  void addRequest(const rag::RequestRecord& record);

  KgGraphModel* graph() const { return m_graph; }
  KgRelationModel* relations() const { return m_relations; }
  KgRequestModel* requests() const { return m_requests; }
  KgGraphView* view() const { return m_view; }
  QStringListModel* completions() const { return m_completions; }
  QTreeView* requestView() const { return m_requestView; }
  QComboBox* senses() const { return m_senses; }
  QLineEdit* searchBox() const { return m_search; }
  QString passagesText() const;
  QString statusText() const;
  void setFollowRequests(bool on);
  // The longest the GUI thread spent on one finished request (adding it, drawing its subgraph's
  // model) and on one layout's scene items, in ms: the inspector's share of a GUI stall.
  double longestRequestMs() const { return m_longestRequestMs; }
  double longestApplyMs() const { return m_view->longestApplyMs(); }

Q_SIGNALS:
  void explorerReady();
  void neighbourhoodShown(int32_t id);  // after a showEntity or expandEntity landed in the model
  void passagesShown(int32_t id);
  void failed(const QString& message);  // unknown names, failed loads: also shown in the status line

protected:
  void showEvent(QShowEvent* e) override;

private:
  void updateCompletions(const QString& text);
  void fetchNeighbourhood(int32_t id, bool expand);
  void setStatus(const QString& text);
  rag::NeighbourhoodParams neighbourhoodParams() const;

  EngineBridge* m_bridge;
  std::filesystem::path m_corpus;
  std::shared_ptr<const rag::KnowledgeExplorer> m_explorer;
  bool m_opening = false;
  KgGraphModel* m_graph;
  KgRelationModel* m_relations;
  KgRequestModel* m_requests;
  KgGraphView* m_view;
  QLineEdit* m_search;
  QCompleter* m_completer;
  QStringListModel* m_completions;
  QComboBox* m_senses;
  QSpinBox* m_maxEdges;
  QCheckBox* m_follow;
  QListView* m_relationView;
  QTreeView* m_requestView;
  QTextBrowser* m_passages;
  QLabel* m_status;
  std::vector<QPersistentModelIndex> m_followOpened;  // rows the last followed request expanded
  int m_fetchSerial = 0;
  double m_longestRequestMs = 0;  // the newest neighbourhood fetch; older answers are dropped
};

}  // namespace ragwb
