#include "inspectors/kv_tree_inspector.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTime>
#include <QScrollBar>
#include <QSet>
#include <QTreeView>
#include <QVBoxLayout>
#include <utility>

#include "bridge/background.h"
#include "bridge/engine_bridge.h"

namespace ragwb {

namespace {

// What identifies an open row across snapshots: a node's id, or a namespace (-1 - ns).
qint64 rowKey(const KvTreeModel& m, const QModelIndex& i) {
  if (const rag::KvTreeNode* n = m.node(i)) return n->id;
  if (i.data(KvTreeModel::KindRole).toInt() == static_cast<int>(KvTreeModel::RowKind::Namespace))
    return -1 - i.data(KvTreeModel::NamespaceRole).toLongLong();
  return INT64_MIN;
}

}  // namespace

KvTreeInspector::KvTreeInspector(EngineBridge* bridge, QWidget* parent)
    : QWidget(parent), m_bridge(bridge), m_model(new KvTreeModel(this)) {
  m_summary = new QLabel(tr("No prefix cache yet: run a workload with the prefix cache on."));
  m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // updates never re-lay out the dock
  m_live = new QCheckBox(tr("Live"));
  m_live->setChecked(true);
  m_live->setToolTip(tr("Refresh twice a second from the engine"));
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_summary, 1);
  bar->addWidget(m_live);
  m_view = new QTreeView;
  m_view->setModel(m_model);
  m_view->setUniformRowHeights(true);  // keeps scrolling O(visible rows) at thousands of nodes
  m_view->setAlternatingRowColors(true);
  m_view->setIndentation(14);
  m_view->setToolTip(tr("Bold: locked by a live sequence. Orange text: in the host tier. Tinted rows changed at the "
                        "last update: green new, orange moved to the host tier, blue brought back. Double-click a "
                        "\"… more\" row to unfold it."));
  // Fixed widths for the numbers (measuring contents would visit every open row at each
  // update); the text takes the rest.
  QHeaderView* header = m_view->header();
  header->setStretchLastSection(false);
  header->setMinimumSectionSize(36);
  header->setSectionResizeMode(KvTreeModel::Text, QHeaderView::Stretch);
  const int digit = fontMetrics().horizontalAdvance(QLatin1Char('0'));
  for (auto [column, chars] : {std::pair{KvTreeModel::Tokens, 5}, {KvTreeModel::SubtreeTokens, 6}, {KvTreeModel::Tier, 7},
                               {KvTreeModel::Locks, 4}, {KvTreeModel::Hits, 4}, {KvTreeModel::Priority, 5}}) {
    header->setSectionResizeMode(column, QHeaderView::Interactive);
    header->resizeSection(column, digit * chars + 10);
  }
  m_log = new QPlainTextEdit;
  m_log->setReadOnly(true);
  m_log->setMaximumBlockCount(500);
  m_log->setPlaceholderText(tr("Evictions and tier moves appear here as they happen."));
  m_log->setFixedHeight(m_log->fontMetrics().lineSpacing() * 5 + 12);
  m_prompts = new QComboBox;
  m_prompts->addItem(tr("none"));
  m_prompts->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_prompts->setMinimumContentsLength(28);
  m_prompts->setToolTip(tr("A finished request's generation stage: its prompt's path through the tree is highlighted"));
  m_pathLabel = new QLabel;
  m_pathLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* pathBar = new QHBoxLayout;
  pathBar->addWidget(new QLabel(tr("Prompt path:")));
  pathBar->addWidget(m_prompts);
  pathBar->addWidget(m_pathLabel, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(bar);
  layout->addLayout(pathBar);
  layout->addWidget(m_view, 1);
  layout->addWidget(m_log);

  connect(m_view, &QTreeView::doubleClicked, this, [this](const QModelIndex& i) { m_model->unfold(i.siblingAtColumn(0)); });
  m_timer.setInterval(500);
  connect(&m_timer, &QTimer::timeout, this, &KvTreeInspector::poll);
  connect(m_live, &QCheckBox::toggled, this, [this](bool on) {
    if (on && isVisible()) m_timer.start();
    else m_timer.stop();
  });
  connect(m_prompts, qOverload<int>(&QComboBox::activated), this, &KvTreeInspector::showPromptPath);
  if (m_bridge) {
    connect(m_bridge, &EngineBridge::kvTree, this, &KvTreeInspector::layOutInBackground);
    connect(m_bridge, &EngineBridge::requestFinished, this, &KvTreeInspector::addRequest);
  }
}

void KvTreeInspector::addRequest(const rag::RequestRecord& record) {
  constexpr size_t kChoices = 60;  // the newest generation stages offered
  std::vector<PromptChoice> added;
  for (const rag::StageTiming& s : record.stages)
    if (s.kind == rag::NodeKind::Generation && s.promptTokenIds && !s.promptTokenIds->empty())
      added.push_back({tr("#%1 %2 · %3 tokens (%4 cached)")
                           .arg(record.requestId)
                           .arg(QString::fromStdString(s.node))
                           .arg(s.promptTokenIds->size())
                           .arg(s.cachedPromptTokens),
                       s.promptTokenIds, s.cachedPromptTokens, s.attention});
  if (added.empty()) return;
  // Newest first, the shown one kept selected.
  const PromptChoice* shown = m_shownChoice > 0 ? &m_choices[static_cast<size_t>(m_shownChoice - 1)] : nullptr;
  const auto shownTokens = shown ? shown->tokens : nullptr;
  m_choices.insert(m_choices.begin(), std::make_move_iterator(added.rbegin()), std::make_move_iterator(added.rend()));
  if (m_choices.size() > kChoices) m_choices.resize(kChoices);
  m_prompts->clear();
  m_prompts->addItem(tr("none"));
  m_shownChoice = 0;
  for (size_t i = 0; i < m_choices.size(); ++i) {
    m_prompts->addItem(m_choices[i].label);
    if (shownTokens && m_choices[i].tokens == shownTokens) m_shownChoice = static_cast<int>(i) + 1;
  }
  m_prompts->setCurrentIndex(m_shownChoice);
  if (shownTokens && m_shownChoice == 0) showPromptPath(0);  // it aged out of the list
}

void KvTreeInspector::showPromptPath(int item) {
  m_shownChoice = item > 0 && item <= static_cast<int>(m_choices.size()) ? item : 0;
  m_prompts->setCurrentIndex(m_shownChoice);
  if (m_shownChoice == 0) {
    m_model->setPromptPath({});
    describePath();
    return;
  }
  const PromptChoice& c = m_choices[static_cast<size_t>(m_shownChoice - 1)];
  m_model->setPromptPath(*c.tokens);
  expandPath(true);
  describePath();
}

void KvTreeInspector::expandPath(bool scroll) {
  // Open the rows down to the deepest node on the path (and bring it into view).
  QModelIndex last;
  for (int32_t id : m_model->promptPath().nodes)
    if (QModelIndex i = m_model->indexOfNode(id); i.isValid()) last = i;
  for (QModelIndex p = last.parent(); p.isValid(); p = p.parent()) m_view->expand(p);
  if (scroll && last.isValid()) m_view->scrollTo(last, QAbstractItemView::PositionAtCenter);
  const std::vector<int32_t>& path = m_model->promptPath().nodes;
  m_pathEnd = path.empty() ? -1 : path.back();
}

void KvTreeInspector::describePath() {
  if (m_shownChoice == 0) {
    m_pathLabel->clear();
    return;
  }
  const PromptChoice& c = m_choices[static_cast<size_t>(m_shownChoice - 1)];
  const KvTreePath& p = m_model->promptPath();
  QString text = tr("%1 of %2 prompt tokens in the tree now, along %3; %4 came from the cache when it ran")
                     .arg(p.matchedTokens)
                     .arg(c.tokens->size())
                     .arg(p.nodes.size() == 1 ? tr("1 node") : tr("%1 nodes").arg(p.nodes.size()))
                     .arg(c.cachedTokens);
  if (c.attention != "causal" && !c.attention.empty())
    text += tr(" (its attention was %1: its passages' KV is kept apart from plain prompts)").arg(QString::fromStdString(c.attention));
  m_pathLabel->setText(text);
}

void KvTreeInspector::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (m_live->isChecked()) {
    m_timer.start();
    poll();
  }
}

void KvTreeInspector::hideEvent(QHideEvent* e) {
  QWidget::hideEvent(e);
  m_timer.stop();
}

void KvTreeInspector::poll() {
  if (m_bridge) m_bridge->requestKvTree();
}

void KvTreeInspector::layOutInBackground(std::vector<rag::KvTreeNode> nodes) {
  if (m_layingOut) {
    m_pending = std::move(nodes);
    return;
  }
  m_layingOut = true;
  auto* watcher = new QFutureWatcher<KvTreeLayout>(this);
  connect(watcher, &QFutureWatcher<KvTreeLayout>::finished, this, [this, watcher] {
    watcher->deleteLater();
    m_layingOut = false;
    showLayout(watcher->result());
    if (m_pending) {
      std::vector<rag::KvTreeNode> next = std::move(*m_pending);
      m_pending.reset();
      layOutInBackground(std::move(next));
    }
  });
  // The highlighted prompt's path may have grown in this snapshot: its parents are unfolded too.
  watcher->setFuture(runInBackground(
      [nodes = std::move(nodes), fold = m_model->foldParams(), unfolded = m_model->unfoldedKeys(),
       prompt = m_model->pathPrompt(), ns = m_model->pathNamespace()]() mutable {
        QSet<qint64> open = KvTreeModel::withPathParents(nodes, std::move(unfolded), prompt, ns);
        return KvTreeModel::layOut(std::move(nodes), fold, open);
      }));
}

void KvTreeInspector::showSnapshot(std::vector<rag::KvTreeNode> nodes) {
  showLayout(KvTreeModel::layOut(std::move(nodes), m_model->foldParams(), m_model->unfoldedKeys()));
}

void KvTreeInspector::showLayout(KvTreeLayout layout) {
  // Keep what the user opened and where they scrolled: a snapshot replaces the whole model.
  QSet<qint64> open;
  std::vector<QModelIndex> stack;
  for (int r = 0; r < m_model->rowCount(); ++r) stack.push_back(m_model->index(r, 0));
  while (!stack.empty()) {
    const QModelIndex i = stack.back();
    stack.pop_back();
    if (!m_view->isExpanded(i)) continue;
    open.insert(rowKey(*m_model, i));
    for (int r = 0; r < m_model->rowCount(i); ++r) stack.push_back(m_model->index(r, 0, i));
  }
  const bool first = m_model->rowCount() == 0;
  const int scroll = m_view->verticalScrollBar()->value();
  m_model->setLayout(std::move(layout));
  for (int r = 0; r < m_model->rowCount(); ++r) stack.push_back(m_model->index(r, 0));
  while (!stack.empty()) {
    const QModelIndex i = stack.back();
    stack.pop_back();
    const bool top = !i.parent().isValid();
    if (!open.contains(rowKey(*m_model, i)) && !(first && top)) continue;  // namespaces open at first
    m_view->expand(i);
    for (int r = 0; r < m_model->rowCount(i); ++r) stack.push_back(m_model->index(r, 0, i));
  }
  m_view->verticalScrollBar()->setValue(scroll);
  // A highlighted path that reaches another node in this snapshot (it grew, or was evicted to a
  // shorter one): open the rows down to it and bring it into view.
  const std::vector<int32_t>& path = m_model->promptPath().nodes;
  if ((path.empty() ? -1 : path.back()) != m_pathEnd) expandPath(true);

  const KvTreeChanges& c = m_model->changes();
  if (!c.first && c.any()) logChanges(c);
  QString text = m_model->nodeCount() == 0 ? tr("The prefix cache is empty (or off).")
                                           : tr("%1 nodes · %2 tokens cached · %3 folded rows")
                                                 .arg(m_model->nodeCount())
                                                 .arg(m_model->cachedTokens())
                                                 .arg(m_model->foldedRows());
  if (m_evicted > 0 || m_movedToHost > 0)
    text += tr(" · since opened: %1 evicted (%2 tokens), %3 moved to host").arg(m_evicted).arg(m_evictedTokens).arg(m_movedToHost);
  m_summary->setText(text);
  describePath();  // the tree changed under the highlighted path
}

void KvTreeInspector::logChanges(const KvTreeChanges& c) {
  m_evicted += static_cast<int64_t>(c.evicted.size());
  m_evictedTokens += c.evictedTokens;
  m_movedToHost += c.toHost;
  const QString now = QTime::currentTime().toString(QStringLiteral("HH:mm:ss"));
  constexpr size_t kListed = 6;  // evictions named one by one per update; the rest are counted
  for (size_t i = 0; i < c.evicted.size() && i < kListed; ++i) {
    const KvTreeChanges::Evicted& e = c.evicted[i];
    QString t = QString::fromUtf8(e.text.data(), static_cast<qsizetype>(e.text.size())).simplified();
    if (t.size() > 60) t = t.left(60) + QChar(0x2026);
    m_log->appendPlainText(tr("%1  evicted «%2» (%3 tokens, %4 hits%5)")
                               .arg(now, t)
                               .arg(e.tokens)
                               .arg(e.hits)
                               .arg(e.hostTier ? tr(", from the host tier") : QString()));
  }
  if (c.evicted.size() > kListed)
    m_log->appendPlainText(tr("%1  … and %2 more evicted").arg(now).arg(c.evicted.size() - kListed));
  if (c.toHost > 0 || c.toCompute > 0)
    m_log->appendPlainText(tr("%1  %2 moved to the host tier, %3 brought back to compute").arg(now).arg(c.toHost).arg(c.toCompute));
}

}  // namespace ragwb
