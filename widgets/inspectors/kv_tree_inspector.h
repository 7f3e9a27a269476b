// The KV-tree inspector: the generation worker's prefix KV tree, live, as a folded tree
// (KvTreeModel) with a summary line. While it is visible and Live is on it asks the bridge for a
// snapshot twice a second; the snapshot is taken and laid out off the GUI thread, which only
// swaps the rows in, and the rows the user opened stay open across updates. Double-click a
// "… more" row to unfold it. Bold rows are locked by a live sequence, orange text lives in the
// host tier. Each update is compared with the one before: rows added since are tinted green,
// rows that just moved to the host tier orange (back to compute: blue), and the log under the
// tree lists the evictions and tier moves as they happen, with totals in the summary line.
// "Prompt path" lists the generation stages of the requests that finished: choosing one
// highlights (yellow) the nodes its prompt runs through in the tree now, unfolded and scrolled
// to, and says how many of its tokens the tree holds.
//
//   auto* inspector = new ragwb::KvTreeInspector(&bridge);
//   tools.add("kvTreeDock", tr("KV tree"), inspector, ToolPlacement::tabbedWith("heatmapDock"));
#pragma once

#include <QTimer>
#include <QWidget>
#include <memory>
#include <optional>
#include <vector>

#include "inspectors/kv_tree_model.h"
#include "rag/engine.h"
#include "rag/run_store.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPlainTextEdit;
class QTreeView;

namespace ragwb {

class EngineBridge;

class KvTreeInspector : public QWidget {
  Q_OBJECT
public:
  explicit KvTreeInspector(EngineBridge* bridge, QWidget* parent = nullptr);

  KvTreeModel* model() const { return m_model; }
  QTreeView* view() const { return m_view; }
  QPlainTextEdit* changeLog() const { return m_log; }
  int64_t evictedSinceOpened() const { return m_evicted; }
  QComboBox* promptChoice() const { return m_prompts; }
  QLabel* pathLabel() const { return m_pathLabel; }
  // A finished request: its generation stages join the prompt-path choices (newest first).
  void addRequest(const rag::RequestRecord& record);
  // Highlights the prompt of choice `item` (0: none) in the tree.
  void showPromptPath(int item);
  // Lays out and shows `nodes` on the calling thread (tests and the benchmark; bridge polls are
  // laid out on Qt's pool and shown with showLayout).
  void showSnapshot(std::vector<rag::KvTreeNode> nodes);
  // Shows a layout made by KvTreeModel::layOut with the model's fold settings, keeping the rows
  // the user opened and the scroll position: the GUI thread's share of an update.
  void showLayout(KvTreeLayout layout);

protected:
  void showEvent(QShowEvent* e) override;
  void hideEvent(QHideEvent* e) override;

private:
  void poll();
  void logChanges(const KvTreeChanges& c);
  void layOutInBackground(std::vector<rag::KvTreeNode> nodes);
  void describePath();
  void expandPath(bool scroll);

  EngineBridge* m_bridge;
  KvTreeModel* m_model;
  QTreeView* m_view;
  QLabel* m_summary;
  QCheckBox* m_live;
  QPlainTextEdit* m_log;
  QComboBox* m_prompts;
  QLabel* m_pathLabel;
  struct PromptChoice {
    QString label;
    std::shared_ptr<const std::vector<int32_t>> tokens;
    int64_t cachedTokens = 0;  // what the prefix cache gave it when it ran
    std::string attention;
  };
  std::vector<PromptChoice> m_choices;  // combo item i + 1, newest first
  int m_shownChoice = 0;
  int32_t m_pathEnd = -1;  // the deepest path node opened in the view so far
  int64_t m_evicted = 0, m_evictedTokens = 0, m_movedToHost = 0;  // since the inspector opened
  QTimer m_timer;
  bool m_layingOut = false;
  std::optional<std::vector<rag::KvTreeNode>> m_pending;  // arrived while laying out: the newest
};

}  // namespace ragwb
