// The wrong ring_slot() answers the precheck tests plant in 08's solution (tests/sections_07_08.cmake):
// LAB_WRONG_RING_SLOT picks one on the host (the kernels keep the right one; only the CPU model runs).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

struct WrongRingSlot {
  int stage;
  uint32_t parity;
};
static WrongRingSlot wrong_ring_slot(int n, int stages) {
  const char* mode = std::getenv("LAB_WRONG_RING_SLOT");
  WrongRingSlot s{n % stages, uint32_t(n / stages) & 1u};
  if (mode && !std::strcmp(mode, "never-flips")) s.parity = 0u;       // one phase named for every use
  if (mode && !std::strcmp(mode, "flipped")) s.parity ^= 1u;          // the producer's parity for the consumers'
  if (mode && !std::strcmp(mode, "shifted")) s.stage = (n + 1) % stages;  // an off-by-one slot
  return s;
}
