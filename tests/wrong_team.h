// The wrong ways to share a row that the team tests plant in 01's solution (tests/sections_01_04.cmake):
// LAB_WRONG_TEAM picks one on the host (the kernel keeps the right softmax; only the CPU model runs).
//   whole-row   every member sums every key (rank() and size() ignored): l is team-size times too large
//   leader-sum  only the leader calls team.sum(): the others never meet it at the barrier
#pragma once
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "toolbox/attention_math.h"

template <class Team>
static float wrong_team_sum(const Team& team, const float* s_row, lab::KeyRange keys, float m) {
  const char* mode = std::getenv("LAB_WRONG_TEAM");
  const bool whole_row = mode && !std::strcmp(mode, "whole-row");
  float l = 0.f;
  for (int j = keys.begin + (whole_row ? 0 : team.rank()); j < keys.end; j += whole_row ? 1 : team.size())
    l += expf(s_row[j] - m);
  if (mode && !std::strcmp(mode, "leader-sum")) return team.leader() ? team.sum(l) : l;
  return team.sum(l);
}
