// Decode over a KV cache (sections 05, 06), the given parts: the split ranges and the split
// heuristic, the paged slot the host fills a pool by, the block allocator's free list and
// reference counts, the block-table check. (The exercises' parts, the split merge and the
// allocator's sequence operations, are tested against the section sources: test_decode_exercises.cu.)
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
      REQUIRE((i < ceil_div(lengths[b], 16)) == (e >= 0));  // exactly the blocks the length needs
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
