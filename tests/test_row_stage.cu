// The layout of 11's dQ restaging (lab::sm80::row_stage_word): a warp stores its C fragments into
// an [8 rows][32 floats] stage and loads them back as whole rows, 4 columns a lane, for atomics
// that add whole 128-byte lines. Checked on the host, lane by lane, as the kernel's loops run:
//   the 32 lanes' fragment stores (4 n-blocks x a float2) fill every word of the stage once;
//   the row loads (2 instructions x a float4) give lane l of load q row 4q + l/8, columns
//     4(l%8) .. +3 of the 32, the very values the fragments held there;
//   no access conflicts: a 32-lane store of 8-byte pairs needs 2 wavefronts, a load of 16-byte
//     chunks 4 (the fewest the bytes allow). Shared memory serves 8-byte accesses a half-warp at a
//     time and 16-byte ones a quarter-warp at a time: each phase costs the largest number of
//     distinct words its lanes touch in one bank, and the phases add up.
// Exit 0 when every check passes, 1 otherwise (each failure printed with its line).
#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "toolbox/mma_sm80.cuh"

using lab::sm80::row_stage_word;

#include "host_checks.h"

// Wavefronts a warp's access needs. words[lane] lists the 4-byte words lane `lane` touches (2 for
// an 8-byte access, 4 for 16); the lanes are served in phases of 32 / (words a lane) lanes, and a
// phase costs the largest number of distinct words that fall in one bank.
static int wavefronts(const std::vector<std::vector<int>>& words) {
  const int per_lane = int(words[0].size()), lanes_per_phase = 32 / per_lane;
  int total = 0;
  for (int first = 0; first < 32; first += lanes_per_phase) {
    std::vector<std::set<int>> bank(32);
    for (int lane = first; lane < first + lanes_per_phase; ++lane)
      for (int w : words[size_t(lane)]) bank[size_t(w % 32)].insert(w);
    size_t most = 0;
    for (const auto& b : bank) most = std::max(most, b.size());
    total += int(most);
  }
  return total;
}

int main(int argc, char** argv) {
  no_options(argc, argv);
  std::vector<int> stage(8 * 32, -1);  // the value a word holds: row * 32 + column, -1 unwritten
  int writes = 0;
  for (int n = 0; n < 4; ++n) {  // one store instruction per n-block
    std::vector<std::vector<int>> words(32);
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4, col = 8 * n + 2 * t;  // the fragment's row g, columns col, col + 1
      const int w = row_stage_word(g, col / 4, col % 4);  // as the kernel: chunk 2n + t/2, word 2(t%2)
      CHECK(w == row_stage_word(g, 2 * n + t / 2, 2 * (t % 2)));
      CHECK(w % 2 == 0);  // a float2 store is 8-byte aligned
      for (int e = 0; e < 2; ++e) {
        CHECK(w + e >= 0 && w + e < 8 * 32);
        if (w + e < 0 || w + e >= 8 * 32) continue;
        CHECK(stage[size_t(w + e)] == -1);  // no word written twice
        stage[size_t(w + e)] = g * 32 + col + e;
        words[size_t(lane)].push_back(w + e);
        ++writes;
      }
    }
    CHECK(wavefronts(words) == 2);
  }
  CHECK(writes == 8 * 32);
  for (int quad = 0; quad < 2; ++quad) {  // one load instruction per 4 rows
    std::vector<std::vector<int>> words(32);
    for (int lane = 0; lane < 32; ++lane) {
      const int r = 4 * quad + lane / 8, chunk = lane % 8;
      const int w = row_stage_word(r, chunk, 0);
      CHECK(w % 4 == 0);  // a float4 load is 16-byte aligned
      for (int e = 0; e < 4; ++e) {
        CHECK(stage[size_t(w + e)] == r * 32 + 4 * chunk + e);  // the value of row r, that column
        words[size_t(lane)].push_back(w + e);
      }
    }
    CHECK(wavefronts(words) == 4);
  }
  return finish();
}
