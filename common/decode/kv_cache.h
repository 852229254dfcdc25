// Index math of decode over a KV cache (sections 05 and 06), written once and used by the GPU
// kernels, the CPU models and the unit tests alike (see attention_math.h for the conventions).
//
//   split-KV ("flash-decoding"): the keys of one query row are cut into splits of a fixed number
//   of keys; each split produces a partial state (its LSE and its normalised O), and the states
//   are merged with the log-sum-exp rule (the merge is section 05's exercise). A split may see no
//   key at all (a sequence shorter than where the split starts): it is an empty block.
//   This file says which keys each split covers and how many splits a launch uses.
#pragma once
#include <cstdint>
#include <vector>

#include "toolbox/attention_math.h"

namespace lab {

// ---------------------------------------------------------------------------------------------
// Split-KV.

// Keys of `visible` that split `split` covers: the absolute keys
// [split·keys_per_split, (split+1)·keys_per_split) ∩ visible. Empty (begin == end) when the split
// starts past the sequence's last visible key or ends before its first.
LAB_HD KeyRange split_keys(KeyRange visible, int split, int keys_per_split) {
  const int lo = imax(visible.begin, split * keys_per_split);
  const int hi = imin(visible.end, (split + 1) * keys_per_split);
  return {lo, imax(lo, hi)};
}

// How a launch splits the keys: `num_splits` blocks per query row, each covering
// `keys_per_split` consecutive keys (a multiple of the kernel's key tile).
struct SplitPlan {
  int num_splits = 1;
  int keys_per_split = 0;
};

// Blocks a launch has when each of `ranges` (the visible keys of one query row of one sequence)
// is cut into splits of `keys_per_split` keys and `blocks_per_range` blocks (K/V heads x head
// chunks) serve each piece: a split that sees none of a range's keys is an empty block, not counted.
inline int64_t nonempty_blocks(const std::vector<KeyRange>& ranges, int blocks_per_range, int keys_per_split) {
  int64_t pieces = 0;
  for (const KeyRange& r : ranges)
    if (!r.empty()) pieces += ceil_div(r.end, keys_per_split) - r.begin / keys_per_split;
  return pieces * blocks_per_range;
}

// How many splits. `ranges` = the visible keys of every (sequence, query row), `blocks_per_range`
// = blocks each has without splitting, `slots` = SMs. Split so that the launch's non-empty blocks
// make one wave of at most one block per SM: the shortest splits (hence the shortest longest
// block) whose non-empty blocks fit in `slots`, with at least `min_tiles` key tiles each and at
// most `max_splits` splits. A launch that already fills the SMs is not split. Measured on the H200
// (`scripts/lab bench 05 --tag split-count`, kv_len 32k and 128k, B = 1 and 8): one block per SM
// beat two or more per SM every time, by up to 1.2x at B = 1 (FlashAttention's rule, the fewest
// splits filling 85% of a wave of *resident* blocks, gave 29 splits at B = 1 and ran slower), so
// the extra blocks buy nothing once every SM streams and each adds a partial state to merge.
// The count is of the keys each sequence really has: in a batch of mixed lengths the splits are
// sized so that the long sequences get more of them (the short ones' later splits are empty
// blocks that exit at once), which shortens the longest block, the one the launch waits for.
// With every length equal it is the plain rule: splits = slots / ranges, in whole tiles.
// forced > 0 overrides the choice (clamped to the tiles and to max_splits).
inline SplitPlan plan_splits(const std::vector<KeyRange>& ranges, int blocks_per_range, int tile, int slots,
                             int min_tiles, int max_splits, int forced = 0) {
  int last_key = 1;
  for (const KeyRange& r : ranges) last_key = imax(last_key, r.end);
  const int tiles = ceil_div(last_key, tile);
  int tiles_per_split = tiles;  // one split
  if (forced > 0) {
    tiles_per_split = ceil_div(tiles, imin(imin(forced, tiles), imax(max_splits, 1)));
  } else {
    const int most = imax(1, imin(max_splits, tiles / imax(min_tiles, 1)));
    for (int tps = ceil_div(tiles, most); tps < tiles; ++tps)  // (the count is not monotonic: try each)
      if (ceil_div(tiles, tps) <= most && nonempty_blocks(ranges, blocks_per_range, tps * tile) <= slots) {
        tiles_per_split = tps;
        break;
      }
  }
  // Whole tiles per split; rounding may leave fewer splits than asked for.
  return {ceil_div(tiles, tiles_per_split), tiles_per_split * tile};
}

}  // namespace lab
