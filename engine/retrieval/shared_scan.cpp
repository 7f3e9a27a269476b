#include "retrieval/shared_scan.h"

#include <algorithm>

#include "core/target_clones.h"

namespace rag::retrieval {

namespace {

constexpr int64_t kLanes = 16;  // one AVX-512 register of floats; two AVX2 ones

// R queries against one row: the row's lanes are loaded once and feed R accumulators.
template <int R>
[[gnu::always_inline]] inline void dotsOfRow(const float* const* q, const float* row, int64_t dim,
                                             float* sums) {
  float acc[R][kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= dim; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      const float x = row[i + l];
      for (int r = 0; r < R; ++r) acc[r][l] += q[r][i + l] * x;
    }
  for (int r = 0; r < R; ++r) {
    float s = 0.0f;
    for (int64_t l = 0; l < kLanes; ++l) s += acc[r][l];
    for (int64_t t = i; t < dim; ++t) s += q[r][t] * row[t];
    sums[r] = s;
  }
}

template <int R>
[[gnu::always_inline]] inline void block(const float* const* q, float* const* out,
                                         const float* rows, int64_t n, int64_t dim) {
  float sums[R];
  for (int64_t j = 0; j < n; ++j) {
    dotsOfRow<R>(q, rows + j * dim, dim, sums);
    for (int r = 0; r < R; ++r) out[r][j] = sums[r];
  }
}

}  // namespace

RAG_CLONES
void innerProductsShared(const float* const* queries, float* const* out, int32_t nq,
                         const float* rows, int64_t n, int64_t dim) {
  // Four queries per pass over the rows: 4 x 16 accumulators fit the registers of AVX2 (8 of
  // 16) and AVX-512 (4 of 32) with room for the row and query lanes.
  int32_t q = 0;
  for (; q + 4 <= nq; q += 4) block<4>(queries + q, out + q, rows, n, dim);
  switch (nq - q) {
    case 3: block<3>(queries + q, out + q, rows, n, dim); break;
    case 2: block<2>(queries + q, out + q, rows, n, dim); break;
    case 1: block<1>(queries + q, out + q, rows, n, dim); break;
    default: break;
  }
}

double innerProductErrorBound(int64_t dim, double normProduct) {
  const double u = 0x1p-24;
  const double nu = static_cast<double>(std::max<int64_t>(dim, 1)) * u;
  const double gamma = nu / std::max(1.0 - nu, 0.5);
  return 2.0 * 2.0 * gamma * normProduct;
}

}  // namespace rag::retrieval
