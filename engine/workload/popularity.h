// Topic-entity popularity for synthetic request traces: the three access patterns DepCache
// evaluates its KV cache under (§6.1), since no public RAG query traces exist.
//
//   uniform      every candidate entity is equally likely on every request.
//   zipf:S       entities are ranked by a seeded random permutation and rank k (1-based) is
//                drawn with probability proportional to 1/k^S: a few hot entities dominate.
//   temporal[:P] sessions / multi-turn dialogue. The sampler keeps a window of the W most
//                recently asked distinct entities. With probability P a request re-asks one of
//                them, the one at recency position j (0 = most recent) with probability
//                proportional to 1/(j+1); otherwise it asks a fresh entity drawn uniformly. An
//                asked entity moves to the front of the window; the oldest falls out.
//                Defaults P = 0.5 (a conversation stays on an entity for 1/(1-P) = 2 requests
//                on average) and W = 16 (about as many conversations in flight as a serving
//                queue holds; DepCache sizes its lookahead window by the pending queue).
//                Long-run popularity stays close to uniform; the locality is short-term, which
//                is what separates recency-based from frequency-based cache policies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rag/status.h"
#include "core/random.h"

namespace rag::workload {

inline constexpr double kDefaultTemporalRepeat = 0.5;
inline constexpr int64_t kDefaultTemporalWindow = 16;
inline constexpr int64_t kMaxTemporalWindow = 100'000;

enum class PopularityKind { Uniform, Zipf, Temporal };

struct PopularitySpec {
  PopularityKind kind = PopularityKind::Uniform;
  double zipfExponent = 1.0;                        // S (kind Zipf), > 0
  double repeatProbability = kDefaultTemporalRepeat;  // P (kind Temporal), in [0, 1)
  int64_t window = kDefaultTemporalWindow;          // W (kind Temporal), >= 1
};

// "uniform" | "zipf:S" | "temporal" | "temporal:P". The window is not part of the text: it is
// the separate --window option. Errors name the accepted forms.
Result<PopularitySpec> parsePopularity(std::string_view text);
// The canonical text that parsePopularity reads back: "uniform", "zipf:1.2", "temporal:0.5".
std::string formatPopularity(const PopularitySpec& spec);
// Checks the numeric ranges of a spec built in code (parsePopularity already did).
Status validatePopularity(const PopularitySpec& spec);

// Draws topic entities as indices into a candidate list of size n (the caller's list, in a
// fixed order so that the same seed gives the same trace).
class EntitySampler {
public:
  // spec must be valid and n > 0.
  EntitySampler(const PopularitySpec& spec, size_t n, uint64_t seed);
  size_t next();

private:
  size_t nextTemporal();

  PopularitySpec m_spec;
  size_t m_n;
  Rng m_rng;
  std::vector<size_t> m_rankToEntity;  // Zipf: a seeded permutation of [0, n)
  DiscreteSampler m_zipf;              // Zipf: over ranks
  std::vector<size_t> m_window;        // Temporal: most recent first, distinct
  std::vector<double> m_recencyCumulative;  // Temporal: running sums of 1/(j+1), j < W
};

}  // namespace rag::workload
