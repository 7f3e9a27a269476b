#include "panels/block_attention_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "bridge/engine_bridge.h"
#include "bridge/gui_stall_meter.h"

namespace ragwb {

// Okabe–Ito, as the KV heatmap: passage blocks green there, so reuse is green here.
QColor BlockStripDelegate::cachedColour() { return QColor(0x00, 0x9e, 0x73); }
QColor BlockStripDelegate::reencodedColour() { return QColor(0x56, 0xb4, 0xe9); }
QColor BlockStripDelegate::computedColour() { return QColor(0xe6, 0x9f, 0x00); }

void BlockStripDelegate::paint(QPainter* p, const QStyleOptionViewItem& option, const QModelIndex& index) const {
  QStyledItemDelegate::paint(p, option, index);  // selection background
  const auto* model = qobject_cast<const BlockRequestModel*>(index.model());
  if (!model) return;
  const std::vector<rag::SegmentKvUse>& segs = model->segments(index.row());
  int64_t total = 0;
  for (const rag::SegmentKvUse& s : segs) total += s.tokens;
  if (total <= 0) return;
  const QRectF r = QRectF(option.rect).adjusted(2, 3, -2, -3);
  p->save();
  p->setRenderHint(QPainter::Antialiasing, false);
  double x = r.left();
  for (const rag::SegmentKvUse& s : segs) {
    const double w = r.width() * static_cast<double>(s.tokens) / static_cast<double>(total);
    const int64_t reused = s.cachedTokens + s.storedTokens;
    const double wr = s.tokens > 0 ? w * static_cast<double>(reused) / static_cast<double>(s.tokens) : 0;
    const QColor reuse = s.reencoded ? reencodedColour() : cachedColour();
    if (wr > 0) p->fillRect(QRectF(x, r.top(), wr, r.height()), reuse);
    if (s.storedTokens > 0) {  // the tokens the block store supplied, hatched (they follow the cached ones)
      const double ws = w * static_cast<double>(s.storedTokens) / static_cast<double>(s.tokens);
      p->fillRect(QRectF(x + wr - ws, r.top(), ws, r.height()), QBrush(QColor(0, 0, 0, 110), Qt::BDiagPattern));
    }
    if (w - wr > 0) p->fillRect(QRectF(x + wr, r.top(), w - wr, r.height()), computedColour());
    x += w;
    if (w >= 3) {  // block boundaries
      p->setPen(QPen(option.palette.color(QPalette::Base), 1));
      p->drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
    }
  }
  p->restore();
}

QSize BlockStripDelegate::sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const {
  QSize s = QStyledItemDelegate::sizeHint(option, index);
  return {std::max(s.width(), 240), s.height()};
}

BlockAttentionPanel::BlockAttentionPanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  m_status = new QLabel;
  m_status->setWordWrap(true);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(m_status);
  auto swatch = [](const QColor& c, const QString& label, bool hatched = false) {
    return QStringLiteral("<span style='color:%1'>%2</span>&nbsp;%3")
        .arg(c.name(), hatched ? QStringLiteral("&#9636;") : QStringLiteral("&#9632;"), label);
  };
  auto* legend = new QLabel(QStringList{swatch(BlockStripDelegate::cachedColour(), tr("cached")),
                                        swatch(BlockStripDelegate::reencodedColour(), tr("re-encoded to its offset")),
                                        swatch(BlockStripDelegate::computedColour(), tr("computed")),
                                        swatch(QColor(0x55, 0x55, 0x55), tr("from the block store (hatched)"), true)}
                                .join(QStringLiteral("&nbsp;&nbsp; ")));
  legend->setTextFormat(Qt::RichText);
  layout->addWidget(legend);

  auto* split = new QSplitter(Qt::Vertical);
  m_requestView = new QTableView;
  m_requestView->setModel(&m_requests);
  m_requestView->setItemDelegateForColumn(BlockRequestModel::Strip, new BlockStripDelegate(m_requestView));
  m_requestView->setSelectionBehavior(QAbstractItemView::SelectRows);
  m_requestView->verticalHeader()->hide();
  m_requestView->verticalHeader()->setDefaultSectionSize(22);
  m_requestView->horizontalHeader()->setStretchLastSection(true);
  m_requestView->setToolTip(tr("Each generation's passage blocks in prompt order, as wide as their tokens"));
  m_storeView = new QTableView;
  m_storeView->setModel(&m_store);
  m_storeView->verticalHeader()->hide();
  m_storeView->verticalHeader()->setDefaultSectionSize(22);
  m_storeView->horizontalHeader()->setStretchLastSection(true);
  split->addWidget(m_requestView);
  split->addWidget(m_storeView);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  connect(bridge, &EngineBridge::requestFinished, this, [this](const rag::RequestRecord& r) {
    const double cpu0 = GuiStallMeter::threadCpuMs();
    // Follow new rows while the last one is in view (a user reading older rows keeps them).
    const int bottom = m_requestView->rowAt(m_requestView->viewport()->height() - 1);
    const bool follow = bottom < 0 || bottom >= m_requests.rowCount() - 1;
    m_requests.addRecord(r);
    if (follow) m_requestView->scrollToBottom();
    m_longestRecordMs = std::max(m_longestRecordMs, GuiStallMeter::threadCpuMs() - cpu0);
  });
  connect(bridge, &EngineBridge::engineReady, this, &BlockAttentionPanel::refresh);
  m_timer.setInterval(500);
  connect(&m_timer, &QTimer::timeout, this, &BlockAttentionPanel::refresh);
  refresh();
}

QString BlockAttentionPanel::statusText() const {
  if (!m_bridge->isEngineReady()) return tr("Waiting for the engine…");
  if (!m_bridge->config().blockAttention)
    return tr("Block attention is off: tick Block attention in the Run panel (the engine reloads with "
              "rag-llama-block) to read retrieved passages as blocks.");
  const rag::ServingStats s = m_bridge->stats();
  QString text = tr("Block attention on: %1 of %2 passage-block tokens reused (%3 %), %4 of them from the block store")
                     .arg(s.blockHitTokens)
                     .arg(s.blockTokens)
                     .arg(s.blockTokens > 0 ? 100.0 * s.blockHitTokens / s.blockTokens : 0.0, 0, 'f', 1)
                     .arg(s.blockStoreHitTokens);
  text += tr("; the block store holds %1 passages (%2).")
              .arg(m_store.rowCount())
              .arg(QLocale().formattedDataSize(m_store.totalBytes(), 1, QLocale::DataSizeTraditionalFormat));
  if (!s.blockStoreNotice.empty()) text += QLatin1Char(' ') + QString::fromStdString(s.blockStoreNotice);
  return text;
}

void BlockAttentionPanel::refresh() {
  const double cpu0 = GuiStallMeter::threadCpuMs();
  m_store.setEntries(m_bridge->blockStoreEntries());
  m_status->setText(statusText());
  m_longestRefreshMs = std::max(m_longestRefreshMs, GuiStallMeter::threadCpuMs() - cpu0);
}

void BlockAttentionPanel::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  refresh();
  m_timer.start();
}

void BlockAttentionPanel::hideEvent(QHideEvent* e) {
  QWidget::hideEvent(e);
  m_timer.stop();
}

}  // namespace ragwb
