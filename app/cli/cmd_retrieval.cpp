// `ragraph index build`, `index calibrate` and `eval retrieval`: embed every passage of the
// corpus with the embedder and build the IVF index next to it (resumable), measure the index's
// default nprobe on dev questions (retrieval/nprobe_calibration.h), then measure how often the
// gold passage is retrieved, exactly and through the IVF at several nprobe.
//
//   ragraph index build [--embedder DIR] [--nlist N] [--batch 64] [--dtype bf16]
//   ragraph index calibrate [--queries 2000] [--target 0.95] [--confidence 0.95] [--force]
//   ragraph eval retrieval --split test --limit 2000 --json [--reworded] [--fusion-sweep]
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <iostream>
#include <thread>

#include "commands.h"
#include "core/clock.h"
#include "core/fork_join.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/qa_prompt.h"
#include "model/runner.h"
#include "model/training_data.h"
#include "retriever.h"
#include "retrieval/bm25_index.h"
#include "retrieval/fusion_calibration.h"
#include "retrieval/reword.h"
#include "retrieval/locality.h"
#include "retrieval/nprobe_calibration.h"

namespace rag::cli {

namespace fs = std::filesystem;

// Questions of a split (spread evenly over it, all when limit is 0) with the first gold passage
// of each: the one the question's entity names (-1 when it has none), and all of them (a two-hop
// question's second hop too).
struct LabelledQuestions {
  std::vector<std::string> questions;
  std::vector<int64_t> gold;
  std::vector<std::vector<int64_t>> allGold;
  std::vector<std::string> goldText;  // the gold passage's text ("" when none)
  std::vector<std::string> type;      // single_hop | definition | two_hop | foldoc
};

Result<LabelledQuestions> labelledQuestions(const fs::path& corpus, const std::string& split, int64_t limit) {
  RAG_ASSIGN_OR_RETURN(auto reader, corpus::QaPromptReader::open(corpus));
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> all, reader.splitIds(split));
  LabelledQuestions out;
  for (int64_t id : spreadEvenly(all, limit)) {
    RAG_ASSIGN_OR_RETURN(auto item, reader.item(id));
    out.questions.push_back(item.question);
    out.gold.push_back(item.goldPassages.empty() ? -1 : item.goldPassages.front().id);
    out.allGold.emplace_back();
    for (const auto& g : item.goldPassages) out.allGold.back().push_back(g.id);
    out.goldText.push_back(item.goldPassages.empty() ? std::string() : item.goldPassages.front().text);
    out.type.push_back(item.type);
  }
  return out;
}

// The held-out wording check: each question reworded away from its passage (retrieval/reword.h).
// The share of content words a question shares with its gold passage, before and after.
struct WordingShift {
  double sharedBefore = 0, sharedAfter = 0, changed = 0;  // means; changed: questions reworded at all
};
Result<WordingShift> rewordQuestions(const fs::path& corpus, LabelledQuestions& q) {
  RAG_ASSIGN_OR_RETURN(retrieval::Rewording rewording, retrieval::Rewording::open(corpus));
  WordingShift shift;
  for (size_t i = 0; i < q.questions.size(); ++i) {
    RAG_ASSIGN_OR_RETURN(std::string reworded, rewording.reword(q.questions[i]));
    shift.sharedBefore += retrieval::Rewording::sharedWords(q.questions[i], q.goldText[i]);
    shift.sharedAfter += retrieval::Rewording::sharedWords(reworded, q.goldText[i]);
    shift.changed += reworded != q.questions[i];
    q.questions[i] = std::move(reworded);
  }
  const double n = std::max<double>(1.0, static_cast<double>(q.questions.size()));
  shift.sharedBefore /= n;
  shift.sharedAfter /= n;
  shift.changed /= n;
  return shift;
}

// Measures and stores the index's defaults (`base`), on dev questions: not the train split (the
// embedder learned those, so they find their passages more easily: calibrated there, nprobe 238
// kept only 0.937 on test) and not the test split. First the default nprobe
// (retrieval/nprobe_calibration.h), then hybrid retrieval's fusion constants over the IVF's
// ranking at that nprobe and BM25's (retrieval/fusion_calibration.h). Each is kept when one is
// stored for this embedder already, unless `force`. The fusion needs the BM25 index (built beside
// the corpus when missing); when it cannot be measured the nprobe still stands, and `fusionError`
// says why.
struct IndexCalibration {
  retrieval::NprobeCalibration nprobe;
  std::optional<retrieval::FusionCalibration> fusion;
  Status fusionError;
};

Result<IndexCalibration> calibrateIndex(const model::TextEmbedder& embedder, const retrieval::PassageIndex& index,
                                        const fs::path& base, const fs::path& corpus, const std::string& split,
                                        int64_t queries, const retrieval::NprobeCalibrationParams& params, bool force,
                                        bool quiet) {
  IndexCalibration out;
  std::optional<retrieval::NprobeCalibration> storedNprobe;
  if (!force) {
    RAG_ASSIGN_OR_RETURN(storedNprobe, retrieval::loadNprobeCalibration(base, embedder.fingerprint()));
    RAG_ASSIGN_OR_RETURN(out.fusion, retrieval::loadFusionCalibration(base, embedder.fingerprint()));
    if (storedNprobe && out.fusion) {
      out.nprobe = *storedNprobe;
      return out;
    }
  }
  RAG_ASSIGN_OR_RETURN(LabelledQuestions dev, labelledQuestions(corpus, split, queries));
  if (dev.questions.empty())
    return Status::notFound("the corpus has no " + split + " questions to calibrate nprobe on; pick another with --split");
  RAG_ASSIGN_OR_RETURN(std::vector<float> q, embedder.embed(dev.questions, 32, model::sharedComputeTeam().get()));
  if (storedNprobe) {
    out.nprobe = *storedNprobe;
  } else {
    ProgressPrinter printer(quiet);
    retrieval::NprobeCalibrationParams p = params;
    p.progress = [&printer](std::string_view phase, uint64_t done, uint64_t total) { printer(phase, done, total); };
    auto c = retrieval::calibrateNprobe(index, q, dev.gold, embedder.fingerprint(), p);
    printer.finish();
    if (!c) return c.status();
    RAG_RETURN_IF_ERROR(retrieval::saveNprobeCalibration(base, *c));
    out.nprobe = std::move(*c);
  }
  if (out.fusion) return out;
  // The fusion, over the top 20 of each ranking as the serving engine fuses them.
  auto measureFusion = [&]() -> Result<retrieval::FusionCalibration> {
    constexpr int32_t kDepth = 20;
    RAG_ASSIGN_OR_RETURN(auto dense, index.searchIvf(q, kDepth, std::min(out.nprobe.nprobe, index.ivf().nlist())));
    RAG_ASSIGN_OR_RETURN(auto bm25, retrieval::Bm25Index::openOrBuild(corpus, {}, [quiet](const std::string& m) {
                           if (!quiet) std::fprintf(stderr, "%s\n", m.c_str());
                         }));
    ProgressPrinter printer(quiet);
    std::vector<std::vector<int64_t>> lexical;
    for (const std::string& question : dev.questions) {
      RAG_ASSIGN_OR_RETURN(auto hits, bm25.search(question, kDepth));
      lexical.push_back(std::move(hits));
      printer("calibrating hybrid fusion (BM25)", lexical.size(), dev.questions.size());
    }
    printer.finish();
    RAG_ASSIGN_OR_RETURN(auto c, retrieval::calibrateFusion(dense, lexical, dev.gold, dev.allGold,
                                                            embedder.fingerprint(), out.nprobe.nprobe));
    RAG_RETURN_IF_ERROR(retrieval::saveFusionCalibration(base, c));
    return c;
  };
  Result<retrieval::FusionCalibration> fusion = measureFusion();
  if (fusion) {
    out.fusion = std::move(*fusion);
  } else {
    out.fusionError = fusion.status();
  }
  return out;
}

void printCalibration(const IndexCalibration& c, const fs::path& base) {
  const retrieval::NprobeCalibration& n = c.nprobe;
  std::printf("default nprobe %lld: IVF recall@%d %.3f = %.3f of exact %.3f on %lld questions (at least %.3f with "
              "confidence %.2f; target %.2f); stored in %s\n",
              static_cast<long long>(n.nprobe), n.k, n.ivfRecall, n.flatRecall > 0 ? n.ivfRecall / n.flatRecall : 0.0,
              n.flatRecall, static_cast<long long>(n.queries), n.ratioLowerBound, n.confidence, n.target,
              retrieval::nprobeCalibrationPath(base).c_str());
  if (c.fusion) {
    const retrieval::FusionCalibration& f = *c.fusion;
    std::printf("hybrid fusion c %g, dense weight %g: recall@%d %.3f against IVF %.3f and BM25 %.3f alone (%.3f with "
                "the defaults c %g, dense weight %g); stored in %s\n",
                f.fusion.c, f.fusion.denseWeight, f.k, f.recall, f.denseRecall, f.lexicalRecall, f.defaultRecall,
                retrieval::HybridFusion{}.c, retrieval::HybridFusion{}.denseWeight,
                retrieval::fusionCalibrationPath(base).c_str());
  } else {
    std::fprintf(stderr, "ragraph: warning: hybrid fusion not measured (%s); hybrid retrieval uses c %g, dense weight %g\n",
                 c.fusionError.message().c_str(), retrieval::HybridFusion{}.c, retrieval::HybridFusion{}.denseWeight);
  }
}

int cmdIndexCalibrate(Args& args) {
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  Result<int64_t> queries = args.getInt("queries", retrieval::kDefaultCalibrationQueries);
  Result<double> target = args.getDouble("target", 0.95);
  Result<double> confidence = args.getDouble("confidence", 0.95);
  const std::string split = args.getOr("split", "dev");
  const bool force = args.flag("force");
  const bool json = args.flag("json");
  const bool quiet = args.flag("quiet");
  if (!queries) return fail(queries.status());
  if (!target) return fail(target.status());
  if (!confidence) return fail(confidence.status());
  if (*queries < 1 || *target <= 0.0 || *target > 1.0 || *confidence < 0.0 || *confidence >= 1.0)
    return fail(Status::invalidArgument("--queries must be >= 1, --target in (0, 1] and --confidence in [0, 1)"));
  retrieval::NprobeCalibrationParams params;
  params.target = *target;
  params.confidence = *confidence;
  model::setComputeThreads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  Result<Retriever> r = Retriever::open(args, corpus);
  if (!r) return fail(r.status());
  if (Status s = args.finish(); !s) return fail(s);
  auto c = calibrateIndex(*r->embedder, *r->index, r->base, corpus, split, *queries, params, force, quiet);
  if (!c) return fail(c.status().withContext("calibrating the default nprobe"));
  if (json) {
    // {"nprobe": B.nprobe.json, "fusion": B.fusion.json (null when not measured)}
    std::printf("{\"nprobe\": %s, \"fusion\": %s}\n",
                readFile(retrieval::nprobeCalibrationPath(r->base)).valueOr("null").c_str(),
                c->fusion ? readFile(retrieval::fusionCalibrationPath(r->base)).valueOr("null").c_str() : "null");
  } else {
    printCalibration(*c, r->base);
  }
  return 0;
}

int cmdIndexBuild(Args& args) {
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  Result<fs::path> dir = readEmbedderDir(args);
  Result<int64_t> nlist = args.getInt("nlist", 0);
  Result<int64_t> batch = args.getInt("batch", 64);
  Result<int64_t> threads = args.getInt("threads", static_cast<int64_t>(std::thread::hardware_concurrency()));
  const std::optional<std::string> base = args.get("index");
  const std::string dtype = args.getOr("dtype", "f32");
  const bool quiet = args.flag("quiet");
  const bool json = args.flag("json");
  const bool ifNeeded = args.flag("if-needed");
  for (const Status& s : {dir.status(), nlist.status(), batch.status(), threads.status(), args.finish()})
    if (!s) return fail(s);
  if (*nlist < 0 || *batch < 1 || *threads < 1)
    return fail(Status::invalidArgument("--nlist must be >= 0 (0: from the corpus size), --batch and --threads >= 1"));
  model::setComputeThreads(static_cast<int>(*threads));
  auto embedder = model::TextEmbedder::load(*dir, dtype);
  if (!embedder) return fail(embedder.status());
  // --if-needed: an index this embedder built is kept (run.sh calls this on every start); one
  // another embedder built (e.g. an older shipped one) is rebuilt, and the user is told why.
  if (ifNeeded) {
    const fs::path at = base ? fs::path(*base) : retrieval::defaultIndexBase(corpus);
    auto existing = retrieval::PassageIndex::load(at, (*embedder)->fingerprint());
    if (existing) {
      if (json) {
        JsonWriter w(std::cout);
        w.beginObject().key("index").value(at.string()).key("embedder").value((*embedder)->fingerprint());
        w.key("passages").value(existing->size()).key("up_to_date").value(true).endObject();
        std::cout << std::endl;
      } else if (!quiet) {
        std::fprintf(stderr, "the passage index %s is up to date (embedder %s)\n", at.c_str(),
                     (*embedder)->fingerprint().c_str());
      }
      return 0;
    }
    if (existing.status().code() != StatusCode::NotFound)
      std::fprintf(stderr, "ragraph: rebuilding the passage index %s: %s\n", at.c_str(),
                   existing.status().message().c_str());
  }

  retrieval::PassageIndexParams p;
  p.corpus = corpus;
  if (base) p.base = *base;
  p.fingerprint = (*embedder)->fingerprint();
  p.dim = (*embedder)->dim();
  p.clusterDims = (*embedder)->pooledDim();
  p.batch = *batch;
  p.nlist = *nlist;
  ProgressPrinter printer(quiet);
  p.progress = [&printer](std::string_view phase, uint64_t done, uint64_t total) { printer(phase, done, total); };
  const std::shared_ptr<ForkJoin> team = model::sharedComputeTeam();  // --threads
  auto built = retrieval::buildPassageIndex(p, [&](std::span<const std::string> texts) {
    return (*embedder)->embed(texts, *batch, team.get());
  });
  printer.finish();
  if (!built) return fail(built.status().withContext("building the passage index (run the same command again to resume)"));
  const fs::path where = p.base.empty() ? retrieval::defaultIndexBase(corpus) : p.base;
  // The new index's default nprobe: an old calibration was for the old clusters and goes first.
  // A corpus without dev questions (or one where calibration fails) keeps the built index and
  // the fallback nprobe, and says so.
  std::error_code ec;
  fs::remove(retrieval::nprobeCalibrationPath(where), ec);
  fs::remove(retrieval::fusionCalibrationPath(where), ec);
  auto index = retrieval::PassageIndex::load(where, (*embedder)->fingerprint());
  if (!index) return fail(index.status());
  auto calibration = calibrateIndex(**embedder, *index, where, corpus, "dev", retrieval::kDefaultCalibrationQueries,
                                    {}, /*force=*/true, quiet);
  if (!calibration)
    std::fprintf(stderr, "ragraph: warning: the index is built, but its default nprobe was not measured (%s); "
                         "retrieval uses --nprobe or %lld. Run `ragraph index calibrate --split SPLIT` to measure it.\n",
                 calibration.status().message().c_str(), static_cast<long long>(kDefaultNprobe));
  if (json) {
    JsonWriter w(std::cout);
    w.beginObject();
    w.key("index").value(where.string());
    w.key("embedder").value((*embedder)->fingerprint());
    w.key("passages").value(built->passages);
    w.key("up_to_date").value(false);
    w.key("resumed_from").value(built->resumedFrom);
    w.key("dim").value((*embedder)->dim());
    w.key("nlist").value(built->nlist);
    w.key("embed_seconds").value(built->embedSeconds);
    w.key("index_seconds").value(built->indexSeconds);
    w.key("default_nprobe").value(calibration ? calibration->nprobe.nprobe : kDefaultNprobe);
    w.key("default_nprobe_measured").value(calibration.isOk());
    const bool fused = calibration && calibration->fusion;
    const retrieval::HybridFusion f = fused ? calibration->fusion->fusion : retrieval::HybridFusion{};
    w.key("hybrid_fusion").beginObject().key("c").value(f.c).key("dense_weight").value(f.denseWeight);
    w.key("measured").value(fused).endObject();
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("index written to %s.{vectors,ivf}: %lld passages (%lld resumed) of dimension %lld "
                "by %s, %lld clusters; embedding %.1f s, index %.1f s\n",
                where.c_str(), static_cast<long long>(built->passages),
                static_cast<long long>(built->resumedFrom), static_cast<long long>((*embedder)->dim()),
                (*embedder)->fingerprint().c_str(), static_cast<long long>(built->nlist),
                built->embedSeconds, built->indexSeconds);
    if (calibration) printCalibration(*calibration, where);
  }
  return 0;
}

int cmdEvalRetrieval(Args& args) {
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  const std::string split = args.getOr("split", "test");
  Result<int64_t> limit = args.getInt("limit", 0);
  const bool json = args.flag("json");
  const bool reworded = args.flag("reworded");
  const bool sweep = args.flag("fusion-sweep");
  Result<int64_t> threads = args.getInt("threads", static_cast<int64_t>(std::thread::hardware_concurrency()));
  if (!limit || !threads) return fail(!limit ? limit.status() : threads.status());
  if (*limit < 0 || *threads < 1) return fail(Status::invalidArgument("--limit must be >= 0 and --threads >= 1"));
  model::setComputeThreads(static_cast<int>(*threads));
  Result<Retriever> r = Retriever::open(args, corpus);
  if (!r) return fail(r.status());
  if (Status s = args.finish(); !s) return fail(s);

  auto labelled = labelledQuestions(corpus, split, *limit);
  if (!labelled) return fail(labelled.status());
  std::optional<WordingShift> wording;
  if (reworded) {
    auto shift = rewordQuestions(corpus, *labelled);
    if (!shift) return fail(shift.status());
    wording = *shift;
  }
  const std::vector<int64_t>& gold = labelled->gold;
  Stopwatch watch;
  auto q = r->embedder->embed(labelled->questions, 32, model::sharedComputeTeam().get());  // --threads
  if (!q) return fail(q.status());
  const double embedSeconds = watch.elapsedSeconds();

  constexpr int32_t kTop = 20;
  struct Recall {
    double at1 = 0, at5 = 0, at20 = 0, seconds = 0;
    double every5 = 0;                           // every gold passage of the question in the top 5
    std::map<std::string, double> at5ByType;     // recall@5 per question type
    std::map<std::string, double> every5ByType;
  };
  auto recall = [&](const std::vector<std::vector<int64_t>>& hits, double seconds) {
    Recall out;
    out.seconds = seconds;
    std::map<std::string, double> questionsOfType;
    for (size_t i = 0; i < hits.size(); ++i) {
      const std::string& type = labelled->type[i];
      questionsOfType[type] += 1;
      out.at5ByType[type] += 0;
      const std::vector<int64_t> top5(hits[i].begin(), hits[i].begin() + std::min<ptrdiff_t>(5, std::ssize(hits[i])));
      const bool every = !labelled->allGold[i].empty() &&
                         std::all_of(labelled->allGold[i].begin(), labelled->allGold[i].end(), [&](int64_t g) {
                           return std::find(top5.begin(), top5.end(), g) != top5.end();
                         });
      out.every5 += every;
      out.every5ByType[type] += every;
      for (size_t rank = 0; rank < hits[i].size(); ++rank)
        if (hits[i][rank] == gold[i]) {
          out.at1 += rank < 1;
          out.at5 += rank < 5;
          out.at20 += rank < 20;
          out.at5ByType[type] += rank < 5;
          break;
        }
    }
    const double n = std::max<double>(1.0, static_cast<double>(hits.size()));
    out.at1 /= n;
    out.at5 /= n;
    out.at20 /= n;
    out.every5 /= n;
    for (auto& [type, hit] : out.at5ByType) hit /= questionsOfType[type];
    for (auto& [type, hit] : out.every5ByType) hit /= questionsOfType[type];
    return out;
  };
  Stopwatch exactWatch;
  auto exact = r->index->searchExact(*q, kTop);
  if (!exact) return fail(exact.status());
  const Recall flat = recall(*exact, exactWatch.elapsedSeconds());
  std::vector<std::pair<int64_t, Recall>> ivf;
  for (int64_t nprobe = 8; nprobe <= std::min<int64_t>(256, r->index->ivf().nlist()); nprobe *= 2) {
    Stopwatch w;
    auto hits = r->index->searchIvf(*q, kTop, nprobe);
    if (!hits) return fail(hits.status());
    ivf.emplace_back(nprobe, recall(*hits, w.elapsedSeconds()));
  }
  Stopwatch defWatch;
  auto defHits = r->index->searchIvf(*q, kTop, r->nprobe);
  if (!defHits) return fail(defHits.status());
  const Recall def = recall(*defHits, defWatch.elapsedSeconds());

  // Lexical retrieval in the same run: BM25 (SQLite FTS5), and hybrid = reciprocal-rank fusion of
  // the IVF at the default nprobe with BM25.
  auto bm25 = retrieval::Bm25Index::openOrBuild(corpus, {}, [](const std::string& m) { std::fprintf(stderr, "%s\n", m.c_str()); });
  if (!bm25) return fail(bm25.status());
  Stopwatch bm25Watch;
  std::vector<std::vector<int64_t>> bm25Hits;
  for (const std::string& question : labelled->questions) {
    auto hits = bm25->search(question, kTop);
    if (!hits) return fail(hits.status());
    bm25Hits.push_back(std::move(*hits));
  }
  const Recall lexical = recall(bm25Hits, bm25Watch.elapsedSeconds());
  auto fuse = [&](const retrieval::HybridFusion& f) {
    std::vector<std::vector<int64_t>> fused;
    for (size_t i = 0; i < bm25Hits.size(); ++i) fused.push_back(retrieval::hybridFusion((*defHits)[i], bm25Hits[i], kTop, f));
    return recall(fused, def.seconds + lexical.seconds);
  };
  const retrieval::HybridFusion used = r->fusion;  // what hybrid retrieval serves with
  const Recall hybrid = fuse(used);
  // --fusion-sweep: hybrid's recall over the grid `index calibrate` chooses the fusion from, over
  // the same two rankings.
  struct SweepPoint {
    retrieval::HybridFusion fusion;
    Recall recall;
  };
  std::vector<SweepPoint> sweepPoints;
  if (sweep)
    for (const retrieval::HybridFusion& f : retrieval::fusionGrid()) sweepPoints.push_back({f, fuse(f)});

  auto write = [](JsonWriter& w, const Recall& x) {
    w.beginObject();
    w.key("recall@1").value(x.at1);
    w.key("recall@5").value(x.at5);
    w.key("recall@20").value(x.at20);
    w.key("seconds").value(x.seconds);
    w.key("recall@5_by_type").beginObject();
    for (const auto& [type, r] : x.at5ByType) w.key(type).value(r);
    w.endObject();
    w.key("every_gold@5").value(x.every5);
    w.key("every_gold@5_by_type").beginObject();
    for (const auto& [type, r] : x.every5ByType) w.key(type).value(r);
    w.endObject();
    w.endObject();
  };
  if (json) {
    JsonWriter w(std::cout);
    w.beginObject();
    w.key("split").value(split);
    w.key("queries").value(static_cast<int64_t>(gold.size()));
    if (wording)
      w.key("reworded").beginObject()
          .key("shared_words_before").value(wording->sharedBefore)
          .key("shared_words_after").value(wording->sharedAfter)
          .key("questions_changed").value(wording->changed)
          .endObject();
    w.key("embedder").value(r->embedder->fingerprint());
    w.key("passages").value(r->index->size());
    w.key("nlist").value(r->index->ivf().nlist());
    w.key("embed_seconds").value(embedSeconds);
    w.key("flat");
    write(w, flat);
    w.key("ivf").beginObject();
    for (const auto& [nprobe, x] : ivf) {
      w.key(std::to_string(nprobe));
      write(w, x);
    }
    w.endObject();
    w.key("default_nprobe").value(r->nprobe);
    w.key("default_nprobe_from").value(r->nprobeFrom);
    w.key("ivf_default");
    write(w, def);
    w.key("ivf_default_over_flat_recall@5").value(flat.at5 > 0 ? def.at5 / flat.at5 : 0.0);
    w.key("bm25");
    write(w, lexical);
    w.key("hybrid");
    write(w, hybrid);
    w.key("hybrid_fusion").beginObject()
        .key("c").value(used.c)
        .key("dense_weight").value(used.denseWeight)
        .key("lexical_weight").value(used.lexicalWeight)
        .key("from").value(r->fusionFrom)
        .endObject();
    if (sweep) {
      w.key("fusion_sweep").beginArray();
      for (const SweepPoint& p : sweepPoints) {
        w.beginObject();
        w.key("c").value(p.fusion.c);
        w.key("dense_weight").value(p.fusion.denseWeight);
        w.key("recall@1").value(p.recall.at1);
        w.key("recall@5").value(p.recall.at5);
        w.key("recall@20").value(p.recall.at20);
        w.endObject();
      }
      w.endArray();
    }
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("%zu %s questions, gold = first gold passage\n", gold.size(), split.c_str());
    if (wording)
      std::printf("  reworded with WordNet synonyms: %.0f %% of the questions changed; content words shared with "
                  "the gold passage %.2f -> %.2f\n",
                  100 * wording->changed, wording->sharedBefore, wording->sharedAfter);
    std::printf("  exact      recall@1 %.3f  @5 %.3f  @20 %.3f\n", flat.at1, flat.at5, flat.at20);
    auto byType = [](const char* name, const Recall& x) {
      std::printf("  %-10s recall@5 by type:", name);
      for (const auto& [type, r] : x.at5ByType) std::printf("  %s %.3f", type.c_str(), r);
      std::printf("; every gold passage in the top 5 %.3f (two-hop %.3f)\n", x.every5,
                  x.every5ByType.count("two_hop") ? x.every5ByType.at("two_hop") : 0.0);
    };
    byType("exact", flat);
    byType("bm25", lexical);
    byType("hybrid", hybrid);
    for (const auto& [nprobe, x] : ivf)
      std::printf("  nprobe %-4lld recall@1 %.3f  @5 %.3f  @20 %.3f  (%.3f s)\n",
                  static_cast<long long>(nprobe), x.at1, x.at5, x.at20, x.seconds);
    std::printf("  bm25       recall@1 %.3f  @5 %.3f  @20 %.3f  (%.3f s)\n", lexical.at1, lexical.at5, lexical.at20,
                lexical.seconds);
    std::printf("  hybrid     recall@1 %.3f  @5 %.3f  @20 %.3f  (IVF at nprobe %lld + BM25, reciprocal-rank fusion, "
                "c %g, dense weight %g: %s)\n",
                hybrid.at1, hybrid.at5, hybrid.at20, static_cast<long long>(r->nprobe), used.c, used.denseWeight,
                r->fusionFrom == "calibration" ? "measured for this embedder" : "the defaults");
    for (const SweepPoint& p : sweepPoints)
      std::printf("  fusion c %-3g dense weight %-4g recall@1 %.3f  @5 %.3f  @20 %.3f\n", p.fusion.c,
                  p.fusion.denseWeight, p.recall.at1, p.recall.at5, p.recall.at20);
  }
  return 0;
}

// Two-step query chains from the two-hop questions (HedraRAG §4.3): the first query is the
// question, the second the question followed by the intermediate entity's name (what an IRG or
// Multistep round adds after its first answer). For the second query: clusters searched until
// its final top-k (the full nprobe search) is reached, in nearest-centroid order and reordered
// by the first query's local cache; and the recall of its gold (second-hop) passage with and
// without early termination.
int cmdBenchRetrieval(Args& args) {
  const fs::path corpus = args.get("corpus") ? fs::path(*args.get("corpus")) : defaultCorpusPath();
  const std::string split = args.getOr("split", "test");
  Result<int64_t> limit = args.getInt("limit", 500);
  Result<int64_t> k = args.getInt("k", 5);
  Result<int64_t> patience = args.getInt("patience", 8);
  const bool json = args.flag("json");
  for (const Status& st : {limit.status(), k.status(), patience.status()})
    if (!st) return fail(st);
  if (*limit < 1 || *k < 1 || *k > 20 || *patience < 1)
    return fail(Status::invalidArgument("--limit >= 1, --k between 1 and 20, --patience >= 1"));
  model::setComputeThreads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  Result<Retriever> r = Retriever::open(args, corpus);
  if (!r) return fail(r.status());
  if (Status st = args.finish(); !st) return fail(st);
  auto reader = corpus::QaPromptReader::open(corpus);
  if (!reader) return fail(reader.status());
  auto all = reader->splitIds(split);
  if (!all) return fail(all.status());
  std::vector<std::string> first, second;
  std::vector<int64_t> gold2;
  for (int64_t id : *all) {
    auto item = reader->item(id);
    if (!item) return fail(item.status());
    if (item->type != "two_hop" || item->goldPassages.size() < 2) continue;
    first.push_back(item->question);
    second.push_back(item->question + " " + std::string(model::plainTitle(item->goldPassages[1].title)));
    gold2.push_back(item->goldPassages[1].id);
  }
  if (first.empty()) return fail(Status::notFound("split '" + split + "' has no two-hop questions"));
  // Spread over the split like the other evaluations.
  std::vector<int64_t> pick(first.size());
  std::iota(pick.begin(), pick.end(), int64_t{0});
  pick = spreadEvenly(pick, *limit);
  std::vector<std::string> q1, q2;
  std::vector<int64_t> g2;
  for (int64_t i : pick) {
    q1.push_back(first[static_cast<size_t>(i)]);
    q2.push_back(second[static_cast<size_t>(i)]);
    g2.push_back(gold2[static_cast<size_t>(i)]);
  }
  auto v1 = r->embedder->embed(q1);
  auto v2 = r->embedder->embed(q2);
  if (!v1 || !v2) return fail(!v1 ? v1.status() : v2.status());
  const retrieval::IvfIndex& ivf = r->index->ivf();
  const std::vector<int32_t> clusterOf = ivf.clusterOfIds();
  const int64_t d = ivf.dim();
  const auto kk = static_cast<int32_t>(*k);
  double plainUntil = 0, reorderedUntil = 0, recallFull = 0, recallPlainStop = 0, recallReorderedStop = 0;
  double plainStopClusters = 0, reorderedStopClusters = 0, cacheHits = 0;
  auto has = [](const std::vector<retrieval::SearchHit>& hits, int64_t passageId) {
    for (const retrieval::SearchHit& h : hits)
      if (retrieval::PassageIndex::passageId(h.id) == passageId) return 1.0;
    return 0.0;
  };
  Stopwatch watch;
  for (size_t i = 0; i < q1.size(); ++i) {
    std::span<const float> a(v1->data() + i * static_cast<size_t>(d), static_cast<size_t>(d));
    std::span<const float> b(v2->data() + i * static_cast<size_t>(d), static_cast<size_t>(d));
    auto t1 = ivf.makeTask(a, 20, r->nprobe);
    if (!t1) return fail(t1.status());
    retrieval::SearchTask* one[] = {&*t1};
    if (auto st = ivf.step(one, 1e9); !st) return fail(st.status());
    const retrieval::LocalCache cache = retrieval::LocalCache::remember(*t1, clusterOf);
    auto full = ivf.makeTask(b, kk, r->nprobe);
    if (!full) return fail(full.status());
    retrieval::SearchTask* f[] = {&*full};
    if (auto st = ivf.step(f, 1e9); !st) return fail(st.status());
    const std::vector<retrieval::SearchHit> final = full->topK();
    recallFull += has(final, g2[i]);
    // Observation 1: the follow-up's results already among the cached top-20.
    bool inCache = true;
    for (const retrieval::SearchHit& h : final) {
      bool found = false;
      for (const retrieval::SearchHit& c : cache.top) found = found || c.id == h.id;
      inCache = inCache && found;
    }
    cacheHits += inCache;
    for (int reordered = 0; reordered < 2; ++reordered) {
      auto order = ivf.makeTask(b, kk, r->nprobe);
      if (!order) return fail(order.status());
      const std::vector<int64_t> clusters =
          reordered ? retrieval::reorderClusters(order->clusters(), cache) : order->clusters();
      auto until = ivf.makeTask(b, kk, clusters);
      auto stop = ivf.makeTask(b, kk, clusters);
      if (!until || !stop) return fail(!until ? until.status() : stop.status());
      auto n = retrieval::clustersUntil(ivf, *until, final);
      auto e = retrieval::searchWithEarlyStop(ivf, *stop, *patience);
      if (!n || !e) return fail(!n ? n.status() : e.status());
      (reordered ? reorderedUntil : plainUntil) += static_cast<double>(*n);
      (reordered ? reorderedStopClusters : plainStopClusters) += static_cast<double>(e->clustersSearched);
      (reordered ? recallReorderedStop : recallPlainStop) += has(e->top, g2[i]);
    }
  }
  const double n = static_cast<double>(q1.size());
  if (json) {
    JsonWriter w(std::cout);
    w.beginObject();
    w.key("chains").value(static_cast<int64_t>(q1.size()));
    w.key("split").value(split);
    w.key("second_query").value("question + intermediate entity name");
    w.key("nprobe").value(r->nprobe);
    w.key("k").value(*k);
    w.key("patience").value(*patience);
    w.key("final_in_local_cache").value(cacheHits / n);
    w.key("clusters_until_final").beginObject();
    w.key("plain").value(plainUntil / n);
    w.key("reordered").value(reorderedUntil / n);
    w.key("reduction").value(plainUntil > 0 ? 1.0 - reorderedUntil / plainUntil : 0.0);
    w.endObject();
    w.key("recall_second_hop").beginObject();
    w.key("full").value(recallFull / n);
    w.key("early_stop_plain").value(recallPlainStop / n);
    w.key("early_stop_reordered").value(recallReorderedStop / n);
    w.endObject();
    w.key("clusters_with_early_stop").beginObject();
    w.key("plain").value(plainStopClusters / n);
    w.key("reordered").value(reorderedStopClusters / n);
    w.endObject();
    w.key("seconds").value(watch.elapsedSeconds());
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("%zu two-hop chains, nprobe %lld, k %lld: clusters until the final top-k %.2f plain, "
                "%.2f reordered (%.1f%% fewer); recall of the second hop %.3f full, %.3f / %.3f with "
                "early stop (plain / reordered)\n",
                q1.size(), static_cast<long long>(r->nprobe), static_cast<long long>(*k), plainUntil / n,
                reorderedUntil / n, plainUntil > 0 ? 100.0 * (1.0 - reorderedUntil / plainUntil) : 0.0,
                recallFull / n, recallPlainStop / n, recallReorderedStop / n);
  }
  return 0;
}

}  // namespace rag::cli
