// Checks of the QA sets on a built corpus database, written independently of the generator
// (Qt's JSON and regular expressions instead of the engine's helpers), shared by test_qa,
// test_corpus and test_corpus_slow. Each returns the violations found, empty when none.
#pragma once

#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>
#include <QSet>
#include <QStringList>

#include <cstdint>
#include <vector>

#include "storage/sqlite.h"

namespace qa_checks {

struct Row {
  int64_t id = 0;
  QString split, type, relation, question, topicName;
  int64_t topic = 0;
  QStringList answers;
  QList<int64_t> gold;
  QJsonArray path;
};

inline QJsonArray parseArray(std::string_view json) {
  return QJsonDocument::fromJson(QByteArray(json.data(), static_cast<qsizetype>(json.size()))).array();
}

inline std::vector<Row> load(rag::sql::Db& db, QString* error) {
  std::vector<Row> rows;
  auto st = db.prepare(
      "SELECT q.id, q.split, q.type, coalesce(q.relation, ''), q.question, q.topic_entity, "
      "n.topic_name, q.answers, q.gold_passages, q.kg_path "
      "FROM qa q JOIN qa_topic_names n ON n.qa_id = q.id ORDER BY q.id");
  if (!st) {
    *error = QString::fromStdString(st.status().message());
    return rows;
  }
  for (;;) {
    auto more = st->step();
    if (!more || !*more) break;
    Row r;
    r.id = st->columnInt64(0);
    r.split = QString::fromStdString(st->columnText(1));
    r.type = QString::fromStdString(st->columnText(2));
    r.relation = QString::fromStdString(st->columnText(3));
    r.question = QString::fromStdString(st->columnText(4));
    r.topic = st->columnInt64(5);
    r.topicName = QString::fromStdString(st->columnText(6));
    for (const QJsonValue& v : parseArray(st->columnTextView(7))) r.answers << v.toString();
    for (const QJsonValue& v : parseArray(st->columnTextView(8)))
      r.gold << static_cast<int64_t>(v.toDouble());
    r.path = parseArray(st->columnTextView(9));
    rows.push_back(std::move(r));
  }
  return rows;
}

// `phrase` as whole words in `text`, ignoring case.
inline bool containsWord(const QString& text, const QString& phrase) {
  if (phrase.isEmpty()) return false;
  const QString word = QStringLiteral("[\\p{L}\\p{N}]");
  QString pattern = QRegularExpression::escape(phrase);
  if (phrase.front().isLetterOrNumber()) pattern.prepend("(?<!" + word + ")");
  if (phrase.back().isLetterOrNumber()) pattern.append("(?!" + word + ")");
  return QRegularExpression(pattern, QRegularExpression::CaseInsensitiveOption).match(text).hasMatch();
}

inline QString passageText(rag::sql::Db& db, int64_t id) {
  auto st = db.prepare("SELECT text FROM passages WHERE id = ?");
  if (!st) return {};
  st->bind(1, id);
  auto row = st->step();
  if (!row || !*row) return {};
  return QString::fromStdString(st->columnText(0));
}

inline QStringList lemmasOf(rag::sql::Db& db, int64_t synsetEntity) {
  QStringList out;
  auto st = db.prepare(
      "SELECT e.name FROM relations r JOIN entities e ON e.id = r.src "
      "WHERE r.dst = ? AND r.type = 'lemma_of'");
  if (!st) return out;
  st->bind(1, synsetEntity);
  for (;;) {
    auto row = st->step();
    if (!row || !*row) break;
    out << QString::fromStdString(st->columnText(0));
  }
  return out;
}

// The documented guarantee, for every held-out (test or dev) item T and train item R:
// T.topic != R.topic; T's topic name != R's topic name; no entity on T's kg_path is R's
// topic; no answer of T and no lemma of T's intermediate entities is R's topic name.
inline QStringList splitViolations(rag::sql::Db& db, const std::vector<Row>& rows) {
  QSet<int64_t> trainTopics;
  QSet<QString> trainNames;
  for (const Row& r : rows)
    if (r.split == "train") {
      trainTopics.insert(r.topic);
      trainNames.insert(r.topicName.toLower());
    }
  QStringList bad;
  for (const Row& r : rows) {
    if (r.split == "train") continue;
    if (r.split != "test" && r.split != "dev") {
      bad << QString("qa %1: unknown split '%2'").arg(r.id).arg(r.split);
      continue;
    }
    const QString where = QString("%1 qa %2 (%3)").arg(r.split).arg(r.id).arg(r.question);
    if (trainTopics.contains(r.topic)) bad << where + ": topic entity is a train topic";
    if (trainNames.contains(r.topicName.toLower()))
      bad << where + ": topic name '" + r.topicName + "' is a train topic name";
    for (qsizetype i = 0; i < r.path.size(); i += 2) {
      int64_t e = static_cast<int64_t>(r.path[i].toDouble());
      if (trainTopics.contains(e)) bad << where + QString(": path entity %1 is a train topic").arg(e);
    }
    for (const QString& a : r.answers)
      if (trainNames.contains(a.toLower())) bad << where + ": answer '" + a + "' is a train topic name";
    for (qsizetype i = 2; i + 2 < r.path.size(); i += 2)
      for (const QString& l : lemmasOf(db, static_cast<int64_t>(r.path[i].toDouble())))
        if (trainNames.contains(l.toLower()))
          bad << where + ": intermediate lemma '" + l + "' is a train topic name";
    if (bad.size() > 20) break;
  }
  return bad;
}

// Two-hop items: two gold passages (topic's, then the bridge's), the bridge entity unnamed in
// the question, the answer absent from the first passage and present in the second.
inline QStringList twoHopViolations(rag::sql::Db& db, const std::vector<Row>& rows) {
  QStringList bad;
  for (const Row& r : rows) {
    if (r.type != "two_hop") continue;
    const QString where = QString("qa %1 (%2)").arg(r.id).arg(r.question);
    if (r.gold.size() != 2 || r.path.size() != 5) {
      bad << where + ": not two passages / a two-relation path";
      continue;
    }
    const int64_t bridge = static_cast<int64_t>(r.path[2].toDouble());
    for (const QString& l : lemmasOf(db, bridge))
      if (containsWord(r.question, l)) bad << where + ": names the intermediate '" + l + "'";
    const QString first = passageText(db, r.gold[0]);
    const QString second = passageText(db, r.gold[1]);
    bool inSecond = false;
    for (const QString& a : r.answers) {
      if (containsWord(first, a)) bad << where + ": answer '" + a + "' is in the first passage";
      inSecond |= containsWord(second, a);
    }
    if (!inSecond) bad << where + ": no answer in the second passage";
    if (bad.size() > 20) break;
  }
  return bad;
}

// Single-hop items: the answer is read off the one gold passage and is not in the question.
inline QStringList singleHopViolations(rag::sql::Db& db, const std::vector<Row>& rows) {
  QStringList bad;
  for (const Row& r : rows) {
    if (r.type != "single_hop") continue;
    const QString where = QString("qa %1 (%2)").arg(r.id).arg(r.question);
    if (r.gold.size() != 1 || r.path.size() != 3) {
      bad << where + ": not one passage / a one-relation path";
      continue;
    }
    const QString passage = passageText(db, r.gold[0]);
    bool found = false;
    for (const QString& a : r.answers) {
      found |= containsWord(passage, a);
      if (containsWord(r.question, a)) bad << where + ": answer '" + a + "' is in the question";
    }
    if (!found) bad << where + ": no answer in the gold passage";
    if (r.path[1].toString() != r.relation) bad << where + ": path relation differs";
    if (bad.size() > 20) break;
  }
  return bad;
}

}  // namespace qa_checks
