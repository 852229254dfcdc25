// parallel_for over [0, n) on the host's cores: the fp64 reference and the CPU models are the
// slow part of a check, and every row is independent.
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace lab {
template <class Fn>
void parallel_for(int64_t n, Fn fn) {
  const int64_t workers = std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t w = 0; w < workers; ++w)
    pool.emplace_back([=, &fn] {
      for (int64_t i = w; i < n; i += workers) fn(i);  // interleaved: causal rows differ in cost
    });
  for (auto& t : pool) t.join();
}
}  // namespace lab
