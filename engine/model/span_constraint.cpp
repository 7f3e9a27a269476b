#include "model/span_constraint.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace rag::model {

uint8_t SpanSource::normalise(uint8_t c) {
  if (c == ' ' || c == '\t' || c == '\r') return ' ';
  if (c < 0x20 || c == 0x7f) return kBreak;
  if (c >= 'A' && c <= 'Z') return static_cast<uint8_t>(c - 'A' + 'a');
  return c;
}

int32_t SpanSource::addState() {
  m_first.push_back(kNone);
  m_link.push_back(kNone);
  m_len.push_back(0);
  return static_cast<int32_t>(m_first.size()) - 1;
}

void SpanSource::addEdge(int32_t from, uint8_t c, int32_t to) {
  m_edges.push_back({c, to, m_first[static_cast<size_t>(from)]});
  m_first[static_cast<size_t>(from)] = static_cast<int32_t>(m_edges.size()) - 1;
}

void SpanSource::setEdge(int32_t from, uint8_t c, int32_t to) {
  for (int32_t e = m_first[static_cast<size_t>(from)]; e != kNone; e = m_edges[static_cast<size_t>(e)].nextEdge)
    if (m_edges[static_cast<size_t>(e)].byte == c) {
      m_edges[static_cast<size_t>(e)].to = to;
      return;
    }
  addEdge(from, c, to);
}

int32_t SpanSource::next(int32_t state, uint8_t c) const {
  if (state < 0 || static_cast<size_t>(state) >= m_first.size()) return kNone;
  for (int32_t e = m_first[static_cast<size_t>(state)]; e != kNone; e = m_edges[static_cast<size_t>(e)].nextEdge)
    if (m_edges[static_cast<size_t>(e)].byte == c) return m_edges[static_cast<size_t>(e)].to;
  return kNone;
}

std::shared_ptr<const SpanSource> SpanSource::build(std::string_view text) {
  // Normalise: whitespace runs become one space, none at a line's start.
  std::string norm;
  norm.reserve(text.size());
  for (char ch : text) {
    const uint8_t c = normalise(static_cast<uint8_t>(ch));
    if (c == ' ' && (norm.empty() || norm.back() == ' ' || static_cast<uint8_t>(norm.back()) == kBreak)) continue;
    norm.push_back(static_cast<char>(c));
  }
  auto s = std::make_shared<SpanSource>();
  s->m_first.reserve(2 * norm.size() + 1);
  s->m_link.reserve(2 * norm.size() + 1);
  s->m_len.reserve(2 * norm.size() + 1);
  s->m_edges.reserve(3 * norm.size() + 1);
  s->addState();  // the root: the empty string
  int32_t last = kRoot;
  for (char ch : norm) {  // the classic online construction (Blumer et al. 1985)
    const auto c = static_cast<uint8_t>(ch);
    const int32_t cur = s->addState();
    s->m_len[static_cast<size_t>(cur)] = s->m_len[static_cast<size_t>(last)] + 1;
    int32_t p = last;
    while (p != kNone && s->next(p, c) == kNone) {
      s->addEdge(p, c, cur);
      p = s->m_link[static_cast<size_t>(p)];
    }
    if (p == kNone) {
      s->m_link[static_cast<size_t>(cur)] = kRoot;
    } else {
      const int32_t q = s->next(p, c);
      if (s->m_len[static_cast<size_t>(p)] + 1 == s->m_len[static_cast<size_t>(q)]) {
        s->m_link[static_cast<size_t>(cur)] = q;
      } else {
        const int32_t clone = s->addState();
        s->m_len[static_cast<size_t>(clone)] = s->m_len[static_cast<size_t>(p)] + 1;
        s->m_link[static_cast<size_t>(clone)] = s->m_link[static_cast<size_t>(q)];
        for (int32_t e = s->m_first[static_cast<size_t>(q)]; e != kNone; e = s->m_edges[static_cast<size_t>(e)].nextEdge)
          s->addEdge(clone, s->m_edges[static_cast<size_t>(e)].byte, s->m_edges[static_cast<size_t>(e)].to);
        while (p != kNone && s->next(p, c) == q) {
          s->setEdge(p, c, clone);
          p = s->m_link[static_cast<size_t>(p)];
        }
        s->m_link[static_cast<size_t>(q)] = clone;
        s->m_link[static_cast<size_t>(cur)] = clone;
      }
    }
    last = cur;
  }
  return s;
}

std::shared_ptr<const TokenPieces> TokenPieces::make(std::vector<std::string> bytes, std::vector<int32_t> endIds) {
  auto p = std::make_shared<TokenPieces>();
  p->bytes = std::move(bytes);
  p->endIds = std::move(endIds);
  p->nextToken.assign(p->bytes.size(), -1);
  p->trieFirstEdge.push_back(-1);
  p->trieFirstToken.push_back(-1);
  auto child = [&](int32_t node, uint8_t c) {
    for (int32_t e = p->trieFirstEdge[static_cast<size_t>(node)]; e >= 0; e = p->trieEdges[static_cast<size_t>(e)].next)
      if (p->trieEdges[static_cast<size_t>(e)].byte == c) return p->trieEdges[static_cast<size_t>(e)].to;
    const auto to = static_cast<int32_t>(p->trieFirstEdge.size());
    p->trieFirstEdge.push_back(-1);
    p->trieFirstToken.push_back(-1);
    p->trieEdges.push_back({c, to, p->trieFirstEdge[static_cast<size_t>(node)]});
    p->trieFirstEdge[static_cast<size_t>(node)] = static_cast<int32_t>(p->trieEdges.size()) - 1;
    return to;
  };
  for (size_t id = 0; id < p->bytes.size(); ++id) {
    if (p->bytes[id].empty()) continue;
    int32_t node = 0;
    for (char c : p->bytes[id]) node = child(node, static_cast<uint8_t>(c));
    p->nextToken[id] = p->trieFirstToken[static_cast<size_t>(node)];
    p->trieFirstToken[static_cast<size_t>(node)] = static_cast<int32_t>(id);
  }
  return p;
}

SpanConstraint::SpanConstraint(std::shared_ptr<const SpanSource> source, std::shared_ptr<const TokenPieces> pieces)
    : m_source(std::move(source)), m_pieces(std::move(pieces)) {}

SpanConstraint::Walk SpanConstraint::walk(Walk w, std::string_view bytes) const {
  for (char ch : bytes) {
    if (w.state == SpanSource::kNone) return w;
    const uint8_t c = SpanSource::normalise(static_cast<uint8_t>(ch));
    if (c == ' ') {
      // Whitespace before the first character is free; after it, a run is one space.
      if (w.started && !w.space) w.state = m_source->next(w.state, ' ');
      w.space = w.started;
      continue;
    }
    if (c == SpanSource::kBreak) {
      w.state = SpanSource::kNone;
      return w;
    }
    w.state = m_source->next(w.state, c);
    w.started = true;
    w.space = false;
  }
  return w;
}

void SpanConstraint::decide(std::span<uint8_t> allowed, std::span<const std::string> stops) {
  const TokenPieces& p = *m_pieces;
  if (!m_stopsRead) {
    m_stopsRead = true;
    m_holdsStop.assign(p.bytes.size(), 0);
    for (size_t id = 0; id < p.bytes.size(); ++id) {
      size_t cut = std::string_view::npos;
      for (const std::string& s : stops)
        if (!s.empty()) cut = std::min(cut, std::string_view(p.bytes[id]).find(s));
      if (cut == std::string_view::npos) continue;
      m_holdsStop[id] = 1;
      m_stopCuts.emplace_back(static_cast<int32_t>(id), cut);
    }
  }
  const Walk here{m_state, m_started, m_space};
  // The trie, depth first: a node's tokens are allowed when the walk to it stays in the source.
  m_stack.clear();
  m_stack.emplace_back(0, here);
  while (!m_stack.empty()) {
    const auto [node, w] = m_stack.back();
    m_stack.pop_back();
    for (int32_t t = p.trieFirstToken[static_cast<size_t>(node)]; t >= 0; t = p.nextToken[static_cast<size_t>(t)])
      if (static_cast<size_t>(t) < allowed.size() && !m_holdsStop[static_cast<size_t>(t)]) allowed[static_cast<size_t>(t)] = 1;
    for (int32_t e = p.trieFirstEdge[static_cast<size_t>(node)]; e >= 0; e = p.trieEdges[static_cast<size_t>(e)].next) {
      const TokenPieces::TrieEdge& edge = p.trieEdges[static_cast<size_t>(e)];
      const char c = static_cast<char>(edge.byte);
      const Walk next = walk(w, std::string_view(&c, 1));
      if (next.state != SpanSource::kNone) m_stack.emplace_back(edge.to, next);
    }
  }
  // A token with a stop string stops there, with some text.
  for (const auto& [id, cut] : m_stopCuts) {
    if (static_cast<size_t>(id) >= allowed.size()) continue;
    const Walk w = walk(here, std::string_view(p.bytes[static_cast<size_t>(id)]).substr(0, cut));
    allowed[static_cast<size_t>(id)] = w.state != SpanSource::kNone && w.started;
  }
}

size_t SpanConstraint::mask(std::span<float> logits, std::span<const std::string> stops,
                            std::span<const int32_t> stopTokenIds, float floor) {
  if (outside()) return logits.size();  // left the source already: no constraint to keep
  // Decide first, then mask, so that a row with nothing allowed is left as it was.
  std::vector<uint8_t>& allowed = m_allowed;
  allowed.assign(logits.size(), 0);
  decide(allowed, stops);
  for (const std::span<const int32_t> ends : {std::span<const int32_t>(m_pieces->endIds), stopTokenIds})
    for (int32_t t : ends)
      if (t >= 0 && static_cast<size_t>(t) < allowed.size()) allowed[static_cast<size_t>(t)] = m_started;
  size_t count = 0;
  for (uint8_t a : allowed) count += a;
  if (count == 0) return 0;
  if (floor > 0 && !m_spaced) {  // in the answer's first word: the best span continuation against the model's best
    float best = -std::numeric_limits<float>::infinity(), bestAllowed = best;
    for (size_t i = 0; i < logits.size(); ++i) {
      best = std::max(best, logits[i]);
      if (allowed[i]) bestAllowed = std::max(bestAllowed, logits[i]);
    }
    if (std::isfinite(best) && static_cast<double>(bestAllowed) - static_cast<double>(best) < std::log(static_cast<double>(floor))) {
      m_state = SpanSource::kNone;  // the model is not copying: lift the constraint
      return logits.size();
    }
  }
  for (size_t i = 0; i < logits.size(); ++i)
    if (!allowed[i]) logits[i] = -std::numeric_limits<float>::infinity();
  return count;
}

void SpanConstraint::advance(int32_t token) {
  if (outside() || token < 0 || static_cast<size_t>(token) >= m_pieces->bytes.size()) return;
  const Walk w = walk({m_state, m_started, m_space}, m_pieces->bytes[static_cast<size_t>(token)]);
  m_state = w.state;
  m_started = w.started;
  m_space = w.space;
  m_spaced = m_spaced || (w.started && w.space);
}

void SpanConstraint::reset() {
  m_state = SpanSource::kRoot;
  m_started = false;
  m_space = false;
  m_spaced = false;
}

}  // namespace rag::model
