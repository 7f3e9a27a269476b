#include "knowledge/knowledge_graph.h"

#include <algorithm>
#include <cctype>

#include "corpus/corpus_db.h"

namespace rag::knowledge {

namespace {

int32_t wordCount(std::string_view s) {
  int32_t n = 0;
  bool in = false;
  for (char c : s) {
    const bool space = c == ' ';
    if (!space && !in) ++n;
    in = !space;
  }
  return n;
}

}  // namespace

std::vector<std::string> linkWords(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && (cur.back() == '.' || cur.back() == '\'' || cur.back() == '-')) cur.pop_back();
    if (!cur.empty()) words.push_back(std::move(cur));
    cur.clear();
  };
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || ((ch == '-' || ch == '\'' || ch == '.') && !cur.empty())) {
      cur.push_back(static_cast<char>(std::tolower(c)));
    } else {
      flush();
    }
  }
  flush();
  return words;
}

Result<std::shared_ptr<const KnowledgeGraph>> KnowledgeGraph::load(const std::filesystem::path& corpus) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(corpus));
  std::shared_ptr<KnowledgeGraph> g(new KnowledgeGraph());
  RAG_ASSIGN_OR_RETURN(int64_t maxId, db.queryInt64("SELECT COALESCE(MAX(id), 0) FROM entities"));
  if (maxId <= 0)
    return Status::notFound(corpus.string() + " has no entities; rebuild it with `ragraph corpus build`");
  g->m_kind.assign(static_cast<size_t>(maxId) + 1, EntityKind::Synset);
  g->m_nameOffset.assign(static_cast<size_t>(maxId) + 2, 0);
  {
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT id, kind, name FROM entities ORDER BY id"));
    int64_t next = 1;
    while (true) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      const int64_t id = st.columnInt64(0);
      for (; next <= id; ++next) g->m_nameOffset[static_cast<size_t>(next)] = static_cast<uint32_t>(g->m_names.size());
      const std::string_view kind = st.columnTextView(1);
      g->m_kind[static_cast<size_t>(id)] =
          kind == "lemma" ? EntityKind::Lemma : kind == "term" ? EntityKind::Term : EntityKind::Synset;
      g->m_names += st.columnTextView(2);
    }
    for (; next <= maxId + 1; ++next) g->m_nameOffset[static_cast<size_t>(next)] = static_cast<uint32_t>(g->m_names.size());
  }
  {
    std::vector<Row> rows;
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT src, type, dst FROM relations"));
    while (true) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      const auto src = static_cast<EntityId>(st.columnInt64(0));
      const auto dst = static_cast<EntityId>(st.columnInt64(2));
      if (src < 1 || src > maxId || dst < 1 || dst > maxId) continue;  // the schema's REFERENCES make this impossible
      rows.push_back({src, g->internRelation(st.columnTextView(1)), dst});
    }
    g->setEdges(std::move(rows));
  }
  {
    RAG_ASSIGN_OR_RETURN(int64_t maxPassage, db.queryInt64("SELECT COALESCE(MAX(id), 0) FROM passages"));
    g->m_passageEntity.assign(static_cast<size_t>(maxPassage) + 1, 0);
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT id, entity_id FROM passages"));
    while (true) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      const int64_t e = st.columnInt64(1);
      if (e >= 1 && e <= maxId) g->m_passageEntity[static_cast<size_t>(st.columnInt64(0))] = static_cast<EntityId>(e);
    }
  }
  g->buildIndexes();
  return std::shared_ptr<const KnowledgeGraph>(std::move(g));
}

std::shared_ptr<const KnowledgeGraph> KnowledgeGraph::fromParts(std::vector<std::string> names,
                                                                std::vector<EntityKind> kinds,
                                                                std::span<const EdgeSpec> edges,
                                                                std::vector<EntityId> passageEntity) {
  std::shared_ptr<KnowledgeGraph> g(new KnowledgeGraph());
  const size_t n = names.size();
  g->m_kind.assign(n + 1, EntityKind::Synset);
  g->m_nameOffset.assign(n + 2, 0);
  for (size_t i = 0; i < n; ++i) {
    g->m_nameOffset[i + 1] = static_cast<uint32_t>(g->m_names.size());
    g->m_names += names[i];
    if (i < kinds.size()) g->m_kind[i + 1] = kinds[i];
  }
  g->m_nameOffset[n + 1] = static_cast<uint32_t>(g->m_names.size());
  std::vector<Row> rows;
  for (const EdgeSpec& e : edges) rows.push_back({e.src, g->internRelation(e.relation), e.dst});
  g->setEdges(std::move(rows));
  g->m_passageEntity.assign(1, 0);
  g->m_passageEntity.insert(g->m_passageEntity.end(), passageEntity.begin(), passageEntity.end());
  g->buildIndexes();
  return g;
}

int32_t KnowledgeGraph::internRelation(std::string_view name) {
  int32_t r = relationId(name);
  if (r < 0) {
    r = static_cast<int32_t>(m_relations.size());
    m_relations.emplace_back(name);
  }
  return r;
}

void KnowledgeGraph::setEdges(std::vector<Row> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.src < b.src; });
  const size_t n = m_kind.size() - 1;  // entities 1..n
  m_edgeOffset.assign(n + 2, 0);
  m_edges.clear();
  m_edges.reserve(rows.size());
  size_t r = 0;
  for (size_t id = 1; id <= n + 1; ++id) {
    m_edgeOffset[id] = static_cast<uint32_t>(m_edges.size());
    for (; r < rows.size() && static_cast<size_t>(rows[r].src) == id; ++r) m_edges.push_back({rows[r].rel, rows[r].dst});
  }
}

void KnowledgeGraph::buildIndexes() {
  const size_t n = m_kind.size();
  m_byName.clear();
  m_byName.reserve(n);
  for (size_t id = 1; id < n; ++id) {
    const std::string_view nm = name(static_cast<EntityId>(id));
    if (nm.empty()) continue;
    const std::vector<std::string> words = linkWords(nm);
    if (words.empty()) continue;
    std::string key;
    for (const std::string& w : words) key += (key.empty() ? "" : " ") + w;
    m_byName[key].push_back(static_cast<EntityId>(id));
    m_maxNameWords = std::max(m_maxNameWords, wordCount(key));
  }
  m_entityPassage.assign(n, -1);
  for (size_t p = m_passageEntity.size(); p-- > 1;) {
    const EntityId e = m_passageEntity[p];
    if (e > 0 && static_cast<size_t>(e) < n) m_entityPassage[static_cast<size_t>(e)] = static_cast<int64_t>(p);
  }
}

std::string_view KnowledgeGraph::name(EntityId id) const {
  if (!contains(id)) return {};
  const auto b = m_nameOffset[static_cast<size_t>(id)], e = m_nameOffset[static_cast<size_t>(id) + 1];
  return std::string_view(m_names).substr(b, e - b);
}

std::span<const KgEdge> KnowledgeGraph::outEdges(EntityId id) const {
  if (!contains(id)) return {};
  const auto b = m_edgeOffset[static_cast<size_t>(id)], e = m_edgeOffset[static_cast<size_t>(id) + 1];
  return std::span<const KgEdge>(m_edges).subspan(b, e - b);
}

int32_t KnowledgeGraph::relationId(std::string_view nm) const {
  for (size_t i = 0; i < m_relations.size(); ++i)
    if (m_relations[i] == nm) return static_cast<int32_t>(i);
  return -1;
}

std::span<const EntityId> KnowledgeGraph::byName(std::string_view lowerName) const {
  auto it = m_byName.find(std::string(lowerName));
  if (it == m_byName.end()) return {};
  return it->second;
}

EntityId KnowledgeGraph::passageEntity(int64_t passageId) const {
  if (passageId < 1 || static_cast<size_t>(passageId) >= m_passageEntity.size()) return 0;
  return m_passageEntity[static_cast<size_t>(passageId)];
}

int64_t KnowledgeGraph::entityPassage(EntityId id) const {
  if (!contains(id) || static_cast<size_t>(id) >= m_entityPassage.size()) return -1;
  return m_entityPassage[static_cast<size_t>(id)];
}

KgStats KnowledgeGraph::stats() const {
  return {static_cast<int64_t>(m_kind.size()) - 1, static_cast<int64_t>(m_edges.size()),
          static_cast<int64_t>(m_byName.size())};
}

}  // namespace rag::knowledge
