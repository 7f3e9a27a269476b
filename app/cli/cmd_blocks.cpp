// ragraph blocks precompute: fills Block-Attention's disk tier (memory/block_store.h) with the KV
// of the passages serving is most likely to retrieve, so the first requests after a start find
// their blocks instead of computing them. Resumable: passages already stored are skipped, and the
// store is saved (atomically) every few hundred passages, so an interrupted run keeps its work.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>

#include "commands.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/json_writer.h"
#include "corpus/qa_prompt.h"
#include "memory/block_store.h"
#include "model/model_config.h"
#include "model/prompt.h"
#include "model_choice.h"
#include "retriever.h"

namespace rag::cli {

namespace {

constexpr int64_t kSaveEvery = 256;  // passages between saves (the resume granularity)

// The passages retrieval returns most often for the split's first `questions` questions, most
// frequent first: what a trace over those questions will ask blocks for.
Result<std::vector<int64_t>> hotPassages(Args& args, const std::filesystem::path& corpus, corpus::QaPromptReader& reader,
                                         const std::string& split, int64_t questions, ProgressPrinter& progress) {
  RAG_ASSIGN_OR_RETURN(Retriever retriever, Retriever::open(args, corpus));
  RAG_ASSIGN_OR_RETURN(std::vector<int64_t> ids, reader.splitIds(split));
  ids = spreadEvenly(ids, questions);
  std::vector<std::string> texts;
  for (int64_t id : ids) {
    RAG_ASSIGN_OR_RETURN(QaItem item, reader.item(id));
    texts.push_back(item.question);
  }
  progress("retrieving the hot set", 0, 1);
  RAG_ASSIGN_OR_RETURN(auto hits, retriever.search(texts, 5));
  std::map<int64_t, int64_t> count;
  for (const auto& h : hits)
    for (int64_t p : h)
      if (p >= 0) ++count[p];
  std::vector<std::pair<int64_t, int64_t>> byCount(count.begin(), count.end());
  std::stable_sort(byCount.begin(), byCount.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<int64_t> out;
  for (const auto& [p, n] : byCount) out.push_back(p);
  return out;
}

}  // namespace

int cmdBlocksPrecompute(Args& args) {
  const std::filesystem::path corpusPath = args.getOr("corpus", defaultCorpusPath().string());
  const std::string which = args.getOr("passages", "hot");
  const std::string split = args.getOr("split", "test");
  auto questions = args.getInt("questions", 2000);
  auto maxMb = args.getInt("max-mb", 512);
  auto batch = args.getInt("batch", 32);
  const bool quiet = args.flag("quiet");
  const bool json = args.flag("json");
  for (auto* r : {&questions, &maxMb, &batch})
    if (!*r) return fail(r->status());
  if (*questions < 1 || *maxMb < 1 || *batch < 1)
    return fail(Status::invalidArgument("--questions, --max-mb and --batch must be at least 1"));
  int64_t limit = -1;  // passages to consider; -1: until the store is full
  bool all = false;
  if (which == "all") {
    all = true;
  } else if (which != "hot") {
    char* end = nullptr;
    limit = std::strtoll(which.c_str(), &end, 10);
    if (which.empty() || *end != '\0' || limit < 1)
      return fail(Status::invalidArgument("--passages takes hot (the passages retrieved most often for the split's "
                                          "questions), all (in id order) or a count N (the N hottest), not '" + which + "'"));
  }
  auto choice = readModelChoice(args, /*allowSynthetic=*/false);
  if (!choice) return fail(choice.status());
  ProgressPrinter progress(quiet);
  auto reader = corpus::QaPromptReader::open(corpusPath);
  if (!reader) return fail(reader.status());
  std::vector<int64_t> ids;
  if (all) {
    if (Status st = args.finish(); !st) return fail(st);
    for (int64_t id = 1; id <= reader->maxPassageId(); ++id) ids.push_back(id);
  } else {
    auto hot = hotPassages(args, corpusPath, *reader, split, *questions, progress);
    if (!hot) return fail(hot.status().withContext("finding the hot passages (--passages hot needs the passage index)"));
    if (Status st = args.finish(); !st) return fail(st);
    ids = std::move(*hot);
    if (limit > 0 && static_cast<int64_t>(ids.size()) > limit) ids.resize(static_cast<size_t>(limit));
  }

  auto loaded = loadChosenModel(*choice);
  if (!loaded) return fail(loaded.status());
  if (!loaded->tokenizer)
    return fail(Status::notFound("the model at " + loaded->description + " has no tokenizer.json next to it; "
                                 "copy the tokenizer it was trained with there"));
  auto fp = model::llamaFingerprint(choice->dir, choice->dtype);
  if (!fp) return fail(fp.status());
  model::RunnerParams rp;
  rp.maxRunning = static_cast<int32_t>(*batch);
  rp.kvBudgetBytes = 64ll << 20;
  rp.backend = choice->backend;
  auto runner = model::ModelRunner::create(loaded->model, rp, loaded->tokenizer);
  if (!runner) return fail(runner.status());
  const memory::KvPoolParams& pp = (*runner)->kvPool().params();
  std::filesystem::path dir = corpusPath;
  dir += ".blocks";
  auto store = memory::BlockStore::open({.file = dir / (*fp + ".kvblocks"),
                                         .fingerprint = *fp,
                                         .layers = pp.layers,
                                         .kvHeads = pp.kvHeads,
                                         .headDim = pp.headDim,
                                         .elementBytes = pp.elementBytes,
                                         .maxBytes = *maxMb << 20});
  if (!store) return fail(store.status());
  if (!(*store)->openReport().empty()) std::fprintf(stderr, "%s\n", (*store)->openReport().c_str());

  Stopwatch wall;
  int64_t computed = 0, skipped = 0, sinceSave = 0, tokens = 0;
  std::map<model::SeqId, std::pair<int64_t, std::vector<int32_t>>> running;  // seq -> passage, tokens
  size_t next = 0;
  bool full = false;
  auto saveNow = [&]() -> Status {
    sinceSave = 0;
    return (*store)->save();
  };
  while ((next < ids.size() && !full) || !running.empty()) {
    while (!full && next < ids.size() && static_cast<int64_t>(running.size()) < *batch) {
      const int64_t id = ids[next++];
      auto passage = reader->passage(id);
      if (!passage) return fail(passage.status());
      const model::PassageText text = model::passageText(*passage);
      const model::PromptPiece piece{text.text, model::SegmentOrigin::Passage, id};
      model::PromptTokens t = model::tokenizePieces(*loaded->tokenizer, std::span(&piece, 1));
      if (t.tokens.empty()) continue;
      if ((*store)->contains(id, t.tokens)) {
        ++skipped;
        continue;
      }
      if ((*store)->stats().bytes + (*store)->recordBytes(static_cast<int64_t>(t.tokens.size())) > (*maxMb << 20)) {
        full = true;
        break;
      }
      model::SequenceRequest q;
      q.prompt = t.tokens;
      q.sampling.maxTokens = 0;
      q.keepKv = true;
      auto seq = (*runner)->add(std::move(q));
      if (!seq) return fail(seq.status().withContext("passage " + std::to_string(id)));
      running.emplace(*seq, std::make_pair(id, std::move(t.tokens)));
    }
    if (running.empty()) continue;
    model::StepResult r = (*runner)->step();
    for (const model::SeqEvent& e : r.events) {
      if (!e.finished) continue;
      auto it = running.find(e.id);
      if (it == running.end()) continue;
      auto info = (*runner)->info(e.id);
      if (!info) return fail(info.status());
      if (Status st = (*store)->put(it->second.first, it->second.second, (*runner)->kvPool(), info->blocks); !st)
        return fail(st);
      tokens += static_cast<int64_t>(it->second.second.size());
      (void)(*runner)->release(e.id);
      running.erase(it);
      ++computed;
      if (++sinceSave >= kSaveEvery)
        if (Status st = saveNow(); !st) return fail(st);
      progress("computing passage blocks", next, ids.size());
    }
  }
  if (Status st = saveNow(); !st) return fail(st);
  progress.finish();
  const memory::BlockStoreStats s = (*store)->stats();
  const double secs = wall.elapsedSeconds();
  if (json) {
    JsonWriter w(std::cout, true);
    w.beginObject();
    w.key("file").value((*store)->params().file.string());
    w.key("model").value(*fp);
    w.key("records").value(s.records);
    w.key("bytes").value(s.bytes);
    w.key("computed").value(computed);
    w.key("skipped_stored").value(skipped);
    w.key("full").value(full);
    w.key("computed_tokens").value(tokens);
    w.key("seconds").value(secs);
    w.endObject();
    std::cout << std::endl;
  } else {
    std::printf("%s: %lld passage blocks (%.1f MiB); computed %lld (%lld tokens) in %.1f s, %lld already stored%s\n",
                (*store)->params().file.c_str(), static_cast<long long>(s.records), static_cast<double>(s.bytes) / (1 << 20),
                static_cast<long long>(computed), static_cast<long long>(tokens), secs, static_cast<long long>(skipped),
                full ? "; the store is full (raise --max-mb to keep more)" : "");
  }
  return 0;
}

}  // namespace rag::cli
