// Decode over a KV cache (sections 05, 06): the split ranges and the split heuristic, the merge of
// partial softmax states (empty ones included), the paged address, the block allocator, the
// block-table check and the serving simulation, on scenarios whose numbers are worked out by hand.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>
#include <vector>

#include "decode/block_allocator.h"
#include "decode/kv_cache.h"

using namespace lab;

// ---------------------------------------------------------------------------------------------
TEST_CASE("split_keys cuts the visible keys into disjoint fixed-size splits", "[kv_cache]") {
  for (int begin : {0, 5, 64})
    for (int end : {begin, begin + 1, 100, 257, 1000}) {
      const KeyRange visible{begin, std::max(begin, end)};
      for (int kps : {64, 128, 192}) {
        std::vector<int> seen;
        for (int s = 0; s * kps < 1100; ++s) {
          const KeyRange r = split_keys(visible, s, kps);
          REQUIRE(r.begin <= r.end);
          for (int j = r.begin; j < r.end; ++j) {
            REQUIRE(j / kps == s);  // inside the split's own window
            seen.push_back(j);
          }
        }
        std::vector<int> want;
        for (int j = visible.begin; j < visible.end; ++j) want.push_back(j);
        REQUIRE(seen == want);  // every visible key once, in order
      }
    }
  // A sequence of 100 keys split by 64: split 1 holds 36 keys, split 2 none (empty, not negative).
  CHECK(split_keys({0, 100}, 1, 64).begin == 64);
  CHECK(split_keys({0, 100}, 1, 64).end == 100);
  CHECK(split_keys({0, 100}, 2, 64).empty());
  CHECK(split_keys({0, 1}, 3, 64).empty());
}

// plan_splits for `rows` blocks that all see keys [0, t_kv) (every sequence full length).
static SplitPlan plan_splits(int rows, int t_kv, int tile, int slots, int min_tiles, int max_splits, int forced = 0) {
  return plan_splits(std::vector<KeyRange>(size_t(std::max(rows, 0)), KeyRange{0, std::max(t_kv, 1)}), 1, tile, slots,
                     min_tiles, max_splits, forced);
}

TEST_CASE("plan_splits: one wave, one block per SM, on the benchmark shapes", "[kv_cache]") {
  const int slots = 132;  // H200 SMs
  // B = 8, H_kv = 8: 64 blocks. 2 splits = 128 blocks: one per SM (3 would be 192: a second block on 60 SMs).
  SplitPlan p = plan_splits(64, 32768, 64, slots, 2, 128);
  CHECK(p.num_splits == 2);
  CHECK(p.keys_per_split == 16384);
  // B = 1: 8 blocks. 16 splits = 128 blocks (17 would be 136 > 132 SMs).
  p = plan_splits(8, 32768, 64, slots, 2, 128);
  CHECK(p.num_splits == 16);
  CHECK(p.keys_per_split == 32 * 64);  // 512 tiles / 16
  CHECK(int64_t(p.num_splits) * p.keys_per_split >= 32768);
  p = plan_splits(8, 32768 + 64, 64, slots, 2, 128);  // 513 tiles: 33 per split, still 16 splits
  CHECK(p.num_splits == 16);
  CHECK(int64_t(p.num_splits) * p.keys_per_split >= 32768 + 64);
  // 80% of the SMs (106 of 132 blocks) already: not split; 60 blocks: 2 splits (120 blocks).
  CHECK(plan_splits(106, 32768, 64, slots, 2, 128).num_splits == 1);
  CHECK(plan_splits(60, 32768, 64, slots, 2, 128).num_splits == 2);
  // A launch that already fills the GPU is not split.
  CHECK(plan_splits(1024, 32768, 64, slots, 2, 128).num_splits == 1);
  // Short caches: at least 2 tiles per split (1000 keys = 16 tiles: at most 8 splits).
  p = plan_splits(8, 1000, 64, slots, 2, 128);
  CHECK(p.num_splits <= 8);
  CHECK(p.keys_per_split % 64 == 0);
  CHECK(int64_t(p.num_splits) * p.keys_per_split >= 1000);
  CHECK(int64_t(p.num_splits - 1) * p.keys_per_split < 1000);  // no split entirely past the end
  CHECK(plan_splits(8, 1, 64, slots, 2, 128).num_splits == 1);
  // Forced (LAB_SPLITS): clamped to the tiles and to max_splits; rounding to whole tiles may give fewer.
  CHECK(plan_splits(64, 32768, 64, slots, 2, 128, 7).num_splits == 7);
  CHECK(plan_splits(64, 100, 64, slots, 2, 128, 7).num_splits == 2);
  CHECK(plan_splits(64, 1 << 20, 64, slots, 2, 128, 1000).num_splits == 128);
  p = plan_splits(64, 1000, 64, slots, 2, 128, 7);  // 16 tiles / 7 -> 3 tiles per split -> 6 splits
  CHECK(p.num_splits == 6);
  CHECK(p.keys_per_split == 192);
}

TEST_CASE("plan_splits: a batch of mixed lengths splits its long sequences more", "[kv_cache]") {
  const int slots = 132;
  // The bench's mixed batch (B = 8, seed 0, T_kv = 32768): 512, 386, 303, 261, 64, 161, 185 and 145
  // tiles of 64 keys; 8 K/V heads, one block each per piece. A split of 161 tiles cuts them into
  // 4+3+2+2+1+1+2+1 = 16 pieces = 128 blocks; 160 tiles would make 17 (136 blocks > 132 SMs). The
  // longest block reads 161 tiles, where splitting by T_kv (2 splits of 256) made one of 256.
  const std::vector<int> lengths = {32768, 24647, 19377, 16685, 4061, 10288, 11794, 9241};
  std::vector<KeyRange> ranges;
  for (int len : lengths) ranges.push_back({0, len});
  SplitPlan p = plan_splits(ranges, 8, 64, slots, 2, 128);
  CHECK(p.keys_per_split == 161 * 64);
  CHECK(p.num_splits == 4);  // the grid's splits: sequence 0 needs 4; the others' extra splits are empty blocks
  CHECK(nonempty_blocks(ranges, 8, p.keys_per_split) == 128);
  CHECK(nonempty_blocks(ranges, 8, 160 * 64) == 136);
  CHECK(nonempty_blocks(ranges, 8, 256 * 64) == 96);  // the T_kv rule's 2 splits: 12 pieces
  // Equal lengths give the plain rule's plan, whatever the overload.
  const SplitPlan uniform = plan_splits(std::vector<KeyRange>(8, KeyRange{0, 32768}), 8, 64, slots, 2, 128);
  CHECK(uniform.num_splits == plan_splits(64, 32768, 64, slots, 2, 128).num_splits);
  CHECK(uniform.keys_per_split == plan_splits(64, 32768, 64, slots, 2, 128).keys_per_split);
  // A window's range counts only the splits it overlaps: keys [1000, 1100) by 64 = splits 15..17.
  CHECK(nonempty_blocks({KeyRange{1000, 1100}}, 1, 64) == 3);
  CHECK(nonempty_blocks({KeyRange{5, 5}, KeyRange{0, 1}}, 4, 64) == 4);  // an empty range: no block
}

// Softmax attention of one query over keys [begin, end) with scores s and values v (D = 3), as a
// partial state: its LSE (natural log, -inf when empty) and its normalised O (0 when empty).
struct State {
  float lse;
  float o[3];
};
static State partial(const std::vector<double>& s, const std::vector<double>& v, int begin, int end) {
  State st{-INFINITY, {0, 0, 0}};
  if (begin >= end) return st;
  double m = -INFINITY, l = 0, o[3] = {0, 0, 0};
  for (int j = begin; j < end; ++j) m = std::max(m, s[size_t(j)]);
  for (int j = begin; j < end; ++j) {
    const double p = std::exp(s[size_t(j)] - m);
    l += p;
    for (int c = 0; c < 3; ++c) o[c] += p * v[size_t(3 * j + c)];
  }
  st.lse = float(m + std::log(l));
  for (int c = 0; c < 3; ++c) st.o[c] = float(o[c] / l);
  return st;
}

TEST_CASE("merging partial states equals attention over the union, empty parts included", "[kv_cache]") {
  const int n = 50;
  std::vector<double> s(n), v(3 * n);
  for (int j = 0; j < n; ++j) {
    s[size_t(j)] = 3.0 * std::sin(1.7 * j) + (j == 31 ? 40.0 : 0.0);  // one dominant key
    for (int c = 0; c < 3; ++c) v[size_t(3 * j + c)] = std::cos(0.3 * j + c) + 0.5;
  }
  const State full = partial(s, v, 0, n);
  // Splits of 16 keys over 7 splits: splits 4..6 are past the end (empty: LSE -inf).
  for (int kps : {8, 16, 50, 64}) {
    std::vector<State> parts;
    for (int sp = 0; sp < 7; ++sp) {
      const KeyRange r = split_keys({0, n}, sp, kps);
      parts.push_back(partial(s, v, r.begin, r.end));
    }
    std::vector<float> lse;
    for (auto& p : parts) lse.push_back(p.lse);
    const float all = merged_lse(lse.data(), int(lse.size()));
    REQUIRE(all == Approx(full.lse).epsilon(1e-6));
    for (int c = 0; c < 3; ++c) {
      float o = 0;
      for (auto& p : parts) o += partial_weight(p.lse, all) * p.o[c];
      REQUIRE(std::isfinite(o));
      REQUIRE(o == Approx(full.o[c]).epsilon(1e-5));
    }
  }
}

TEST_CASE("LseFold: the merge as an online softmax over groups of parts equals the one-pass merge", "[kv_cache]") {
  // 37 parts (3 groups of 16: the last one short), some empty, LSEs spread over a wide range.
  std::vector<float> lse, o;
  for (int s = 0; s < 37; ++s) {
    lse.push_back(s % 5 == 3 ? -INFINITY : 0.37f * float((s * 7) % 23) - 4.f);
    o.push_back(float(s) - 10.f);  // a 1-column normalised O per part
  }
  const float all = merged_lse(lse.data(), int(lse.size()));
  float want = 0.f;
  for (size_t s = 0; s < lse.size(); ++s) want += partial_weight(lse[s], all) * o[s];
  for (int group : {1, 4, 16, 37}) {
    LseFold merge;
    float acc = 0.f;
    for (int s0 = 0; s0 < 37; s0 += group) {
      const int n = std::min(group, 37 - s0);
      float w[37];
      const float alpha = merge.fold(lse.data() + s0, n, w);
      acc *= alpha;
      for (int k = 0; k < n; ++k) acc += w[k] * o[size_t(s0 + k)];
    }
    CHECK(merge.lse() == Approx(all).epsilon(1e-6));
    CHECK(acc * merge.inv_l() == Approx(want).epsilon(1e-5));
  }
  // Only empty parts (a fold of them, or nothing folded): LSE -inf, O 0, no NaN anywhere.
  LseFold empty;
  const float none[3] = {-INFINITY, -INFINITY, -INFINITY};
  float w[3];
  CHECK(empty.fold(none, 3, w) == 0.f);
  CHECK(w[0] == 0.f);
  CHECK(empty.lse() == -INFINITY);
  CHECK(empty.inv_l() == 0.f);
  // An empty first group, then a real part: the real part alone.
  const float one[1] = {2.5f};
  CHECK(empty.fold(one, 1, w) == 0.f);  // (the running O, still 0, is scaled by 0)
  CHECK(w[0] == 1.f);
  CHECK(empty.lse() == Approx(2.5f));
}

TEST_CASE("merging only empty states gives LSE -inf and weight 0, never NaN", "[kv_cache]") {
  const float lse[3] = {-INFINITY, -INFINITY, -INFINITY};
  const float all = merged_lse(lse, 3);
  CHECK(all == -INFINITY);
  CHECK(partial_weight(-INFINITY, all) == 0.f);
  CHECK(partial_weight(-INFINITY, 2.5f) == 0.f);
  CHECK(merged_lse(lse, 0) == -INFINITY);
  // Strided reads (the kernel reads one row of a [warp][row] array).
  const float grid[6] = {1.f, -INFINITY, -INFINITY, -INFINITY, 1.f, -INFINITY};  // [3 warps][2 rows]
  CHECK(merged_lse(grid, 3, 2) == Approx(1.0 + std::log(2.0)));
  CHECK(merged_lse(grid + 1, 3, 2) == -INFINITY);
  // Weights of non-empty parts sum to 1.
  const float some[4] = {0.5f, -INFINITY, 2.0f, -3.0f};
  const float a = merged_lse(some, 4);
  float sum = 0;
  for (float x : some) sum += partial_weight(x, a);
  CHECK(sum == Approx(1.0f));
}

// ---------------------------------------------------------------------------------------------
TEST_CASE("paged_slot follows the block table", "[kv_cache]") {
  // Two sequences, page 16, 3 table entries each: seq 0 -> blocks 5, 2, 7; seq 1 -> blocks 0, 3, -1.
  const int table[6] = {5, 2, 7, 0, 3, -1};
  CHECK(paged_slot(table, 3, 16, 0, 0) == 5 * 16);
  CHECK(paged_slot(table, 3, 16, 0, 15) == 5 * 16 + 15);
  CHECK(paged_slot(table, 3, 16, 0, 16) == 2 * 16);      // the next logical block is physical 2
  CHECK(paged_slot(table, 3, 16, 0, 40) == 7 * 16 + 8);
  CHECK(paged_slot(table, 3, 16, 1, 17) == 3 * 16 + 1);
  CHECK(paged_slot(table, 3, 32, 1, 33) == 3 * 32 + 1);  // same table, page 32
  CHECK(blocks_for(1, 16) == 1);
  CHECK(blocks_for(16, 16) == 1);
  CHECK(blocks_for(17, 16) == 2);
  // A slot is never shared: every key of every sequence maps to a distinct slot.
  std::set<int64_t> slots;
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < (b == 0 ? 48 : 32); ++j) REQUIRE(slots.insert(paged_slot(table, 3, 16, b, j)).second);
}

TEST_CASE("BlockAllocator: free list, allocate, release, reference counts", "[allocator]") {
  BlockAllocator a(4, 16);
  CHECK(a.free_blocks() == 4);
  CHECK(a.allocate() == 0);  // in order until shuffled
  CHECK(a.allocate() == 1);
  CHECK(a.allocate() == 2);
  CHECK(a.allocate() == 3);
  CHECK(a.allocate() == -1);  // full
  CHECK(a.used_blocks() == 4);
  a.release(2);
  CHECK(a.ref_count(2) == 0);
  CHECK(a.allocate() == 2);  // the freed block comes back first (LIFO)
  a.retain(1);               // shared by a second sequence
  CHECK(a.ref_count(1) == 2);
  a.release(1);
  CHECK(a.ref_count(1) == 1);
  CHECK(a.free_blocks() == 0);  // still in use
  a.release(1);
  CHECK(a.free_blocks() == 1);
}

TEST_CASE("BlockAllocator refuses misuse", "[allocator]") {
  CHECK_THROWS_AS(BlockAllocator(-1, 16), std::invalid_argument);
  CHECK_THROWS_AS(BlockAllocator(4, 0), std::invalid_argument);
  BlockAllocator a(2, 16);
  CHECK_THROWS_AS(a.release(0), std::logic_error);  // free already
  CHECK_THROWS_AS(a.retain(1), std::logic_error);   // nobody holds it
  CHECK_THROWS_AS(a.release(2), std::invalid_argument);
  CHECK_THROWS_AS(a.ref_count(-1), std::invalid_argument);
  a.allocate();
  CHECK_THROWS_AS(a.shuffle_free_list(3), std::logic_error);  // only on an unused pool
}

TEST_CASE("shuffled free list: a permutation, seeded", "[allocator]") {
  auto order = [](uint64_t seed) {
    BlockAllocator a(64, 16);
    a.shuffle_free_list(seed);
    std::vector<int> got;
    for (int b; (b = a.allocate()) >= 0;) got.push_back(b);
    return got;
  };
  std::vector<int> o1 = order(1), sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 64; ++i) REQUIRE(sorted[size_t(i)] == i);
  CHECK(o1 == order(1));
  CHECK(o1 != order(2));
  CHECK(!std::is_sorted(o1.begin(), o1.end()));
}

TEST_CASE("sequences: allocate on append, free on finish, share full prefix blocks", "[allocator]") {
  BlockAllocator a(10, 16);
  SequenceBlocks s;
  REQUIRE(append_tokens(a, s, 1));
  CHECK(s.blocks.size() == 1);
  REQUIRE(append_tokens(a, s, 15));  // 16 tokens: still one block
  CHECK(s.blocks.size() == 1);
  REQUIRE(append_tokens(a, s, 1));   // the 17th opens a second
  CHECK(s.blocks.size() == 2);
  CHECK(s.length == 17);

  // Prefix sharing: a 40-token prompt (blocks 16 + 16 + 8); a child sharing it takes the 2 full
  // blocks by reference and starts at 32 tokens; it recomputes the other 8 into a block of its own.
  SequenceBlocks prompt;
  REQUIRE(append_tokens(a, prompt, 40));
  CHECK(a.used_blocks() == 5);
  SequenceBlocks child = fork_prefix(a, prompt, 40);
  CHECK(child.length == 32);
  CHECK(child.blocks == std::vector<int>(prompt.blocks.begin(), prompt.blocks.begin() + 2));
  CHECK(a.ref_count(prompt.blocks[0]) == 2);
  CHECK(a.ref_count(prompt.blocks[2]) == 1);  // the partial block is not shared
  REQUIRE(append_tokens(a, child, 18));       // 50 tokens: 2 shared + 2 own blocks
  CHECK(child.blocks.size() == 4);
  CHECK(a.used_blocks() == 2 + 3 + 2);        // s, prompt, the child's own: 7 (no sharing: 9)
  free_sequence(a, prompt);                   // the shared blocks stay with the child
  CHECK(a.used_blocks() == 2 + 2 + 2);
  CHECK(a.ref_count(child.blocks[0]) == 1);
  free_sequence(a, child);
  free_sequence(a, s);
  CHECK(a.free_blocks() == 10);
  CHECK_THROWS_AS(fork_prefix(a, child, 1), std::invalid_argument);  // a prefix longer than the parent

  // The pool running out: the append fails and changes nothing.
  BlockAllocator small(2, 16);
  SequenceBlocks t;
  REQUIRE(append_tokens(small, t, 20));
  CHECK_FALSE(append_tokens(small, t, 13));  // 33 tokens need 3 blocks
  CHECK(t.length == 20);
  CHECK(t.blocks.size() == 2);
}

TEST_CASE("footprint: internal fragmentation, contiguous vs paged", "[allocator]") {
  // Lengths 1, 16, 17, 100 with blocks of 16 and max_seq_len 128:
  //   live 134 tokens; paged 1 + 1 + 2 + 7 = 11 blocks = 176 slots; contiguous 4 x 128 = 512 slots.
  const Footprint f = footprint({1, 16, 17, 100}, 16, 128);
  CHECK(f.live_tokens == 134);
  CHECK(f.paged_slots == 176);
  CHECK(f.contiguous_slots == 512);
  CHECK(f.paged_waste() == Approx(1 - 134.0 / 176));
  CHECK(f.contiguous_waste() == Approx(1 - 134.0 / 512));
  CHECK(footprint({}, 16, 128).paged_waste() == 0);
}

TEST_CASE("build_paged_cache: shuffled blocks covering every length, spare blocks free", "[allocator]") {
  const std::vector<int> lengths = {100, 1, 16, 17, 0, 64};
  const PagedCache c = build_paged_cache(lengths, 100, 16, 42);
  CHECK(c.table_stride == 7);
  const int used = 7 + 1 + 1 + 2 + 0 + 4;
  CHECK(c.used_blocks() == used);
  CHECK(c.num_blocks == used + std::max(1, used / 8));
  CHECK(check_block_tables(c).empty());
  std::set<int> blocks;
  std::vector<int> in_order;
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int i = 0; i < c.table_stride; ++i) {
      const int e = c.tables[b * size_t(c.table_stride) + size_t(i)];
      REQUIRE((i < blocks_for(lengths[b], 16)) == (e >= 0));  // exactly the blocks the length needs
      if (e >= 0) {
        REQUIRE(blocks.insert(e).second);  // no block twice
        REQUIRE(e < c.num_blocks);
        in_order.push_back(e);
      }
    }
  CHECK(!std::is_sorted(in_order.begin(), in_order.end()));  // physically scattered
  CHECK(build_paged_cache(lengths, 100, 16, 42).tables == c.tables);
  CHECK(build_paged_cache(lengths, 100, 16, 43).tables != c.tables);
}

TEST_CASE("paged_pool: every token at the slot its table gives, NaN where no sequence owns", "[allocator]") {
  const std::vector<int> lengths = {37, 5, 20};
  const int t_kv = 40, row = 3;
  const PagedCache c = build_paged_cache(lengths, t_kv, 16, 7);
  std::vector<float> x(size_t(3 * t_kv * row));
  for (size_t e = 0; e < x.size(); ++e) x[e] = float(e);  // token (b, j) holds (b·t_kv + j)·row + 0..2
  const std::vector<float> pool = paged_pool(c, x, t_kv, row);
  REQUIRE(pool.size() == size_t(c.num_blocks) * 16 * row);
  std::vector<bool> owned(pool.size() / row, false);
  for (int b = 0; b < 3; ++b)
    for (int j = 0; j < lengths[size_t(b)]; ++j) {
      const int64_t slot = paged_slot(c.tables.data(), c.table_stride, 16, b, j);
      owned[size_t(slot)] = true;
      for (int e = 0; e < row; ++e) CHECK(pool[size_t(slot * row + e)] == float((b * t_kv + j) * row + e));
    }
  for (size_t slot = 0; slot < owned.size(); ++slot)
    if (!owned[slot]) CHECK(std::isnan(pool[slot * row]));
}

TEST_CASE("check_block_tables catches out-of-range entries and short tables", "[allocator]") {
  PagedCache c = build_paged_cache({40, 20}, 48, 16, 1);  // 3 + 2 blocks, stride 3
  REQUIRE(check_block_tables(c).empty());
  PagedCache oob = c;
  oob.tables[1] = c.num_blocks;  // sequence 0, block 1
  CHECK(check_block_tables(oob) ==
        "block table entry [sequence 0, block 1] = " + std::to_string(c.num_blocks) + " is outside the pool of " +
            std::to_string(c.num_blocks) + " blocks");
  oob.tables[1] = -5;
  CHECK(check_block_tables(oob).find("outside the pool") != std::string::npos);
  PagedCache short_table = c;
  short_table.tables[3 + 1] = -1;  // sequence 1 (20 keys) needs 2 blocks
  CHECK(check_block_tables(short_table) ==
        "sequence 1 has 20 keys, which need 2 blocks of 16, but its block table holds only 1");
  PagedCache too_long = c;
  too_long.lengths[1] = 49;  // needs 4 blocks, the table has 3 entries
  CHECK(check_block_tables(too_long).find("has only 3 entries") != std::string::npos);
  PagedCache wrong_size = c;
  wrong_size.tables.pop_back();
  CHECK(!check_block_tables(wrong_size).empty());
}

TEST_CASE("simulate_serving: numbers of a scenario worked out by hand", "[allocator]") {
  // 4 requests, 2 at a time, prompt 10, output 6, blocks of 16, max_seq_len 32, no sharing.
  // Each pair runs 6 steps with lengths 11..16 (one block each): 12 steps in all.
  ServingConfig c;
  c.requests = 4;
  c.max_batch = 2;
  c.prompt_min = c.prompt_max = 10;
  c.output_min = c.output_max = 6;
  c.block_size = 16;
  c.max_seq_len = 32;
  c.shared_prefix = 0;
  ServingReport r = simulate_serving(c);
  CHECK(r.steps == 12);
  CHECK(r.live_tokens == Approx(2 * 13.5));   // mean of 11..16, two sequences
  CHECK(r.paged_slots == Approx(32));         // one block each
  CHECK(r.shared_slots == Approx(32));        // nothing shared
  CHECK(r.contiguous_slots == Approx(64));    // 2 x 32
  CHECK(r.contiguous_waste() == Approx(1 - 27.0 / 64));
  CHECK(r.paged_waste() == Approx(1 - 27.0 / 32));
  CHECK(r.sharing_saving() == Approx(0));
  CHECK(r.peak_live_tokens == Approx(22));  // the first step at which 2 blocks are held: lengths 11

  // The same with a 16-token system prompt on every request (one full block, shared): prompts
  // are 26 tokens, lengths 27..32 = 2 blocks each, but block 0 is the one cached prefix block:
  // 1 + 2 x 1 blocks in use instead of 2 x 2.
  c.shared_prefix = 16;
  c.share_fraction = 1.0;
  r = simulate_serving(c);
  CHECK(r.steps == 12);
  CHECK(r.live_tokens == Approx(2 * 29.5));
  CHECK(r.paged_slots == Approx(64));
  CHECK(r.shared_slots == Approx(48));
  CHECK(r.sharing_saving() == Approx(0.25));
  CHECK(r.blocks_in_pool == 2 * 2 + 1);
}

TEST_CASE("simulate_serving refuses impossible configurations", "[allocator]") {
  ServingConfig c;
  c.max_seq_len = 100;  // the default lengths need 512 + 1024 + 1024
  CHECK_THROWS_AS(simulate_serving(c), std::invalid_argument);
  c = ServingConfig{};
  c.block_size = 0;
  CHECK_THROWS_AS(simulate_serving(c), std::invalid_argument);
  c = ServingConfig{};
  c.prompt_min = 50;
  c.prompt_max = 10;
  CHECK_THROWS_AS(simulate_serving(c), std::invalid_argument);
  c = ServingConfig{};
  c.share_fraction = 1.5;
  CHECK_THROWS_AS(simulate_serving(c), std::invalid_argument);
}

TEST_CASE("simulate_serving: paging wastes little, contiguous a lot, sharing saves", "[allocator]") {
  const ServingReport r = simulate_serving(ServingConfig{});
  CHECK(r.contiguous_waste() > 0.5);  // max_seq_len 4096 against ~1000-token sequences
  CHECK(r.paged_waste() < 0.02);      // under half a block per sequence
  CHECK(r.sharing_saving() > 0.1);
  CHECK(r.shared_slots < r.paged_slots);
  CHECK(r.paged_slots >= r.live_tokens);
  ServingConfig big = ServingConfig{};
  big.block_size = 256;
  CHECK(simulate_serving(big).paged_waste() > r.paged_waste());  // bigger blocks, more waste
}
