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
// Exit 0 when every check passes, 1 otherwise. Each failure is printed under its exercise's id
// with what was called, what it gave and what was wanted (tests/host_checks.h).
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#define LAB_RING12_NO_MAIN
#include LAB_EXERCISE_SOURCE

#include "host_checks.h"
static bool near(float a, float b, float tol = 1e-5f) { return std::fabs(a - b) <= tol; }
static const char* name(Layout l) { return l == Layout::zigzag ? "zigzag" : "contiguous"; }

static void test_shard_map() {
  exercise("shard-map");
  // The handout's example first (T = 16, N = 2): its failure is the one a student can follow by hand.
  const int zig0[8] = {0, 1, 2, 3, 12, 13, 14, 15}, zig1[8] = {4, 5, 6, 7, 8, 9, 10, 11};
  FirstFailure example;
  for (int i = 0; i < 8; ++i) {
    const int z0 = shard_row(i, 0, 2, 16, Layout::zigzag), z1 = shard_row(i, 1, 2, 16, Layout::zigzag),
              c1 = shard_row(i, 1, 2, 16, Layout::contiguous);
    example.note(z0 == zig0[i], "shard_row(local=%d, rank=0, ranks=2, t=16, zigzag) = %d, want %d: rank 0 holds "
                 "chunks 0 and 3, rows 0-3 and 12-15", i, z0, zig0[i]);
    example.note(z1 == zig1[i], "shard_row(local=%d, rank=1, ranks=2, t=16, zigzag) = %d, want %d: rank 1 holds "
                 "chunks 1 and 2, rows 4-11", i, z1, zig1[i]);
    example.note(c1 == 8 + i, "shard_row(local=%d, rank=1, ranks=2, t=16, contiguous) = %d, want %d: rank 1 holds "
                 "rows 8-15", i, c1, 8 + i);
  }
  CHECKF(example.ok, "%s (the worked example of ch12/12_ring.md)", example.what);
  // A permutation, in order, for every layout and N.
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    for (int n = 1; n <= 8; ++n) {
      const int unit = layout == Layout::zigzag ? 2 * n : n, t = unit * 5;
      std::vector<int> seen(size_t(t), 0);
      FirstFailure once, ordered;
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < t / n; ++i) {
          const int g = shard_row(i, r, n, t, layout);
          if (!once.note(g >= 0 && g < t, "shard_row(local=%d, rank=%d, ranks=%d, t=%d, %s) = %d, want a global row "
                         "of [0, %d)", i, r, n, t, name(layout), g, t))
            continue;
          ++seen[size_t(g)];
          if (i > 0) {
            const int before = shard_row(i - 1, r, n, t, layout);
            ordered.note(g > before, "shard_row(local=%d, rank=%d, ranks=%d, t=%d, %s) = %d, not after local row "
                         "%d's %d: a shard keeps the global order", i, r, n, t, name(layout), g, i - 1, before);
          }
        }
      for (int g = 0; g < t; ++g)
        once.note(seen[size_t(g)] == 1, "shard_row over every (rank, local row) of %d ranks, t=%d, %s gives global "
                  "row %d %d times, want once: the shards split the rows", n, t, name(layout), g, seen[size_t(g)]);
      CHECKF(once.ok, "%s", once.what);
      CHECKF(ordered.ok, "%s", ordered.what);
    }
  // The schedule: step 0 is a rank's own block; each block once; blocks move to rank + 1.
  for (int n = 1; n <= 8; ++n) {
    FirstFailure own, each_once, moves;
    for (int r = 0; r < n; ++r) {
      const int first = block_at(r, 0, n);
      own.note(first == r, "block_at(rank=%d, step=0, n=%d) = %d, want %d: at step 0 a rank holds its own block", r,
               n, first, r);
      std::vector<int> seen(size_t(n), 0);
      for (int s = 0; s < n; ++s) {
        const int b = block_at(r, s, n);
        if (!each_once.note(b >= 0 && b < n, "block_at(rank=%d, step=%d, n=%d) = %d, want a block of 0..%d", r, s,
                            n, b, n - 1))
          continue;
        ++seen[size_t(b)];
        if (s + 1 < n) {
          const int next = block_at(r, s + 1, n), left = (r - 1 + n) % n, passed = block_at(left, s, n);
          moves.note(next == passed, "block_at(rank=%d, step=%d, n=%d) = %d, want %d, the block rank %d held at step "
                     "%d: each step every rank passes its block to rank + 1", r, s + 1, n, next, passed, left, s);
        }
      }
      for (int b = 0; b < n; ++b)
        each_once.note(seen[size_t(b)] == 1, "block_at(rank=%d, step, n=%d) over steps 0..%d gives block %d %d "
                       "times, want once: in N steps a rank meets every block once", r, n, n - 1, b, seen[size_t(b)]);
    }
    CHECKF(own.ok, "%s", own.what);
    CHECKF(each_once.ok, "%s", each_once.what);
    CHECKF(moves.ok, "%s", moves.what);
  }
}

// keys_seen is given code, built on the shard map: its failures are the shard map's.
static void test_keys_seen() {
  // A row sees a prefix of the block in hand, of the length a count says (both layouts, every pair,
  // causal; local positions for --bug local-causal; every key without a mask).
  for (Layout layout : {Layout::contiguous, Layout::zigzag})
    for (int n = 1; n <= 8; ++n) {
      const int unit = layout == Layout::zigzag ? 2 * n : n, t = unit * 7, tl = t / n;
      FirstFailure counted, all_without_mask;
      for (int r = 0; r < n; ++r)
        for (int blk = 0; blk < n; ++blk)
          for (int local = 0; local < 2; ++local) {
            const PairMap m{n, t, layout, r, blk, local == 1};
            for (int i = 0; i < tl; ++i) {
              int count = 0;
              for (int j = 0; j < tl; ++j) count += m.k_pos(j) <= m.q_pos(i);
              const int seen = keys_seen(m, true, i, tl), unmasked = keys_seen(m, false, i, tl);
              bool prefix = true;
              for (int j = 0; j < tl; ++j) prefix = prefix && ((j < seen) == (m.k_pos(j) <= m.q_pos(i)));
              counted.note(seen == count && prefix, "keys_seen (given code, a bisection on your shard_row) of row "
                           "%d of rank %d's Q against rank %d's block, %d ranks, t=%d, %s, causal%s = %d, want %d%s: "
                           "a shard must keep the global order", i, r, blk, n, t, name(layout),
                           local ? " on local positions" : "", seen, count,
                           prefix ? "" : " keys, and those a prefix of the block");
              all_without_mask.note(unmasked == tl, "keys_seen (given code) of row %d of rank %d's Q against rank "
                                    "%d's block, %d ranks, t=%d, %s, no mask = %d, want all %d keys", i, r, blk, n,
                                    t, name(layout), unmasked, tl);
            }
          }
      CHECKF(counted.ok, "%s", counted.what);
      CHECKF(all_without_mask.ok, "%s", all_without_mask.what);
    }
}

static std::string shown(const RowMerge& m) {
  char s[96];
  std::snprintf(s, sizeof s, "{w_run %s, w_part %s, lse %s}", num(m.w_run).c_str(), num(m.w_part).c_str(),
                num(m.lse).c_str());
  return s;
}

static void test_ring_merge() {
  exercise("ring-merge");
  // The worked example.
  const RowMerge m = merge_rows(2.0f, 1.0f);
  CHECKF(near(m.w_run, 0.7310586f) && near(m.w_part, 0.2689414f) && near(m.lse, 2.3132617f),
         "merge_rows(lse_run=2, lse_part=1) = %s, want {w_run 0.731059, w_part 0.268941, lse 2.31326}: the worked "
         "example of ch12/12_ring.md (the weights sum to 1)", shown(m).c_str());
  // Empty states.
  const RowMerge first = merge_rows(-INFINITY, 3.0f), none = merge_rows(3.0f, -INFINITY), both = merge_rows(-INFINITY, -INFINITY);
  CHECKF(first.w_run == 0.f && first.w_part == 1.f && first.lse == 3.0f, "merge_rows(lse_run=-inf, lse_part=3) = "
         "%s, want {w_run 0, w_part 1, lse 3}: an empty running state weighs nothing", shown(first).c_str());
  CHECKF(none.w_run == 1.f && none.w_part == 0.f && none.lse == 3.0f, "merge_rows(lse_run=3, lse_part=-inf) = %s, "
         "want {w_run 1, w_part 0, lse 3}: a partial whose keys are all masked changes nothing", shown(none).c_str());
  CHECKF(!std::isnan(both.w_run) && !std::isnan(both.w_part) && both.lse == -INFINITY && both.w_part == 0.f,
         "merge_rows(lse_run=-inf, lse_part=-inf) = %s, want w_run not NaN, w_part 0, lse -inf: both empty, keep the "
         "running state (never exp(-inf - -inf))", shown(both).c_str());
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
    CHECKF(near(o, o_whole, 1e-4f) && near(lse, lse_whole, 1e-5f),
           "3 partials of a 6-key row (LSE %s, %s, %s) merged by merge_rows in the order %s, from the empty state: O %s, LSE %s; want the softmax over "
           "the 6 keys, O %s, LSE %s",
           num(lse_part[0]).c_str(), num(lse_part[1]).c_str(), num(lse_part[2]).c_str(),
           order == 0 ? "0, 1, 2" : "2, 1, 0", num(o).c_str(), num(lse).c_str(), num(o_whole).c_str(),
           num(lse_whole).c_str());
  }
}

int main(int argc, char** argv) {
  no_options(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("12 exercises (%s)\n", LAB_EXERCISE_SOURCE);  // which file was tested, as 05's and 06's say
  test_shard_map();
  test_keys_seen();
  test_ring_merge();
  return finish();
}
