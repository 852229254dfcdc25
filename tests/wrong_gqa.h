// The wrong GQA mappings the precheck tests plant in 05's solution (tests/sections_05_06.cmake):
// LAB_WRONG_GQA picks one on the host (the kernels keep the right one; only the CPU model runs).
#pragma once
#include <cstdlib>
#include <cstring>

static int wrong_gqa(int kv_head, int r, int group) {
  const char* mode = std::getenv("LAB_WRONG_GQA");
  if (mode && !std::strcmp(mode, "range")) return kv_head * group + r + 1000;  // past H
  if (mode && !std::strcmp(mode, "group")) return r * group + kv_head;         // another K/V head's run
  if (mode && !std::strcmp(mode, "twice")) return kv_head * group;             // one head for every row
  return kv_head * group + r;
}
