// Unit tests of the exercises of sections 05 and 06, compiled against a section's source file:
// the solution's (they must pass) or the student's lab (a stub must fail them). LAB_EXERCISE_SOURCE
// names the file, LAB_EXERCISE_SECTION is 5 or 6. Only the exercises' code is compiled (the
// sections' HOOKS_ONLY guards), so the tests run on any machine, with or without a GPU.
//   05: the GQA mapping, a split's state (online step, LSE; empty splits), the split merge
//       (merged LSE, weights, the online fold; empty splits, no NaN), on numbers worked by hand.
//   06: the paged address through the block table in both layouts; the allocator's append, free
//       and prefix sharing (reference counts), and the serving simulation on them.
// Exit 0 when every check passes, 1 otherwise (each failure printed with its line).
#include <cmath>
#include <cstdio>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#if LAB_EXERCISE_SECTION == 5
#define LAB_DECODE05_HOOKS_ONLY
#include LAB_EXERCISE_SOURCE
using Hooks = Decode05;
#else
#define LAB_DECODE06_HOOKS_ONLY
#include LAB_EXERCISE_SOURCE
#include "decode/block_allocator.h"
#endif

#include "host_checks.h"
#define REQUIRE(x)                     \
  do {                                 \
    const bool ok_ = (x);              \
    check(ok_, #x, __FILE__, __LINE__); \
    if (!ok_) return;                  \
  } while (0)
static bool near(double a, double b, double rel = 1e-5) { return std::fabs(a - b) <= rel * (1 + std::fabs(b)); }
template <class F>
static bool throws(F f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

#if LAB_EXERCISE_SECTION == 5
// One part's exact state over keys [lo, hi) of scores s and a 1-column V: (LSE, normalised O).
struct State {
  float lse, o;
};
static State exact(const std::vector<double>& s, const std::vector<double>& v, int lo, int hi) {
  if (lo >= hi) return {-INFINITY, 0.f};
  double m = -1e300, l = 0, o = 0;
  for (int j = lo; j < hi; ++j) m = std::fmax(m, s[size_t(j)]);
  for (int j = lo; j < hi; ++j) {
    l += std::exp(s[size_t(j)] - m);
    o += std::exp(s[size_t(j)] - m) * v[size_t(j)];
  }
  return {float(m + std::log(l)), float(o / l)};
}

static void test_gqa() {
  // H = 32, H_kv = 8: K/V head 3 serves query heads 12..15, and lab::kv_head_of agrees.
  CHECK(Hooks::query_head_of(3, 0, 4) == 12);
  CHECK(Hooks::query_head_of(3, 3, 4) == 15);
  for (int h_kv : {1, 2, 8})
    for (int group : {1, 3, 4, 32})
      for (int kv = 0; kv < h_kv; ++kv)
        for (int r = 0; r < group; ++r) {
          const int h = Hooks::query_head_of(kv, r, group);
          if (h < 0 || h >= h_kv * group || lab::kv_head_of(h, h_kv * group, h_kv) != kv) {
            CHECK(!"query_head_of(kv_head, r, group) is a head of kv_head's group");
            return;
          }
        }
}

static void test_split_state() {
  // An empty state meeting an all-masked tile stays empty, with no NaN.
  float m = -INFINITY, l = 0.f, alpha = 1.f, base = 1.f;
  CHECK(Hooks::online_step(-INFINITY, m, l, alpha, base));
  CHECK(m == -INFINITY && l == 0.f && !std::isnan(alpha) && std::exp2(-INFINITY - base) == 0.f);
  // Tile maxima 3 then 5 (log2 domain): after the first, base 3 and l still 0 (the kernel adds the
  // tile's p = exp2(s - base)); say the tile's p sum to 1.5. The second rescales by exp2(3 - 5).
  CHECK(Hooks::online_step(3.f, m, l, alpha, base));
  CHECK(m == 3.f && base == 3.f && l == 0.f);
  l += 1.5f;
  CHECK(Hooks::online_step(5.f, m, l, alpha, base));
  CHECK(m == 5.f && base == 5.f && near(alpha, 0.25) && near(l, 0.375));
  // A lower tile max keeps m: alpha 1.
  CHECK(Hooks::online_step(4.f, m, l, alpha, base));
  CHECK(m == 5.f && alpha == 1.f);
  // The split's LSE in natural log: (m + log2 l)·ln 2; an empty split: -inf.
  CHECK(near(Hooks::split_lse(5.f, 2.f), (5.0 + 1.0) * std::log(2.0)));
  CHECK(Hooks::split_lse(-INFINITY, 0.f) == -INFINITY);
}

static void test_split_merge() {
  // The worked example of ch12/05_decode.md: two splits with LSE 2 and 1 and O 10 and 4, and an
  // empty third split: LSE = 2 + log(1 + e^-1) = 2.3133, weights 0.7311 and 0.2689, O = 8.3864.
  const float lse3[3] = {2.f, 1.f, -INFINITY};
  const float all = Hooks::merged_lse(lse3, 3, 1);
  CHECK(near(all, 2.0 + std::log1p(std::exp(-1.0))));
  CHECK(near(Hooks::partial_weight(2.f, all), 0.7310586));
  CHECK(near(Hooks::partial_weight(1.f, all), 0.2689414));
  CHECK(Hooks::partial_weight(-INFINITY, all) == 0.f);
  CHECK(near(Hooks::partial_weight(2.f, all) * 10 + Hooks::partial_weight(1.f, all) * 4, 8.386352));
  // Only empty parts: LSE -inf, weight 0, never NaN; strided reads.
  const float none[3] = {-INFINITY, -INFINITY, -INFINITY};
  CHECK(Hooks::merged_lse(none, 3, 1) == -INFINITY);
  CHECK(Hooks::partial_weight(-INFINITY, -INFINITY) == 0.f);
  const float grid[6] = {1.f, -INFINITY, -INFINITY, -INFINITY, 1.f, -INFINITY};  // [3 warps][2 rows]
  CHECK(near(Hooks::merged_lse(grid, 3, 2), 1.0 + std::log(2.0)));
  CHECK(Hooks::merged_lse(grid + 1, 3, 2) == -INFINITY);
  // Large LSEs: no overflow (subtract the largest first).
  const float big[2] = {100.f, 100.f};
  CHECK(near(Hooks::merged_lse(big, 2, 1), 100.0 + std::log(2.0)));

  // Splits of a 50-key row, some past its end, merged = attention over the whole row.
  const int n = 50;
  std::vector<double> s(n), v(n);
  for (int j = 0; j < n; ++j) {
    s[size_t(j)] = 3.0 * std::sin(1.7 * j) + (j == 31 ? 40.0 : 0.0);
    v[size_t(j)] = std::cos(0.3 * j) + 0.5;
  }
  const State full = exact(s, v, 0, n);
  for (int kps : {8, 16, 64}) {
    std::vector<float> lse, o;
    for (int sp = 0; sp < 7; ++sp) {
      const State st = exact(s, v, std::min(n, sp * kps), std::min(n, (sp + 1) * kps));
      lse.push_back(st.lse);
      o.push_back(st.o);
    }
    const float m = Hooks::merged_lse(lse.data(), 7, 1);
    float out = 0.f;
    for (int sp = 0; sp < 7; ++sp) out += Hooks::partial_weight(lse[size_t(sp)], m) * o[size_t(sp)];
    CHECK(near(m, full.lse) && std::isfinite(out) && near(out, full.o, 1e-4));
    // The same merge folded in groups (the last block's way), an empty group first for kps 64.
    for (int group : {1, 3, 7}) {
      Hooks::LseFold fold;
      float acc = 0.f, w[7];
      for (int s0 = 0; s0 < 7; s0 += group) {
        const int cnt = std::min(group, 7 - s0);
        const float a = fold.fold(lse.data() + s0, cnt, w);
        acc *= a;
        for (int k = 0; k < cnt; ++k) acc += w[k] * o[size_t(s0 + k)];
      }
      CHECK(near(fold.lse(), full.lse) && near(acc * fold.inv_l(), full.o, 1e-4));
    }
  }
  // Folding only empty parts, then a real one: no NaN, the real part alone.
  Hooks::LseFold f;
  float w[3];
  const float a0 = f.fold(none, 3, w);
  CHECK(!std::isnan(a0) && w[0] == 0.f && f.lse() == -INFINITY && f.inv_l() == 0.f);
  const float one[1] = {2.5f};
  const float a1 = f.fold(one, 1, w);
  CHECK(!std::isnan(a1) && near(w[0], 1.0) && near(f.lse(), 2.5));
}
#else
static void test_block_table() {
  // Two sequences, page 16, 3 table entries each: seq 0 -> blocks 5, 2, 7; seq 1 -> blocks 0, 3, -1.
  const int table[6] = {5, 2, 7, 0, 3, -1};
  const int h_kv = 2, d = 8;
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < (b == 0 ? 48 : 32); ++j)
      for (int kv = 0; kv < h_kv; ++kv) {
        const int64_t slot = lab::paged_slot(table, 3, 16, b, j);  // the specification
        const int64_t nhd = kv_row_offset<KvLayout::nhd>(table, 3, 16, h_kv, d, b, j, kv);
        const int64_t hnd = kv_row_offset<KvLayout::hnd>(table, 3, 16, h_kv, d, b, j, kv);
        const int64_t block = slot / 16, in_page = slot % 16;
        if (nhd != (slot * h_kv + kv) * d || hnd != ((block * h_kv + kv) * 16 + in_page) * d) {
          std::printf("  sequence %d key %d head %d: nhd %lld hnd %lld\n", b, j, kv, (long long)nhd, (long long)hnd);
          CHECK(!"kv_row_offset follows the block table in both layouts");
          return;
        }
      }
  CHECK(kv_row_offset<KvLayout::nhd>(table, 3, 16, 8, 128, 0, 40, 3) == ((7 * 16 + 8) * 8 + 3) * 128);
  // 64-bit: block 2^20 of page 16, 8 heads of 128: past 2^31 elements.
  const int far[1] = {1 << 20};
  CHECK(kv_row_offset<KvLayout::nhd>(far, 1, 16, 8, 128, 0, 0, 0) == (int64_t(1) << 20) * 16 * 8 * 128);
}

static void test_allocator() {
  using namespace lab;
  BlockAllocator a(10, 16);
  SequenceBlocks s;
  REQUIRE(append_tokens(a, s, 1) && s.blocks.size() == 1 && s.length == 1);
  REQUIRE(append_tokens(a, s, 15) && s.blocks.size() == 1);  // 16 tokens: still one block
  REQUIRE(append_tokens(a, s, 1) && s.blocks.size() == 2 && s.length == 17);
  CHECK(a.used_blocks() == 2);
  CHECK(throws([&] { append_tokens(a, s, -1); }));
  // Prefix sharing: a 40-token prompt (16 + 16 + 8); a child takes the 2 full blocks by reference.
  SequenceBlocks prompt;
  REQUIRE(append_tokens(a, prompt, 40) && a.used_blocks() == 5 && prompt.blocks.size() == 3);
  SequenceBlocks child = fork_prefix(a, prompt, 40);
  REQUIRE(child.length == 32 && child.blocks.size() == 2);
  CHECK(prompt.blocks.size() == 3 && child.blocks.size() == 2 && child.blocks[0] == prompt.blocks[0] &&
        child.blocks[1] == prompt.blocks[1]);
  CHECK(a.ref_count(prompt.blocks[0]) == 2 && a.ref_count(prompt.blocks[2]) == 1);  // partial block not shared
  REQUIRE(append_tokens(a, child, 18) && child.blocks.size() == 4);                    // 50 tokens
  CHECK(a.used_blocks() == 2 + 3 + 2);
  free_sequence(a, prompt);  // the shared blocks stay with the child
  CHECK(prompt.blocks.empty() && prompt.length == 0);
  CHECK(a.used_blocks() == 2 + 2 + 2 && a.ref_count(child.blocks[0]) == 1);
  free_sequence(a, child);
  free_sequence(a, s);
  CHECK(a.free_blocks() == 10);
  CHECK(throws([&] { fork_prefix(a, child, 1); }));  // a prefix longer than the parent
  // The pool running out: all or nothing.
  BlockAllocator small(2, 16);
  SequenceBlocks t;
  CHECK(append_tokens(small, t, 20));
  CHECK(!append_tokens(small, t, 13) && t.length == 20 && t.blocks.size() == 2 && small.free_blocks() == 0);
}

static void test_simulation() {
  using namespace lab;
  // 4 requests, 2 at a time, prompt 10, output 6, blocks of 16, max_seq_len 32, no sharing:
  // each pair runs 6 steps with lengths 11..16 (one block each).
  ServingConfig c;
  c.requests = 4;
  c.max_batch = 2;
  c.prompt_min = c.prompt_max = 10;
  c.output_min = c.output_max = 6;
  c.block_size = 16;
  c.max_seq_len = 32;
  c.shared_prefix = 0;
  try {
    ServingReport r = simulate_serving(c);
    CHECK(r.steps == 12 && near(r.live_tokens, 27) && near(r.paged_slots, 32) && near(r.contiguous_slots, 64));
    // A 16-token system prompt on every request: one full block, shared: 1 + 2 x 1 blocks, not 2 x 2.
    c.shared_prefix = 16;
    c.share_fraction = 1.0;
    r = simulate_serving(c);
    CHECK(near(r.paged_slots, 64) && near(r.shared_slots, 48) && near(r.sharing_saving(), 0.25));
    r = simulate_serving(ServingConfig{});
    CHECK(r.contiguous_waste() > 0.5 && r.paged_waste() < 0.02 && r.sharing_saving() > 0.1);
  } catch (const std::exception& e) {
    std::printf("  simulate_serving: %s\n", e.what());
    CHECK(!"simulate_serving runs on the allocator without an error");
  }
}
#endif

int main(int argc, char** argv) {
  no_options(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
#if LAB_EXERCISE_SECTION == 5
  std::printf("05 exercises (%s)\n", LAB_EXERCISE_SOURCE);
  test_gqa();
  test_split_state();
  test_split_merge();
#else
  std::printf("06 exercises (%s)\n", LAB_EXERCISE_SOURCE);
  test_block_table();
  test_allocator();
  test_simulation();
#endif
  return finish();
}
