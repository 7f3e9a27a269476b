#include "corpus/corpus_builder.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <unordered_map>

#include "core/fs.h"
#include "corpus/corpus_db.h"
#include "corpus/foldoc.h"
#include "corpus/wordnet.h"

namespace fs = std::filesystem;

namespace rag::corpus {

namespace {

constexpr std::string_view kLemmaOf = "lemma_of";
constexpr std::string_view kXref = "xref";

// Lemma entities merge satellites with adjectives, as WordNet's index.adj does.
char posGroup(char pos) { return pos == 's' ? 'a' : pos; }

int posGroupIndex(char pos) {
  switch (posGroup(pos)) {
    case 'n': return 0;
    case 'v': return 1;
    case 'a': return 2;
    default: return 3;
  }
}

uint64_t synsetKey(char pos, uint32_t offset) {
  return (static_cast<uint64_t>(posGroupIndex(pos)) << 32) | offset;
}

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// How each relation is written in a synset passage, in the order the clauses appear.
// `many`: one-to-many relations list only the first lemma of at most maxListedTargets targets.
struct ClauseStyle {
  std::string_view type;
  std::string_view label;
  bool many;
};
constexpr std::array<ClauseStyle, 27> kClauses = {{
    {"hypernym", "kind of", false},
    {"instance_hypernym", "instance of", false},
    {"part_holonym", "part of", false},
    {"member_holonym", "member of", false},
    {"substance_holonym", "substance of", false},
    {"similar_to", "similar to", false},
    {"attribute", "attribute", false},
    {"antonym", "opposite", false},
    {"entailment", "entails", false},
    {"cause", "causes", false},
    {"pertainym", "pertains to", false},
    {"derived_from_adjective", "derived from", false},
    {"participle", "participle of", false},
    {"verb_group", "similar verbs", false},
    {"domain_topic", "topic", false},
    {"domain_region", "region", false},
    {"domain_usage", "usage", false},
    {"also_see", "see also", true},
    {"part_meronym", "has parts", true},
    {"member_meronym", "has members", true},
    {"substance_meronym", "has substances", true},
    {"hyponym", "has kinds", true},
    {"instance_hyponym", "has instances", true},
    {"member_of_domain_topic", "terms in this topic", true},
    {"member_of_domain_region", "terms of this region", true},
    {"member_of_domain_usage", "terms of this usage", true},
    {"derivation", "related forms", true},
}};

void appendSentenceEnd(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (!s.empty() && s.back() != '.' && s.back() != '?' && s.back() != '!') s.push_back('.');
}

std::string renderSynsetPassage(const CorpusModel& m, const SynsetView& s,
                                const std::vector<std::string>& examples,
                                const PassageParams& pp) {
  std::string t;
  t.reserve(512);
  for (size_t i = 0; i < s.lemmas.size(); ++i) {
    if (i) t += ", ";
    t += s.lemmas[i];
  }
  t += " (";
  t += posName(s.pos);
  t += "): ";
  t += s.definition;
  appendSentenceEnd(t);
  if (!examples.empty()) {
    t += examples.size() == 1 ? " Example: " : " Examples: ";
    for (size_t i = 0; i < examples.size(); ++i) {
      if (i) t += "; ";
      t += '"';
      t += examples[i];
      t += '"';
    }
    t += '.';
  }
  std::vector<std::string_view> listed;
  for (const ClauseStyle& c : kClauses) {
    listed.clear();
    size_t total = 0;
    std::string clause;
    for (const SynsetLink& l : s.links) {
      if (l.type != c.type) continue;
      const SynsetView& target = m.synsets[l.target];
      if (l.sourceWord) {
        // A lexical pointer names one lemma of the target.
        std::string_view lemma = target.lemmas[l.targetWord - 1];
        if (std::find(listed.begin(), listed.end(), lemma) != listed.end()) continue;
        ++total;
        if (c.many && listed.size() >= pp.maxListedTargets) continue;
        if (!listed.empty()) clause += c.many ? ", " : "; ";
        clause += lemma;
        listed.push_back(lemma);
        continue;
      }
      std::string_view first = target.lemmas.front();
      if (std::find(listed.begin(), listed.end(), first) != listed.end()) continue;
      ++total;
      if (c.many) {
        if (listed.size() >= pp.maxListedTargets) continue;
        if (!listed.empty()) clause += ", ";
        clause += first;
      } else {
        if (!listed.empty()) clause += "; ";
        size_t n = std::min(pp.maxLemmasPerTarget, target.lemmas.size());
        for (size_t i = 0; i < n; ++i) {
          if (i) clause += ", ";
          clause += target.lemmas[i];
        }
      }
      listed.push_back(first);
    }
    if (listed.empty()) continue;
    t += ' ';
    t += c.label;
    t += ": ";
    t += clause;
    if (total > listed.size()) t += " and " + std::to_string(total - listed.size()) + " more";
    t += '.';
  }
  return t;
}

uint8_t addSourceFile(CorpusModel& m, std::string name) {
  m.sourceFiles.push_back(std::move(name));
  return static_cast<uint8_t>(m.sourceFiles.size() - 1);
}

Status addWordNet(CorpusModel& m, const CorpusSources& src, const PassageParams& pp,
                  const ProgressFn& progress) {
  std::vector<std::vector<WnSynset>> files;
  std::vector<uint8_t> fileIds;
  size_t total = 0;
  const auto paths = wordNetDataFiles(src.wordnetDir);
  for (size_t i = 0; i < paths.size(); ++i) {
    if (progress) progress("parsing WordNet", i, paths.size());
    RAG_ASSIGN_OR_RETURN(std::vector<WnSynset> parsed, readWordNetFile(paths[i]));
    total += parsed.size();
    files.push_back(std::move(parsed));
    fileIds.push_back(addSourceFile(m, paths[i].filename().string()));
  }
  if (progress) progress("parsing WordNet", paths.size(), paths.size());

  // Synset entities first, so that synset ids are 1..N in file order.
  m.entities.reserve(total * 3);
  m.synsets.reserve(total);
  std::unordered_map<uint64_t, uint32_t> byKey;
  byKey.reserve(total * 2);
  std::vector<std::vector<std::string>> examples;
  examples.reserve(total);
  std::vector<Provenance> synsetProv;
  synsetProv.reserve(total);
  for (size_t f = 0; f < files.size(); ++f) {
    for (WnSynset& s : files[f]) {
      Provenance prov{fileIds[f], s.lineOffset};
      if (!byKey.emplace(synsetKey(s.pos, s.offset), static_cast<uint32_t>(m.synsets.size())).second)
        return Status::corrupt(m.sourceFiles[prov.file] + " byte " + std::to_string(s.lineOffset) +
                               ": synset offset " + std::to_string(s.offset) +
                               " appears twice; reinstall it with: "
                               "apt-get install --reinstall wordnet-base");
      Entity e;
      e.kind = EntityKind::Synset;
      e.pos = s.pos;
      e.synsetOffset = s.offset;
      e.name = s.words.front().text;
      e.prov = prov;
      m.entities.push_back(std::move(e));
      SynsetView v;
      v.entityId = static_cast<int64_t>(m.entities.size());
      v.pos = s.pos;
      v.lemmas.reserve(s.words.size());
      for (WnWord& w : s.words) v.lemmas.push_back(std::move(w.text));
      v.definition = std::move(s.definition);
      m.synsets.push_back(std::move(v));
      examples.push_back(std::move(s.examples));
      synsetProv.push_back(prov);
    }
  }

  // Lemma entities, one per (case-folded text, part of speech), and lemma_of links.
  std::unordered_map<std::string, int64_t> lemmaIds;
  lemmaIds.reserve(total * 2);
  m.relations.reserve(total * 6);
  for (size_t i = 0; i < m.synsets.size(); ++i) {
    SynsetView& v = m.synsets[i];
    v.lemmaEntities.reserve(v.lemmas.size());
    for (const std::string& lemma : v.lemmas) {
      std::string key = lowerAscii(lemma);
      key.push_back('\x1f');
      key.push_back(posGroup(v.pos));
      auto [it, inserted] = lemmaIds.emplace(std::move(key), 0);
      if (inserted) {
        Entity e;
        e.kind = EntityKind::Lemma;
        e.pos = posGroup(v.pos);
        e.name = lemma;
        e.prov = synsetProv[i];
        m.entities.push_back(std::move(e));
        it->second = static_cast<int64_t>(m.entities.size());
      }
      v.lemmaEntities.push_back(it->second);
      m.relations.push_back({it->second, kLemmaOf, v.entityId, synsetProv[i]});
    }
  }

  // Pointers: semantic ones between synsets, lexical ones between lemma entities.
  size_t done = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    for (const WnSynset& s : files[f]) {
      const uint32_t self = byKey.at(synsetKey(s.pos, s.offset));
      SynsetView& v = m.synsets[self];
      v.links.reserve(s.pointers.size());
      for (const WnPointer& p : s.pointers) {
        auto hit = byKey.find(synsetKey(p.targetPos, p.targetOffset));
        if (hit == byKey.end()) {
          ++m.danglingPointers;
          continue;
        }
        const SynsetView& target = m.synsets[hit->second];
        if (p.lexical() && p.targetWord > target.lemmas.size()) {
          ++m.danglingPointers;
          continue;
        }
        v.links.push_back({p.type, hit->second, p.sourceWord, p.targetWord});
        if (p.lexical())
          m.relations.push_back({v.lemmaEntities[p.sourceWord - 1], p.type,
                                 target.lemmaEntities[p.targetWord - 1], synsetProv[self]});
        else
          m.relations.push_back({v.entityId, p.type, target.entityId, synsetProv[self]});
      }
      if (progress && ++done % 8192 == 0) progress("linking WordNet", done, total);
    }
  }
  if (progress) progress("linking WordNet", total, total);

  // One passage per synset; passage id == synset entity id.
  m.passages.reserve(total + 20000);
  for (size_t i = 0; i < m.synsets.size(); ++i) {
    SynsetView& v = m.synsets[i];
    Passage p;
    p.entityId = v.entityId;
    p.title = v.lemmas.front() + " (" + std::string(posName(v.pos)) + ")";
    p.text = renderSynsetPassage(m, v, examples[i], pp);
    p.nTokens = static_cast<uint32_t>(countTokens(p.text));
    p.prov = synsetProv[i];
    m.passages.push_back(std::move(p));
    v.passageId = static_cast<int64_t>(m.passages.size());
    if (progress && (i + 1) % 8192 == 0) progress("writing WordNet passages", i + 1, total);
  }
  if (progress) progress("writing WordNet passages", total, total);
  return Status::ok();
}

Status addFoldoc(CorpusModel& m, const CorpusSources& src, const PassageParams& pp,
                 const ProgressFn& progress) {
  if (progress) progress("reading FOLDOC", 0, 1);
  RAG_ASSIGN_OR_RETURN(FoldocDictionary dict, readFoldoc(src.foldocDir));
  if (progress) progress("reading FOLDOC", 1, 1);
  const uint8_t file = addSourceFile(m, "foldoc.dict.dz");
  const size_t n = dict.entries.size();
  std::vector<int64_t> termIds(n);
  m.terms.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const FoldocEntry& fe = dict.entries[i];
    Entity e;
    e.kind = EntityKind::Term;
    e.name = fe.term;
    e.prov = {file, fe.offset};
    m.entities.push_back(std::move(e));
    termIds[i] = static_cast<int64_t>(m.entities.size());
  }
  std::vector<std::pair<int64_t, int64_t>> seen;
  for (size_t i = 0; i < n; ++i) {
    const FoldocEntry& fe = dict.entries[i];
    const Provenance prov{file, fe.offset};
    std::string plain = foldocPlainText(fe.body);

    std::string head = fe.term;
    if (!fe.aliases.empty() || !fe.category.empty()) {
      head += " (";
      for (size_t a = 0; a < fe.aliases.size(); ++a) {
        if (a) head += ", ";
        head += fe.aliases[a];
      }
      if (!fe.category.empty()) {
        if (!fe.aliases.empty()) head += "; ";
        head += fe.category;
      }
      head += ")";
    }
    head += ":";
    std::vector<std::string> chunks =
        chunkText(plain, head, fe.term + " (continued):", pp.maxFoldocTokens);
    TermView tv;
    tv.entityId = termIds[i];
    tv.firstPassageId = static_cast<int64_t>(m.passages.size() + 1);
    for (size_t c = 0; c < chunks.size(); ++c) {
      Passage p;
      p.entityId = termIds[i];
      p.chunk = static_cast<int>(c);
      p.title = fe.term;
      p.nTokens = static_cast<uint32_t>(countTokens(chunks[c]));
      p.text = std::move(chunks[c]);
      p.prov = prov;
      m.passages.push_back(std::move(p));
    }
    tv.term = fe.term;
    tv.aliases = fe.aliases;
    tv.category = fe.category;
    tv.firstSentence = firstSentence(plain);
    m.terms.push_back(std::move(tv));

    seen.clear();
    for (const FoldocXref& x : extractXrefs(fe.body)) {
      const FoldocEntry* target = dict.find(x.target);
      if (!target && x.text != x.target) target = dict.find(x.text);
      if (!target) {
        ++m.unresolvedXrefs;
        continue;
      }
      int64_t dst = termIds[dict.indexOf(target)];
      if (dst == termIds[i]) continue;
      std::pair<int64_t, int64_t> key{termIds[i], dst};
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      m.relations.push_back({termIds[i], kXref, dst, prov});
    }
    if (progress && (i + 1) % 2048 == 0) progress("writing FOLDOC passages", i + 1, n);
  }
  if (progress) progress("writing FOLDOC passages", n, n);
  return Status::ok();
}

std::string isoNow() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Status checkCorpusSources(const CorpusSources& sources) {
  std::error_code ec;
  for (const fs::path& p : wordNetDataFiles(sources.wordnetDir))
    if (!fs::exists(p, ec))
      return Status::notFound("WordNet data file " + p.string() +
                              " is missing; install it with: apt-get install wordnet-base "
                              "(or pass --wordnet DIR)");
  for (const char* name : {"foldoc.index", "foldoc.dict.dz"}) {
    fs::path p = sources.foldocDir / name;
    if (!fs::exists(p, ec))
      return Status::notFound("FOLDOC file " + p.string() +
                              " is missing; install it with: apt-get install dict-foldoc "
                              "(or pass --foldoc DIR)");
  }
  return Status::ok();
}

Result<CorpusModel> buildCorpusModel(const CorpusSources& sources, const PassageParams& pp,
                                     const ProgressFn& progress) {
  RAG_RETURN_IF_ERROR(checkCorpusSources(sources));
  CorpusModel m;
  RAG_RETURN_IF_ERROR(addWordNet(m, sources, pp, progress));
  RAG_RETURN_IF_ERROR(addFoldoc(m, sources, pp, progress));
  return m;
}

Result<CorpusBuildReport> buildCorpus(const CorpusBuildParams& params) {
  const auto start = std::chrono::steady_clock::now();
  // Cheap checks first: a missing package or an unwritable target fails before any parsing.
  RAG_RETURN_IF_ERROR(checkCorpusSources(params.sources));
  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(params.out));
  // Whatever fails from here on, the temp file goes and the target stays as it was.
  struct DiscardUnlessCommitted {
    const StagedOutput& staged;
    bool committed = false;
    ~DiscardUnlessCommitted() {
      if (!committed) discardStagedOutput(staged);
    }
  } guard{staged};

  RAG_ASSIGN_OR_RETURN(CorpusModel model,
                       buildCorpusModel(params.sources, params.passages, params.progress));
  std::vector<QaItem> qa = buildQa(model, params.qa, params.progress);

  std::vector<std::pair<std::string, std::string>> meta = {
      {"built_at", isoNow()},
      {"seed", std::to_string(params.qa.seed)},
      {"wordnet_dir", params.sources.wordnetDir.string()},
      {"foldoc_dir", params.sources.foldocDir.string()},
      {"max_foldoc_tokens", std::to_string(params.passages.maxFoldocTokens)},
      {"builder", "ragraph corpus build"},
      {"dangling_pointers", std::to_string(model.danglingPointers)},
      {"unresolved_xrefs", std::to_string(model.unresolvedXrefs)},
      {"qa_split_guarantee",
       "test/dev items share no topic entity or topic name with train items; no entity on a "
       "test/dev kg_path and no test/dev answer or intermediate lemma is a train topic"},
  };
  RAG_RETURN_IF_ERROR(writeCorpusFile(staged.temp, model, qa, meta, params.progress));
  RAG_RETURN_IF_ERROR(commitStagedOutput(staged));
  guard.committed = true;
  CorpusBuildReport r;
  r.entities = static_cast<int64_t>(model.entities.size());
  r.passages = static_cast<int64_t>(model.passages.size());
  r.relations = static_cast<int64_t>(model.relations.size());
  r.qa = static_cast<int64_t>(qa.size());
  r.danglingPointers = model.danglingPointers;
  r.unresolvedXrefs = model.unresolvedXrefs;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace rag::corpus
