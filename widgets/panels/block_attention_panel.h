// BlockAttentionPanel: Block-Attention at work. Top, every Block-Attention generation of this
// session's finished requests with a strip of its prompt's passage blocks in order, each as wide
// as its tokens and coloured by where its KV came from (cached: reused where it was computed;
// re-encoded: reused and moved to its offset; computed by the request; hatched: loaded from the
// block store on disk); below, the block store's records. The line above says whether Block
// attention is on (the Run panel's switch) and the reuse so far.
//
//   auto* panel = new BlockAttentionPanel(&bridge);  // follows requestFinished; polls the store
//
// Block store lists are copied from the engine twice a second while the panel is visible (the
// generation worker takes them; the GUI thread only swaps the list in).
#pragma once

#include <QStyledItemDelegate>
#include <QTimer>
#include <QWidget>

#include "panels/block_attention_models.h"

class QLabel;
class QTableView;

namespace ragwb {

class EngineBridge;

// Paints BlockRequestModel's Strip column.
class BlockStripDelegate : public QStyledItemDelegate {
  Q_OBJECT
public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override;
  static QColor cachedColour();
  static QColor reencodedColour();
  static QColor computedColour();
};

class BlockAttentionPanel : public QWidget {
  Q_OBJECT
public:
  explicit BlockAttentionPanel(EngineBridge* bridge, QWidget* parent = nullptr);

  BlockRequestModel* requests() { return &m_requests; }
  BlockStoreModel* store() { return &m_store; }
  QTableView* requestView() const { return m_requestView; }
  QString statusText() const;
  // The longest GUI-thread work since construction, in the thread's CPU time (ms): one finished
  // request (its rows added), one store refresh.
  double longestRecordMs() const { return m_longestRecordMs; }
  double longestRefreshMs() const { return m_longestRefreshMs; }

public Q_SLOTS:
  void refresh();  // the store list and the status line, now

protected:
  void showEvent(QShowEvent* e) override;
  void hideEvent(QHideEvent* e) override;

private:
  EngineBridge* m_bridge;
  BlockRequestModel m_requests;
  BlockStoreModel m_store;
  QLabel* m_status;
  QTableView* m_requestView;
  QTableView* m_storeView;
  QTimer m_timer;
  double m_longestRecordMs = 0;
  double m_longestRefreshMs = 0;
};

}  // namespace ragwb
