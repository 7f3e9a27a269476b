#include "corpus/qa_builder.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <unordered_set>

namespace rag::corpus {

namespace {

constexpr std::string_view kSingleHop = "single_hop";
constexpr std::string_view kDefinition = "definition";
constexpr std::string_view kTwoHop = "two_hop";
constexpr std::string_view kFoldoc = "foldoc";

char fold(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = fold(c);
  return out;
}

bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80;
}

char posGroup(char pos) { return pos == 's' ? 'a' : pos; }

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A stable hash (unlike std::hash, the same on every platform and run).
uint64_t stableHash(uint64_t seed, std::string_view s) {
  uint64_t h = 1469598103934665603ULL ^ splitmix(seed);
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return splitmix(h);
}

double unitHash(uint64_t seed, std::string_view s) {
  return static_cast<double>(stableHash(seed, s) >> 11) * (1.0 / 9007199254740992.0);
}

std::string stripFinalPeriod(std::string_view s) {
  while (!s.empty() && (s.back() == '.' || s.back() == ' ')) s.remove_suffix(1);
  return std::string(s);
}

size_t tokenCount(std::string_view s) {
  size_t n = 0;
  bool in = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n') in = false;
    else if (!in) {
      in = true;
      ++n;
    }
  }
  return n;
}

bool anyPhraseIn(std::string_view text, const std::vector<std::string>& phrases) {
  for (const std::string& p : phrases)
    if (containsPhrase(text, p)) return true;
  return false;
}

void addUnique(std::vector<std::string>& v, std::string_view s) {
  for (const std::string& x : v)
    if (x == s) return;
  v.emplace_back(s);
}

struct Template {
  std::string_view relation;
  char pos;             // part of speech of the topic synset (groups: 'a' covers satellites)
  bool lexical;         // a pointer between lemmas (the topic lemma's own pointer)
  std::string_view text;  // "{}" is replaced by the topic name
};

constexpr Template kSingleHopTemplates[] = {
    {"hypernym", 'n', false, "What is {} a kind of?"},
    {"instance_hypernym", 'n', false, "What is {} an instance of?"},
    {"part_holonym", 'n', false, "What is {} a part of?"},
    {"member_holonym", 'n', false, "What is {} a member of?"},
    {"substance_holonym", 'n', false, "What is {} a substance of?"},
    {"antonym", 'n', true, "What is the opposite of {}?"},
    {"domain_topic", 'n', false, "Which field or topic is {} used in?"},
    {"domain_region", 'n', false, "Which region is {} associated with?"},
    {"domain_usage", 'n', false, "What usage category does {} belong to?"},
    {"hypernym", 'v', false, "What more general action is {} a kind of?"},
    {"entailment", 'v', false, "What does {} entail?"},
    {"cause", 'v', false, "What does {} cause?"},
    {"antonym", 'v', true, "What is the opposite of {}?"},
    {"domain_topic", 'v', false, "Which field or topic is {} used in?"},
    {"similar_to", 'a', false, "Which adjective is {} similar to?"},
    {"attribute", 'a', false, "What attribute is {} a value of?"},
    {"antonym", 'a', true, "What is the opposite of {}?"},
    {"pertainym", 'a', true, "What does {} pertain to?"},
    {"participle", 'a', true, "Which verb is {} a participle of?"},
    {"domain_topic", 'a', false, "Which field or topic is {} used in?"},
    {"antonym", 'r', true, "What is the opposite of {}?"},
    {"derived_from_adjective", 'r', true, "Which adjective is {} derived from?"},
};

struct TwoHopTemplate {
  std::string_view first;
  std::string_view second;
  std::string_view text;
};

// X -first-> Y -second-> Z, asked about X. Y never appears in the text.
constexpr TwoHopTemplate kTwoHopTemplates[] = {
    {"part_holonym", "hypernym", "What kind of thing is {} a part of?"},
    {"member_holonym", "hypernym", "What kind of group is {} a member of?"},
    {"substance_holonym", "hypernym", "What kind of thing is {} a substance of?"},
    {"instance_hypernym", "hypernym", "{} is an instance of something; what is that a kind of?"},
    {"hypernym", "hypernym", "{} is a kind of something; what is that a kind of?"},
    {"part_holonym", "part_holonym", "{} is a part of something; what is that a part of?"},
    {"part_holonym", "instance_hypernym",
     "{} is a part of something; what is that an instance of?"},
    {"member_holonym", "member_holonym",
     "{} is a member of something; what is that a member of?"},
    {"hypernym", "part_holonym", "{} is a kind of something; what is that a part of?"},
    {"hypernym", "member_holonym", "{} is a kind of something; what is that a member of?"},
};

// The template with "{}" replaced by `name`, first letter capitalised.
std::string fill(std::string_view tmpl, std::string_view name) {
  const size_t at = tmpl.find("{}");
  std::string out;
  out.reserve(tmpl.size() + name.size());
  out.append(tmpl.substr(0, at));
  out.append(name);
  out.append(tmpl.substr(at + 2));
  const char c0 = out.front();
  if (c0 >= 'a' && c0 <= 'z') out.front() = static_cast<char>(c0 - 'a' + 'A');
  return out;
}

// The one synset X points to with a semantic `type` pointer; -1 when none or several.
int64_t uniqueTarget(const SynsetView& s, std::string_view type) {
  int64_t found = -1;
  for (const SynsetLink& l : s.links) {
    if (l.type != type || l.sourceWord) continue;
    if (found >= 0 && found != l.target) return -1;
    found = l.target;
  }
  return found;
}

struct Candidate {
  QaItem item;
  std::string sampleKey;
};

class QaGenerator {
public:
  QaGenerator(const CorpusModel& m, const QaParams& p, const ProgressFn& progress)
      : m_m(m), m_p(p), m_progress(progress) {}

  std::vector<QaItem> run() {
    indexSenses();
    std::vector<Candidate> all;
    appendCapped(all, singleHop(), [](const Candidate& c) { return c.item.relation; },
                 m_p.maxPerSingleHopRelation);
    appendCapped(all, definitions(), [](const Candidate&) { return std::string(); },
                 m_p.maxDefinition);
    appendCapped(all, twoHop(), [](const Candidate& c) { return c.item.relation; },
                 m_p.maxPerTwoHopRelation);
    appendCapped(all, foldoc(), [](const Candidate&) { return std::string(); }, m_p.maxFoldoc);
    if (m_progress) m_progress("splitting QA", 0, 1);
    std::vector<QaItem> out = split(all);
    if (m_progress) m_progress("splitting QA", 1, 1);
    return out;
  }

private:
  const CorpusModel& m_m;
  const QaParams& m_p;
  const ProgressFn& m_progress;
  std::unordered_map<std::string, uint32_t> m_senses;  // "lemma\x1fpos" -> synsets
  std::vector<int> m_topicLemma;                       // per synset: monosemous lemma or -1
  std::unordered_map<int64_t, size_t> m_synsetOfEntity;

  static std::string senseKey(std::string_view lemma, char pos) {
    std::string k = lowerAscii(lemma);
    k.push_back('\x1f');
    k.push_back(posGroup(pos));
    return k;
  }

  void indexSenses() {
    m_senses.reserve(m_m.synsets.size() * 2);
    for (const SynsetView& s : m_m.synsets) {
      std::vector<std::string> seen;
      for (const std::string& l : s.lemmas) {
        std::string k = senseKey(l, s.pos);
        if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
        ++m_senses[k];
        seen.push_back(std::move(k));
      }
    }
    m_topicLemma.assign(m_m.synsets.size(), -1);
    m_synsetOfEntity.reserve(m_m.synsets.size());
    for (size_t i = 0; i < m_m.synsets.size(); ++i) m_synsetOfEntity[m_m.synsets[i].entityId] = i;
    for (size_t i = 0; i < m_m.synsets.size(); ++i) {
      const SynsetView& s = m_m.synsets[i];
      for (size_t w = 0; w < s.lemmas.size(); ++w) {
        const std::string& l = s.lemmas[w];
        bool hasLetter = std::any_of(l.begin(), l.end(),
                                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
        if (l.size() < 2 || !hasLetter) continue;
        if (m_senses[senseKey(l, s.pos)] == 1) {
          m_topicLemma[i] = static_cast<int>(w);
          break;
        }
      }
    }
  }

  std::vector<std::string> lemmasOf(const SynsetView& s, std::string_view first = {}) const {
    std::vector<std::string> v;
    if (!first.empty()) v.emplace_back(first);
    for (const std::string& l : s.lemmas) addUnique(v, l);
    return v;
  }

  std::vector<Candidate> singleHop() {
    std::vector<Candidate> out;
    for (size_t i = 0; i < m_m.synsets.size(); ++i) {
      if (m_topicLemma[i] < 0) continue;
      const SynsetView& x = m_m.synsets[i];
      const int w = m_topicLemma[i];
      const std::string& name = x.lemmas[static_cast<size_t>(w)];
      const std::string_view passage = m_m.passage(x.passageId).text;
      for (const Template& t : kSingleHopTemplates) {
        if (t.pos != posGroup(x.pos)) continue;
        QaItem q;
        q.type = kSingleHop;
        q.relation = std::string(t.relation);
        q.topicName = name;
        q.question = fill(t.text, name);
        q.goldPassages = {x.passageId};
        if (t.lexical) {
          // The topic lemma's own pointers; they must all name the same lemma text.
          const SynsetLink* only = nullptr;
          bool ambiguous = false;
          for (const SynsetLink& l : x.links) {
            if (l.type != t.relation || l.sourceWord != w + 1) continue;
            if (only && lowerAscii(m_m.synsets[only->target].lemmas[only->targetWord - 1]) !=
                            lowerAscii(m_m.synsets[l.target].lemmas[l.targetWord - 1]))
              ambiguous = true;
            if (!only) only = &l;
          }
          if (!only || ambiguous) continue;
          const SynsetView& y = m_m.synsets[only->target];
          q.topicEntity = x.lemmaEntities[static_cast<size_t>(w)];
          q.answers = lemmasOf(y, y.lemmas[only->targetWord - 1]);
          q.pathEntities = {q.topicEntity, y.lemmaEntities[only->targetWord - 1]};
        } else {
          int64_t target = uniqueTarget(x, t.relation);
          if (target < 0) continue;
          const SynsetView& y = m_m.synsets[static_cast<size_t>(target)];
          q.topicEntity = x.entityId;
          q.answers = lemmasOf(y);
          q.pathEntities = {x.entityId, y.entityId};
        }
        q.pathRelations = {t.relation};
        // The answer must be readable in the gold passage and not given away by the question.
        if (anyPhraseIn(q.question, q.answers)) continue;
        if (!anyPhraseIn(passage, q.answers)) continue;
        std::string key = q.relation + "|" + std::to_string(q.topicEntity);
        out.push_back({std::move(q), std::move(key)});
      }
      if (m_progress && (i + 1) % 16384 == 0)
        m_progress("generating single-hop QA", i + 1, m_m.synsets.size());
    }
    if (m_progress) m_progress("generating single-hop QA", m_m.synsets.size(), m_m.synsets.size());
    return out;
  }

  std::vector<Candidate> definitions() {
    std::unordered_map<std::string, uint32_t> glossCount;
    glossCount.reserve(m_m.synsets.size());
    for (const SynsetView& s : m_m.synsets) ++glossCount[lowerAscii(s.definition)];
    std::vector<Candidate> out;
    for (size_t i = 0; i < m_m.synsets.size(); ++i) {
      const SynsetView& x = m_m.synsets[i];
      if (tokenCount(x.definition) < 4) continue;
      if (glossCount[lowerAscii(x.definition)] != 1) continue;
      std::vector<std::string> answers = lemmasOf(x);
      if (anyPhraseIn(x.definition, answers)) continue;
      QaItem q;
      q.type = kDefinition;
      q.relation = "gloss";
      q.topicEntity = x.entityId;
      q.topicName = m_topicLemma[i] >= 0 ? x.lemmas[static_cast<size_t>(m_topicLemma[i])]
                                         : x.lemmas.front();
      q.question = "Which term means: " + stripFinalPeriod(x.definition) + "?";
      q.answers = std::move(answers);
      q.goldPassages = {x.passageId};
      q.pathEntities = {x.entityId};
      std::string key = std::to_string(x.entityId);
      out.push_back({std::move(q), std::move(key)});
    }
    if (m_progress) m_progress("generating definition QA", 1, 1);
    return out;
  }

  std::vector<Candidate> twoHop() {
    std::vector<Candidate> out;
    for (size_t i = 0; i < m_m.synsets.size(); ++i) {
      if (m_topicLemma[i] < 0 || m_m.synsets[i].pos != 'n') continue;
      const SynsetView& x = m_m.synsets[i];
      const std::string& name = x.lemmas[static_cast<size_t>(m_topicLemma[i])];
      const std::string_view firstPassage = m_m.passage(x.passageId).text;
      size_t made = 0;
      for (const TwoHopTemplate& t : kTwoHopTemplates) {
        if (made >= m_p.maxTwoHopPerTopic) break;
        int64_t yi = uniqueTarget(x, t.first);
        if (yi < 0 || static_cast<size_t>(yi) == i) continue;
        const SynsetView& y = m_m.synsets[static_cast<size_t>(yi)];
        int64_t zi = uniqueTarget(y, t.second);
        if (zi < 0 || static_cast<size_t>(zi) == i || zi == yi) continue;
        const SynsetView& z = m_m.synsets[static_cast<size_t>(zi)];
        QaItem q;
        q.type = kTwoHop;
        q.relation = std::string(t.first) + "+" + std::string(t.second);
        q.topicEntity = x.entityId;
        q.topicName = name;
        q.question = fill(t.text, name);
        q.answers = lemmasOf(z);
        // Two retrievals needed: the bridge Y is not named, the answer is not in X's passage
        // but is in Y's.
        if (anyPhraseIn(q.question, y.lemmas) || anyPhraseIn(q.question, q.answers)) continue;
        if (anyPhraseIn(firstPassage, q.answers)) continue;
        if (!anyPhraseIn(m_m.passage(y.passageId).text, q.answers)) continue;
        q.goldPassages = {x.passageId, y.passageId};
        q.pathEntities = {x.entityId, y.entityId, z.entityId};
        q.pathRelations = {t.first, t.second};
        q.intermediates = {y.entityId};
        std::string key = q.relation + "|" + std::to_string(x.entityId);
        out.push_back({std::move(q), std::move(key)});
        ++made;
      }
      if (m_progress && (i + 1) % 16384 == 0)
        m_progress("generating two-hop QA", i + 1, m_m.synsets.size());
    }
    if (m_progress) m_progress("generating two-hop QA", m_m.synsets.size(), m_m.synsets.size());
    return out;
  }

  std::vector<Candidate> foldoc() {
    std::unordered_map<std::string, uint32_t> sentenceCount;
    std::unordered_map<std::string, uint32_t> termCount;
    for (const TermView& t : m_m.terms) {
      ++sentenceCount[lowerAscii(t.firstSentence)];
      ++termCount[lowerAscii(t.term)];
    }
    std::vector<Candidate> out;
    for (const TermView& t : m_m.terms) {
      const size_t n = tokenCount(t.firstSentence);
      if (n < 5 || n > 60) continue;
      if (sentenceCount[lowerAscii(t.firstSentence)] != 1 || termCount[lowerAscii(t.term)] != 1)
        continue;
      // Redirect-style entries ("See X.") do not define anything; a sentence that starts with
      // a quote, a parenthesis or "1." is a title, an aside or one of several senses.
      const std::string& fs = t.firstSentence;
      if (fs.starts_with("See ") || fs.starts_with("Synonym")) continue;
      if (fs.starts_with('"') || fs.starts_with('(') || fs.starts_with("1.")) continue;
      if (fs.find('?') != std::string::npos) continue;
      QaItem q;
      q.type = kFoldoc;
      q.relation = "foldoc_definition";
      q.topicEntity = t.entityId;
      q.topicName = t.term;
      q.answers = {t.term};
      for (const std::string& a : t.aliases) addUnique(q.answers, a);
      if (anyPhraseIn(t.firstSentence, q.answers)) continue;
      q.question = "Which computing term means: " + stripFinalPeriod(t.firstSentence) + "?";
      q.goldPassages = {t.firstPassageId};
      q.pathEntities = {t.entityId};
      std::string key = std::to_string(t.entityId);
      out.push_back({std::move(q), std::move(key)});
    }
    if (m_progress) m_progress("generating FOLDOC QA", 1, 1);
    return out;
  }

  // Keeps at most `cap` candidates per group (by `groupOf`), chosen by a seeded hash, in their
  // generation order.
  template <typename GroupFn>
  void appendCapped(std::vector<Candidate>& all, std::vector<Candidate> cands, GroupFn groupOf,
                    size_t cap) {
    std::unordered_map<std::string, std::vector<size_t>> groups;
    std::vector<std::string> order;
    for (size_t i = 0; i < cands.size(); ++i) {
      std::string g = groupOf(cands[i]);
      auto [it, inserted] = groups.try_emplace(g);
      if (inserted) order.push_back(g);
      it->second.push_back(i);
    }
    std::vector<char> keep(cands.size(), 0);
    for (const std::string& g : order) {
      std::vector<size_t>& idx = groups[g];
      if (idx.size() > cap) {
        std::vector<std::pair<uint64_t, size_t>> ranked;
        ranked.reserve(idx.size());
        for (size_t i : idx) ranked.push_back({stableHash(m_p.seed, cands[i].sampleKey), i});
        std::sort(ranked.begin(), ranked.end());
        idx.clear();
        for (size_t k = 0; k < cap; ++k) idx.push_back(ranked[k].second);
      }
      for (size_t i : idx) keep[i] = 1;
    }
    for (size_t i = 0; i < cands.size(); ++i)
      if (keep[i]) all.push_back(std::move(cands[i]));
  }

  // Union-find over "topic entity" and "topic name" keys: items sharing either go to one split.
  std::vector<QaItem> split(std::vector<Candidate>& all) {
    std::unordered_map<std::string, uint32_t> keyIds;
    std::vector<std::string> keys;
    std::vector<uint32_t> parent;
    auto keyId = [&](std::string k) {
      auto [it, inserted] = keyIds.try_emplace(k, static_cast<uint32_t>(keys.size()));
      if (inserted) {
        keys.push_back(std::move(k));
        parent.push_back(it->second);
      }
      return it->second;
    };
    auto find = [&](uint32_t a) {
      while (parent[a] != a) {
        parent[a] = parent[parent[a]];
        a = parent[a];
      }
      return a;
    };
    auto unite = [&](uint32_t a, uint32_t b) {
      a = find(a);
      b = find(b);
      // The smaller id (first seen) stays the root, so the group's key is deterministic.
      if (a < b) parent[b] = a;
      else if (b < a) parent[a] = b;
    };
    std::vector<uint32_t> itemKey(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const QaItem& q = all[i].item;
      uint32_t e = keyId("e:" + std::to_string(q.topicEntity));
      uint32_t n = keyId("n:" + lowerAscii(q.topicName));
      unite(e, n);
      itemKey[i] = e;
    }
    const double testCut = m_p.testFraction;
    const double devCut = m_p.testFraction + m_p.devFraction;
    for (size_t i = 0; i < all.size(); ++i) {
      double u = unitHash(m_p.seed, keys[find(itemKey[i])]);
      all[i].item.split = u < testCut ? "test" : (u < devCut ? "dev" : "train");
    }

    // Held-out items' path entities, answers and bridge lemmas must not be train topics.
    std::unordered_set<int64_t> blockedIds;
    std::unordered_set<std::string> blockedNames;
    for (const Candidate& c : all) {
      const QaItem& q = c.item;
      if (q.split == "train") continue;
      for (int64_t e : q.pathEntities) blockedIds.insert(e);
      for (const std::string& a : q.answers) blockedNames.insert(lowerAscii(a));
      blockedNames.insert(lowerAscii(q.topicName));
      for (int64_t e : q.intermediates) {
        auto syn = m_synsetOfEntity.find(e);
        if (syn == m_synsetOfEntity.end()) {
          blockedNames.insert(lowerAscii(m_m.entity(e).name));
          continue;
        }
        for (const std::string& l : m_m.synsets[syn->second].lemmas)
          blockedNames.insert(lowerAscii(l));
      }
    }
    std::vector<QaItem> out;
    out.reserve(all.size());
    for (Candidate& c : all) {
      QaItem& q = c.item;
      if (q.split == "train" &&
          (blockedIds.count(q.topicEntity) || blockedNames.count(lowerAscii(q.topicName))))
        continue;
      out.push_back(std::move(q));
    }
    return out;
  }
};

}  // namespace

bool containsPhrase(std::string_view text, std::string_view phrase) {
  if (phrase.empty() || phrase.size() > text.size()) return false;
  const char first = fold(phrase[0]);
  for (size_t i = 0; i + phrase.size() <= text.size(); ++i) {
    if (fold(text[i]) != first) continue;
    if (i > 0 && isWordChar(text[i - 1]) && isWordChar(phrase.front())) continue;
    size_t k = 1;
    while (k < phrase.size() && fold(text[i + k]) == fold(phrase[k])) ++k;
    if (k != phrase.size()) continue;
    size_t end = i + phrase.size();
    if (end < text.size() && isWordChar(text[end]) && isWordChar(phrase.back())) continue;
    return true;
  }
  return false;
}

std::string singleHopQuestion(std::string_view relation, char pos, std::string_view name) {
  for (const Template& t : kSingleHopTemplates)
    if (t.relation == relation && t.pos == posGroup(pos)) return fill(t.text, name);
  return {};
}

std::string kgPathJson(const QaItem& item) {
  std::string s = "[";
  for (size_t i = 0; i < item.pathEntities.size(); ++i) {
    if (i) {
      s += ",\"";
      s += i - 1 < item.pathRelations.size() ? item.pathRelations[i - 1] : std::string_view();
      s += "\",";
    }
    s += std::to_string(item.pathEntities[i]);
  }
  s += ']';
  return s;
}

std::vector<QaItem> buildQa(const CorpusModel& model, const QaParams& params,
                            const ProgressFn& progress) {
  return QaGenerator(model, params, progress).run();
}

}  // namespace rag::corpus
