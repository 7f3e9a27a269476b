#include "plot/plot_export.h"

#include <QEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QSvgGenerator>

#include "plot/qcustomplot_include.h"

namespace ragwb {

bool savePlot(QCustomPlot* plot, const QString& path, QSize size, const QString& title) {
  if (!size.isValid() || size.isEmpty()) size = plot->size();
  if (!path.endsWith(".svg", Qt::CaseInsensitive)) return plot->savePng(path, size.width(), size.height());
  QSvgGenerator svg;
  svg.setFileName(path);
  svg.setSize(size);
  svg.setViewBox(QRect(QPoint(0, 0), size));
  svg.setTitle(title);
  QCPPainter painter;
  if (!painter.begin(&svg)) return false;
  plot->toPainter(&painter, size.width(), size.height());
  painter.end();
  return QFileInfo(path).size() > 0;
}

QString exportPlotDialog(QWidget* parent, QCustomPlot* plot, const QString& suggestedName, QString* error) {
  error->clear();
  const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export Plot"), suggestedName,
                                                    QObject::tr("PNG image (*.png);;SVG drawing (*.svg)"));
  if (path.isEmpty()) return {};
  if (!savePlot(plot, path)) {
    *error = QObject::tr("Could not write %1").arg(path);
    return {};
  }
  return path;
}

void styleAxis(QCPAxis* axis, const QPalette& pal) {
  const QColor text = pal.color(QPalette::WindowText);
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(110);
  axis->setBasePen(QPen(text));
  axis->setTickPen(QPen(text));
  axis->setSubTickPen(QPen(text));
  axis->setTickLabelColor(text);
  axis->setLabelColor(text);
  axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
  axis->grid()->setZeroLinePen(Qt::NoPen);
}

void stylePlot(QCustomPlot* plot, const QPalette& pal) {
  plot->setBackground(pal.brush(QPalette::Window));
  for (QCPAxisRect* rect : plot->axisRects()) {
    rect->setBackground(pal.brush(QPalette::Base));
    for (QCPAxis* a : rect->axes()) styleAxis(a, pal);
    for (int i = 0; i < rect->insetLayout()->elementCount(); ++i)
      if (auto* legend = qobject_cast<QCPLegend*>(rect->insetLayout()->elementAt(i))) {
        legend->setBrush(pal.brush(QPalette::Base));
        legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
        legend->setTextColor(pal.color(QPalette::WindowText));
      }
  }
}

namespace {

// Replots a plot marked stale when it is shown (one filter for every plot).
class ReplotOnShow final : public QObject {
public:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() == QEvent::Show && watched->property(kStale).toBool()) {
      watched->setProperty(kStale, false);
      static_cast<QCustomPlot*>(watched)->replot(QCustomPlot::rpQueuedReplot);
    }
    return false;
  }
  static constexpr const char* kStale = "ragwbReplotWhenShown";
};

}  // namespace

void replotWhenShown(QCustomPlot* plot) {
  if (plot->isVisible()) {
    plot->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  static ReplotOnShow* filter = new ReplotOnShow;  // lives as long as the application
  if (!plot->property(ReplotOnShow::kStale).isValid()) plot->installEventFilter(filter);
  plot->setProperty(ReplotOnShow::kStale, true);
}

}  // namespace ragwb
