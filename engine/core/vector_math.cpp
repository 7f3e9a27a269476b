#include "core/vector_math.h"

#include <cmath>

namespace rag {

void l2NormalizeRows(float* x, size_t n, size_t d, float eps) {
  for (size_t i = 0; i < n; ++i) {
    float* row = x + i * d;
    double sq = 0;  // accumulate in double: the reference should be the more exact side
    for (size_t j = 0; j < d; ++j) sq += static_cast<double>(row[j]) * row[j];
    double norm = std::sqrt(sq);
    if (norm < eps) continue;
    const float inv = static_cast<float>(1.0 / norm);
    for (size_t j = 0; j < d; ++j) row[j] *= inv;
  }
}

void innerProducts(const float* query, const float* x, size_t n, size_t d, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float* row = x + i * d;
    double acc = 0;
    for (size_t j = 0; j < d; ++j) acc += static_cast<double>(query[j]) * row[j];
    out[i] = static_cast<float>(acc);
  }
}

}  // namespace rag
