// Highlights the {variables} of a prompt template (rag::templateVariables syntax): a variable the
// workflow sets in blue, one nothing sets in red, and syntax errors (an unclosed '{', a lone '}',
// "{not a name}") in red with a wavy underline. {{ and }} are literal braces and stay plain.
#pragma once

#include <QStringList>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>

namespace ragwb {

class PromptHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
public:
  explicit PromptHighlighter(QTextDocument* document);

  // The variables that count as set (GraphModel::knownVariables()); rehighlights on a change.
  void setKnownVariables(const QStringList& variables);
  const QStringList& knownVariables() const { return m_known; }

  static QColor knownColor() { return QColor(0x1f, 0x5f, 0xbf); }
  static QColor unknownColor() { return QColor(0xd3, 0x2f, 0x2f); }

protected:
  void highlightBlock(const QString& text) override;

private:
  QStringList m_known;
  QTextCharFormat m_knownFormat, m_unknownFormat, m_errorFormat;
};

}  // namespace ragwb
