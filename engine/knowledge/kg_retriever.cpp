#include "knowledge/kg_retriever.h"

#include <algorithm>
#include <iterator>

namespace rag::knowledge {

namespace {

// Words that never link on their own: function words, question words and the relation words
// questions are phrased with ("What is X a part of?").
constexpr std::string_view kNoLink[] = {
    "a",         "an",       "the",       "of",        "in",       "on",        "to",       "from",
    "with",      "for",      "by",        "at",        "as",       "and",       "or",       "is",
    "are",       "was",      "be",        "does",      "do",       "did",       "what",     "which",
    "who",       "whom",     "how",       "why",       "when",     "where",     "that",     "this",
    "it",        "its",      "something", "kind",      "part",     "member",    "instance", "substance",
    "opposite",  "field",    "topic",     "used",      "region",   "associated", "usage",   "category",
    "belong",    "more",     "general",   "action",    "entail",   "cause",     "adjective", "similar",
    "attribute", "value",    "pertain",   "verb",      "participle", "derived", "term",     "means"};

bool linkable(const std::string& gram, int32_t words) {
  if (words > 1) return true;
  if (gram.size() < 2) return false;
  return std::find(std::begin(kNoLink), std::end(kNoLink), gram) == std::end(kNoLink);
}

float dot(std::span<const float> a, std::span<const float> b) {
  float s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::string relationWords(std::string_view r) {
  std::string s(r);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

}  // namespace

Status KgParams::validate() const {
  if (subgraphs < 1 || subgraphs > 64) return Status::invalidArgument("subgraphs must be in [1, 64]");
  if (hops < 1 || hops > 4) return Status::invalidArgument("hops (L) must be in [1, 4]");
  if (fanout < 1 || fanout > 256) return Status::invalidArgument("fanout must be in [1, 256]");
  if (topK < 1 || topK > 1000) return Status::invalidArgument("top_k (paths kept per subgraph) must be in [1, 1000]");
  if (candidatePassages < 0 || candidatePassages > 200)
    return Status::invalidArgument("candidate passages must be in [0, 200]");
  return Status::ok();
}

std::vector<std::string> pathElements(const KnowledgeGraph& kg, const KgPath& path) {
  std::vector<std::string> out;
  out.reserve(path.entities.size());
  out.emplace_back(kg.name(path.entities.front()));
  for (size_t i = 0; i < path.relations.size(); ++i)
    out.push_back(" " + relationWords(kg.relationName(path.relations[i])) + " " + std::string(kg.name(path.entities[i + 1])));
  return out;
}

std::string pathText(const KnowledgeGraph& kg, const KgPath& path) {
  std::string s;
  for (const std::string& e : pathElements(kg, path)) s += e;
  return s;
}

std::vector<model::SubgraphText> subgraphTexts(const KnowledgeGraph& kg, std::span<const Subgraph> subgraphs) {
  std::vector<model::SubgraphText> out;
  for (const Subgraph& g : subgraphs) {
    model::SubgraphText t{.root = g.link.entity, .paths = {}};
    for (const KgPath& p : g.paths)
      if (p.kept) t.paths.push_back(pathElements(kg, p));
    out.push_back(std::move(t));
  }
  return out;
}

KgRetriever::KgRetriever(std::shared_ptr<const KnowledgeGraph> kg, EmbedFn embed, SearchFn search,
                         PassageTextFn passageText, size_t pathCacheEntries)
    : m_kg(std::move(kg)),
      m_embed(std::move(embed)),
      m_search(std::move(search)),
      m_passageText(std::move(passageText)),
      m_cacheEntries(pathCacheEntries) {
  m_lemmaOf = m_kg->relationId("lemma_of");
}

Result<std::vector<float>> KgRetriever::embedCached(std::span<const std::string> texts, int64_t* embedded) {
  std::vector<std::string> missing;
  for (const std::string& t : texts)
    if (!m_cache.count(t) && std::find(missing.begin(), missing.end(), t) == missing.end()) missing.push_back(t);
  if (!missing.empty()) {
    RAG_ASSIGN_OR_RETURN(std::vector<float> v, m_embed(missing));
    if (v.size() % missing.size() != 0) return Status::internal("the embedder returned a ragged batch");
    const size_t dim = v.size() / missing.size();
    if (m_cache.size() + missing.size() > m_cacheEntries) m_cache.clear();  // a bound; hot entities refill it
    for (size_t i = 0; i < missing.size(); ++i)
      m_cache[missing[i]] = std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(i * dim),
                                               v.begin() + static_cast<std::ptrdiff_t>((i + 1) * dim));
    if (embedded) *embedded += static_cast<int64_t>(missing.size());
  }
  std::vector<float> out;
  for (const std::string& t : texts) {
    const std::vector<float>& v = m_cache.at(t);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::vector<KgPath> KgRetriever::expand(EntityId root, int32_t hops, int32_t fanout, int64_t* cutEdges) const {
  std::vector<KgPath> paths;
  if (!m_kg->contains(root)) return paths;
  std::vector<KgPath> frontier{KgPath{.entities = {root}, .relations = {}}};
  for (int32_t h = 0; h < hops && !frontier.empty(); ++h) {
    std::vector<KgPath> next;
    for (const KgPath& p : frontier) {
      int32_t taken = 0;
      for (const KgEdge& e : m_kg->outEdges(p.entities.back())) {
        if (e.relation == m_lemmaOf) continue;  // a lemma's synsets are the same thing, not a fact
        if (std::find(p.entities.begin(), p.entities.end(), e.dst) != p.entities.end()) continue;  // a cycle
        if (taken == fanout) {
          if (cutEdges) ++*cutEdges;
          continue;
        }
        ++taken;
        KgPath q = p;
        q.entities.push_back(e.dst);
        q.relations.push_back(e.relation);
        next.push_back(std::move(q));
      }
    }
    paths.insert(paths.end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  return paths;
}

Result<std::vector<LinkedEntity>> KgRetriever::link(std::string_view question, std::span<const float> qv) {
  const std::vector<std::string> words = linkWords(question);
  std::vector<bool> used(words.size(), false);
  struct Match {
    std::string gram;
    std::vector<EntityId> candidates;
  };
  std::vector<Match> matches;
  const auto maxN = static_cast<size_t>(std::min(m_kg->maxNameWords(), 6));
  for (size_t n = std::min(maxN, words.size()); n >= 1; --n) {
    for (size_t i = 0; i + n <= words.size(); ++i) {
      if (std::any_of(used.begin() + static_cast<std::ptrdiff_t>(i), used.begin() + static_cast<std::ptrdiff_t>(i + n),
                      [](bool u) { return u; }))
        continue;
      std::string gram;
      for (size_t k = i; k < i + n; ++k) gram += (k > i ? " " : "") + words[k];
      if (!linkable(gram, static_cast<int32_t>(n))) continue;
      std::span<const EntityId> named = m_kg->byName(gram);
      if (named.empty()) continue;
      Match m{gram, {}};
      for (EntityId e : named) {
        if (m_kg->kind(e) == EntityKind::Lemma) {
          for (const KgEdge& edge : m_kg->outEdges(e))
            if (edge.relation == m_lemmaOf) m.candidates.push_back(edge.dst);
        } else {
          m.candidates.push_back(e);
        }
      }
      std::sort(m.candidates.begin(), m.candidates.end());
      m.candidates.erase(std::unique(m.candidates.begin(), m.candidates.end()), m.candidates.end());
      if (m.candidates.empty()) continue;
      for (size_t k = i; k < i + n; ++k) used[k] = true;
      matches.push_back(std::move(m));
    }
  }
  std::vector<LinkedEntity> out;
  for (const Match& m : matches)
    for (EntityId e : m.candidates) out.push_back({e, LinkSource::Name, m.gram, 0.0});
  // Score every candidate by its passage (the entity's gloss) against the question.
  std::vector<std::string> texts;
  std::vector<size_t> which;
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t pid = m_kg->entityPassage(out[i].entity);
    if (pid < 0) continue;
    Result<std::string> t = m_passageText(pid);
    if (!t || t->empty()) continue;
    texts.push_back(std::move(*t));
    which.push_back(i);
  }
  if (!texts.empty()) {
    RAG_ASSIGN_OR_RETURN(std::vector<float> v, embedCached(texts, nullptr));
    const size_t dim = qv.size();
    for (size_t k = 0; k < which.size(); ++k)
      out[which[k]].score = dot(qv, std::span<const float>(v).subspan(k * dim, dim));
  }
  return out;
}

Result<KgResult> KgRetriever::retrieve(std::string_view question, const KgParams& params) {
  RAG_RETURN_IF_ERROR(params.validate());
  KgResult res;
  const std::string q(question);
  RAG_ASSIGN_OR_RETURN(std::vector<float> qv, embedCached(std::span<const std::string>(&q, 1), &res.embeddedTexts));
  RAG_ASSIGN_OR_RETURN(res.nameCandidates, link(question, qv));

  // Candidates: for each matched n-gram its best-scoring sense, then the passages' entities.
  std::vector<LinkedEntity> chosen;
  auto seen = [&](EntityId e) {
    return std::any_of(chosen.begin(), chosen.end(), [&](const LinkedEntity& l) { return l.entity == e; });
  };
  {
    std::vector<LinkedEntity> best;
    for (const LinkedEntity& c : res.nameCandidates) {
      auto it = std::find_if(best.begin(), best.end(), [&](const LinkedEntity& b) { return b.matched == c.matched; });
      if (it == best.end()) best.push_back(c);
      else if (c.score > it->score) *it = c;
    }
    for (const LinkedEntity& b : best)
      if (!seen(b.entity)) chosen.push_back(b);
  }
  if (params.candidatePassages > 0 && m_search) {
    RAG_ASSIGN_OR_RETURN(std::vector<int64_t> pids, m_search(question, params.candidatePassages));
    std::vector<std::string> texts;
    std::vector<LinkedEntity> fromPassages;
    for (int64_t pid : pids) {
      const EntityId e = m_kg->passageEntity(pid);
      if (e == 0 || seen(e) ||
          std::any_of(fromPassages.begin(), fromPassages.end(), [&](const LinkedEntity& l) { return l.entity == e; }))
        continue;
      Result<std::string> t = m_passageText(pid);
      if (!t || t->empty()) continue;
      texts.push_back(std::move(*t));
      fromPassages.push_back({e, LinkSource::Passage, std::to_string(pid), 0.0});
    }
    if (!texts.empty()) {
      RAG_ASSIGN_OR_RETURN(std::vector<float> v, embedCached(texts, &res.embeddedTexts));
      for (size_t k = 0; k < fromPassages.size(); ++k)
        fromPassages[k].score = dot(qv, std::span<const float>(v).subspan(k * qv.size(), qv.size()));
    }
    chosen.insert(chosen.end(), fromPassages.begin(), fromPassages.end());
  }
  // The embedder ranks all candidates; the top `subgraphs` get a subgraph.
  std::stable_sort(chosen.begin(), chosen.end(), [](const LinkedEntity& a, const LinkedEntity& b) { return a.score > b.score; });
  if (chosen.size() > static_cast<size_t>(params.subgraphs)) chosen.resize(static_cast<size_t>(params.subgraphs));
  if (chosen.empty()) {
    res.note = "no entity of the knowledge graph is named in the question or found by the passage search";
    return res;
  }

  for (const LinkedEntity& l : chosen) {
    Subgraph g;
    g.link = l;
    g.paths = expand(l.entity, params.hops, params.fanout, &g.cutEdges);
    if (!g.paths.empty()) {
      std::vector<std::string> texts;
      texts.reserve(g.paths.size());
      for (const KgPath& p : g.paths) texts.push_back(pathText(*m_kg, p));
      RAG_ASSIGN_OR_RETURN(std::vector<float> v, embedCached(texts, &res.embeddedTexts));
      for (size_t k = 0; k < g.paths.size(); ++k)
        g.paths[k].score = dot(qv, std::span<const float>(v).subspan(k * qv.size(), qv.size()));
      std::vector<size_t> order(g.paths.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return g.paths[a].score > g.paths[b].score; });
      for (size_t k = 0; k < order.size() && k < static_cast<size_t>(params.topK); ++k) g.paths[order[k]].kept = true;
      // Kept paths in canonical order (relation and entity ids along the path: a path right
      // before its extensions, siblings together), then the pruned ones best first.
      auto key = [](const KgPath& p) {
        std::vector<int64_t> k;
        for (size_t i = 0; i < p.relations.size(); ++i) {
          k.push_back(p.relations[i]);
          k.push_back(p.entities[i + 1]);
        }
        return k;
      };
      std::stable_sort(g.paths.begin(), g.paths.end(), [&](const KgPath& a, const KgPath& b) {
        if (a.kept != b.kept) return a.kept;
        if (a.kept) return key(a) < key(b);
        return a.score > b.score;
      });
    }
    res.subgraphs.push_back(std::move(g));
  }
  return res;
}

}  // namespace rag::knowledge
