// Unit tests of the exercises of sections 05 and 06, compiled against a section's source file:
// the solution's (they must pass) or the student's lab (a stub must fail them). LAB_EXERCISE_SOURCE
// names the file, LAB_EXERCISE_SECTION is 5 or 6. Only the exercises' code is compiled (the
// sections' HOOKS_ONLY guards), so the tests run on any machine, with or without a GPU.
//   05: the GQA mapping, a split's state (online step, LSE; empty splits), the split merge
//       (merged LSE, weights, the online fold; empty splits, no NaN), on numbers worked by hand.
//   06: the paged address through the block table in both layouts; the allocator's append, free
//       and prefix sharing (reference counts), and the serving simulation on them.
// Exit 0 when every check passes, 1 otherwise. Each failure is printed under its exercise's id
// with what was called, what it gave and what was wanted (tests/host_checks.h).
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
  exercise("gqa");
  // H = 32, H_kv = 8: K/V head 3 serves query heads 12..15, and lab::kv_head_of agrees.
  for (int r : {0, 3}) {
    const int h = Hooks::query_head_of(3, r, 4);
    CHECKF(h == 12 + r, "query_head_of(kv_head=3, r=%d, group=4) = %d, want %d: K/V head g serves the query heads "
           "[g*group, (g+1)*group), in order", r, h, 12 + r);
  }
  // Every mapping of three shapes is one check, passed or failed: a check counted only when it
  // fails would make the group's total differ between a stub and a solution.
  FirstFailure mapping;
  for (int h_kv : {1, 2, 8})
    for (int group : {1, 3, 4, 32})
      for (int kv = 0; kv < h_kv; ++kv)
        for (int r = 0; r < group; ++r) {
          const int h = Hooks::query_head_of(kv, r, group);
          mapping.note(h >= 0 && h < h_kv * group && lab::kv_head_of(h, h_kv * group, h_kv) == kv,
                       "query_head_of(kv_head=%d, r=%d, group=%d) = %d with H_kv=%d, want a head of [%d, %d): the "
                       "query heads lab::kv_head_of gives to K/V head %d", kv, r, group, h, h_kv, kv * group,
                       (kv + 1) * group, kv);
        }
  CHECKF(mapping.ok, "%s", mapping.what);
}

static void test_split_state() {
  exercise("split-state");
  float m = -INFINITY, l = 0.f, alpha = 1.f, base = 1.f;
  char call[96];  // the last call, with the state it was given
  auto step = [&](float tile_max) {
    std::snprintf(call, sizeof call, "online_step(tile_max=%s) on m=%s, l=%s", num(tile_max).c_str(), num(m).c_str(),
                  num(l).c_str());
    CHECKF(Hooks::online_step(tile_max, m, l, alpha, base),
           "%s returned false, want true (false stops the kernel's block, which then writes nothing)", call);
  };
  // An empty state meeting an all-masked tile stays empty, with no NaN.
  step(-INFINITY);
  CHECKF(m == -INFINITY && l == 0.f && !std::isnan(alpha) && std::exp2(-INFINITY - base) == 0.f,
         "%s gave m=%s, l=%s, alpha=%s, base=%s; want m=-inf, l=0, alpha not NaN, base neither NaN nor -inf: "
         "still empty, and the kernel's exp2(-inf - base) must be 0, not NaN",
         call, num(m).c_str(), num(l).c_str(), num(alpha).c_str(), num(base).c_str());
  // Tile maxima 3 then 5 (log2 domain): after the first, base 3 and l still 0 (the kernel adds the
  // tile's p = exp2(s - base)); say the tile's p sum to 1.5. The second rescales by exp2(3 - 5).
  // Each step starts from the state the steps before it should have left (set here), so a wrong
  // step fails alone and the next ones show what they were given and want, not its aftermath.
  m = -INFINITY, l = 0.f, alpha = 1.f, base = 1.f;
  step(3.f);
  CHECKF(m == 3.f && base == 3.f && l == 0.f,
         "%s gave m=%s, base=%s, l=%s; want m=3, base=3, l=0 (the kernel adds the tile's p = exp2(s - base) to l "
         "itself)", call, num(m).c_str(), num(base).c_str(), num(l).c_str());
  m = 3.f, base = 3.f, l = 1.5f, alpha = 1.f;
  step(5.f);
  CHECKF(m == 5.f && base == 5.f && near(alpha, 0.25) && near(l, 0.375),
         "%s gave m=%s, base=%s, alpha=%s, l=%s; want m=5, base=5, alpha=0.25 = exp2(3 - 5), l=0.375 = "
         "1.5*alpha", call, num(m).c_str(), num(base).c_str(), num(alpha).c_str(), num(l).c_str());
  // A lower tile max keeps m: alpha 1.
  m = 5.f, base = 5.f, l = 0.375f, alpha = 0.25f;
  step(4.f);
  CHECKF(m == 5.f && alpha == 1.f, "%s gave m=%s, alpha=%s; want m=5, alpha=1: a lower tile max keeps m", call,
         num(m).c_str(), num(alpha).c_str());
  // The split's LSE in natural log: (m + log2 l)·ln 2; an empty split: -inf.
  const float lse = Hooks::split_lse(5.f, 2.f), lse_empty = Hooks::split_lse(-INFINITY, 0.f);
  const double want = (5.0 + 1.0) * std::log(2.0);
  CHECKF(near(lse, want), "split_lse(m=5, l=2) = %s, want %s = (m + log2 l)*ln 2: the LSE in natural log",
         num(lse).c_str(), num(want).c_str());
  CHECKF(lse_empty == -INFINITY, "split_lse(m=-inf, l=0) = %s, want -inf: a split that saw no key weighs nothing",
         num(lse_empty).c_str());
}

static void test_split_merge() {
  exercise("split-merge");
  // The worked example of ch12/05_decode.md: two splits with LSE 2 and 1 and O 10 and 4, and an
  // empty third split: LSE = 2 + log(1 + e^-1) = 2.3133, weights 0.7311 and 0.2689, O = 8.3864.
  const float lse3[3] = {2.f, 1.f, -INFINITY};
  const float all = Hooks::merged_lse(lse3, 3, 1);
  const double want_all = 2.0 + std::log1p(std::exp(-1.0));
  CHECKF(near(all, want_all), "merged_lse({2, 1, -inf}, n=3, stride=1) = %s, want %s = 2 + ln(1 + e^-1), the "
         "worked example of ch12/05_decode.md", num(all).c_str(), num(want_all).c_str());
  const float w2 = Hooks::partial_weight(2.f, all), w1 = Hooks::partial_weight(1.f, all),
              w_empty = Hooks::partial_weight(-INFINITY, all);
  CHECKF(near(w2, 0.7310586), "partial_weight(lse_part=2, lse_all=%s) = %s, want 0.731059 = exp(2 - 2.31326)",
         num(all).c_str(), num(w2).c_str());
  CHECKF(near(w1, 0.2689414), "partial_weight(lse_part=1, lse_all=%s) = %s, want 0.268941 = exp(1 - 2.31326)",
         num(all).c_str(), num(w1).c_str());
  CHECKF(w_empty == 0.f, "partial_weight(lse_part=-inf, lse_all=%s) = %s, want 0: an empty split weighs nothing",
         num(all).c_str(), num(w_empty).c_str());
  const float o = w2 * 10 + w1 * 4;
  CHECKF(near(o, 8.386352), "O = partial_weight(2, lse_all)*10 + partial_weight(1, lse_all)*4 = %s, want "
         "8.38635: the weights of the splits must sum to 1", num(o).c_str());
  // Only empty parts: LSE -inf, weight 0, never NaN; strided reads.
  const float none[3] = {-INFINITY, -INFINITY, -INFINITY};
  const float lse_none = Hooks::merged_lse(none, 3, 1), w_none = Hooks::partial_weight(-INFINITY, -INFINITY);
  CHECKF(lse_none == -INFINITY, "merged_lse({-inf, -inf, -inf}, n=3, stride=1) = %s, want -inf: every split "
         "empty (a row that sees no key), never -inf - -inf", num(lse_none).c_str());
  CHECKF(w_none == 0.f, "partial_weight(lse_part=-inf, lse_all=-inf) = %s, want 0, not NaN: an empty split "
         "weighs nothing, even when every split is empty", num(w_none).c_str());
  const float grid[6] = {1.f, -INFINITY, -INFINITY, -INFINITY, 1.f, -INFINITY};  // [3 warps][2 rows]
  const float lse_col0 = Hooks::merged_lse(grid, 3, 2), lse_col1 = Hooks::merged_lse(grid + 1, 3, 2);
  CHECKF(near(lse_col0, 1.0 + std::log(2.0)), "merged_lse(lse, n=3, stride=2) with lse = {1, -inf, -inf, -inf, 1, "
         "-inf} = %s, want 1.69315 = 1 + ln 2: it reads lse[0], lse[2], lse[4] = {1, -inf, 1}", num(lse_col0).c_str());
  CHECKF(lse_col1 == -INFINITY, "merged_lse(lse + 1, n=3, stride=2) with the same lse = %s, want -inf: it reads "
         "lse[1], lse[3], lse[5], all -inf", num(lse_col1).c_str());
  // Large LSEs: no overflow (subtract the largest first).
  const float big[2] = {100.f, 100.f};
  const float lse_big = Hooks::merged_lse(big, 2, 1);
  CHECKF(near(lse_big, 100.0 + std::log(2.0)), "merged_lse({100, 100}, n=2, stride=1) = %s, want 100.693 = 100 + "
         "ln 2: subtract the largest LSE before exp (exp(100) overflows a float)", num(lse_big).c_str());

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
    CHECKF(near(m, full.lse) && std::isfinite(out) && near(out, full.o, 1e-4),
           "a 50-key row in 7 splits of %d keys (%d of them empty), merged by merged_lse and partial_weight: LSE "
           "%s, O %s; want the whole row's, LSE %s, O %s",
           kps, 7 - (n + kps - 1) / kps, num(m).c_str(), num(out).c_str(), num(full.lse).c_str(), num(full.o).c_str());
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
      const float lse_fold = fold.lse(), o_fold = acc * fold.inv_l();
      CHECKF(near(lse_fold, full.lse) && near(o_fold, full.o, 1e-4),
             "LseFold over the same 7 splits of %d keys, folded %d at a time: lse() %s, O = acc*inv_l() %s; want "
             "the whole row's, LSE %s, O %s",
             kps, group, num(lse_fold).c_str(), num(o_fold).c_str(), num(full.lse).c_str(), num(full.o).c_str());
    }
  }
  // Folding only empty parts, then a real one: no NaN, the real part alone.
  Hooks::LseFold f;
  float w[3];
  const float a0 = f.fold(none, 3, w), lse0 = f.lse(), inv_l0 = f.inv_l();
  CHECKF(!std::isnan(a0) && w[0] == 0.f && lse0 == -INFINITY && inv_l0 == 0.f,
         "a new LseFold's fold({-inf, -inf, -inf}) returned %s and set w[0] = %s, then lse() = %s, inv_l() = "
         "%s; want no NaN, w[0] = 0, lse() = -inf, inv_l() = 0: only empty splits so far",
         num(a0).c_str(), num(w[0]).c_str(), num(lse0).c_str(), num(inv_l0).c_str());
  const float one[1] = {2.5f};
  const float a1 = f.fold(one, 1, w), lse1 = f.lse();
  CHECKF(!std::isnan(a1) && near(w[0], 1.0) && near(lse1, 2.5),
         "then fold({2.5}) returned %s and set w[0] = %s, then lse() = %s; want no NaN, w[0] = 1, lse() = 2.5: "
         "the real split alone", num(a1).c_str(), num(w[0]).c_str(), num(lse1).c_str());
  // inv_l() where l is not 1 (the rows above are dominated by one split, l close to 1): the merged
  // O is acc * inv_l(), so the weights must come out normalised.
  Hooks::LseFold g;
  const float two[2] = {2.f, 1.f};
  float w_two[2];
  g.fold(two, 2, w_two);
  const float inv2 = g.inv_l(), lse2 = g.lse();
  CHECKF(near(inv2, 0.7310586) && near(lse2, 2.3132617),
         "a new LseFold's fold({2, 1}), then inv_l() = %s, lse() = %s; want 0.731059 = 1 / (1 + exp(-1)) and "
         "2.31326: the merged O is acc * inv_l(), its weights summing to 1", num(inv2).c_str(), num(lse2).c_str());
}
#else
static void test_block_table() {
  exercise("block-table");
  // Two sequences, page 16, 3 table entries each: seq 0 -> blocks 5, 2, 7; seq 1 -> blocks 0, 3, -1.
  const int table[6] = {5, 2, 7, 0, 3, -1};
  const int h_kv = 2, d = 8;
  FirstFailure walk;  // one check, passed or failed (as gqa's mapping)
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < (b == 0 ? 48 : 32); ++j)
      for (int kv = 0; kv < h_kv; ++kv) {
        const int64_t slot = lab::paged_slot(table, 3, 16, b, j);  // the specification
        const int64_t nhd = kv_row_offset<KvLayout::nhd>(table, 3, 16, h_kv, d, b, j, kv);
        const int64_t hnd = kv_row_offset<KvLayout::hnd>(table, 3, 16, h_kv, d, b, j, kv);
        const int64_t block = slot / 16, in_page = slot % 16;
        const int64_t want_nhd = (slot * h_kv + kv) * d, want_hnd = ((block * h_kv + kv) * 16 + in_page) * d;
        walk.note(nhd == want_nhd && hnd == want_hnd,
                  "kv_row_offset(b=%d, j=%d, kv_head=%d) with page_size 16, H_kv 2, D 8, block_table "
                  "{5, 2, 7 | 0, 3, -1} (table_stride 3) = %lld in nhd, %lld in hnd; want %lld and %lld: key %d is "
                  "slot %lld of logical block %d, physical block %lld", b, j, kv, (long long)nhd, (long long)hnd,
                  (long long)want_nhd, (long long)want_hnd, j, (long long)in_page, j / 16, (long long)block);
      }
  CHECKF(walk.ok, "%s", walk.what);
  const int64_t at40 = kv_row_offset<KvLayout::nhd>(table, 3, 16, 8, 128, 0, 40, 3);
  CHECKF(at40 == ((7 * 16 + 8) * 8 + 3) * 128, "kv_row_offset<nhd>(b=0, j=40, kv_head=3) with page_size 16, H_kv 8, "
         "D 128, sequence 0's blocks {5, 2, 7} = %lld, want %d = ((7*16 + 8)*8 + 3)*128: key 40 is slot 8 of "
         "logical block 2, physical block 7", (long long)at40, ((7 * 16 + 8) * 8 + 3) * 128);
  // 64-bit: block 2^20 of page 16, 8 heads of 128: past 2^31 elements.
  const int far[1] = {1 << 20};
  const int64_t at_far = kv_row_offset<KvLayout::nhd>(far, 1, 16, 8, 128, 0, 0, 0);
  CHECKF(at_far == (int64_t(1) << 20) * 16 * 8 * 128, "kv_row_offset<nhd>(b=0, j=0, kv_head=0) in physical block "
         "2^20, page_size 16, H_kv 8, D 128 = %lld, want %lld: past 2^31 elements, so the arithmetic must be 64-bit",
         (long long)at_far, (long long)((int64_t(1) << 20) * 16 * 8 * 128));
}

static const char* tf(bool b) { return b ? "true" : "false"; }
static std::string listed(const lab::SequenceBlocks& s) {  // "20 tokens in blocks {3, 7}"
  std::string out = std::to_string(s.length) + " tokens in blocks {";
  for (size_t i = 0; i < s.blocks.size(); ++i) out += (i ? ", " : "") + std::to_string(s.blocks[i]);
  return out + "}";
}

// A sequence of `tokens` tokens built with the allocator's primitives, not the exercise's
// operations, so free_sequence and fork_prefix are tested even while append_tokens is wrong.
static lab::SequenceBlocks made_sequence(lab::BlockAllocator& a, int tokens) {
  lab::SequenceBlocks s;
  for (int held = 0; held < tokens; held += a.block_size()) s.blocks.push_back(a.allocate());
  s.length = tokens;
  return s;
}

// Each operation is tested on its own pool, so a student sees every operation that is wrong, not
// only the first; inside one operation a failed step ends it (the next steps build on it).
static void test_append() {
  using namespace lab;
  BlockAllocator a(10, 16);  // 10 blocks of 16 tokens
  SequenceBlocks s;
  bool ok = append_tokens(a, s, 1);
  if (!CHECKF(ok && s.blocks.size() == 1 && s.length == 1, "append_tokens(a, s, 1) on an empty sequence (a pool of "
              "10 blocks of 16) returned %s, s holds %s; want true, 1 token in 1 block", tf(ok), listed(s).c_str()))
    return not_run(4);
  ok = append_tokens(a, s, 15);
  if (!CHECKF(ok && s.blocks.size() == 1 && s.length == 16, "append_tokens(a, s, 15) on 1 token returned %s, s "
              "holds %s; want true, 16 tokens still in 1 block", tf(ok), listed(s).c_str()))
    return not_run(3);
  ok = append_tokens(a, s, 1);
  if (!CHECKF(ok && s.blocks.size() == 2 && s.length == 17, "append_tokens(a, s, 1) on 16 tokens returned %s, s "
              "holds %s; want true, 17 tokens in 2 blocks", tf(ok), listed(s).c_str()))
    return not_run(2);
  CHECKF(a.used_blocks() == 2, "the pool has %d blocks in use, want 2: s holds 17 tokens", a.used_blocks());
  ok = append_tokens(a, s, 40);
  CHECKF(ok && s.length == 57 && s.blocks.size() == 4 && a.used_blocks() == 4, "append_tokens(a, s, 40) on 17 "
         "tokens returned %s, s holds %s, %d blocks in use; want true, 57 tokens in 4 blocks, 4 in use: one call may "
         "need several blocks", tf(ok), listed(s).c_str(), a.used_blocks());
}

static void test_append_errors() {
  using namespace lab;
  BlockAllocator a(10, 16);
  SequenceBlocks s;
  const bool threw = throws([&] { append_tokens(a, s, -1); });
  CHECKF(threw, "append_tokens(a, s, -1) did not throw std::invalid_argument: n < 0 is the caller's error");
  // The pool running out: all or nothing.
  BlockAllocator small(2, 16);
  SequenceBlocks t = made_sequence(small, 20);  // 2 blocks: the pool is full
  const bool ok = append_tokens(small, t, 13);
  CHECKF(!ok && t.length == 20 && t.blocks.size() == 2 && small.free_blocks() == 0, "append_tokens(small, t, 13) "
         "on 20 tokens, no block free, returned %s, t holds %s, %d blocks free; want false and nothing changed (20 "
         "tokens in 2 blocks, 0 free): all or nothing", tf(ok), listed(t).c_str(), small.free_blocks());
  BlockAllocator three(3, 16);
  SequenceBlocks u = made_sequence(three, 16);  // 1 block used, 2 free: 40 more tokens need 3
  const bool ok_u = append_tokens(three, u, 40);
  CHECKF(!ok_u && u.length == 16 && u.blocks.size() == 1 && three.free_blocks() == 2, "append_tokens(three, u, 40) "
         "on 16 tokens with 2 of 3 blocks free returned %s, u holds %s, %d blocks free; want false and nothing "
         "changed (16 tokens in 1 block, 2 free): the blocks it took before running out go back", tf(ok_u),
         listed(u).c_str(), three.free_blocks());
}

static void test_free() {
  using namespace lab;
  BlockAllocator a(10, 16);
  SequenceBlocks s = made_sequence(a, 40);  // 3 blocks
  const int shared = s.blocks[0];
  a.retain(shared);  // another sequence uses the first block too
  free_sequence(a, s);
  CHECKF(s.blocks.empty() && s.length == 0, "free_sequence(a, s) on %s left s holding %s; want it empty (0 tokens, "
         "no blocks)", "40 tokens in 3 blocks", listed(s).c_str());
  const int refs = a.ref_count(shared);
  CHECKF(a.used_blocks() == 1 && refs == 1, "free_sequence(a, s) on 3 blocks, the first also used by another "
         "sequence: %d blocks in use, the shared one has %d references; want 1 in use (the shared block stays "
         "with its other user) and 1 reference", a.used_blocks(), refs);
}

static void test_fork() {
  using namespace lab;
  BlockAllocator a(10, 16);
  SequenceBlocks prompt = made_sequence(a, 40);  // 16 + 16 + 8 tokens in 3 blocks
  SequenceBlocks child = fork_prefix(a, prompt, 40);
  if (CHECKF(child.length == 32 && child.blocks.size() == 2, "fork_prefix(a, prompt, 40) with prompt holding %s "
             "gave a child of %s; want 32 tokens in the prompt's first 2 blocks: only full blocks are shared",
             listed(prompt).c_str(), listed(child).c_str())) {
    CHECKF(prompt.blocks.size() == 3 && child.blocks[0] == prompt.blocks[0] && child.blocks[1] == prompt.blocks[1],
           "after fork_prefix(a, prompt, 40) the prompt holds %s and the child %s; want the prompt unchanged and the "
           "child in the prompt's first 2 blocks (shared, not copied)", listed(prompt).c_str(), listed(child).c_str());
    const int refs0 = a.ref_count(prompt.blocks[0]), refs2 = a.ref_count(prompt.blocks[2]);
    CHECKF(refs0 == 2 && refs2 == 1 && a.used_blocks() == 3, "after fork_prefix(a, prompt, 40) the prompt's blocks "
           "0 and 2 have %d and %d references, %d blocks in use; want 2 (the child shares it), 1 (a partly filled "
           "block is not shared) and 3 in use (nothing allocated)", refs0, refs2, a.used_blocks());
  } else {
    not_run(2);
  }
  SequenceBlocks short_child = fork_prefix(a, prompt, 20);
  CHECKF(short_child.length == 16 && short_child.blocks.size() == 1, "fork_prefix(a, prompt, 20) gave a child of "
         "%s; want 16 tokens in 1 block: the prefix's full blocks only", listed(short_child).c_str());
  const bool threw = throws([&] { fork_prefix(a, prompt, 41); });
  CHECKF(threw, "fork_prefix(a, prompt, 41) with the prompt holding 40 tokens did not throw std::invalid_argument: "
         "a prefix longer than its parent is the caller's error");
}

// The three operations together: a prompt, a child sharing its prefix and growing, both freed.
static void test_allocator_together() {
  using namespace lab;
  BlockAllocator a(10, 16);
  SequenceBlocks prompt;
  bool ok = append_tokens(a, prompt, 40);
  SequenceBlocks child = fork_prefix(a, prompt, 40);
  const bool grew = append_tokens(a, child, 18);
  if (!CHECKF(ok && grew && child.blocks.size() == 4 && a.used_blocks() == 5, "append_tokens(a, prompt, 40), "
              "fork_prefix(a, prompt, 40), append_tokens(a, child, 18): the child holds %s, %d blocks in use; want "
              "50 tokens in 4 blocks (2 shared), 5 in use", listed(child).c_str(), a.used_blocks()))
    return not_run(2);
  free_sequence(a, prompt);  // the shared blocks stay with the child
  const int refs_child = a.ref_count(child.blocks[0]);
  CHECKF(a.used_blocks() == 4 && refs_child == 1, "after free_sequence(a, prompt): %d blocks in use, the child's "
         "first block has %d references; want 4 in use (the 2 shared blocks stay with the child) and 1 reference",
         a.used_blocks(), refs_child);
  free_sequence(a, child);
  CHECKF(a.free_blocks() == 10, "after free_sequence of every sequence the pool has %d of its 10 blocks free, want "
         "10", a.free_blocks());
}

static void test_allocator() {
  exercise("allocator");
  // A wrong operation can make the allocator throw (a block released once too often, one retained
  // while free): the test that met it fails, naming the error, and the others still run.
  run_catching("append_tokens", test_append);
  run_catching("append_tokens at a full pool", test_append_errors);
  run_catching("free_sequence", test_free);
  run_catching("fork_prefix", test_fork);
  run_catching("append_tokens, fork_prefix and free_sequence together", test_allocator_together);
}

// One run of the simulation: true with its report, or one failed check naming the error.
static bool simulated(const lab::ServingConfig& c, lab::ServingReport& r, const char* what) {
  bool ran = false;
  run_catching(what, [&] {
    r = lab::simulate_serving(c);
    ran = true;
  });
  return ran;
}

static void test_simulation() {  // the allocator as the serving simulation (--simulate) runs it
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
  const char* small = "simulate_serving of 4 requests, 2 at a time, prompt 10, output 6, blocks of 16, "
                      "max_seq_len 32";
  ServingReport r;
  if (simulated(c, r, small))
    CHECKF(r.steps == 12 && near(r.live_tokens, 27) && near(r.paged_slots, 32) && near(r.contiguous_slots, 64),
           "%s, no shared prefix: steps %lld, live_tokens %s, paged_slots %s, contiguous_slots %s; want 12, "
           "27, 32, 64 (each pair decodes 6 steps at 11..16 tokens, one block each)", small, (long long)r.steps,
           num(r.live_tokens).c_str(), num(r.paged_slots).c_str(), num(r.contiguous_slots).c_str());
  // A 16-token system prompt on every request: one full block, shared: 1 + 2 x 1 blocks, not 2 x 2.
  c.shared_prefix = 16;
  c.share_fraction = 1.0;
  if (simulated(c, r, small))
    CHECKF(near(r.paged_slots, 64) && near(r.shared_slots, 48) && near(r.sharing_saving(), 0.25),
           "%s, all sharing a 16-token prefix: paged_slots %s, shared_slots %s, sharing_saving() %s; want 64, "
           "48, 0.25 (the prefix's full block is held once, 1 + 2 blocks instead of 2 x 2)",
           small, num(r.paged_slots).c_str(), num(r.shared_slots).c_str(), num(r.sharing_saving()).c_str());
  if (simulated(ServingConfig{}, r, "simulate_serving at its defaults"))
    CHECKF(r.contiguous_waste() > 0.5 && r.paged_waste() < 0.02 && r.sharing_saving() > 0.1,
           "simulate_serving at its defaults: contiguous_waste() %s, paged_waste() %s, sharing_saving() %s; "
           "want > 0.5, < 0.02, > 0.1",
           num(r.contiguous_waste()).c_str(), num(r.paged_waste()).c_str(), num(r.sharing_saving()).c_str());
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
