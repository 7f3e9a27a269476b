// The CUDA backend of the GPU cluster cache (engine/retrieval/cluster_store.h): cluster vectors
// and ids in device memory (stream-ordered cudaMallocAsync/cudaFreeAsync, so a swap never
// synchronises the device), uploaded from pinned staging buffers with cudaMemcpyAsync on the
// store's own copy stream, an event per transfer so transferDone() polls without blocking, and
// scans with the kernel of cluster_scan.cuh on a second stream, so uploads overlap searches.
// Plain C++ header: include it where RAGWB_HAVE_CUDA is defined.
#pragma once

#include <memory>

#include "rag/status.h"
#include "retrieval/cluster_store.h"

namespace rag::cuda {

struct CudaClusterStoreParams {
  int device = 0;
};

// Unavailable when there is no usable device; Internal for other CUDA failures.
Result<std::unique_ptr<retrieval::ClusterStore>> makeCudaClusterStore(
    CudaClusterStoreParams params = {});

}  // namespace rag::cuda
