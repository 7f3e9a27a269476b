#include "retrieval/passage_index.h"

#include <cstdio>
#include <fstream>

#include "core/clock.h"
#include "core/fs.h"
#include "corpus/corpus_db.h"
#include "corpus/qa_prompt.h"

namespace rag::retrieval {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "RAGVEC1\n";

std::string header(std::string_view fingerprint, int64_t dim) {
  return std::string(kMagic) + std::string(fingerprint) + "\ndim " + std::to_string(dim) + "\n";
}

fs::path withSuffix(const fs::path& base, const char* suffix) {
  return fs::path(base.string() + suffix);
}

// Whole rows after a header of `headerBytes` in a file of `size` bytes.
int64_t wholeRows(uintmax_t size, size_t headerBytes, int64_t dim) {
  if (size < headerBytes) return 0;
  return static_cast<int64_t>((size - headerBytes) / (static_cast<uintmax_t>(dim) * sizeof(float)));
}

// Rows of `file` when its header matches (fingerprint, dim); -1 when it does not.
int64_t matchingRows(const fs::path& file, const std::string& head, int64_t dim) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return -1;
  std::string got(head.size(), '\0');
  if (!in.read(got.data(), static_cast<std::streamsize>(got.size())) || got != head) return -1;
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  return ec ? -1 : wholeRows(size, head.size(), dim);
}

// `floats` floats after a header of `headerBytes`, read straight into (aligned) floats: the header
// has no fixed length, so the rows are not 4-byte aligned within the file's bytes.
Result<std::vector<float>> readRows(const fs::path& file, size_t headerBytes, int64_t floats) {
  std::vector<float> rows(static_cast<size_t>(floats));
  std::ifstream in(file, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(headerBytes));
  if (!in.read(reinterpret_cast<char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float))))
    return Status::ioError("cannot read " + file.string());
  return rows;
}

}  // namespace

fs::path defaultIndexBase(const fs::path& corpus) { return fs::path(corpus.string() + ".index"); }

Result<PassageIndexBuild> buildPassageIndex(const PassageIndexParams& p, const EmbedTexts& embed) {
  if (p.dim < 1) return Status::invalidArgument("the embedding dimension must be at least 1");
  if (p.batch < 1) return Status::invalidArgument("--batch must be at least 1");
  if (p.fingerprint.empty() || p.fingerprint.find('\n') != std::string::npos)
    return Status::invalidArgument("the embedder fingerprint must be one non-empty line");
  const fs::path base = p.base.empty() ? defaultIndexBase(p.corpus) : p.base;
  const fs::path partial = withSuffix(base, ".vectors.partial");
  const fs::path vectorsFile = withSuffix(base, ".vectors");
  const std::string head = header(p.fingerprint, p.dim);
  PassageIndexBuild out;

  RAG_ASSIGN_OR_RETURN(sql::Db db, corpus::openCorpus(p.corpus));
  RAG_ASSIGN_OR_RETURN(int64_t n, db.queryInt64("SELECT count(*) FROM passages"));
  RAG_ASSIGN_OR_RETURN(int64_t maxId, db.queryInt64("SELECT coalesce(max(id), 0) FROM passages"));
  if (n == 0) return Status::notFound("corpus " + p.corpus.string() + " has no passages; rebuild it with `ragraph corpus build`");
  if (maxId != n)
    return Status::corrupt("corpus " + p.corpus.string() + " has passage ids that are not 1.." +
                           std::to_string(n) + "; rebuild it with `ragraph corpus build`");
  out.passages = n;
  if (const fs::path dir = base.parent_path(); !dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::ioError("cannot create the index directory " + dir.string() + ": " + ec.message());
  }

  // Embed, continuing a partial file of the same embedder.
  int64_t done = matchingRows(vectorsFile, head, p.dim) == n ? n : 0;
  Stopwatch watch;
  if (done < n) {
    done = std::max<int64_t>(0, matchingRows(partial, head, p.dim));
    std::error_code ec;
    if (done > 0) {
      fs::resize_file(partial, head.size() + static_cast<uintmax_t>(done) * static_cast<uintmax_t>(p.dim) * sizeof(float), ec);
      if (ec) return Status::ioError("cannot trim " + partial.string() + ": " + ec.message());
    } else {
      std::ofstream fresh(partial, std::ios::binary | std::ios::trunc);
      if (!(fresh << head)) return Status::ioError("cannot write " + partial.string());
    }
    out.resumedFrom = done;
    std::ofstream file(partial, std::ios::binary | std::ios::app);
    if (!file) return Status::ioError("cannot append to " + partial.string());
    RAG_ASSIGN_OR_RETURN(sql::Stmt st, db.prepare("SELECT text FROM passages WHERE id > ? ORDER BY id"));
    st.bind(1, done);
    std::vector<std::string> texts;
    auto flush = [&]() -> Status {
      if (texts.empty()) return Status::ok();
      RAG_ASSIGN_OR_RETURN(std::vector<float> v, embed(texts));
      if (static_cast<int64_t>(v.size()) != static_cast<int64_t>(texts.size()) * p.dim)
        return Status::invalidArgument("the embedder returned " + std::to_string(v.size()) +
                                       " values for " + std::to_string(texts.size()) + " texts of dimension " +
                                       std::to_string(p.dim));
      file.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
      file.flush();
      if (!file) return Status::ioError("cannot write " + partial.string() + " (disk full?)");
      done += static_cast<int64_t>(texts.size());
      texts.clear();
      if (p.progress) p.progress("embedding passages", static_cast<uint64_t>(done), static_cast<uint64_t>(n));
      return Status::ok();
    };
    for (;;) {
      RAG_ASSIGN_OR_RETURN(bool row, st.step());
      if (!row) break;
      rag::Passage passage;
      passage.text = st.columnText(0);
      texts.emplace_back(corpus::embeddingText(passage));
      if (static_cast<int64_t>(texts.size()) == p.batch) RAG_RETURN_IF_ERROR(flush());
    }
    RAG_RETURN_IF_ERROR(flush());
    file.close();
    if (done != n) return Status::internal("embedded " + std::to_string(done) + " of " + std::to_string(n) + " passages");
    fs::rename(partial, vectorsFile, ec);
    if (ec) return Status::ioError("cannot rename " + partial.string() + ": " + ec.message());
  }
  out.embedSeconds = watch.elapsedSeconds();

  // The IVF index over the finished vectors.
  Stopwatch indexWatch;
  RAG_ASSIGN_OR_RETURN(std::vector<float> vectors, readRows(vectorsFile, head.size(), n * p.dim));
  out.nlist = p.nlist > 0 ? p.nlist : IvfIndex::defaultNlist(n);
  RAG_ASSIGN_OR_RETURN(IvfIndex ivf, IvfIndex::build(vectors, p.dim, out.nlist, p.seed, p.progress, p.clusterDims));
  RAG_RETURN_IF_ERROR(ivf.save(withSuffix(base, ".ivf"), p.fingerprint));
  out.indexSeconds = indexWatch.elapsedSeconds();
  return out;
}

Result<PassageIndex> PassageIndex::load(const fs::path& base, std::string_view fingerprint) {
  const fs::path vectorsFile = withSuffix(base, ".vectors");
  std::error_code ec;
  if (!fs::exists(vectorsFile, ec))
    return Status::notFound("no passage index at " + base.string() + ".{vectors,ivf}; build it with "
                            "`ragraph index build`");
  RAG_ASSIGN_OR_RETURN(IvfIndex ivf, IvfIndex::load(withSuffix(base, ".ivf"), fingerprint));
  const std::string head = header(fingerprint, ivf.dim());
  // Straight into the vector: the file is the index's size again (134 MB for the corpus).
  if (matchingRows(vectorsFile, head, ivf.dim()) < 0)
    return Status::schemaMismatch(vectorsFile.string() + " was made by another embedder than " +
                                  std::string(fingerprint) + "; rebuild it with `ragraph index build`");
  const uintmax_t size = fs::file_size(vectorsFile, ec);
  const int64_t n = ec ? -1 : wholeRows(size, head.size(), ivf.dim());
  if (n != ivf.size() || size != head.size() + static_cast<uintmax_t>(n * ivf.dim()) * sizeof(float))
    return Status::corrupt(vectorsFile.string() + " holds " + std::to_string(n) + " vectors but the IVF index " +
                           std::to_string(ivf.size()) + "; rebuild it with `ragraph index build`");
  RAG_ASSIGN_OR_RETURN(std::vector<float> vectors, readRows(vectorsFile, head.size(), n * ivf.dim()));
  const int64_t dim = ivf.dim();
  return PassageIndex(std::move(ivf), std::move(vectors), n, dim);
}

namespace {

std::vector<std::vector<int64_t>> passageIds(const SearchResults& r) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(r.n));
  for (int64_t i = 0; i < r.n; ++i)
    for (const SearchHit& h : r.row(i)) out[static_cast<size_t>(i)].push_back(PassageIndex::passageId(h.id));
  return out;
}

}  // namespace

Result<std::vector<std::vector<int64_t>>> PassageIndex::searchExact(std::span<const float> queries,
                                                                    int32_t k) const {
  RAG_ASSIGN_OR_RETURN(SearchResults r, searchFlat(m_vectors, m_dim, queries, k));
  return passageIds(r);
}

Result<std::vector<std::vector<int64_t>>> PassageIndex::searchIvf(std::span<const float> queries,
                                                                  int32_t k, int64_t nprobe) const {
  RAG_ASSIGN_OR_RETURN(SearchResults r, m_ivf.search(queries, k, nprobe));
  return passageIds(r);
}

}  // namespace rag::retrieval
