#include "knowledge/knowledge_use.h"

#include <algorithm>

namespace rag {

int64_t KnowledgeUse::keptPaths() const {
  int64_t n = 0;
  for (const KgSubgraphUse& g : subgraphs)
    n += std::count_if(g.paths.begin(), g.paths.end(), [](const KgPathUse& p) { return p.kept; });
  return n;
}

int64_t KnowledgeUse::prunedPaths() const {
  int64_t n = 0;
  for (const KgSubgraphUse& g : subgraphs)
    n += std::count_if(g.paths.begin(), g.paths.end(), [](const KgPathUse& p) { return !p.kept; });
  return n;
}

const char* kgEntityKindName(KgEntityKind k) {
  switch (k) {
    case KgEntityKind::Synset: return "synset";
    case KgEntityKind::Lemma: return "lemma";
    case KgEntityKind::Term: return "term";
  }
  return "entity";
}

}  // namespace rag

namespace rag::knowledge {

namespace {

KgLink publicLink(const KnowledgeGraph& kg, const LinkedEntity& l, bool chosen) {
  return {.entity = publicEntity(kg, l.entity),
          .source = l.source == LinkSource::Name ? KgLinkSource::Name : KgLinkSource::Passage,
          .matched = l.matched,
          .score = l.score,
          .chosen = chosen};
}

}  // namespace

KgEntity publicEntity(const KnowledgeGraph& kg, EntityId id) {
  KgEntity e{.id = id, .name = std::string(kg.name(id))};
  if (kg.contains(id)) {
    switch (kg.kind(id)) {
      case EntityKind::Synset: e.kind = KgEntityKind::Synset; break;
      case EntityKind::Lemma: e.kind = KgEntityKind::Lemma; break;
      case EntityKind::Term: e.kind = KgEntityKind::Term; break;
    }
  }
  return e;
}

std::shared_ptr<const KnowledgeUse> knowledgeUse(const KnowledgeGraph& kg, std::string_view query, const KgResult& r) {
  auto use = std::make_shared<KnowledgeUse>();
  use->query = std::string(query);
  use->note = r.note;
  auto chosen = [&](EntityId id) {
    return std::any_of(r.subgraphs.begin(), r.subgraphs.end(), [&](const Subgraph& g) { return g.link.entity == id; });
  };
  // Every name candidate, then the passage-linked roots no name matched.
  for (const LinkedEntity& l : r.nameCandidates) use->links.push_back(publicLink(kg, l, chosen(l.entity)));
  for (const Subgraph& g : r.subgraphs) {
    const bool listed = std::any_of(use->links.begin(), use->links.end(),
                                    [&](const KgLink& l) { return l.entity.id == g.link.entity; });
    if (!listed) use->links.push_back(publicLink(kg, g.link, true));
  }
  for (const Subgraph& g : r.subgraphs) {
    KgSubgraphUse s{.root = publicLink(kg, g.link, true), .cutEdges = g.cutEdges};
    s.paths.reserve(g.paths.size());
    for (const KgPath& p : g.paths) {
      KgPathUse u{.score = p.score, .kept = p.kept};
      for (EntityId e : p.entities) u.entities.push_back(publicEntity(kg, e));
      for (int32_t rel : p.relations) u.relations.emplace_back(kg.relationName(rel));
      s.paths.push_back(std::move(u));
    }
    use->subgraphs.push_back(std::move(s));
  }
  return use;
}

}  // namespace rag::knowledge
