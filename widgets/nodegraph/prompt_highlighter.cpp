#include "nodegraph/prompt_highlighter.h"

namespace ragwb {

namespace {

bool isName(QStringView s) {
  if (s.isEmpty() || s.front().isDigit()) return false;
  for (QChar c : s)
    if (!(c.isLetterOrNumber() || c == u'_') || c.unicode() > 0x7f) return false;
  return true;
}

}  // namespace

PromptHighlighter::PromptHighlighter(QTextDocument* document) : QSyntaxHighlighter(document) {
  m_knownFormat.setForeground(knownColor());
  m_knownFormat.setFontWeight(QFont::Bold);
  m_unknownFormat.setForeground(unknownColor());
  m_unknownFormat.setFontWeight(QFont::Bold);
  m_unknownFormat.setToolTip(tr("No node sets this variable"));
  m_errorFormat.setForeground(unknownColor());
  m_errorFormat.setUnderlineStyle(QTextCharFormat::WaveUnderline);
  m_errorFormat.setUnderlineColor(unknownColor());
}

void PromptHighlighter::setKnownVariables(const QStringList& variables) {
  if (variables == m_known) return;
  m_known = variables;
  rehighlight();
}

void PromptHighlighter::highlightBlock(const QString& text) {
  const qsizetype n = text.size();
  for (qsizetype i = 0; i < n;) {
    const QChar c = text[i];
    const bool doubled = i + 1 < n && text[i + 1] == c;
    if ((c == u'{' || c == u'}') && doubled) {
      i += 2;  // a literal brace
    } else if (c == u'}') {
      setFormat(int(i), 1, m_errorFormat);
      ++i;
    } else if (c == u'{') {
      const qsizetype close = text.indexOf(u'}', i + 1);
      if (close < 0) {
        setFormat(int(i), int(n - i), m_errorFormat);
        return;
      }
      const QStringView name = QStringView(text).mid(i + 1, close - i - 1);
      const int length = int(close - i + 1);
      if (!isName(name))
        setFormat(int(i), length, m_errorFormat);
      else
        setFormat(int(i), length, m_known.contains(name.toString()) ? m_knownFormat : m_unknownFormat);
      i = close + 1;
    } else {
      ++i;
    }
  }
}

}  // namespace ragwb
