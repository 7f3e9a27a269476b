#include "nodegraph/property_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "nodegraph/palette_model.h"
#include "nodegraph/prompt_highlighter.h"
#include "nodegraph/strings.h"

namespace ragwb {

namespace {

using Prop = GraphModel::NodeProperty;

// Sets a widget's value without committing it back: `m_refreshing` is checked by the slots.
void setText(QLineEdit* e, const QString& t) {
  if (e->text() != t) e->setText(t);
}

QSpinBox* spinBox(int min, int max) {
  auto* box = new QSpinBox;
  box->setRange(min, max);
  box->setKeyboardTracking(false);  // commit "12", not "1" then "12"
  return box;
}

// Two decimals; `atMin` is what the minimum shows ("0 (greedy)").
QDoubleSpinBox* doubleSpinBox(double min, double max, double step, const QString& atMin) {
  auto* box = new QDoubleSpinBox;
  box->setRange(min, max);
  box->setSingleStep(step);
  box->setDecimals(2);
  box->setSpecialValueText(atMin);
  box->setKeyboardTracking(false);
  return box;
}

// A column of rows at the top of `page`; the stretch below takes the spare height.
QVBoxLayout* columnOn(QWidget* page) {
  auto* column = new QVBoxLayout(page);
  column->setContentsMargins(0, 0, 0, 0);
  column->addStretch(1);
  return column;
}

}  // namespace

PropertyPanel::PropertyPanel(GraphModel* model, QWidget* parent)
    : QWidget(parent), m_model(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  m_title = new QLabel;
  m_title->setTextFormat(Qt::RichText);
  m_pages = new QStackedWidget;
  auto* graphPage = new QWidget;
  auto* nodePage = new QWidget;
  auto* edgePage = new QWidget;
  buildGraphPage(graphPage);
  buildNodePage(nodePage);
  buildEdgePage(edgePage);
  m_pages->addWidget(graphPage);
  m_pages->addWidget(nodePage);
  m_pages->addWidget(edgePage);
  m_issues = new QLabel;
  m_issues->setWordWrap(true);
  m_issues->setTextFormat(Qt::RichText);
  m_issues->setStyleSheet(QStringLiteral("color: #b02020;"));
  m_issues->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(m_title);
  layout->addWidget(m_pages);
  layout->addWidget(m_issues);
  layout->addStretch(1);

  connect(model, &GraphModel::nodeChanged, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::nodeAdded, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::nodeRemoved, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::edgesChanged, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::graphPropertiesChanged, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::issuesChanged, this, &PropertyPanel::refresh);
  connect(model, &GraphModel::modelReset, this, &PropertyPanel::showNothing);
  showNothing();
}

// Nothing selected: the workflow's own settings, above how to edit the canvas.
void PropertyPanel::buildGraphPage(QWidget* page) {
  m_graphColumn = columnOn(page);
  m_graphName = new QLineEdit;
  m_graphName->setToolTip(tr("Names the workflow in the run panel, in saved runs and as the file name"));
  m_graphDescription = new QPlainTextEdit;
  m_graphDescription->setTabChangesFocus(true);
  m_graphDescription->setFixedHeight(4 * fontMetrics().lineSpacing() + 12);
  m_graphDescription->setPlaceholderText(tr("What the workflow does, for whoever opens it next"));
  m_answerVar = new QLineEdit;
  m_answerVar->setToolTip(tr("The variable whose value at END is the request's answer"));
  addRow(m_graphColumn, tr("Name"), m_graphName);
  addRow(m_graphColumn, tr("Description"), m_graphDescription);
  addRow(m_graphColumn, tr("Answer variable"), m_answerVar);
  auto* help = new QLabel(tr("Select a node or an edge to edit it.\n\n"
                             "Drag a node kind from the palette onto the canvas to add a node; "
                             "drag from the dot below a node onto another node to connect them; "
                             "drop a condition on an edge to guard it."));
  help->setWordWrap(true);
  help->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  m_graphColumn->insertWidget(m_graphColumn->count() - 1, help);

  connect(m_graphName, &QLineEdit::editingFinished, this,
          [this] { setGraphProperty(GraphModel::GraphProperty::Name, m_graphName->text()); });
  connect(m_graphDescription, &QPlainTextEdit::textChanged, this, [this] {
    setGraphProperty(GraphModel::GraphProperty::Description, m_graphDescription->toPlainText());
  });
  connect(m_answerVar, &QLineEdit::editingFinished, this,
          [this] { setGraphProperty(GraphModel::GraphProperty::AnswerVar, m_answerVar->text()); });
}

void PropertyPanel::buildNodePage(QWidget* page) {
  m_nodeColumn = columnOn(page);
  m_id = new QLineEdit;
  m_kind = new QLabel;
  m_output = new QLineEdit;
  m_prompt = new QPlainTextEdit;
  m_prompt->setTabChangesFocus(true);
  m_prompt->setMinimumHeight(110);
  QFont mono(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::Monospace);
  m_prompt->setFont(mono);
  m_prompt->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  m_highlighter = new PromptHighlighter(m_prompt->document());
  m_maxTokens = spinBox(1, 4096);
  m_temperature = doubleSpinBox(0.0, 5.0, 0.1, tr("0 (greedy)"));
  m_stop = new QLineEdit;
  m_stop->setToolTip(tr("A JSON array of strings; generation ends at the first one: [\"\\n\"]"));
  m_copyFrom = new QLineEdit;
  m_copyFrom->setPlaceholderText(tr("free generation"));
  m_copyFrom->setToolTip(tr("Extractive answers: a variable of the prompt (docs), or a template of several "
                            "({docs}{hop}), whose text the output must be a span of, compared without case; "
                            "the model chooses what to copy but cannot miscopy or invent words. Empty: free "
                            "generation"));
  m_copyFloor = doubleSpinBox(0.0, 1.0, 0.05, tr("0 (always copy)"));
  m_copyFloor->setToolTip(tr("With Copy from: while the answer's first word is written, when the likeliest token "
                             "that keeps it a span is less than this many times as probable as the model's own "
                             "first choice, it is answering from what it knows, and the node generates freely "
                             "from there on"));
  m_query = new QLineEdit;
  m_query->setToolTip(tr("A variable's name (question) or a template of variables ({answer} {question}: IRG's "
                         "query, the last answer and the question); a retrieval node may search several as one, "
                         "separated by '|' ({hypothesis} {question} | {question}: HyDE's, the mean of their "
                         "embeddings and BM25's rankings fused)"));
  m_topk = spinBox(1, 1000);
  m_passages = new QLineEdit;
  m_passages->setToolTip(tr("The variable of retrieved passages to compress (a retrieval node's output: docs)"));
  m_nprobe = spinBox(0, 1 << 20);
  m_nprobe->setSpecialValueText(tr("engine default"));
  m_method = new QComboBox;
  for (rag::RetrievalMethod m : {rag::RetrievalMethod::Dense, rag::RetrievalMethod::Bm25, rag::RetrievalMethod::Hybrid})
    m_method->addItem(toQString(rag::retrievalMethodName(m)));
  m_method->setToolTip(tr("dense: the embedder and step-wise IVF search (HedraRAG's sub-stages); bm25: the "
                          "passages' words (SQLite FTS5); hybrid (the default): both, fused by reciprocal rank, "
                          "the best recall. `ragraph eval workflow --method` measures a workflow's answers "
                          "with each: with the shipped small models bm25 led hybrid by up to 3 points until the "
                          "built-ins reranked their passages by BM25 (Rerank), which brings hybrid level with it"));
  m_rerank = new QComboBox;
  for (rag::RetrievalRerank r : {rag::RetrievalRerank::None, rag::RetrievalRerank::Bm25})
    m_rerank->addItem(toQString(rag::retrievalRerankName(r)));
  m_rerank->setToolTip(tr("none: the passages in the method's order; bm25: the same passages ordered by their "
                          "BM25 score for the query, so the most lexically relevant one leads the prompt "
                          "(the shipped readers answer most often from the first passage)"));

  addRow(m_nodeColumn, tr("Id"), m_id);
  addRow(m_nodeColumn, tr("Kind"), m_kind);
  addRow(m_nodeColumn, tr("Output variable"), m_output);
  addRow(m_nodeColumn, tr("Prompt template"), m_prompt);
  addRow(m_nodeColumn, tr("Max tokens"), m_maxTokens);
  addRow(m_nodeColumn, tr("Temperature"), m_temperature);
  addRow(m_nodeColumn, tr("Stop strings"), m_stop);
  addRow(m_nodeColumn, tr("Copy from"), m_copyFrom);
  addRow(m_nodeColumn, tr("Copy floor"), m_copyFloor);
  addRow(m_nodeColumn, tr("Passages"), m_passages);
  addRow(m_nodeColumn, tr("Query"), m_query);
  addRow(m_nodeColumn, tr("Top-k"), m_topk);
  addRow(m_nodeColumn, tr("Method"), m_method);
  addRow(m_nodeColumn, tr("Rerank"), m_rerank);
  addRow(m_nodeColumn, tr("nprobe"), m_nprobe);

  connect(m_id, &QLineEdit::editingFinished, this, &PropertyPanel::commitRename);
  connect(m_output, &QLineEdit::editingFinished, this,
          [this] { setNodeProperty(Prop::OutputVar, m_output->text()); });
  connect(m_prompt, &QPlainTextEdit::textChanged, this,
          [this] { setNodeProperty(Prop::Prompt, m_prompt->toPlainText()); });
  connect(m_maxTokens, &QSpinBox::valueChanged, this,
          [this](int v) { setNodeProperty(Prop::MaxTokens, v); });
  connect(m_temperature, &QDoubleSpinBox::valueChanged, this,
          [this](double v) { setNodeProperty(Prop::Temperature, v); });
  connect(m_stop, &QLineEdit::editingFinished, this, &PropertyPanel::commitStop);
  connect(m_copyFrom, &QLineEdit::editingFinished, this,
          [this] { setNodeProperty(Prop::CopyFrom, m_copyFrom->text()); });
  connect(m_copyFloor, &QDoubleSpinBox::valueChanged, this,
          [this](double v) { setNodeProperty(Prop::CopyFloor, v); });
  connect(m_query, &QLineEdit::editingFinished, this,
          [this] { setNodeProperty(Prop::Query, m_query->text()); });
  connect(m_passages, &QLineEdit::editingFinished, this,
          [this] { setNodeProperty(Prop::Passages, m_passages->text()); });
  connect(m_topk, &QSpinBox::valueChanged, this, [this](int v) { setNodeProperty(Prop::TopK, v); });
  connect(m_nprobe, &QSpinBox::valueChanged, this,
          [this](int v) { setNodeProperty(Prop::NProbe, v); });
  connect(m_method, &QComboBox::currentTextChanged, this,
          [this](const QString& m) { setNodeProperty(Prop::Method, m); });
  connect(m_rerank, &QComboBox::currentTextChanged, this,
          [this](const QString& r) { setNodeProperty(Prop::Rerank, r); });
}

void PropertyPanel::buildEdgePage(QWidget* page) {
  m_edgeColumn = columnOn(page);
  m_ends = new QLabel;
  m_order = spinBox(1, 1);
  m_order->setToolTip(tr("The edges leaving a node are checked in this order; the first whose "
                         "condition holds is taken"));
  m_condition = new QComboBox;
  for (rag::ConditionKind k : kConditionKinds)
    m_condition->addItem(toQString(rag::conditionKindName(k)), int(k));
  m_condVar = new QLineEdit;
  m_condText = new QLineEdit;
  m_condNode = new QLineEdit;
  m_condLimit = spinBox(1, 1000);
  addRow(m_edgeColumn, tr("Edge"), m_ends);
  addRow(m_edgeColumn, tr("Checked"), m_order);
  addRow(m_edgeColumn, tr("Condition"), m_condition);
  addRow(m_edgeColumn, tr("Variable"), m_condVar);
  addRow(m_edgeColumn, tr("Contains text"), m_condText);
  addRow(m_edgeColumn, tr("Node"), m_condNode);
  addRow(m_edgeColumn, tr("Runs below"), m_condLimit);

  connect(m_order, &QSpinBox::valueChanged, this, &PropertyPanel::commitOrder);
  connect(m_condition, &QComboBox::currentIndexChanged, this, [this] { commitCondition(true); });
  for (QLineEdit* e : {m_condVar, m_condText, m_condNode})
    connect(e, &QLineEdit::editingFinished, this, [this] { commitCondition(false); });
  connect(m_condLimit, &QSpinBox::valueChanged, this, [this] { commitCondition(false); });
}

void PropertyPanel::addRow(QVBoxLayout* column, const QString& label, QWidget* field) {
  auto* row = new QWidget;
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* name = new QLabel(label);
  name->setBuddy(field);
  name->setFixedWidth(fontMetrics().horizontalAdvance(QStringLiteral("Prompt template")) + 12);
  const bool tall = qobject_cast<QPlainTextEdit*>(field) != nullptr;
  layout->addWidget(name, 0, tall ? Qt::AlignTop : Qt::AlignVCenter);
  layout->addWidget(field, 1);
  column->insertWidget(column->count() - 1, row);  // above the stretch
  m_rows.insert(field, row);
}

void PropertyPanel::setRowVisible(QWidget* field, bool visible) {
  m_rows.value(field)->setVisible(visible);
}

void PropertyPanel::showNode(const QString& id) {
  m_node = id;
  m_edge = -1;
  refresh();
}

void PropertyPanel::showEdge(int index) {
  m_node.clear();
  m_edge = index;
  refresh();
}

void PropertyPanel::showNothing() {
  m_node.clear();
  m_edge = -1;
  refresh();
}

void PropertyPanel::refresh() {
  m_refreshing = true;
  m_highlighter->setKnownVariables(m_model->knownVariables());
  const auto& edges = m_model->graph().edges();
  const rag::WorkflowNode* node = m_node.isEmpty() ? nullptr : m_model->node(m_node);
  QStringList issues;
  if (node) {
    refreshNode(*node);
    issues = m_model->nodeIssues(m_node);
  } else if (m_edge >= 0 && size_t(m_edge) < edges.size()) {
    refreshEdge(edges[size_t(m_edge)]);
    issues = m_model->edgeIssues(m_edge);
  } else {
    m_node.clear();
    m_edge = -1;
    refreshGraph();
  }
  QStringList escaped;
  for (const QString& i : issues) escaped << i.toHtmlEscaped();
  m_issues->setText(issues.isEmpty() ? QString()
                                     : tr("<b>Problems</b><ul><li>%1</li></ul>")
                                           .arg(escaped.join(QStringLiteral("</li><li>"))));
  m_refreshing = false;
}

void PropertyPanel::refreshGraph() {
  const rag::WorkflowGraph& g = m_model->graph();
  m_title->setText(tr("<b>Workflow</b>"));
  m_pages->setCurrentIndex(0);
  setText(m_graphName, toQString(g.name()));
  setText(m_answerVar, toQString(g.answerVar()));
  const QString description = toQString(g.description());
  if (m_graphDescription->toPlainText() != description) m_graphDescription->setPlainText(description);
}

void PropertyPanel::refreshNode(const rag::WorkflowNode& n) {
  const bool gen = n.kind == rag::NodeKind::Generation;
  const bool retrieval = n.kind == rag::NodeKind::Retrieval;
  const bool compression = n.kind == rag::NodeKind::Compression;
  m_title->setText(tr("<b>%1 node</b>")
                       .arg(gen                                   ? tr("Generation")
                            : n.kind == rag::NodeKind::Knowledge ? tr("Knowledge-graph retrieval")
                            : compression                         ? tr("Compression (extractive)")
                                                                  : tr("Retrieval")));
  m_pages->setCurrentIndex(1);
  setText(m_id, toQString(n.id));
  m_kind->setText(toQString(rag::nodeKindName(n.kind)));
  setText(m_output, toQString(n.outputVar));
  for (QWidget* w : {static_cast<QWidget*>(m_prompt), static_cast<QWidget*>(m_maxTokens),
                     static_cast<QWidget*>(m_temperature), static_cast<QWidget*>(m_stop),
                     static_cast<QWidget*>(m_copyFrom), static_cast<QWidget*>(m_copyFloor)})
    setRowVisible(w, gen);
  for (QWidget* w : {static_cast<QWidget*>(m_query), static_cast<QWidget*>(m_topk)}) setRowVisible(w, !gen);
  // Top-k counts subgraphs on a knowledge node, sentences kept on a compression node; method and
  // nprobe are the passage search's.
  m_topk->setToolTip(compression ? tr("Sentences kept in the summary")
                     : retrieval ? tr("Passages retrieved")
                                 : tr("Subgraphs: entities of the query to expand"));
  for (QWidget* w : {static_cast<QWidget*>(m_method), static_cast<QWidget*>(m_rerank), static_cast<QWidget*>(m_nprobe)})
    setRowVisible(w, retrieval);
  setRowVisible(m_passages, compression);
  if (compression) setText(m_passages, toQString(n.compression.passages));
  if (gen) {
    // Only a different text is set, so the cursor stays where the user is typing.
    if (m_prompt->toPlainText() != toQString(n.promptTemplate))
      m_prompt->setPlainText(toQString(n.promptTemplate));
    m_maxTokens->setValue(int(n.generation.maxTokens));
    m_temperature->setValue(n.generation.temperature);
    QJsonArray stops;
    for (const std::string& s : n.generation.stop) stops.append(toQString(s));
    setText(m_stop, QString::fromUtf8(QJsonDocument(stops).toJson(QJsonDocument::Compact)));
    setText(m_copyFrom, toQString(n.generation.copyFrom));
    m_copyFloor->setValue(n.generation.copyFloor);
  } else {
    setText(m_query, toQString(n.query));
    m_topk->setValue(int(n.topk));
    m_nprobe->setValue(int(n.retrieval.nprobe));
    m_method->setCurrentText(toQString(rag::retrievalMethodName(n.retrieval.method)));
    m_rerank->setCurrentText(toQString(rag::retrievalRerankName(n.retrieval.rerank)));
  }
}

void PropertyPanel::refreshEdge(const rag::WorkflowEdge& e) {
  m_title->setText(tr("<b>Edge</b>"));
  m_pages->setCurrentIndex(2);
  m_ends->setText(QStringLiteral("%1 → %2").arg(toQString(e.from), toQString(e.to)));
  const std::vector<size_t> siblings = m_model->graph().edgesFrom(e.from);
  const auto rank = std::find(siblings.begin(), siblings.end(), size_t(m_edge)) - siblings.begin();
  m_order->setRange(1, std::max(1, int(siblings.size())));
  m_order->setValue(int(rank) + 1);
  m_order->setSuffix(tr(" of %1").arg(siblings.size()));
  m_condition->setCurrentIndex(m_condition->findData(int(e.when.kind)));
  setText(m_condVar, toQString(e.when.var));
  setText(m_condText, toQString(e.when.text));
  setText(m_condNode, toQString(e.when.node));
  m_condLimit->setValue(int(std::max<int64_t>(1, e.when.limit)));
  const rag::ConditionKind k = e.when.kind;
  setRowVisible(m_condVar, k == rag::ConditionKind::Empty ||
                                           k == rag::ConditionKind::NonEmpty ||
                                           k == rag::ConditionKind::Contains);
  setRowVisible(m_condText, k == rag::ConditionKind::Contains);
  setRowVisible(m_condNode, k == rag::ConditionKind::RunsBelow);
  setRowVisible(m_condLimit, k == rag::ConditionKind::RunsBelow);
}

void PropertyPanel::report(const rag::Status& status) {
  if (!status) Q_EMIT editFailed(QString::fromStdString(status.message()));
}

void PropertyPanel::setNodeProperty(GraphModel::NodeProperty property, const QVariant& value) {
  if (m_refreshing || m_node.isEmpty()) return;
  report(m_model->setNodeProperty(m_node, property, value));
}

void PropertyPanel::setGraphProperty(GraphModel::GraphProperty property, const QString& value) {
  if (m_refreshing || !m_node.isEmpty() || m_edge >= 0) return;
  const rag::Status s = m_model->setGraphProperty(property, value);
  report(s);
  if (!s) refresh();  // show the value the workflow kept
}

void PropertyPanel::commitStop() {
  if (m_refreshing || m_node.isEmpty()) return;
  QJsonParseError err;
  QJsonDocument doc = QJsonDocument::fromJson(m_stop->text().toUtf8(), &err);
  QStringList stops;
  bool ok = doc.isArray();
  for (const QJsonValue& v : doc.array()) {
    ok = ok && v.isString();
    stops << v.toString();
  }
  if (!ok) {
    Q_EMIT editFailed(tr("Stop strings must be a JSON array of strings, e.g. [\"\\n\"]"));
    refresh();
    return;
  }
  setNodeProperty(Prop::Stop, stops);
}

void PropertyPanel::commitRename() {
  if (m_refreshing || m_node.isEmpty() || m_id->text() == m_node) return;
  const QString newId = m_id->text();
  rag::Status s = m_model->renameNode(m_node, newId);
  if (!s) {
    report(s);
    refresh();  // back to the current id
    return;
  }
  m_node = newId;
  refresh();
  Q_EMIT nodeRenamed(newId);
}

void PropertyPanel::commitOrder(int rank) {
  if (m_refreshing || m_edge < 0) return;
  const auto& edges = m_model->graph().edges();
  const std::vector<size_t> siblings = m_model->graph().edgesFrom(edges[size_t(m_edge)].from);
  if (rank < 1 || size_t(rank) > siblings.size()) return;
  const int target = int(siblings[size_t(rank - 1)]);
  if (target == m_edge) return;
  const int from = m_edge;
  m_edge = target;  // where the edge will be once the model emits edgesChanged
  rag::Status s = m_model->moveEdge(from, target);
  if (!s) m_edge = from;
  report(s);
  refresh();
  if (s) Q_EMIT edgeMoved(target);
}

void PropertyPanel::commitCondition(bool kindChanged) {
  if (m_refreshing || m_edge < 0) return;
  const auto kind = rag::ConditionKind(m_condition->currentData().toInt());
  rag::EdgeCondition c = m_model->defaultCondition(kind, m_edge);
  if (!kindChanged) {
    // Only the fields of the kind are kept, so the JSON has no stray keys.
    const std::string var = m_condVar->text().toStdString();
    switch (kind) {
      case rag::ConditionKind::Always: break;
      case rag::ConditionKind::Empty: c = rag::EdgeCondition::empty(var); break;
      case rag::ConditionKind::NonEmpty: c = rag::EdgeCondition::nonEmpty(var); break;
      case rag::ConditionKind::Contains:
        c = rag::EdgeCondition::contains(var, m_condText->text().toStdString());
        break;
      case rag::ConditionKind::RunsBelow:
        c = rag::EdgeCondition::runsBelow(m_condNode->text().toStdString(), m_condLimit->value());
        break;
    }
  }
  report(m_model->setEdgeCondition(m_edge, c));
}

}  // namespace ragwb
