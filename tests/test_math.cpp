// The shared index helpers against brute force: the mask rules, tile ranges, GQA, LSE merge.
#include <catch2/catch.hpp>
#include <cmath>

#include "toolbox/attention_math.h"

using namespace lab;

// The mask written the obvious way, independent of visible_keys.
static bool brute_visible(int i, int j, int t_q, int t_kv, bool causal, int window) {
  const int pos = i + t_kv - t_q;
  if (j < 0 || j >= t_kv) return false;
  if (causal && j > pos) return false;
  if (window > 0 && j <= pos - window) return false;
  return true;
}

TEST_CASE("visible_keys matches the brute-force mask", "[math]") {
  for (int t_q : {1, 2, 7, 16, 33})
    for (int t_kv : {1, 3, 16, 40})
      for (bool causal : {false, true})
        for (int window : {0, 1, 2, 5, 64}) {
          if (window && !causal) continue;
          for (int i = 0; i < t_q; ++i) {
            const KeyRange r = visible_keys(i, t_q, t_kv, causal, window);
            for (int j = -1; j <= t_kv; ++j)
              REQUIRE(r.contains(j) == brute_visible(i, j, t_q, t_kv, causal, window));
          }
        }
}

TEST_CASE("causal is bottom-right aligned when T_q != T_kv", "[math]") {
  // T_q = 2, T_kv = 5: the two queries are the last two tokens (positions 3 and 4).
  CHECK(visible_keys(0, 2, 5, true, 0).end == 4);
  CHECK(visible_keys(1, 2, 5, true, 0).end == 5);
  // T_q = 5, T_kv = 2: the first three queries see no key at all.
  CHECK(visible_keys(2, 5, 2, true, 0).empty());
  CHECK(visible_keys(3, 5, 2, true, 0).end == 1);
}

TEST_CASE("visible_keys_of_rows is the union of the rows' ranges", "[math]") {
  for (int t_q : {5, 64, 100})
    for (int t_kv : {5, 64, 130})
      for (int window : {0, 3, 50})
        for (int q0 = 0; q0 < t_q; q0 += 7)
          for (int q1 = q0 + 1; q1 <= t_q; q1 += 9) {
            int lo = t_kv, hi = 0;
            for (int i = q0; i < q1; ++i) {
              const KeyRange r = visible_keys(i, t_q, t_kv, true, window);
              if (!r.empty()) { lo = std::min(lo, r.begin); hi = std::max(hi, r.end); }
            }
            const KeyRange u = visible_keys_of_rows(q0, q1, t_q, t_kv, true, window);
            if (lo >= hi) REQUIRE(u.empty());
            else REQUIRE((u.begin == lo && u.end == hi));
          }
}

TEST_CASE("GQA head mapping groups query heads contiguously", "[math]") {
  CHECK(kv_head_of(0, 8, 2) == 0);
  CHECK(kv_head_of(3, 8, 2) == 0);
  CHECK(kv_head_of(4, 8, 2) == 1);
  CHECK(kv_head_of(7, 8, 2) == 1);
  CHECK(kv_head_of(5, 8, 8) == 5);
  CHECK(kv_head_of(5, 8, 1) == 0);
}

TEST_CASE("tile_visibility matches brute force, windows W-1, W, W+1 at tile edges", "[math]") {
  int checked = 0;
  for (int tile : {16, 64})
    for (int t_q : {1, 63, 64, 65, 130})
      for (int t_kv : {1, 64, 65, 130, 200})
        for (int window : {0, 1, tile - 1, tile, tile + 1, 2 * tile, 1000})
          for (bool causal : {false, true}) {
            if (window && !causal) continue;
            for (int q0 = 0; q0 < t_q; q0 += tile)
              for (int k0 = 0; k0 < t_kv; k0 += tile) {
                const int q1 = std::min(q0 + tile, t_q), k1 = k0 + tile;  // k1 may pass t_kv: ragged
                int seen = 0, total = 0;
                for (int i = q0; i < q1; ++i)
                  for (int j = k0; j < k1; ++j) {
                    ++total;
                    seen += brute_visible(i, j, t_q, t_kv, causal, window);
                  }
                const TileVisibility want = seen == 0 ? TileVisibility::none
                                          : seen == total ? TileVisibility::full : TileVisibility::partial;
                INFO("tile " << tile << " T_q " << t_q << " T_kv " << t_kv << " W " << window << " causal "
                     << causal << " q0 " << q0 << " k0 " << k0);
                REQUIRE(int(tile_visibility(q0, q1, k0, k1, t_q, t_kv, causal, window)) == int(want));
                ++checked;
              }
          }
  CHECK(checked > 5000);
}

TEST_CASE("the K/V tiles a Q tile must visit are one span, from its rows' union (07's tile skip)", "[math]") {
  // tile_visibility != none, K/V tile by K/V tile, against the span the kernels compute once per Q
  // tile: [union.begin / block_kv, ceil(union.end / block_kv)), empty when no row sees a key.
  // Q tiles of 64 and 128 rows over 64-key tiles (07's window and window-q128), ragged ends,
  // T_q < T_kv and T_q > T_kv, windows W-1, W, W+1 around both tile sizes.
  int checked = 0;
  const int block_kv = 64;
  for (int block_q : {64, 128})
    for (int t_q : {1, 63, 64, 65, 200, 333})
      for (int t_kv : {1, 64, 65, 200, 333})
        for (int window : {0, 1, 63, 64, 65, 127, 128, 129, 1000}) {
          for (int q0 = 0; q0 < t_q; q0 += block_q) {
            const int q1 = std::min(q0 + block_q, t_q);
            const KeyRange u = visible_keys_of_rows(q0, q1, t_q, t_kv, true, window);
            const int span_begin = u.empty() ? 0 : u.begin / block_kv;
            const int span_end = u.empty() ? 0 : ceil_div(u.end, block_kv);
            for (int kt = 0; kt * block_kv < t_kv; ++kt) {
              const bool visible = tile_visibility(q0, q1, kt * block_kv, (kt + 1) * block_kv, t_q, t_kv, true, window) !=
                                   TileVisibility::none;
              INFO("Q tile " << block_q << " T_q " << t_q << " T_kv " << t_kv << " W " << window << " q0 " << q0
                   << " K/V tile " << kt);
              REQUIRE(visible == (kt >= span_begin && kt < span_end));
              ++checked;
            }
          }
        }
  CHECK(checked > 3000);
}
