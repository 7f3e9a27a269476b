// The papers' headline figures the Reproduce page can run: for each, the `ragraph bench ...`
// arguments that reproduce it (the quick preset where the bench has one), the numbers the paper reports (reference data,
// each with the figure or table it comes from) and how to read the same quantities out of the
// bench's JSON. Our numbers always come from a run; only the paper's are written here.
//
//   for (const ragwb::PaperFigure& f : ragwb::paperFigures()) ...
//   ragwb::FigurePoints ours = figure.extract(benchJson);   // error: the JSON lacks a key
//
// Quantities are plotted as categories (bars), the paper's beside ours in the same unit; where a
// paper gives a range, the reference carries both ends.
#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <functional>
#include <vector>

#include "rag/status.h"

namespace ragwb {

struct FigurePoint {
  QString category;  // e.g. "vs DRDG/TW"
  double value = 0;  // in the figure's unit
  double high = 0;   // the upper end where the paper gives a range; == value otherwise
};
using FigurePoints = std::vector<FigurePoint>;

struct PaperFigure {
  QString id;           // stable, the name results are saved under ("dragon-fig6")
  QString title;        // "DRAGON Fig. 6: per-token latency against the baselines"
  QString citation;     // where the reference numbers come from
  QString unit;         // the value axis ("% lower per-token latency")
  QStringList args;     // after `ragraph`: {"bench", "dragon", "--quick", "--json"}
  // Roughly how long the run takes on the 2-core development machine: the progress bar's scale.
  double expectedSeconds = 60;
  FigurePoints paper;   // the paper's numbers (reference data)
  // Our numbers from the bench's JSON; NotFound naming the key when the output lacks one.
  std::function<rag::Result<FigurePoints>(const QJsonObject&)> extract;
};

// Every figure, in the order. Figures whose bench cannot run here are not listed.
const std::vector<PaperFigure>& paperFigures();
const PaperFigure* findPaperFigure(const QString& id);  // nullptr for an unknown id

}  // namespace ragwb
