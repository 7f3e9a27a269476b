#include "workload/popularity.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace rag::workload {

namespace {

constexpr const char* kForms = "use uniform, zipf:S (e.g. zipf:1.0) or temporal[:P] (e.g. temporal:0.5)";

// A whole-string, locale-independent decimal number.
bool parseNumber(std::string_view s, double& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

std::string formatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

Status validatePopularity(const PopularitySpec& spec) {
  switch (spec.kind) {
    case PopularityKind::Uniform: return Status::ok();
    case PopularityKind::Zipf:
      if (!(spec.zipfExponent > 0) || !std::isfinite(spec.zipfExponent))
        return Status::invalidArgument("zipf exponent must be a number > 0 (got " +
                                       formatNumber(spec.zipfExponent) +
                                       "); use uniform for no skew");
      return Status::ok();
    case PopularityKind::Temporal:
      if (!(spec.repeatProbability >= 0 && spec.repeatProbability < 1))
        return Status::invalidArgument("temporal repeat probability must be in [0, 1) (got " +
                                       formatNumber(spec.repeatProbability) + ")");
      if (spec.window < 1 || spec.window > kMaxTemporalWindow)
        return Status::invalidArgument("--window must be between 1 and " +
                                       std::to_string(kMaxTemporalWindow) + " (got " +
                                       std::to_string(spec.window) + ")");
      return Status::ok();
  }
  return Status::internal("unknown popularity kind");
}

Result<PopularitySpec> parsePopularity(std::string_view text) {
  PopularitySpec spec;
  std::string_view name = text, arg;
  bool hasArg = false;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    name = text.substr(0, colon);
    arg = text.substr(colon + 1);
    hasArg = true;
  }
  if (name == "uniform") {
    if (hasArg)
      return Status::invalidArgument("popularity 'uniform' takes no parameter (got '" +
                                     std::string(text) + "')");
    return spec;
  }
  if (name == "zipf") {
    spec.kind = PopularityKind::Zipf;
    if (!hasArg || !parseNumber(arg, spec.zipfExponent))
      return Status::invalidArgument("popularity '" + std::string(text) +
                                     "' needs a numeric Zipf exponent, e.g. zipf:1.0");
    RAG_RETURN_IF_ERROR(validatePopularity(spec));
    return spec;
  }
  if (name == "temporal") {
    spec.kind = PopularityKind::Temporal;
    if (hasArg && !parseNumber(arg, spec.repeatProbability))
      return Status::invalidArgument("popularity '" + std::string(text) +
                                     "' needs a repeat probability in [0, 1), e.g. temporal:0.5");
    RAG_RETURN_IF_ERROR(validatePopularity(spec));
    return spec;
  }
  return Status::invalidArgument("unknown popularity '" + std::string(text) + "'; " + kForms);
}

std::string formatPopularity(const PopularitySpec& spec) {
  switch (spec.kind) {
    case PopularityKind::Uniform: return "uniform";
    case PopularityKind::Zipf: return "zipf:" + formatNumber(spec.zipfExponent);
    case PopularityKind::Temporal: return "temporal:" + formatNumber(spec.repeatProbability);
  }
  return "unknown";
}

EntitySampler::EntitySampler(const PopularitySpec& spec, size_t n, uint64_t seed)
    : m_spec(spec), m_n(n), m_rng(seed) {
  if (spec.kind == PopularityKind::Zipf) {
    m_rankToEntity.resize(n);
    std::iota(m_rankToEntity.begin(), m_rankToEntity.end(), size_t{0});
    m_rng.shuffle(m_rankToEntity);
    std::vector<double> weights(n);
    for (size_t k = 0; k < n; ++k)
      weights[k] = std::pow(static_cast<double>(k + 1), -spec.zipfExponent);
    m_zipf = DiscreteSampler(weights);
  } else if (spec.kind == PopularityKind::Temporal) {
    auto w = static_cast<size_t>(spec.window);
    m_window.reserve(w + 1);
    m_recencyCumulative.resize(w);
    double sum = 0;
    for (size_t j = 0; j < w; ++j) m_recencyCumulative[j] = sum += 1.0 / static_cast<double>(j + 1);
  }
}

size_t EntitySampler::next() {
  switch (m_spec.kind) {
    case PopularityKind::Uniform: return static_cast<size_t>(m_rng.below(m_n));
    case PopularityKind::Zipf: return m_rankToEntity[m_zipf.sample(m_rng)];
    case PopularityKind::Temporal: return nextTemporal();
  }
  return 0;
}

size_t EntitySampler::nextTemporal() {
  size_t pos = m_window.size();  // where the chosen entity sits now; size() = not in the window
  size_t entity = 0;
  if (!m_window.empty() && m_rng.uniform01() < m_spec.repeatProbability) {
    double target = m_rng.uniform01() * m_recencyCumulative[m_window.size() - 1];
    auto end = m_recencyCumulative.begin() + static_cast<std::ptrdiff_t>(m_window.size());
    pos = static_cast<size_t>(std::upper_bound(m_recencyCumulative.begin(), end, target) -
                              m_recencyCumulative.begin());
    if (pos >= m_window.size()) pos = m_window.size() - 1;
    entity = m_window[pos];
  } else {
    entity = static_cast<size_t>(m_rng.below(m_n));
    pos = static_cast<size_t>(std::find(m_window.begin(), m_window.end(), entity) - m_window.begin());
  }
  // Move (or insert) to the front; a window of W keeps its W most recent distinct entities.
  if (pos < m_window.size()) {
    std::rotate(m_window.begin(), m_window.begin() + static_cast<std::ptrdiff_t>(pos),
                m_window.begin() + static_cast<std::ptrdiff_t>(pos) + 1);
  } else {
    m_window.insert(m_window.begin(), entity);
    if (m_window.size() > static_cast<size_t>(m_spec.window)) m_window.pop_back();
  }
  return entity;
}

}  // namespace rag::workload
