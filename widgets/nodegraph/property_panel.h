// The RAGraph editor's property panel: a form for the selected node (id, output variable, and
// the prompt template, max tokens, temperature and stop strings of a generation node or the
// query variable, top-k and nprobe of a retrieval node) or the selected edge (its place in the
// checking order and its condition), plus the validation problems that name it. With nothing
// selected it edits the workflow itself: name, description and answer variable.
//
// Every change goes to the GraphModel as soon as it is made (line edits when editing finishes);
// the model merges consecutive changes of one field into one undo step, so typing a prompt is
// one command. The form follows the model's signals, so undo and redo show in it at once.
#pragma once

#include <QHash>
#include <QWidget>

#include "nodegraph/graph_model.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QSpinBox;
class QStackedWidget;
class QVBoxLayout;

namespace ragwb {

class PromptHighlighter;

class PropertyPanel : public QWidget {
  Q_OBJECT
public:
  explicit PropertyPanel(GraphModel* model, QWidget* parent = nullptr);

  void showNode(const QString& id);
  void showEdge(int index);
  void showNothing();
  const QString& nodeId() const { return m_node; }  // empty unless a node is shown
  int edgeIndex() const { return m_edge; }           // -1 unless an edge is shown

  // The fields, for tests and for focus handling.
  QLineEdit* idEdit() const { return m_id; }
  QLineEdit* outputEdit() const { return m_output; }
  QPlainTextEdit* promptEdit() const { return m_prompt; }
  PromptHighlighter* highlighter() const { return m_highlighter; }
  QSpinBox* maxTokensBox() const { return m_maxTokens; }
  QDoubleSpinBox* temperatureBox() const { return m_temperature; }
  QLineEdit* stopEdit() const { return m_stop; }  // a JSON array of strings: ["\n"]
  QLineEdit* copyFromEdit() const { return m_copyFrom; }  // a variable's name, or empty
  QDoubleSpinBox* copyFloorBox() const { return m_copyFloor; }
  QLineEdit* queryEdit() const { return m_query; }
  QSpinBox* topkBox() const { return m_topk; }
  QLineEdit* passagesEdit() const { return m_passages; }
  QSpinBox* nprobeBox() const { return m_nprobe; }
  QComboBox* methodBox() const { return m_method; }
  QComboBox* rerankBox() const { return m_rerank; }
  QSpinBox* orderBox() const { return m_order; }
  QComboBox* conditionBox() const { return m_condition; }
  QLineEdit* conditionVarEdit() const { return m_condVar; }
  QLineEdit* conditionTextEdit() const { return m_condText; }
  QLineEdit* conditionNodeEdit() const { return m_condNode; }
  QSpinBox* conditionLimitBox() const { return m_condLimit; }
  QLineEdit* graphNameEdit() const { return m_graphName; }
  QPlainTextEdit* graphDescriptionEdit() const { return m_graphDescription; }
  QLineEdit* answerVarEdit() const { return m_answerVar; }
  QLabel* issuesLabel() const { return m_issues; }

Q_SIGNALS:
  // The shown node or edge now has another id or index (a rename, a reorder): select it.
  void nodeRenamed(const QString& newId);
  void edgeMoved(int newIndex);
  void editFailed(const QString& message);

private:
  void buildGraphPage(QWidget* page);
  void buildNodePage(QWidget* page);
  void buildEdgePage(QWidget* page);
  // A labelled row of fields; setRowVisible shows or hides label and field together.
  void addRow(QVBoxLayout* column, const QString& label, QWidget* field);
  void setRowVisible(QWidget* field, bool visible);
  void refresh();
  void refreshGraph();
  void refreshNode(const rag::WorkflowNode& node);
  void refreshEdge(const rag::WorkflowEdge& edge);
  void setNodeProperty(GraphModel::NodeProperty property, const QVariant& value);
  void setGraphProperty(GraphModel::GraphProperty property, const QString& value);
  void commitStop();
  void commitRename();
  void commitOrder(int rank);
  void commitCondition(bool kindChanged);
  void report(const rag::Status& status);

  GraphModel* m_model;
  QString m_node;
  int m_edge = -1;
  bool m_refreshing = false;  // set while the form is filled from the model

  QStackedWidget* m_pages;
  QLabel* m_title;
  QLabel* m_issues;
  QVBoxLayout* m_graphColumn;
  QVBoxLayout* m_nodeColumn;
  QVBoxLayout* m_edgeColumn;
  QHash<QWidget*, QWidget*> m_rows;  // field -> its labelled row
  QLineEdit* m_graphName;
  QPlainTextEdit* m_graphDescription;
  QLineEdit* m_answerVar;
  QLineEdit* m_id;
  QLabel* m_kind;
  QLineEdit* m_output;
  QPlainTextEdit* m_prompt;
  PromptHighlighter* m_highlighter;
  QSpinBox* m_maxTokens;
  QDoubleSpinBox* m_temperature;
  QLineEdit* m_stop;
  QLineEdit* m_copyFrom;
  QDoubleSpinBox* m_copyFloor;
  QLineEdit* m_query;
  QSpinBox* m_topk;
  QLineEdit* m_passages;
  QSpinBox* m_nprobe;
  QComboBox* m_method;
  QComboBox* m_rerank;
  QLabel* m_ends;
  QSpinBox* m_order;
  QComboBox* m_condition;
  QLineEdit* m_condVar;
  QLineEdit* m_condText;
  QLineEdit* m_condNode;
  QSpinBox* m_condLimit;
};

}  // namespace ragwb
