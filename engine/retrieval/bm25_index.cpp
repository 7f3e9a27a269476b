#include "retrieval/bm25_index.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <cctype>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/fs.h"
#include "corpus/corpus_db.h"
#include "model/lexical_words.h"
#include "storage/sqlite.h"

#include <sqlite3.h>  // the FTS5 extension API (Fts5ExtensionApi, fts5_api)

namespace fs = std::filesystem;

namespace rag::retrieval {

namespace {

constexpr std::string_view kFormat = "ragraph-bm25-1";

// What ties an index to its corpus: the corpus's build time and passage count.
Result<std::string> corpusIdentity(sql::Db& corpus) {
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, corpus.prepare("SELECT value FROM meta WHERE key = 'built_at'"));
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  const std::string builtAt = row ? st.columnText(0) : "unknown";
  RAG_ASSIGN_OR_RETURN(int64_t n, corpus.queryInt64("SELECT COUNT(*) FROM passages"));
  return std::string(kFormat) + " " + builtAt + " " + std::to_string(n);
}

Result<std::string> storedIdentity(const fs::path& path) {
  RAG_ASSIGN_OR_RETURN(sql::Db db, sql::Db::open(path, sql::OpenMode::ReadOnly));
  RAG_ASSIGN_OR_RETURN(bool has, db.tableExists("bm25_meta"));
  if (!has) return std::string();
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT value FROM bm25_meta WHERE key = 'corpus'"));
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  return row ? st.columnText(0) : std::string();
}

std::string sqlQuoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Builds the index into a staged file and renames it over `path`.
Status build(const fs::path& corpus, const fs::path& path, const std::string& identity) {
  RAG_ASSIGN_OR_RETURN(StagedOutput staged, stageOutput(path));
  auto fail = [&](Status s) {
    discardStagedOutput(staged);
    return s.withContext("building the BM25 index " + path.string());
  };
  {
    Result<sql::Db> db = sql::Db::open(staged.temp, sql::OpenMode::Create);
    if (!db) return fail(db.status());
    Status s = db->exec("CREATE VIRTUAL TABLE passages USING fts5(title, text, tokenize = 'porter unicode61')");
    if (!s) return fail(Status::internal("this SQLite has no FTS5 (" + s.message() + "); install Debian's libsqlite3-0"));
    // One transaction: the passages (read straight from the attached corpus), the corpus's
    // identity, then FTS5's merge of its segments into one b-tree for fast queries.
    for (const std::string& sql :
         {std::string("CREATE TABLE bm25_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)"),
          "ATTACH DATABASE " + sqlQuoted(corpus.string()) + " AS corpus", std::string("BEGIN"),
          std::string("INSERT INTO passages(rowid, title, text) SELECT id, title, text FROM corpus.passages"),
          "INSERT INTO bm25_meta VALUES ('corpus', " + sqlQuoted(identity) + ")",
          std::string("INSERT INTO passages(passages) VALUES ('optimize')"), std::string("COMMIT"),
          std::string("DETACH DATABASE corpus")})
      if (Status e = db->exec(sql); !e) return fail(e);
    if (Status c = db->close(); !c) return fail(c);
  }
  if (Status c = commitStagedOutput(staged); !c) return fail(c);
  return Status::ok();
}

// FTS5's bm25() (k1 1.2, b 0.75, every column weighing 1) with each phrase's IDF given as an
// argument instead of counted: ragraph_bm25(passages, idf_0, ..., idf_{n-1}), larger is more
// relevant. FTS5's own bm25() counts every phrase's rows (a scan of its whole doclist) in each
// statement before scoring a row: 5 ms for a query of common words, where scoring five given
// rows takes 0.3 ms; the counts are what passagesWith() remembers.
void givenIdfBm25(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* out, int nVal, sqlite3_value** args) {
  constexpr double k1 = 1.2, b = 0.75;
  const int phrases = api->xPhraseCount(fts);
  sqlite3_int64 rows = 0, tokens = 0;
  int instances = 0, rowTokens = 0;
  if (api->xRowCount(fts, &rows) != SQLITE_OK || api->xColumnTotalSize(fts, -1, &tokens) != SQLITE_OK ||
      api->xInstCount(fts, &instances) != SQLITE_OK || api->xColumnSize(fts, -1, &rowTokens) != SQLITE_OK) {
    sqlite3_result_error(out, "ragraph_bm25: FTS5 could not size the row", -1);
    return;
  }
  if (nVal != phrases) {
    sqlite3_result_error(out, "ragraph_bm25: give one IDF per phrase of the query", -1);
    return;
  }
  std::vector<double> freq(static_cast<size_t>(phrases), 0.0);
  for (int i = 0; i < instances; ++i) {
    int phrase = 0, column = 0, offset = 0;
    if (api->xInst(fts, i, &phrase, &column, &offset) == SQLITE_OK && phrase >= 0 && phrase < phrases)
      freq[static_cast<size_t>(phrase)] += 1.0;
  }
  const double avgdl = rows > 0 ? static_cast<double>(tokens) / static_cast<double>(rows) : 1.0;
  const double norm = k1 * (1 - b + b * static_cast<double>(rowTokens) / (avgdl > 0 ? avgdl : 1.0));
  double score = 0;
  for (int i = 0; i < phrases; ++i) {
    const double f = freq[static_cast<size_t>(i)];
    score += sqlite3_value_double(args[i]) * (f * (k1 + 1.0)) / (f + norm);
  }
  sqlite3_result_double(out, score);
}

// Registers ragraph_bm25 on `db` (FTS5's API pointer, as its documentation fetches it).
Status registerGivenIdfBm25(sql::Db& db) {
  fts5_api* api = nullptr;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT fts5(?1)", -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, static_cast<void*>(&api), "fts5_api_ptr", nullptr);
    sqlite3_step(st);
  }
  sqlite3_finalize(st);
  if (!api || api->iVersion < 2)
    return Status::internal("this SQLite's FTS5 offers no extension API; install Debian's libsqlite3-0");
  if (api->xCreateFunction(api, "ragraph_bm25", nullptr, givenIdfBm25, nullptr) != SQLITE_OK)
    return db.lastError("registering ragraph_bm25");
  return Status::ok();
}

}  // namespace

fs::path defaultBm25Path(const fs::path& corpus) { return fs::path(corpus.string() + ".fts"); }

struct Bm25Index::Impl {
  sql::Db db;
  sql::Stmt search;
  sql::Stmt count;
  std::unordered_map<std::string, int64_t> df;  // passages per query word, as looked up
  int64_t size = 0;
  bool rebuilt = false;
};

Bm25Index::Bm25Index(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Bm25Index::Bm25Index(Bm25Index&&) noexcept = default;
Bm25Index& Bm25Index::operator=(Bm25Index&&) noexcept = default;
Bm25Index::~Bm25Index() = default;

Result<Bm25Index> Bm25Index::openOrBuild(const fs::path& corpus, const fs::path& pathIn,
                                         const std::function<void(const std::string&)>& progress) {
  const fs::path path = pathIn.empty() ? defaultBm25Path(corpus) : pathIn;
  std::string identity;
  {
    RAG_ASSIGN_OR_RETURN(sql::Db c, corpus::openCorpus(corpus));
    RAG_ASSIGN_OR_RETURN(identity, corpusIdentity(c));
  }
  auto impl = std::make_unique<Impl>();
  std::error_code ec;
  std::string stored;
  if (fs::exists(path, ec)) {
    Result<std::string> s = storedIdentity(path);
    stored = s ? *s : std::string();  // unreadable: rebuilt like a stale one
  }
  if (stored != identity) {
    if (progress)
      progress(stored.empty() && !fs::exists(path, ec)
                   ? "building the BM25 index " + path.string() + " (once, a few seconds)"
                   : "the BM25 index " + path.string() + " was built from another corpus; rebuilding it");
    RAG_RETURN_IF_ERROR(build(corpus, path, identity));
    impl->rebuilt = true;
  }
  RAG_ASSIGN_OR_RETURN(impl->db, sql::Db::open(path, sql::OpenMode::ReadOnly));
  RAG_RETURN_IF_ERROR(registerGivenIdfBm25(impl->db));
  RAG_ASSIGN_OR_RETURN(impl->size, impl->db.queryInt64("SELECT COUNT(*) FROM passages"));
  RAG_ASSIGN_OR_RETURN(impl->search,
                       impl->db.prepare("SELECT rowid, rank FROM passages WHERE passages MATCH ?1 ORDER BY rank LIMIT ?2"));
  RAG_ASSIGN_OR_RETURN(impl->count, impl->db.prepare("SELECT count(*) FROM passages WHERE passages MATCH ?1"));
  return Bm25Index(std::move(impl));
}

std::vector<std::string> Bm25Index::queryWords(std::string_view query) {
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    // Stopwords are in most passages, so they add almost nothing to BM25's ranking (their IDF is
    // near 0) but make FTS5 walk their huge posting lists (a query of them took ~230 ms).
    if (!word.empty() && !model::isStopword(word)) words.push_back(word);
    word.clear();
  };
  for (char ch : query) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) word += static_cast<char>(std::tolower(c));
    else flush();
  }
  flush();
  return words;
}

std::string Bm25Index::matchExpression(std::span<const std::string> words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "\"" : " OR \"") + w + "\"";
  return out;
}

Result<int64_t> Bm25Index::passagesWith(const std::string& word) {
  auto it = m_impl->df.find(word);
  if (it != m_impl->df.end()) return it->second;
  sql::Stmt& st = m_impl->count;
  st.reset();
  st.bind(1, matchExpression(std::span<const std::string>(&word, 1)));
  RAG_ASSIGN_OR_RETURN(bool row, st.step());
  const int64_t n = row ? st.columnInt64(0) : 0;
  st.reset();
  if (m_impl->df.size() > 100000) m_impl->df.clear();  // bounded
  m_impl->df.emplace(word, n);
  return n;
}

Result<std::vector<int64_t>> Bm25Index::search(std::string_view query, int32_t k) {
  RAG_ASSIGN_OR_RETURN(std::vector<Scored> scored, searchScored(query, k));
  std::vector<int64_t> out;
  out.reserve(scored.size());
  for (const Scored& s : scored) out.push_back(s.id);
  return out;
}

Result<std::vector<std::string>> Bm25Index::matchWords(std::string_view query) {
  // The query's distinct words, without those too common to tell passages apart (the rarest
  // of them is kept when all are).
  std::vector<std::string> words;
  std::string rarest;
  int64_t rarestCount = INT64_MAX;
  for (std::string& w : queryWords(query)) {
    if (std::find(words.begin(), words.end(), w) != words.end() || w == rarest) continue;
    RAG_ASSIGN_OR_RETURN(int64_t n, passagesWith(w));
    if (n == 0) continue;
    if (n < rarestCount) rarestCount = n, rarest = w;
    if (static_cast<double>(n) <= kMaxTermShare * static_cast<double>(m_impl->size)) words.push_back(std::move(w));
  }
  if (words.empty() && !rarest.empty()) words.push_back(rarest);
  return words;
}

Result<std::vector<Bm25Index::Scored>> Bm25Index::searchScored(std::string_view query, int32_t k) {
  std::vector<Scored> out;
  if (k < 1) return Status::invalidArgument("a BM25 search needs k >= 1");
  RAG_ASSIGN_OR_RETURN(std::vector<std::string> words, matchWords(query));
  if (words.empty()) return out;
  sql::Stmt& st = m_impl->search;
  st.reset();
  st.bind(1, matchExpression(words)).bind(2, static_cast<int64_t>(k));
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    out.push_back({st.columnInt64(0), -st.columnDouble(1)});
  }
  st.reset();
  return out;
}

Result<std::vector<size_t>> Bm25Index::rankAmong(std::string_view query, std::span<const int64_t> ids) {
  std::vector<size_t> out(ids.size());
  std::iota(out.begin(), out.end(), size_t{0});
  RAG_ASSIGN_OR_RETURN(std::vector<std::string> words, matchWords(query));
  std::string list;
  for (int64_t id : ids)
    if (id >= 0) list += (list.empty() ? "" : ",") + std::to_string(id);
  if (words.empty() || list.empty()) return out;
  // The candidates scored as FTS5's bm25() would score them, by the whole corpus's statistics,
  // with the IDFs from the remembered counts (givenIdfBm25); the list is integers only.
  std::string sql = "SELECT rowid, ragraph_bm25(passages";
  for (size_t i = 0; i < words.size(); ++i) sql += ", ?" + std::to_string(i + 2);
  RAG_ASSIGN_OR_RETURN(sql::Stmt st, m_impl->db.prepare(sql + ") FROM passages WHERE passages MATCH ?1 AND rowid IN (" + list + ")"));
  st.bind(1, matchExpression(words));
  const double rows = static_cast<double>(m_impl->size);
  for (size_t i = 0; i < words.size(); ++i) {
    RAG_ASSIGN_OR_RETURN(int64_t hits, passagesWith(words[i]));
    const double idf = std::log((rows - static_cast<double>(hits) + 0.5) / (static_cast<double>(hits) + 0.5));
    st.bind(static_cast<int>(i + 2), idf > 0 ? idf : 1e-6);  // FTS5's floor for a word in most rows
  }
  std::unordered_map<int64_t, double> score;
  for (;;) {
    RAG_ASSIGN_OR_RETURN(bool row, st.step());
    if (!row) break;
    score.emplace(st.columnInt64(0), st.columnDouble(1));
  }
  constexpr double kUnmatched = -std::numeric_limits<double>::max();
  auto scoreOf = [&](int64_t id) {
    if (id < 0) return -std::numeric_limits<double>::infinity();  // after the unmatched
    auto it = score.find(id);
    return it == score.end() ? kUnmatched : it->second;
  };
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) { return scoreOf(ids[a]) > scoreOf(ids[b]); });
  return out;
}

int64_t Bm25Index::size() const { return m_impl->size; }
bool Bm25Index::rebuilt() const { return m_impl->rebuilt; }

std::vector<int64_t> reciprocalRankFusion(std::span<const std::vector<int64_t>> rankings, int32_t k, double c,
                                          std::span<const double> weights) {
  struct Score {
    double score = 0;
    size_t firstSeen = 0;  // order of first appearance, rankings in turn
  };
  std::unordered_map<int64_t, Score> scores;
  size_t seen = 0;
  for (size_t i = 0; i < rankings.size(); ++i) {
    const std::vector<int64_t>& r = rankings[i];
    const double w = i < weights.size() ? weights[i] : 1.0;
    for (size_t rank = 0; rank < r.size(); ++rank) {
      if (r[rank] < 0) continue;
      auto [it, fresh] = scores.try_emplace(r[rank], Score{0, seen});
      if (fresh) ++seen;
      it->second.score += w / (c + static_cast<double>(rank + 1));
    }
  }
  std::vector<std::pair<int64_t, Score>> all(scores.begin(), scores.end());
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.second.score != b.second.score) return a.second.score > b.second.score;
    if (a.second.firstSeen != b.second.firstSeen) return a.second.firstSeen < b.second.firstSeen;
    return a.first < b.first;
  });
  std::vector<int64_t> out;
  for (size_t i = 0; i < all.size() && static_cast<int32_t>(out.size()) < k; ++i) out.push_back(all[i].first);
  return out;
}

std::vector<int64_t> hybridFusion(const std::vector<int64_t>& dense, const std::vector<int64_t>& lexical, int32_t k,
                                  const HybridFusion& fusion) {
  const std::vector<int64_t> rankings[] = {dense, lexical};
  const double weights[] = {fusion.denseWeight, fusion.lexicalWeight};
  return reciprocalRankFusion(rankings, k, fusion.c, weights);
}

}  // namespace rag::retrieval
