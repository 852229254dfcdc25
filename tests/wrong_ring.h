// The wrong ring schedules the precheck test plants in 12's solution (tests/12_ring.cmake):
// LAB_WRONG_RING picks one on the host (the kernels keep the right one; only the CPU model runs).
#pragma once
#include <cstdlib>
#include <cstring>

static int wrong_block_at(int rank, int step, int ranks) {
  const char* mode = std::getenv("LAB_WRONG_RING");
  if (mode && !std::strcmp(mode, "turn")) return (rank + step) % ranks;  // blocks passed to rank - 1
  if (mode && !std::strcmp(mode, "sign")) return (rank - step) % ranks;  // C++'s % of a negative: -1
  return ((rank - step) % ranks + ranks) % ranks;
}
