// rag::KnowledgeExplorer (rag/knowledge.h): the corpus's KnowledgeGraph plus what an inspector
// needs beyond linking: a sorted name list for completion and an in-edge index.
#include <algorithm>
#include <cctype>
#include <mutex>
#include <unordered_set>

#include "corpus/corpus_db.h"
#include "knowledge/knowledge_graph.h"
#include "knowledge/knowledge_use.h"
#include "rag/knowledge.h"

namespace rag {

using knowledge::EntityId;
using knowledge::KgEdge;
using knowledge::KnowledgeGraph;

namespace {

// The key linking matches on: linkWords joined by single spaces.
std::string nameKey(std::string_view text) {
  std::string key;
  for (const std::string& w : knowledge::linkWords(text)) {
    if (!key.empty()) key += ' ';
    key += w;
  }
  return key;
}

int kindRank(KgEntityKind k) { return k == KgEntityKind::Synset ? 0 : k == KgEntityKind::Lemma ? 1 : 2; }

}  // namespace

Status NeighbourhoodParams::validate() const {
  if (maxEdges < 1 || maxEdges > 5000)
    return Status::invalidArgument("maxEdges (edges shown per entity) must be in [1, 5000], not " + std::to_string(maxEdges));
  return Status::ok();
}

struct KnowledgeExplorer::Impl {
  std::shared_ptr<const KnowledgeGraph> kg;
  std::vector<std::pair<std::string, EntityId>> names;  // (key, id), sorted by key then id
  std::vector<uint32_t> inOffset;                       // CSR of in-edges by dst; size entities + 2
  std::vector<KgEdge> inEdges;                          // KgEdge::dst holds the source here
  mutable std::mutex dbMutex;
  mutable sql::Db db;
};

KnowledgeExplorer::KnowledgeExplorer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
KnowledgeExplorer::~KnowledgeExplorer() = default;

Result<std::shared_ptr<const KnowledgeExplorer>> KnowledgeExplorer::open(const std::filesystem::path& corpus) {
  auto impl = std::make_unique<Impl>();
  RAG_ASSIGN_OR_RETURN(impl->kg, KnowledgeGraph::load(corpus));
  RAG_ASSIGN_OR_RETURN(impl->db, corpus::openCorpus(corpus));
  const KnowledgeGraph& kg = *impl->kg;
  const auto n = static_cast<EntityId>(kg.stats().entities);
  impl->names.reserve(static_cast<size_t>(n));
  std::vector<uint32_t> inCount(static_cast<size_t>(n) + 2, 0);
  for (EntityId id = 1; id <= n; ++id) {
    std::string key = nameKey(kg.name(id));
    if (!key.empty()) impl->names.emplace_back(std::move(key), id);
    for (const KgEdge& e : kg.outEdges(id)) ++inCount[static_cast<size_t>(e.dst)];
  }
  std::sort(impl->names.begin(), impl->names.end());
  impl->inOffset.assign(static_cast<size_t>(n) + 2, 0);
  for (size_t id = 1; id <= static_cast<size_t>(n); ++id) impl->inOffset[id + 1] = impl->inOffset[id] + inCount[id];
  impl->inEdges.resize(impl->inOffset[static_cast<size_t>(n) + 1]);
  std::vector<uint32_t> fill(impl->inOffset.begin(), impl->inOffset.end());
  for (EntityId id = 1; id <= n; ++id)
    for (const KgEdge& e : kg.outEdges(id)) impl->inEdges[fill[static_cast<size_t>(e.dst)]++] = {e.relation, id};
  return std::shared_ptr<const KnowledgeExplorer>(new KnowledgeExplorer(std::move(impl)));
}

int64_t KnowledgeExplorer::entityCount() const { return m_impl->kg->stats().entities; }
int64_t KnowledgeExplorer::edgeCount() const { return m_impl->kg->stats().edges; }
std::vector<std::string> KnowledgeExplorer::relationNames() const { return m_impl->kg->relationNames(); }

std::vector<KgNameMatch> KnowledgeExplorer::complete(std::string_view prefix, int32_t limit) const {
  std::string p;
  for (char c : prefix) {
    const char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == ' ' && (p.empty() || p.back() == ' ')) continue;
    p += l;
  }
  std::vector<KgNameMatch> out;
  if (p.empty() || limit < 1) return out;
  const auto& names = m_impl->names;
  auto it = std::lower_bound(names.begin(), names.end(), std::make_pair(p, EntityId{0}));
  for (; it != names.end() && it->first.compare(0, p.size(), p) == 0; ++it) {
    if (!out.empty() && out.back().name == it->first) {
      ++out.back().entities;
      continue;
    }
    if (static_cast<int32_t>(out.size()) == limit) break;
    out.push_back({it->first, 1});
  }
  return out;
}

Result<std::vector<KgEntity>> KnowledgeExplorer::find(std::string_view name) const {
  const std::string key = nameKey(name);
  std::vector<KgEntity> out;
  for (EntityId id : m_impl->kg->byName(key)) out.push_back(knowledge::publicEntity(*m_impl->kg, id));
  if (out.empty())
    return Status::notFound("no entity of the knowledge graph is named '" + std::string(name) + "'");
  std::stable_sort(out.begin(), out.end(), [](const KgEntity& a, const KgEntity& b) {
    return kindRank(a.kind) != kindRank(b.kind) ? kindRank(a.kind) < kindRank(b.kind) : a.id < b.id;
  });
  return out;
}

Result<KgEntity> KnowledgeExplorer::entity(int32_t id) const {
  if (!m_impl->kg->contains(id))
    return Status::notFound("entity " + std::to_string(id) + " is not in the knowledge graph (ids run from 1 to " +
                            std::to_string(entityCount()) + ")");
  return knowledge::publicEntity(*m_impl->kg, id);
}

Result<std::string> KnowledgeExplorer::gloss(int32_t id, size_t maxChars) const {
  RAG_RETURN_IF_ERROR(entity(id).status());
  const int64_t pid = m_impl->kg->entityPassage(id);
  if (pid < 0) return std::string();
  std::lock_guard lock(m_impl->dbMutex);
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare("SELECT text FROM passages WHERE id = ?"));
  st.bind(1, pid);
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  if (!row) return std::string();
  std::string text = st.columnText(0);
  if (text.size() > maxChars) {
    text.resize(maxChars);
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();  // UTF-8 tail
    if (!text.empty()) text.pop_back();
    text += "…";
  }
  return text;
}

Result<KgNeighbourhood> KnowledgeExplorer::neighbourhood(int32_t id, const NeighbourhoodParams& params) const {
  RAG_RETURN_IF_ERROR(params.validate());
  RAG_ASSIGN_OR_RETURN(KgEntity centre, entity(id));
  const KnowledgeGraph& kg = *m_impl->kg;
  KgNeighbourhood n;
  n.centre = centre;
  n.entities.push_back(centre);
  std::unordered_set<EntityId> seen{id};
  auto add = [&](EntityId src, int32_t rel, EntityId dst) {
    ++n.totalEdges;
    if (static_cast<int32_t>(n.edges.size()) >= params.maxEdges) {
      ++n.cutEdges;
      return;
    }
    n.edges.push_back({src, dst, std::string(kg.relationName(rel))});
    const EntityId other = src == id ? dst : src;
    if (seen.insert(other).second) n.entities.push_back(knowledge::publicEntity(kg, other));
  };
  std::unordered_set<EntityId> outTargets;
  for (const KgEdge& e : kg.outEdges(id)) {
    outTargets.insert(e.dst);
    add(id, e.relation, e.dst);
  }
  if (params.incoming) {
    const auto b = m_impl->inOffset[static_cast<size_t>(id)], e = m_impl->inOffset[static_cast<size_t>(id) + 1];
    for (auto i = b; i < e; ++i) {
      const KgEdge& in = m_impl->inEdges[i];
      if (!outTargets.count(in.dst)) add(in.dst, in.relation, id);
    }
  }
  return n;
}

Result<std::vector<KgPassage>> KnowledgeExplorer::passages(int32_t id) const {
  RAG_RETURN_IF_ERROR(entity(id).status());
  std::lock_guard lock(m_impl->dbMutex);
  RAG_ASSIGN_OR_RETURN(sql::Stmt st,
                       m_impl->db.prepare("SELECT id, title, text FROM passages WHERE entity_id = ? ORDER BY chunk, id"));
  st.bind(1, static_cast<int64_t>(id));
  std::vector<KgPassage> out;
  while (true) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    out.push_back({st.columnInt64(0), st.columnText(1), st.columnText(2)});
  }
  return out;
}

}  // namespace rag
