// Loading a live facade (rag::DragonLive, rag::WindVeLive: their create() blocks for seconds while
// it loads models) on Qt's thread pool, for the pages that run one. The result carries the
// sources it was loaded from, so a page whose sources changed meanwhile can tell a stale load.
//
//   m_loader.setFuture(loadLive<rag::WindVeLive>(params, embedderDir, corpus));   // GUI thread
//   ... on m_loader's finished(): std::shared_ptr<LiveLoad<rag::WindVeLive>> r = m_loader.result();
#pragma once

#include <QFuture>
#include <filesystem>
#include <memory>

#include "bridge/background.h"
#include "rag/status.h"

namespace ragwb {

template <class Live>
struct LiveLoad {
  rag::Status status;          // why `live` is empty
  std::shared_ptr<Live> live;
  std::filesystem::path modelDir, corpus;  // what it was loaded from
};

// Live::create(params) on the thread pool.
template <class Live, class Params>
QFuture<std::shared_ptr<LiveLoad<Live>>> loadLive(Params params, std::filesystem::path modelDir,
                                                  std::filesystem::path corpus) {
  return runInBackground([params = std::move(params), modelDir = std::move(modelDir), corpus = std::move(corpus)] {
    auto out = std::make_shared<LiveLoad<Live>>();
    out->modelDir = modelDir;
    out->corpus = corpus;
    rag::Result<std::unique_ptr<Live>> live = Live::create(params);
    if (live) out->live = std::shared_ptr<Live>(std::move(*live));
    else out->status = live.status();
    return out;
  });
}

}  // namespace ragwb
