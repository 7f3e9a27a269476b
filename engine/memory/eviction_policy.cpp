#include "memory/eviction_policy.h"

#include <algorithm>
#include <cmath>

namespace rag::memory {

namespace {

class Lru final : public EvictionPolicy {
public:
  std::string_view name() const override { return "lru"; }
  double priority(const EvictionNode& n) const override { return static_cast<double>(n.lastAccess); }
};

// Ties between equal hit counts go to recency through the cache's (priority, lastAccess) order.
class Lfu final : public EvictionPolicy {
public:
  std::string_view name() const override { return "lfu"; }
  double priority(const EvictionNode& n) const override { return static_cast<double>(n.hits); }
};

class Pgdsf final : public EvictionPolicy {
public:
  std::string_view name() const override { return "pgdsf"; }
  double priority(const EvictionNode& n) const override {
    const double frequency = static_cast<double>(n.hits + 1);  // an inserted node was used once
    return n.policyState + frequency * n.recomputeSeconds / std::max(1, n.blocks);
  }
  void onAccess(EvictionNode& n) override { n.policyState = m_clock; }
  void onEvicted(double p) override { m_clock = std::max(m_clock, p); }

private:
  double m_clock = 0;
};

class Lacr final : public EvictionPolicy {
public:
  explicit Lacr(double alpha) : m_alpha(alpha) {}
  std::string_view name() const override { return "lacr"; }
  double priority(const EvictionNode& n) const override {
    return m_alpha * static_cast<double>(n.hits) + (1.0 - m_alpha) * n.lookahead;
  }
  bool usesLookahead() const override { return true; }

private:
  double m_alpha;
};

}  // namespace

std::vector<std::string> evictionPolicyNames() { return {"lru", "lfu", "pgdsf", "lacr"}; }

Result<std::unique_ptr<EvictionPolicy>> makeEvictionPolicy(std::string_view name, double lacrAlpha) {
  if (name == "lru") return std::unique_ptr<EvictionPolicy>(new Lru);
  if (name == "lfu") return std::unique_ptr<EvictionPolicy>(new Lfu);
  if (name == "pgdsf") return std::unique_ptr<EvictionPolicy>(new Pgdsf);
  if (name == "lacr") {
    if (!(lacrAlpha >= 0.0 && lacrAlpha <= 1.0))
      return Status::invalidArgument("LACR's alpha must lie in [0, 1] (0.2 is DepCache's), not " +
                                     std::to_string(lacrAlpha));
    return std::unique_ptr<EvictionPolicy>(new Lacr(lacrAlpha));
  }
  return Status::invalidArgument("unknown eviction policy '" + std::string(name) + "'; use lru, lfu, pgdsf or lacr");
}

}  // namespace rag::memory
