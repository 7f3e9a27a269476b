// The GPU cluster scan (kernels/cluster_scan.cuh) against its CPU reference
// (retrieval/cluster_scan.h), and the CUDA cluster store driving the cluster cache against plain
// IvfIndex steps. Skips (exit 77) without a CUDA device.
#include <QtTest>

#include <cmath>
#include <limits>
#include <random>

#include "../fixtures/retrieval/clustered_vectors.h"
#include "cluster_scan.cuh"
#include "cuda_cluster_store.h"
#include "gpu_test_main.h"
#include "retrieval/cluster_cache.h"
#include "retrieval/cluster_scan.h"

using namespace rag;
using namespace rag::retrieval;

namespace {

struct Batch {
  int64_t dim = 0;
  int32_t k = 0;
  std::vector<float> queries;
  std::vector<std::vector<float>> vectors;  // per segment
  std::vector<std::vector<int64_t>> ids;
  std::vector<int32_t> offsets{0};
  std::vector<ScanSegment> segments() const {
    std::vector<ScanSegment> out;
    for (size_t s = 0; s < ids.size(); ++s)
      out.push_back({vectors[s].data(), ids[s].data(), static_cast<int64_t>(ids[s].size())});
    return out;
  }
};

// nq queries, each over a random subset of `segs` segments of random sizes (0 included).
// `grid` draws values from {-2, -1.75, ..., 2}: products and sums are exact in float, so the
// two sides see identical similarities and many exact ties.
Batch makeBatch(int nq, int segs, int64_t dim, int32_t k, bool grid, uint32_t seed,
                int maxRows = 300) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::uniform_int_distribution<int> q16(-8, 8), rows(0, maxRows), coin(0, 2);
  auto value = [&] { return grid ? 0.25f * static_cast<float>(q16(rng)) : g(rng); };
  Batch b;
  b.dim = dim;
  b.k = k;
  int64_t id = 0;
  std::vector<int> segOf;
  for (int s = 0; s < segs; ++s) {
    const int n = s == 0 ? 0 : rows(rng);
    b.vectors.emplace_back();
    b.ids.emplace_back();
    for (int r = 0; r < n; ++r) {
      for (int64_t j = 0; j < dim; ++j) b.vectors.back().push_back(value());
      b.ids.back().push_back(id += 1 + coin(rng));
    }
  }
  // The segment table is per query: repeat segment entries as queries list them.
  Batch out = b;
  out.vectors.clear();
  out.ids.clear();
  for (int q = 0; q < nq; ++q) {
    for (int64_t j = 0; j < dim; ++j) out.queries.push_back(value());
    for (int s = 0; s < segs; ++s)
      if (coin(rng) != 0) {
        out.vectors.push_back(b.vectors[static_cast<size_t>(s)]);
        out.ids.push_back(b.ids[static_cast<size_t>(s)]);
      }
    out.offsets.push_back(static_cast<int32_t>(out.ids.size()));
  }
  return out;
}

}  // namespace

class TestClusterScanGpu : public QObject {
  Q_OBJECT

  void compare(const Batch& b, bool exact) {
    const size_t slots = b.queries.size() / static_cast<size_t>(b.dim) * static_cast<size_t>(b.k);
    std::vector<float> cpuSims(slots), gpuSims(slots);
    std::vector<int64_t> cpuIds(slots), gpuIds(slots);
    const auto segs = b.segments();
    Status s = scanClustersCpu(b.queries, b.dim, b.k, segs, b.offsets, cpuSims, cpuIds);
    QVERIFY2(s.isOk(), s.toString().c_str());
    s = cuda::scanClustersHost(b.queries, b.dim, b.k, segs, b.offsets, gpuSims, gpuIds);
    QVERIFY2(s.isOk(), s.toString().c_str());
    for (size_t i = 0; i < slots; ++i) {
      if (exact) {
        QCOMPARE(gpuIds[i], cpuIds[i]);
        QCOMPARE(gpuSims[i], cpuSims[i]);
        continue;
      }
      // FMA on the device: similarities agree to rounding; ids wherever the CPU's neighbours
      // are not within that rounding.
      QCOMPARE(gpuIds[i] < 0, cpuIds[i] < 0);
      if (cpuIds[i] < 0) continue;
      QVERIFY(std::abs(gpuSims[i] - cpuSims[i]) <= 1e-4f * (1.0f + std::abs(cpuSims[i])));
      const size_t row = i % static_cast<size_t>(b.k);
      const bool nearTie = (row > 0 && std::abs(cpuSims[i - 1] - cpuSims[i]) < 1e-3f) ||
                           (row + 1 < static_cast<size_t>(b.k) && cpuIds[i + 1] >= 0 &&
                            std::abs(cpuSims[i + 1] - cpuSims[i]) < 1e-3f);
      if (!nearTie) QCOMPARE(gpuIds[i], cpuIds[i]);
    }
  }

private Q_SLOTS:
  void exactDataWithTiesAndNegatives() { compare(makeBatch(17, 12, 8, 10, true, 1), true); }
  void randomEmbeddings() { compare(makeBatch(33, 20, 64, 10, false, 2), false); }
  void kBeyondTheRows() { compare(makeBatch(5, 3, 16, cuda::kClusterScanMaxK, true, 3, 40), true); }  // <= 80 rows
  void oneWideQuery() { compare(makeBatch(1, 40, 384, 5, false, 4), false); }

  void rejectsTooLargeK() {
    Batch b = makeBatch(2, 3, 8, cuda::kClusterScanMaxK + 1, true, 5);
    const size_t slots = 2 * static_cast<size_t>(b.k);
    std::vector<float> sims(slots);
    std::vector<int64_t> ids(slots);
    const Status s = cuda::scanClustersHost(b.queries, b.dim, b.k, b.segments(), b.offsets, sims, ids);
    QVERIFY(!s.isOk());
    QVERIFY(s.message().find("CPU") != std::string::npos);
  }

  void cudaStoreDrivesTheCacheLikePlainSteps() {
    constexpr int64_t d = 32, nlist = 64;
    const std::vector<float> data = rag::testing::clusteredVectors(12000, d, 40, 8);
    auto index = IvfIndex::build(data, d, nlist, 3);
    QVERIFY2(index.isOk(), index.status().toString().c_str());
    index->setCostModel({.a = 1e-6, .b = 1e-8, .samples = 1});
    auto store = cuda::makeCudaClusterStore();
    QVERIFY2(store.isOk(), store.status().toString().c_str());
    auto cache = ClusterCache::create(*index, **store, {.capacityClusters = 16, .updateInterval = 2});
    QVERIFY2(cache.isOk(), cache.status().toString().c_str());
    for (int round = 0; round < 6; ++round) {
      std::vector<float> q(data.begin() + round * 17 * d, data.begin() + (round * 17 + 24) * d);
      auto plain = index->makeTasks(q, 10, 16);
      auto hybrid = index->makeTasks(q, 10, 16);
      QVERIFY(plain.isOk() && hybrid.isOk());
      std::vector<SearchTask*> p, h;
      for (auto& t : *plain) p.push_back(&t);
      for (auto& t : *hybrid) h.push_back(&t);
      while (!p.front()->done()) {
        QVERIFY(index->step(p, 0.0).isOk());
        auto s = cache->step(h, 0.0);
        QVERIFY2(s.isOk(), s.status().toString().c_str());
      }
      for (size_t i = 0; i < p.size(); ++i) {
        const auto a = p[i]->topK(), b = h[i]->topK();
        QCOMPARE(a.size(), b.size());
        for (size_t j = 0; j < a.size(); ++j) {
          QCOMPARE(a[j].id, b[j].id);
          QVERIFY(std::abs(a[j].similarity - b[j].similarity) < 1e-4f);
        }
      }
    }
    QVERIFY(cache->stats().deviceVisits > 0);
    QCOMPARE(cache->stats().deviceFailures, uint64_t{0});
  }
};

RAGWB_GPU_TEST_MAIN(TestClusterScanGpu)
#include "test_cluster_scan.moc"
