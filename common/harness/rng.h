// The lab's one random generator: splitmix64. Tiny, seedable, and identical on every platform,
// so the same seed gives the same inputs, lengths and block shuffles everywhere.
#pragma once
#include <cstdint>

namespace lab {
struct Rng {
  static constexpr uint64_t STEP = 0x9E3779B97F4A7C15ull;  // state advance per draw
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += STEP);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float symmetric() { return float(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }  // [-1, 1)
  int between(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
  double unit() { return double(next() >> 11) / 9007199254740992.0; }               // [0, 1)
};
}  // namespace lab
