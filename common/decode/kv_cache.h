// Index math of decode over a KV cache (sections 05 and 06), written once and used by the GPU
// kernels, the CPU models and the unit tests alike (see attention_math.h for the conventions).
//
//   split-KV ("flash-decoding"): the keys of one query row are cut into splits of a fixed number
//   of keys; each split produces a partial state (its LSE and its normalised O), and the states
//   are merged with the log-sum-exp rule. A split may see no key at all (a sequence shorter than
//   where the split starts): its LSE is -inf and it must weigh exactly 0 in the merge, never NaN.
//
//   paged KV cache (vLLM's PagedAttention): the cache is a pool of fixed-size physical blocks of
//   `page_size` tokens; sequence b's logical key j lives in physical block
//   block_table[b][j / page_size], at slot j % page_size of that block.
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

// The LSE of the union of n partial states (natural log), read at lse[0], lse[stride], ...:
// the largest first (as the softmax subtracts its max), then one sum of exp and one log, where
// folding lse_merge over the parts would chain n exp-log1p steps (a GPU thread waits out each).
// -inf when every part is empty; empty parts (-inf) weigh exp(-inf) = 0, never -inf - -inf.
LAB_HD float merged_lse(const float* lse, int n, int stride = 1) {
  float hi = -INFINITY;
  for (int s = 0; s < n; ++s) hi = fmaxf(hi, lse[s * stride]);
  if (hi == -INFINITY) return -INFINITY;
  float sum = 0.f;
  for (int s = 0; s < n; ++s) sum += expf(lse[s * stride] - hi);
  return hi + logf(sum);
}

// How much a partial state with LSE `lse_part` weighs in the merged O, whose LSE is `lse_all`:
// exp(lse_part - lse_all), and exactly 0 for an empty part (even when every part is empty).
// The merged O is sum over parts of partial_weight(lse_s, lse_all) · O_s (O_s normalised).
LAB_HD float partial_weight(float lse_part, float lse_all) {
  return lse_part == -INFINITY ? 0.f : expf(lse_part - lse_all);
}

// The merge of partial states as an online softmax over the parts (the same rescaling the
// kernel does over key tiles): fold in a group of parts at a time, and the merged state is
// LSE = lse(), O = inv_l() · Σ_s w_s · O_s with the running O rescaled by fold's return value.
// Within a group the parts are independent (one max, then n exps: no chain from part to part),
// so a GPU thread can load a group's LSEs and partial O's together and fold them in one pass.
// Empty parts (-inf) weigh 0; a fold of only empty parts so far leaves the state empty.
struct LseFold {
  float m = -INFINITY;  // the largest LSE folded in so far
  float l = 0.f;        // Σ exp(LSE_s - m) so far
  // Folds in lse[0..n): sets w[s] = exp(lse[s] - m') and returns exp(m - m'), the factor the
  // running (unnormalised) O must be multiplied by before the new w[s] · O_s are added.
  LAB_HD float fold(const float* lse, int n, float* w) {
    float m_new = m;
    for (int s = 0; s < n; ++s) m_new = fmaxf(m_new, lse[s]);
    const float base = m_new == -INFINITY ? 0.f : m_new;  // all empty so far: never -inf - -inf
    const float alpha = expf(m - base);
    l *= alpha;
    for (int s = 0; s < n; ++s) {
      w[s] = expf(lse[s] - base);
      l += w[s];
    }
    m = m_new;
    return alpha;
  }
  LAB_HD float lse() const { return l > 0.f ? m + logf(l) : -INFINITY; }
  LAB_HD float inv_l() const { return l > 0.f ? 1.f / l : 0.f; }
};

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

// ---------------------------------------------------------------------------------------------
// Paged KV cache. Pool layout: K and V each [num_blocks, page_size, H_kv, D]; a block holds
// page_size consecutive tokens of one sequence, every K/V head of them (as vLLM's block holds
// one layer's K or V for its tokens). block_table is [B, table_stride] int, -1 = no block.

LAB_HD int blocks_for(int keys, int page_size) { return ceil_div(keys, page_size); }

// The pool slot (physical block · page_size + offset) holding sequence `seq`'s key `key`.
// The caller guarantees key < the sequence's length and a valid table (check_block_tables).
LAB_HD int64_t paged_slot(const int* block_table, int table_stride, int page_size, int seq, int key) {
  const int block = block_table[int64_t(seq) * table_stride + key / page_size];
  return int64_t(block) * page_size + key % page_size;
}

}  // namespace lab
