// Unit tests of section 12's exercises, compiled against the section's source: the solution's (they
// must pass) or the student's lab (a stub must fail them). LAB_EXERCISE_SOURCE names the file; its
// main() is left out (LAB_RING12_NO_MAIN), so the tests run on any machine, with or without a GPU.
//   shard-map: every layout and rank count gives each global row to exactly one (rank, local row),
//     in increasing order within a shard; the worked example of ch12/12_ring.md; over N steps a
//     rank holds every block once, and what it holds at step s + 1 is what rank r - 1 held at s.
//   keys_seen (given: the Hopper partial's rule, built on the shard map): for every pair of every
//     layout, a row's visible keys are a prefix of the block, as long as a count over the block says.
//   ring-merge: the worked example (2.0 and 1.0), empty states (-inf) weigh nothing and never give
//     a NaN, and merging three partials in either order gives the same state as the whole softmax.
// Exit 0 when every check passes, 1 otherwise (each failure printed with its line).
#include <cmath>
#include <cstdio>
#include <vector>

#define LAB_RING12_NO_MAIN
#include LAB_EXERCISE_SOURCE

#include "host_checks.h"
static bool near(float a, float b, float tol = 1e-5f) { return std::fabs(a - b) <= tol; }

int main(int argc, char** argv) {
  no_options(argc, argv);
  // shard-map: a permutation, in order, for every layout and N.
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    for (int n = 1; n <= 8; ++n) {
      const int unit = layout == Layout::zigzag ? 2 * n : n, t = unit * 5;
      std::vector<int> seen(size_t(t), 0);
      bool ordered = true, in_range = true;
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < t / n; ++i) {
          const int g = shard_row(i, r, n, t, layout);
          if (g < 0 || g >= t) { in_range = false; continue; }
          ++seen[size_t(g)];
          if (i > 0 && g <= shard_row(i - 1, r, n, t, layout)) ordered = false;
        }
      bool once = in_range;
      for (int x : seen) once = once && x == 1;
      CHECK(once);
      CHECK(ordered);
    }
  // The handout's example: T = 16, N = 2.
  const int zig0[8] = {0, 1, 2, 3, 12, 13, 14, 15}, zig1[8] = {4, 5, 6, 7, 8, 9, 10, 11};
  bool example = true;
  for (int i = 0; i < 8; ++i)
    example = example && shard_row(i, 0, 2, 16, Layout::zigzag) == zig0[i] && shard_row(i, 1, 2, 16, Layout::zigzag) == zig1[i] &&
              shard_row(i, 1, 2, 16, Layout::contiguous) == 8 + i;
  CHECK(example);
  // The schedule: step 0 is a rank's own block; each block once; blocks move to rank + 1.
  for (int n = 1; n <= 8; ++n) {
    bool own = true, each_once = true, moves = true;
    for (int r = 0; r < n; ++r) {
      own = own && block_at(r, 0, n) == r;
      std::vector<int> seen(size_t(n), 0);
      for (int s = 0; s < n; ++s) {
        const int b = block_at(r, s, n);
        if (b < 0 || b >= n) { each_once = false; continue; }
        ++seen[size_t(b)];
        if (s + 1 < n) moves = moves && block_at(r, s + 1, n) == block_at((r - 1 + n) % n, s, n);
      }
      for (int x : seen) each_once = each_once && x == 1;
    }
    CHECK(own);
    CHECK(each_once);
    CHECK(moves);
  }
  // keys_seen: a row sees a prefix of the block in hand, of the length a count says (both layouts,
  // every pair, causal; local positions for --bug local-causal; every key without a mask).
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    for (int n = 1; n <= 8; ++n) {
      const int unit = layout == Layout::zigzag ? 2 * n : n, t = unit * 7, tl = t / n;
      bool counted = true, all_without_mask = true;
      for (int r = 0; r < n; ++r)
        for (int blk = 0; blk < n; ++blk)
          for (int local = 0; local < 2; ++local) {
            const PairMap m{n, t, layout, r, blk, local == 1};
            for (int i = 0; i < tl; ++i) {
              int count = 0;
              for (int j = 0; j < tl; ++j) count += m.k_pos(j) <= m.q_pos(i);
              const int seen = keys_seen(m, true, i, tl);
              bool prefix = true;
              for (int j = 0; j < tl; ++j) prefix = prefix && ((j < seen) == (m.k_pos(j) <= m.q_pos(i)));
              counted = counted && seen == count && prefix;
              all_without_mask = all_without_mask && keys_seen(m, false, i, tl) == tl;
            }
          }
      CHECK(counted);
      CHECK(all_without_mask);
    }
  // ring-merge: the worked example.
  const RowMerge m = merge_rows(2.0f, 1.0f);
  CHECK(near(m.w_run, 0.7310586f) && near(m.w_part, 0.2689414f) && near(m.lse, 2.3132617f));
  // Empty states.
  const RowMerge first = merge_rows(-INFINITY, 3.0f), none = merge_rows(3.0f, -INFINITY), both = merge_rows(-INFINITY, -INFINITY);
  CHECK(first.w_run == 0.f && first.w_part == 1.f && first.lse == 3.0f);
  CHECK(none.w_run == 1.f && none.w_part == 0.f && none.lse == 3.0f);
  CHECK(!std::isnan(both.w_run) && !std::isnan(both.w_part) && both.lse == -INFINITY && both.w_part == 0.f);
  // Three partials of one row (their own softmax each), merged in two orders, against the whole.
  const float score[6] = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.5f}, value[6] = {1, 2, 3, 4, 5, 6};
  auto partial = [&](int j0, int j1, float* o) {
    double l = 0, acc = 0;
    for (int j = j0; j < j1; ++j) { l += std::exp(double(score[j])); acc += std::exp(double(score[j])) * value[j]; }
    *o = float(acc / l);
    return float(std::log(l));
  };
  float o_part[3], lse_part[3];
  for (int k = 0; k < 3; ++k) lse_part[k] = partial(2 * k, 2 * k + 2, &o_part[k]);
  float o_whole;
  const float lse_whole = partial(0, 6, &o_whole);
  for (int order = 0; order < 2; ++order) {
    float o = 0.f, lse = -INFINITY;
    for (int k = 0; k < 3; ++k) {
      const int part = order == 0 ? k : 2 - k;
      const RowMerge w = merge_rows(lse, lse_part[part]);
      o = w.w_run * o + w.w_part * o_part[part];
      lse = w.lse;
    }
    CHECK(near(o, o_whole, 1e-4f) && near(lse, lse_whole, 1e-5f));
  }
  return finish();
}
