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

TEST_CASE("visible_keys_of_rows is the union of the rows' ranges, causal or no mask", "[math]") {
  // Brute force: key j is in the union iff some row of [q0, q1) sees it. Ragged row ranges,
  // T_q < T_kv and T_q > T_kv (bottom-right aligned: the first rows may see no key).
  int checked = 0;
  for (int t_q : {1, 5, 64, 100})
    for (int t_kv : {1, 5, 64, 130})
      for (bool causal : {false, true})
        for (int q0 = 0; q0 < t_q; q0 += 7)
          for (int q1 = q0 + 1; q1 <= t_q; q1 += 9) {
            const KeyRange u = visible_keys_of_rows(q0, q1, t_q, t_kv, causal);
            INFO("T_q " << t_q << " T_kv " << t_kv << " causal " << causal << " rows " << q0 << ".." << q1);
            for (int j = -1; j <= t_kv; ++j) {
              bool seen = false;
              for (int i = q0; i < q1 && !seen; ++i) seen = brute_visible(i, j, t_q, t_kv, causal, 0);
              REQUIRE(u.contains(j) == seen);
            }
            ++checked;
          }
  CHECK(checked > 500);
}

TEST_CASE("GQA head mapping groups query heads contiguously", "[math]") {
  CHECK(kv_head_of(0, 8, 2) == 0);
  CHECK(kv_head_of(3, 8, 2) == 0);
  CHECK(kv_head_of(4, 8, 2) == 1);
  CHECK(kv_head_of(7, 8, 2) == 1);
  CHECK(kv_head_of(5, 8, 8) == 5);
  CHECK(kv_head_of(5, 8, 1) == 0);
}

TEST_CASE("tile_visibility matches brute force, causal or no mask, ragged tiles", "[math]") {
  int checked = 0;
  for (int tile_q : {16, 64})
    for (int tile_kv : {16, 64})
      for (int t_q : {1, 63, 64, 65, 130})
        for (int t_kv : {1, 64, 65, 130, 200})
          for (bool causal : {false, true})
            for (int q0 = 0; q0 < t_q; q0 += tile_q)
              for (int k0 = 0; k0 < t_kv; k0 += tile_kv) {
                const int q1 = std::min(q0 + tile_q, t_q), k1 = k0 + tile_kv;  // k1 may pass t_kv: ragged
                int seen = 0, total = 0;
                for (int i = q0; i < q1; ++i)
                  for (int j = k0; j < k1; ++j) {
                    ++total;
                    seen += brute_visible(i, j, t_q, t_kv, causal, 0);
                  }
                const TileVisibility want = seen == 0 ? TileVisibility::none
                                          : seen == total ? TileVisibility::full : TileVisibility::partial;
                INFO("tiles " << tile_q << "x" << tile_kv << " T_q " << t_q << " T_kv " << t_kv << " causal " << causal
                     << " q0 " << q0 << " k0 " << k0);
                REQUIRE(int(tile_visibility(q0, q1, k0, k1, t_q, t_kv, causal)) == int(want));
                ++checked;
              }
  CHECK(checked > 2000);
}

TEST_CASE("a Q tile's causal sweep is one span of K/V tiles, from its rows' union", "[math]") {
  // The span the causal kernels compute once per Q tile (02, 03, 04, 11):
  // [union.begin / block_kv, ceil(union.end / block_kv)), empty when no row sees a key, against
  // brute force: K/V tile kt is in it iff some row of the Q tile sees one of its keys. Q tiles of
  // 64 and 128 rows over 64-key tiles, ragged ends, T_q < T_kv and T_q > T_kv.
  int checked = 0;
  const int block_kv = 64;
  for (int block_q : {64, 128})
    for (int t_q : {1, 63, 64, 65, 200, 333})
      for (int t_kv : {1, 64, 65, 200, 333})
        for (bool causal : {false, true})
          for (int q0 = 0; q0 < t_q; q0 += block_q) {
            const int q1 = std::min(q0 + block_q, t_q);
            const KeyRange u = visible_keys_of_rows(q0, q1, t_q, t_kv, causal);
            const int span_begin = u.empty() ? 0 : u.begin / block_kv;
            const int span_end = u.empty() ? 0 : ceil_div(u.end, block_kv);
            for (int kt = 0; kt * block_kv < t_kv; ++kt) {
              bool seen = false;
              for (int i = q0; i < q1 && !seen; ++i)
                for (int j = kt * block_kv; j < (kt + 1) * block_kv && !seen; ++j)
                  seen = brute_visible(i, j, t_q, t_kv, causal, 0);
              INFO("Q tile " << block_q << " T_q " << t_q << " T_kv " << t_kv << " causal " << causal << " q0 " << q0
                   << " K/V tile " << kt);
              REQUIRE(seen == (kt >= span_begin && kt < span_end));
              ++checked;
            }
          }
  CHECK(checked > 500);
}
