#include "overview/overview_page.h"

#include <QHeaderView>
#include <QLocale>
#include <QVBoxLayout>

#include "bridge/background.h"

namespace ragwb {

OverviewPage::OverviewPage(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  m_title = new QLabel(tr("<h2>RAGraph Workbench</h2>"
                          "<p>Design, serve and understand heterogeneous RAG workflows.</p>"));
  m_title->setTextFormat(Qt::RichText);
  m_path = new QLabel;
  m_path->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_message = new QLabel;
  m_message->setWordWrap(true);
  m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_table = new QTableView;
  m_table->setModel(&m_model);
  m_table->verticalHeader()->hide();
  m_table->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  m_table->horizontalHeader()->setSectionResizeMode(1, QHeaderView::ResizeToContents);
  m_table->setSelectionMode(QAbstractItemView::NoSelection);
  m_table->setAlternatingRowColors(true);
  layout->addWidget(m_title);
  layout->addWidget(m_path);
  layout->addWidget(m_message);
  layout->addWidget(m_table, 1);
  connect(&m_watcher, &QFutureWatcher<rag::Result<rag::CorpusStats>>::finished, this,
          &OverviewPage::onFinished);
}

void OverviewPage::loadCorpus(const std::filesystem::path& path) {
  m_path->setText(tr("Corpus: %1").arg(QString::fromStdString(path.string())));
  m_message->setText(tr("Reading corpus statistics…"));
  m_model.clear();
  m_watcher.setFuture(runInBackground([path] { return rag::readCorpusStats(path); }));
}

void OverviewPage::onFinished() {
  rag::Result<rag::CorpusStats> r = m_watcher.result();
  if (!r) {
    QString msg = QString::fromStdString(r.status().message());
    m_message->setText(tr("<b>No corpus loaded.</b> %1").arg(msg.toHtmlEscaped()));
    Q_EMIT failed(msg);
    return;
  }
  m_model.setStats(*r);
  QLocale loc;
  QString summary = tr("%1 passages, %2 entities, %3 relations, %4 test questions")
                        .arg(loc.toString(r->passages), loc.toString(r->entities),
                             loc.toString(r->relations), loc.toString(r->qaTotal("test")));
  m_message->setText(summary);
  Q_EMIT loaded(summary);
}

}  // namespace ragwb
