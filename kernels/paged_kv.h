// One layer of the paged KV pool in device memory, as the attention kernels read it: the same
// layout as the runner's pool and cpu::PagedKv (engine/model/decode_kernels.h), without the
// block table, which the kernels take per sequence. Plain C++.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rag/status.h"

namespace rag::cuda {

// The widest head the attention kernels hold in registers (8 floats a lane of a warp).
inline constexpr int64_t kMaxAttentionHeadDim = 256;

struct DevicePagedKv {
  const float* k = nullptr;  // F32 [numBlocks * blockSize, kvHeads, headDim]
  const float* v = nullptr;  // F32 [numBlocks * blockSize, kvHeads, headDim]
  int64_t blockSize = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
};

// InvalidArgument naming `what` unless `heads` query heads can read `kv` (grouped-query: heads a
// multiple of kvHeads) with a head width the kernels hold (1 .. kMaxAttentionHeadDim).
inline Status checkAttentionShape(int64_t heads, const DevicePagedKv& kv, std::string_view what) {
  if (kv.kvHeads <= 0 || heads <= 0 || heads % kv.kvHeads != 0)
    return Status::invalidArgument(std::string(what) + ": " + std::to_string(heads) +
                                   " query heads are not a multiple of " + std::to_string(kv.kvHeads) + " KV heads");
  if (kv.headDim <= 0 || kv.headDim > kMaxAttentionHeadDim)
    return Status::invalidArgument(std::string(what) + ": head width " + std::to_string(kv.headDim) +
                                   " is outside 1.." + std::to_string(kMaxAttentionHeadDim) +
                                   "; attend on the CPU (decode_kernels.h)");
  if (kv.blockSize <= 0) return Status::invalidArgument(std::string(what) + ": block size must be positive");
  return Status::ok();
}

}  // namespace rag::cuda
