// Saving a QCustomPlot as PNG or SVG (by the file's suffix), styling one in the palette's
// colours, and replotting only what is on screen, for every plot the workbench shows.
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

// Replots `plot` on the next pass of the event loop when it is on screen; when it is not (a dock
// behind another's tab, a closed panel) when it is next shown. A replot draws every layer even
// for a hidden plot: the heatmaps' took up to 14.7 ms of the GUI thread during `--demo-kg`,
// with the knowledge graph in front. Exporting is unaffected: it draws from the data.
void replotWhenShown(QCustomPlot* plot);

}  // namespace ragwb
