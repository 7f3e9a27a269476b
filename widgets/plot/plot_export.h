// Saving a QCustomPlot as PNG or SVG (by the file's suffix), and styling one in the palette's
// colours, for every plot the workbench shows.
#pragma once

#include <QSize>
#include <QString>

class QCPAxis;
class QCustomPlot;
class QPalette;
class QWidget;

namespace ragwb {

// Writes `plot` to `path` at `size` (an empty size: the plot's own); ".svg" gives vector output,
// anything else PNG. False when the file could not be written.
bool savePlot(QCustomPlot* plot, const QString& path, QSize size = {}, const QString& title = {});
// Asks for a file (PNG or SVG) and saves; returns the path written, empty when cancelled or failed
// (`error` then says why, empty when cancelled).
QString exportPlotDialog(QWidget* parent, QCustomPlot* plot, const QString& suggestedName, QString* error);

// The palette's text colour on an axis's line, ticks and labels and a dotted grid, so the
// heatmaps follow light and dark themes alike.
void styleAxis(QCPAxis* axis, const QPalette& pal);
// The whole plot in the palette's colours: its background, every axis rect's background and
// axes (styleAxis), and every legend in the rects' inset layouts.
void stylePlot(QCustomPlot* plot, const QPalette& pal);

}  // namespace ragwb
