// Helpers of the kernels' gpu tests: random inputs, host <-> device copies that abort the test
// with the runtime's message when the device fails, and the tolerance check every test states.
#pragma once

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.h"

namespace rag::cuda::testing {

inline std::vector<float> randomVector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// A block table 0 .. n-1 in a random order, so that consecutive positions are far apart.
inline std::vector<int32_t> shuffledBlocks(int64_t n, uint32_t seed) {
  std::vector<int32_t> blocks(static_cast<size_t>(n));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(seed));
  return blocks;
}

template <typename T>
DeviceBuffer toDevice(const std::vector<T>& host) {
  DeviceBuffer b;
  const Status s = b.upload(host.data(), host.size() * sizeof(T), "copying a test input to the device");
  if (!s.isOk()) qFatal("%s", s.toString().c_str());
  return b;
}

template <typename T>
std::vector<T> toHost(const DeviceBuffer& b, size_t count) {
  std::vector<T> host(count);
  const Status s = b.download(host.data(), count * sizeof(T), "copying a test result to the host");
  if (!s.isOk()) qFatal("%s", s.toString().c_str());
  return host;
}

// Fails the current test unless |gpu[i] - cpu[i]| <= atol + rtol * |cpu[i]| for every i, naming
// the worst element.
inline void expectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, double atol, double rtol,
                        const char* what) {
  QCOMPARE(gpu.size(), cpu.size());
  size_t at = cpu.size();  // the worst element outside the tolerance
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double err = std::abs(double(gpu[i]) - double(cpu[i])), allowed = atol + rtol * std::abs(double(cpu[i]));
    if (err <= allowed) continue;
    const double over = std::isnan(err) ? INFINITY : err - allowed;
    if (at == cpu.size() || over > worst) {
      worst = over;
      at = i;
    }
  }
  if (at == cpu.size()) return;
  QFAIL(qPrintable(QString("%1: element %2 is %3 on the GPU, %4 on the CPU (atol %5, rtol %6)")
                           .arg(what)
                           .arg(at)
                           .arg(double(gpu[at]), 0, 'g', 9)
                           .arg(double(cpu[at]), 0, 'g', 9)
                           .arg(atol)
                           .arg(rtol)));
}

}  // namespace rag::cuda::testing
