#include "inspectors/kg_inspector.h"

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QCompleter>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QShowEvent>
#include <QSpinBox>
#include <QSplitter>
#include <QStringListModel>
#include <QTextBrowser>
#include <QTreeView>
#include <QVBoxLayout>
#include <utility>

#include "bridge/background.h"
#include "bridge/engine_bridge.h"

namespace ragwb {

namespace {

constexpr int kCompletions = 40;

// Runs `fn` on Qt's pool and hands its result to `done` on `ctx`'s thread (dropped if `ctx` goes).
template <class Fn, class Done>
void inBackground(QObject* ctx, Fn fn, Done done) {
  using T = decltype(fn());
  auto* w = new QFutureWatcher<T>(ctx);
  QObject::connect(w, &QFutureWatcher<T>::finished, ctx, [w, done = std::move(done)] {
    done(w->result());
    w->deleteLater();
  });
  w->setFuture(runInBackground(std::move(fn)));
}

}  // namespace

KgInspector::KgInspector(EngineBridge* bridge, QWidget* parent)
    : QWidget(parent),
      m_bridge(bridge),
      m_graph(new KgGraphModel(this)),
      m_relations(new KgRelationModel(this)),
      m_requests(new KgRequestModel(this)) {
  m_search = new QLineEdit;
  m_search->setPlaceholderText(tr("Entity name, e.g. dog (completes as you type)"));
  m_search->setClearButtonEnabled(true);
  m_completions = new QStringListModel(this);
  m_completer = new QCompleter(m_completions, this);
  m_completer->setCaseSensitivity(Qt::CaseInsensitive);
  m_completer->setCompletionMode(QCompleter::PopupCompletion);
  m_completer->setMaxVisibleItems(15);
  m_search->setCompleter(m_completer);
  m_senses = new QComboBox;
  m_senses->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_senses->setMinimumContentsLength(24);
  m_senses->setToolTip(tr("The entities of this name (senses); pick one to show it"));
  m_maxEdges = new QSpinBox;
  m_maxEdges->setRange(5, 500);
  m_maxEdges->setValue(40);
  m_maxEdges->setPrefix(tr("≤ "));
  m_maxEdges->setSuffix(tr(" edges per node"));
  auto* show = new QPushButton(tr("Show"));
  m_follow = new QCheckBox(tr("Follow requests"));
  m_follow->setChecked(true);
  m_follow->setToolTip(tr("Show each finished request's first subgraph as it arrives"));
  auto* bar = new QHBoxLayout;
  bar->addWidget(m_search, 2);
  bar->addWidget(show);
  bar->addWidget(m_senses, 2);
  bar->addWidget(m_maxEdges);
  bar->addWidget(m_follow);

  m_view = new KgGraphView(m_graph, m_relations);
  m_relationView = new QListView;
  m_relationView->setModel(m_relations);
  m_relationView->setToolTip(tr("Relation types in view: untick to hide"));
  auto* showAll = new QPushButton(tr("All relations"));
  auto* relBox = new QWidget;
  auto* rl = new QVBoxLayout(relBox);
  rl->setContentsMargins(0, 0, 0, 0);
  rl->addWidget(new QLabel(tr("Relations")));
  rl->addWidget(m_relationView, 1);
  rl->addWidget(showAll);
  m_requestView = new QTreeView;
  m_requestView->setModel(m_requests);
  m_requestView->setUniformRowHeights(true);
  m_requestView->header()->setSectionResizeMode(QHeaderView::Interactive);
  m_requestView->setColumnWidth(KgRequestModel::Item, 260);
  auto* reqBox = new QWidget;
  auto* ql = new QVBoxLayout(reqBox);
  ql->setContentsMargins(0, 0, 0, 0);
  ql->addWidget(new QLabel(tr("Requests: entities linked, paths kept and pruned")));
  ql->addWidget(m_requestView, 1);
  m_passages = new QTextBrowser;
  m_passages->setPlaceholderText(tr("Click a node to read its passages."));

  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(relBox);
  left->addWidget(reqBox);
  left->setStretchFactor(1, 2);
  auto* right = new QSplitter(Qt::Vertical);
  right->addWidget(m_view);
  right->addWidget(m_passages);
  right->setStretchFactor(0, 4);
  right->setStretchFactor(1, 1);
  right->setSizes({640, 160});
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(1, 3);
  split->setSizes({440, 960});
  m_status = new QLabel(tr("The knowledge graph opens when this tool is first shown."));
  m_status->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(bar);
  layout->addWidget(split, 1);
  layout->addWidget(m_status);

  connect(m_search, &QLineEdit::textEdited, this, &KgInspector::updateCompletions);
  connect(m_search, &QLineEdit::returnPressed, this, [this] { search(m_search->text()); });
  connect(m_completer, qOverload<const QString&>(&QCompleter::activated), this, [this](const QString& s) { search(s); });
  connect(show, &QPushButton::clicked, this, [this] { search(m_search->text()); });
  connect(m_senses, qOverload<int>(&QComboBox::activated), this, [this](int i) {
    if (i >= 0) showEntity(m_senses->itemData(i).toInt());
  });
  connect(showAll, &QPushButton::clicked, m_relations, &KgRelationModel::showAll);
  connect(m_graph, &KgGraphModel::graphChanged, this, [this] { m_relations->setCounts(m_graph->relationCounts()); });
  connect(m_view, &KgGraphView::expandRequested, this, &KgInspector::expandEntity);
  connect(m_view, &KgGraphView::entityClicked, this, &KgInspector::showPassages);
  connect(m_view, &KgGraphView::layoutFailed, this, [this](const QString& m) { setStatus(tr("Layout failed: %1").arg(m)); });
  connect(m_view, &KgGraphView::layoutApplied, this, [this] {
    setStatus(tr("%1 entities, %2 edges drawn%3 · Graphviz layout · double-click a node to expand it")
                  .arg(m_view->drawnNodes())
                  .arg(m_view->drawnEdges())
                  .arg(m_graph->cutEdges() <= 0      ? QString()
                       : m_graph->fromRequest() ? tr(" (the request's fan-out cap skipped %1 edges)").arg(m_graph->cutEdges())
                                                : tr(" (%1 more edges not shown)").arg(m_graph->cutEdges())));
  });
  connect(m_requestView->selectionModel(), &QItemSelectionModel::currentChanged, this,
          [this](const QModelIndex& i) { showRequestRow(i); });
  if (m_bridge) connect(m_bridge, &EngineBridge::requestFinished, this, &KgInspector::addRequest);
  m_search->setEnabled(false);
}

KgInspector::~KgInspector() = default;

void KgInspector::setStatus(const QString& text) { m_status->setText(text); }
QString KgInspector::statusText() const { return m_status->text(); }
QString KgInspector::passagesText() const { return m_passages->toPlainText(); }
void KgInspector::setFollowRequests(bool on) { m_follow->setChecked(on); }

rag::NeighbourhoodParams KgInspector::neighbourhoodParams() const {
  return {.maxEdges = m_maxEdges->value(), .incoming = true};
}

void KgInspector::setCorpus(std::filesystem::path corpus) {
  if (corpus == m_corpus && (m_explorer || m_opening)) return;
  m_corpus = std::move(corpus);
  m_explorer.reset();
  m_search->setEnabled(false);
  if (isVisible()) openExplorer();
}

void KgInspector::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (!m_explorer && !m_opening && !m_corpus.empty()) openExplorer();
}

void KgInspector::openExplorer() {
  if (m_opening || m_corpus.empty()) return;
  m_opening = true;
  setStatus(tr("Reading the knowledge graph of %1…").arg(QString::fromStdString(m_corpus.string())));
  inBackground(this, [corpus = m_corpus] { return rag::KnowledgeExplorer::open(corpus); },
               [this](rag::Result<std::shared_ptr<const rag::KnowledgeExplorer>> r) {
                 m_opening = false;
                 if (!r) {
                   const QString m = tr("The knowledge graph is not available: %1").arg(QString::fromStdString(r.status().message()));
                   setStatus(m);
                   Q_EMIT failed(m);
                   return;
                 }
                 setExplorer(std::move(*r));
               });
}

void KgInspector::setExplorer(std::shared_ptr<const rag::KnowledgeExplorer> explorer) {
  m_explorer = std::move(explorer);
  m_search->setEnabled(m_explorer != nullptr);
  if (!m_explorer) return;
  setStatus(tr("Knowledge graph: %L1 entities, %L2 typed edges, %3 relation types. Search an entity.")
                .arg(m_explorer->entityCount())
                .arg(m_explorer->edgeCount())
                .arg(m_explorer->relationNames().size()));
  Q_EMIT explorerReady();
}

void KgInspector::updateCompletions(const QString& text) {
  if (!m_explorer) return;
  QStringList names;
  for (const rag::KgNameMatch& m : m_explorer->complete(text.toStdString(), kCompletions))
    names << QString::fromStdString(m.name);
  m_completions->setStringList(names);
}

void KgInspector::search(const QString& name) {
  const QString n = name.trimmed();
  if (!m_explorer) {
    Q_EMIT failed(tr("The knowledge graph is not open yet."));
    return;
  }
  if (n.isEmpty()) return;
  rag::Result<std::vector<rag::KgEntity>> found = m_explorer->find(n.toStdString());
  if (!found) {
    const QString m = QString::fromStdString(found.status().message());
    setStatus(m);
    Q_EMIT failed(m);
    return;
  }
  m_senses->clear();
  for (const rag::KgEntity& e : *found)
    m_senses->addItem(QStringLiteral("%1 · %2 #%3").arg(QString::fromStdString(e.name), QString::fromLatin1(rag::kgEntityKindName(e.kind))).arg(e.id), e.id);
  // The glosses tell the senses apart: read in the background, filled in when they come.
  std::vector<int32_t> ids;
  for (const rag::KgEntity& e : *found) ids.push_back(e.id);
  inBackground(this, [kg = m_explorer, ids] {
        std::vector<std::string> glosses;
        for (int32_t id : ids) {
          rag::Result<std::string> g = kg->gloss(id, 90);
          glosses.push_back(g ? *g : std::string());
        }
        return glosses;
      },
      [this, ids](const std::vector<std::string>& glosses) {  // the box may hold another name's senses by now
        for (int i = 0; i < m_senses->count() && i < static_cast<int>(glosses.size()); ++i)
          if (m_senses->itemData(i).toInt() == ids[static_cast<size_t>(i)] && !glosses[static_cast<size_t>(i)].empty())
            m_senses->setItemText(i, m_senses->itemText(i) + QStringLiteral(" — ") + QString::fromStdString(glosses[static_cast<size_t>(i)]));
      });
  showEntity(found->front().id);
}

void KgInspector::showEntity(int32_t id) { fetchNeighbourhood(id, false); }

void KgInspector::expandEntity(int32_t id) {
  if (!m_graph->contains(id)) return showEntity(id);
  if (m_graph->isExpanded(id) && !m_graph->fromRequest()) {
    setStatus(tr("%1 is already expanded.").arg(QString::fromStdString(m_graph->entity(id)->name)));
    return;
  }
  fetchNeighbourhood(id, true);
}

void KgInspector::fetchNeighbourhood(int32_t id, bool expand) {
  if (!m_explorer) {
    Q_EMIT failed(tr("The knowledge graph is not open yet."));
    return;
  }
  const int serial = ++m_fetchSerial;
  setStatus(tr("Reading the neighbourhood of entity %1…").arg(id));
  inBackground(this, [kg = m_explorer, id, p = neighbourhoodParams()] { return kg->neighbourhood(id, p); },
               [this, id, expand, serial](rag::Result<rag::KgNeighbourhood> r) {
                 if (!r) {
                   const QString m = QString::fromStdString(r.status().message());
                   setStatus(m);
                   Q_EMIT failed(m);
                   return;
                 }
                 if (expand) {
                   if (!m_graph->expand(*r)) m_graph->showNeighbourhood(*r);
                 } else {
                   if (serial != m_fetchSerial) return;  // a newer search replaced this one
                   m_graph->showNeighbourhood(*r);
                   m_view->setHighlightedPath({});
                 }
                 Q_EMIT neighbourhoodShown(id);
                 showPassages(id);
               });
}

void KgInspector::showPassages(int32_t id) {
  if (!m_explorer) return;
  inBackground(this, [kg = m_explorer, id] { return std::make_pair(kg->entity(id), kg->passages(id)); },
               [this, id](const std::pair<rag::Result<rag::KgEntity>, rag::Result<std::vector<rag::KgPassage>>>& r) {
                 if (!r.first || !r.second) {
                   const QString m = QString::fromStdString((!r.first ? r.first.status() : r.second.status()).message());
                   m_passages->setPlainText(m);
                   Q_EMIT failed(m);
                   return;
                 }
                 QString html = QStringLiteral("<h3>%1 <small>(%2, entity %3)</small></h3>")
                                    .arg(QString::fromStdString(r.first->name).toHtmlEscaped(),
                                         QString::fromLatin1(rag::kgEntityKindName(r.first->kind)))
                                    .arg(id);
                 if (r.second->empty())
                   html += tr("<p><i>No passage describes this %1; its senses (lemma_of edges) have theirs.</i></p>")
                               .arg(QString::fromLatin1(rag::kgEntityKindName(r.first->kind)));
                 for (const rag::KgPassage& p : *r.second)
                   html += QStringLiteral("<p><b>%1</b> <small>passage %2</small><br>%3</p>")
                               .arg(QString::fromStdString(p.title).toHtmlEscaped())
                               .arg(p.id)
                               .arg(QString::fromStdString(p.text).toHtmlEscaped());
                 m_passages->setHtml(html);
                 Q_EMIT passagesShown(id);
               });
}

void KgInspector::showRequestRow(const QModelIndex& index) {
  if (!index.isValid()) return;
  QModelIndex row = index.siblingAtColumn(0);
  if (m_requests->kind(row) == KgRequestModel::RowKind::Request) {
    // The request's first expanded entity.
    for (int i = 0; i < m_requests->rowCount(row); ++i) {
      const QModelIndex child = m_requests->index(i, 0, row);
      if (m_requests->subgraphAt(child)) {
        row = child;
        break;
      }
    }
  }
  const rag::KgSubgraphUse* g = m_requests->subgraphAt(row);
  if (!g) {
    if (const rag::KgLink* l = m_requests->linkAt(row)) showEntity(l->entity.id);  // a candidate: its neighbourhood
    return;
  }
  m_graph->showSubgraph(*g);
  std::vector<int32_t> hi;
  if (const rag::KgPathUse* p = m_requests->pathAt(row))
    for (const rag::KgEntity& e : p->entities) hi.push_back(e.id);
  m_view->setHighlightedPath(std::move(hi));
  showPassages(g->root.entity.id);
}

void KgInspector::addRequest(const rag::RequestRecord& record) {
  QElapsedTimer clock;
  clock.start();
  struct Note {  // on every way out
    QElapsedTimer& c;
    double& longest;
    ~Note() { longest = std::max(longest, static_cast<double>(c.nsecsElapsed()) * 1e-6); }
  } note{clock, m_longestRequestMs};
  if (!m_requests->addRecord(record) || !m_follow->isChecked()) return;
  // Open the request and select its first expanded entity: currentChanged draws that subgraph.
  const QModelIndex req = m_requests->indexOfRequest(record.requestId);
  QModelIndex pick = req;
  for (int i = 0; i < m_requests->rowCount(req); ++i)
    if (m_requests->subgraphAt(m_requests->index(i, 0, req))) {
      pick = m_requests->index(i, 0, req);
      break;
    }
  // Close only what following the previous request opened: collapseAll() laid out every row of
  // the tree again on each finished request, and closed what the user had opened.
  for (const QPersistentModelIndex& opened : std::exchange(m_followOpened, {}))
    if (opened.isValid()) m_requestView->collapse(opened);
  m_requestView->expand(req);
  m_followOpened.push_back(req);
  if (pick != req) {
    m_requestView->expand(pick);
    m_followOpened.push_back(pick);
  }
  m_requestView->setCurrentIndex(pick);
  m_requestView->scrollTo(pick);
}

}  // namespace ragwb
