// The decode forward shared by sections 05 (contiguous KV cache) and 06 (paged KV cache): one
// kernel, its launch plan, its launcher and its CPU model, written once. What each section teaches
// stays in its own file and reaches this code through a Hooks type (05's exercises; 06 carries
// the student's 05 answers over):
//   struct Hooks {
//     using Kv = decode::ContiguousKv;  // 06: its paged Kv, whose row_offset is its exercise
//     static LAB_HD int query_head_of(int kv_head, int r, int group);            // GQA mapping
//     static LAB_HD bool online_step(float tile_max, float& m, float& l, float& alpha, float& base);
//     static LAB_HD float split_lse(float m, float l);                            // a split's state
//     static LAB_HD float merged_lse(const float* lse, int n, int stride);        // the LSE merge
//     static LAB_HD float partial_weight(float lse_part, float lse_all);
//     struct LseFold { LAB_HD float fold(const float* lse, int n, float* w);     // the merge, online
//                      LAB_HD float lse() const; LAB_HD float inv_l() const; };
//   };
// A Kv (the cache layout) gives: members k, v; kAddressMayFail, kTableWindow (pages staged in
// shared memory; 0 = no block table), kStages (each warp set's ring depth, where the GPU's shared
// memory allows it); row_offset(b, j, kv_head, t_kv, h_kv, d), where K/V row (b, j, kv_head)
// starts; key_stride(h_kv), rows of D elements between consecutive keys of one page (or of the
// contiguous cache); and, where kTableWindow > 0, page_keys() (keys per page) and table_entries()
// (block-table entries per sequence).
// How the kernel works (GQA heads as the rows of an mma, two sets of 4 warps taking alternate tiles,
// each set with its own cp.async ring (2 stages for 05, 3 for 06) that each warp fills with its own
// keys, split-KV with the merge in the last block): 05_decode.cu's (labs/ or solutions/)
// header and ch12/05_decode.md. On a GPU that allows less shared memory per block than that needs,
// a launch takes a smaller configuration (Config, choose_config below): the same kernel with
// shallower rings or one warp set.
#pragma once
#include <cuda/atomic>

#include <algorithm>
#include <memory>

#include "decode/kv_cache.h"
#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"  // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers

namespace decode {
using namespace lab::sm80;

constexpr int WARP_KEYS = 16;                   // keys per warp per tile: the k of one O = P V mma
constexpr int GROUPS = 4;                       // 16-key groups per tile, one per warp of a set
constexpr int BLOCK_N = GROUPS * WARP_KEYS;     // 64 keys per tile
constexpr int ROWS = 16;                        // query heads per block: the m of mma.m16n8k16
constexpr int MIN_TILES_PER_SPLIT = 2;
constexpr int MAX_SPLITS = 128;
constexpr int MERGE_GROUP = 16;  // splits the last block folds in at a time (their loads in flight together)
constexpr int MAX_TABLE_WINDOW = 1024;  // pages a paged Kv stages in shared memory (their first rows)
constexpr int WINDOW_ENTRY_BYTES = sizeof(int64_t);  // one page's first-row offset
using lab::kLog2e;
using lab::kLn2;  // (the sections' split_lse)

// A block's configuration: its warp sets of 4 warps (set s takes tiles s, s + sets, ...) and the
// depth of each set's K/V ring (its tiles i+1 .. i+stages-1 load while its tile i computes). The
// layout's own is two sets with Kv::kStages-deep rings: 2 stages for 05's contiguous cache, 3 for
// 06's paged one (see the kernel). Two sets put two warps on each scheduler, so one warp's chain of
// dependent instructions per tile hides behind the other's work.
struct Config {
  int stages, sets;
  constexpr bool operator==(const Config& o) const { return stages == o.stages && sets == o.sets; }
  constexpr bool operator!=(const Config& o) const { return !(*this == o); }
};
template <class Kv>
constexpr Config layout_config() { return {Kv::kStages, 2}; }

// Shared memory of a block: the rings [sets][stages][K, V][BLOCK_N][D] (32 KB a stage at D = 128,
// 16 KB at D = 64), then a paged Kv's window of table_window pages (their first rows).
constexpr int smem_bytes(Config c, int head_dim, int table_window) {
  return c.sets * c.stages * 2 * BLOCK_N * head_dim * 2 + WINDOW_ENTRY_BYTES * table_window;
}

template <int HEAD_DIM, int STAGES, int SETS>
struct Tiles {
  static constexpr int NUM_WARPS = SETS * GROUPS;  // two sets: two warps per scheduler
  static constexpr int THREADS = NUM_WARPS * 32;
  static constexpr int CHUNKS = HEAD_DIM / 8;     // 16-byte chunks per row of K or V
  static constexpr int D_STEPS = HEAD_DIM / 16;   // k-steps of S = Q Kᵀ
  static constexpr int O_BLOCKS = HEAD_DIM / 8;   // n-blocks (8 columns) of O
  static constexpr int TILE_BYTES = BLOCK_N * HEAD_DIM * 2;
  static constexpr int SMEM_BYTES = smem_bytes({STAGES, SETS}, HEAD_DIM, 0);  // the rings
  static constexpr int ROW_STEP = 32 / CHUNKS;                // rows one pass of a warp's cp.async covers
  static constexpr int LOADS = WARP_KEYS / ROW_STEP;          // rows per lane per tile (K and V each)
  // The end-of-block merge of the warps' states reuses the rings: O [warp][row][D + 4] fp32
  // (4 floats of padding: rows start 4 banks apart), then LSE and weights [warp][row], LSE [row],
  // and the split ticket's verdict.
  static constexpr int O_STRIDE = HEAD_DIM + 4;
  static constexpr int MERGE_BYTES = (NUM_WARPS * ROWS * O_STRIDE + 2 * NUM_WARPS * ROWS + ROWS + 1) * 4;
  static_assert(WARP_KEYS % ROW_STEP == 0, "whole passes");
  static_assert(MERGE_BYTES <= SMEM_BYTES, "the warp merge fits in the ring");
};

// Shared memory an SM gives its blocks, on the architecture a device pass compiles for: the launch
// bounds must plan registers for blocks that can be resident there (Hopper's 3 blocks planned on an
// A100, which holds 2, cap the registers for a block that never comes: 05 at D = 64 spilled).
// A100 and Orin (sm_80, sm_87): 163 KB; the 100 KB SMs (sm_86, sm_89): 99 KB; Hopper, the host
// pass and the compute_90 PTX: 227 KB.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870)
constexpr int SM_SHARED_BYTES = 163 * 1024;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int SM_SHARED_BYTES = 99 * 1024;
#else
constexpr int SM_SHARED_BYTES = 227 * 1024;
#endif

// Blocks per SM the launch bounds plan registers for. The layout's own configuration: as many as
// the SM holds (Hopper: 2 stages a set: 3 at D = 64, 1 at D = 128; 3 stages and 06's window: 2, 1;
// an A100: 2 at D = 64). A smaller one is taken only where a block may have at most 99 KB (SMs of
// 100 KB: sm_86, sm_89, sm_120) or 163 KB (A100), and there the SM holds one such block.
template <class Kv>
constexpr int min_blocks(Config c, int head_dim) {
  const int fit = SM_SHARED_BYTES / smem_bytes(c, head_dim, Kv::kTableWindow);
  return c == layout_config<Kv>() && fit > 1 ? fit : 1;
}
static_assert((227 * 1024) / smem_bytes({2, 2}, 64, 0) == 3 && (227 * 1024) / smem_bytes({2, 2}, 128, 0) == 1 &&
                  (227 * 1024) / smem_bytes({3, 2}, 64, MAX_TABLE_WINDOW) == 2 &&
                  (227 * 1024) / smem_bytes({3, 2}, 128, MAX_TABLE_WINDOW) == 1,
              "blocks per SM as the comments say (sm_90's 227 KB)");

// The configuration a block takes where it may have `smem_limit` bytes of shared memory: the
// layout's own where it fits (Hopper: always; A100's 163 KB: all but 06 at D = 128), else 2-stage
// rings, else one warp set with 2-stage rings (fits 99 KB at D = 128: RTX 30/40, sm_120). Each
// step down keeps fewer tiles in flight, and one set leaves one warp per scheduler, so it is
// slower; the algorithm is the same (with one set, each warp takes its 16 keys of every tile and
// the block merges 4 warp states, not 8).
template <class Kv>
Config choose_config(int head_dim, int smem_limit) {
  for (const Config c : {layout_config<Kv>(), Config{2, 2}, Config{2, 1}})
    if (smem_bytes(c, head_dim, Kv::kTableWindow) <= smem_limit) return c;
  return {2, 1};  // not even that: its opt-in says "cannot run here"
}


// ---------------------------------------------------------------------------------------------
// Where K/V row (sequence b, key j, K/V head kv_head) starts, in elements: a contiguous cache
// [B, T_kv, H_kv, D] (05). Section 06 brings its paged counterpart (same members k, v first, then
// its block table), and the kernel calls row_offset only, so the two layouts share every other line.
struct ContiguousKv {
  const void* k;  // [B, T_kv, H_kv, D]
  const void* v;  // [B, T_kv, H_kv, D]
  static constexpr bool kAddressMayFail = false;  // (a paged stub returns -1: see the kernel)
  static constexpr int kTableWindow = 0;          // no block table (06's: see the kernel)
  static constexpr int kStages = 2;               // each set's ring (06's is deeper: see the kernel)
  LAB_HD int64_t row_offset(int b, int j, int kv_head, int t_kv, int h_kv, int head_dim) const {
    return ((int64_t(b) * t_kv + j) * h_kv + kv_head) * head_dim;
  }
  LAB_HD int key_stride(int h_kv) const { return h_kv; }  // rows of D elements from key j to j + 1: [.., T_kv, H_kv, D]
};

template <class Kv>
struct Params {
  const void* q;      // [B, T_q, H, D]
  Kv kv;              // K and V, and how a row is found in them
  void* o;            // [B, T_q, H, D]
  float* lse;         // [B, H, T_q]
  const int* kv_len;  // [B], or nullptr: every sequence has t_kv keys
  float* part_o;      // [B·T_q·H, splits, D] fp32, or nullptr: one split, write O and LSE directly
  float* part_lse;    // [B·T_q·H, splits]
  int* tickets;       // [blocks per split]: splits of a row group done so far (0 between forwards)
  int t_q, t_kv, h, h_kv, group, head_chunks;
  bool causal;
  int window;
  int num_splits, keys_per_split;
  float scale_log2;   // softmax scale · log2(e)
  bool gqa_bug;       // --bug gqa-index: the modulo mapping h_kv = h % H_kv instead of the section's
  bool stream_kv;     // a forward's K/V exceed the L2: the kernel that copies them L2::evict_first (see the loader)
};

// Row rr (0..group-1) of K/V head kv_head's group -> its query head: the section's mapping, or
// under --bug gqa-index the classic slip h_kv = h % H_kv (K/V head kv_head then serves heads
// kv_head, kv_head + H_kv, ...). Given code, so the bug runs on a stub as on the solution.
template <class Hooks>
LAB_HD int query_head(int kv_head, int rr, int group, int h_kv, bool gqa_bug) {
  return gqa_bug ? rr * h_kv + kv_head : Hooks::query_head_of(kv_head, rr, group);
}

// The section's query_head_of asked on the host for every (K/V head, row) of the problem, before
// anything runs (Section::precheck): a head past H would be written past the end of O, and a head
// outside kv_head's run would read another head's K and V. "" or the first wrong answer. The
// stub's -1 ("no head yet": the blocks skip their work) is left to the run to report.
template <class Hooks>
std::string gqa_mapping_error(const lab::Problem& pr, const lab::Options& opt) {
  if (opt.bug == "gqa-index") return "";  // the planted slip replaces the hook (given code, in range)
  const int group = pr.h / pr.h_kv;
  std::vector<int> row_of(size_t(pr.h), -1);  // query head -> the row that claimed it
  for (int kv_head = 0; kv_head < pr.h_kv; ++kv_head)
    for (int r = 0; r < group; ++r) {
      const int q = Hooks::query_head_of(kv_head, r, group);
      if (q < 0) continue;
      const std::string asked = "EXERCISE gqa: query_head_of(kv_head=" + std::to_string(kv_head) + ", r=" +
                                std::to_string(r) + ", group=" + std::to_string(group) + ") = " + std::to_string(q);
      if (q >= pr.h)
        return asked + ", not a query head (H = " + std::to_string(pr.h) + "): the run would write past the end of O";
      if (const int owner = lab::kv_head_of(q, pr.h, pr.h_kv); owner != kv_head)
        return asked + ", but query head " + std::to_string(q) + " reads K/V head " + std::to_string(owner) +
               " (each K/V head serves a contiguous run of " + std::to_string(group) + " query heads)";
      if (row_of[size_t(q)] >= 0)
        return asked + ", the head row r=" + std::to_string(row_of[size_t(q)]) + " already has";
      row_of[size_t(q)] = r;
    }
  return "";
}

// Row r (0..15) of a block's chunk of heads -> its query head, or -1 (padding row, or a stub).
template <class Hooks, class P>
__device__ __forceinline__ int head_of_row(const P& p, int kv_head, int chunk, int r) {
  const int rr = chunk * ROWS + r;
  return rr < p.group ? query_head<Hooks>(kv_head, rr, p.group, p.h_kv, p.gqa_bug) : -1;
}

// ---------------------------------------------------------------------------------------------
// One block = one query row i of sequence b, one K/V head, 16 of its query heads, one split.
// grid.x = ((b·T_q + i)·H_kv + kv_head)·head_chunks + chunk, grid.y = split.
template <class Hooks, int HEAD_DIM, class T, int STAGES, int SETS, bool STREAM_KV>
__global__ void __launch_bounds__(SETS * GROUPS * 32, (min_blocks<typename Hooks::Kv>({STAGES, SETS}, HEAD_DIM)))
    decode_kernel(const Params<typename Hooks::Kv> p) {
  using TL = Tiles<HEAD_DIM, STAGES, SETS>;
  constexpr int NUM_WARPS = TL::NUM_WARPS, THREADS = TL::THREADS;
  extern __shared__ __align__(128) uint8_t smem[];
  int idx = blockIdx.x;
  const int chunk = idx % p.head_chunks;
  idx /= p.head_chunks;
  const int kv_head = idx % p.h_kv;
  idx /= p.h_kv;
  const int i = idx % p.t_q, b = idx / p.t_q;
  const int split = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = warp % GROUPS, set = warp / GROUPS;  // the warp's 16 keys of a tile, and its tiles
  const int g = lane / 4, t4 = lane % 4;  // fragment row and column pair

  if (head_of_row<Hooks>(p, kv_head, chunk, 0) < 0) return;  // serves no head (the gqa stub): nothing to do

  // 06, the paged cache: a row's address needs its block-table entry, and a copy cannot be issued
  // before that read returns. Read from global memory, that is a round trip per tile on the issuing
  // warp's critical path, and with one or two blocks of 4 warps per SM little else hides it. So the
  // block stages what it needs, a window of kTableWindow pages at a time, in shared memory: for each
  // page, where its first row of this block's K/V head starts (the section's row_offset, called
  // once per page), so the tile loader's address of a 16-key group is one shared-memory read and
  // one multiply-add, not a table read and the section's division and modulo per row. With the
  // short reads, one more tile in flight pays where it does not for 05: each tile's 64 keys are 4
  // pages scattered over the pool (06 uses a 3-stage ring a set, 05 a 2-stage one).
  using Kv = typename Hooks::Kv;
  constexpr bool kStaged = Kv::kTableWindow > 0;
  static_assert(Kv::kTableWindow <= MAX_TABLE_WINDOW, "the window fits the shared memory planned for it");
  int64_t* page_window = reinterpret_cast<int64_t*>(smem + TL::SMEM_BYTES);  // [page]: its first row's offset
  int window_key = 0, window_end = 0;  // paged: the keys [window_key, window_end) the window maps
  // Staged from the split's first key, which does not depend on the sequence's length: the table
  // read is in flight together with kv_len's, and the first copies wait one round trip, as 05's do
  // (staged after the length was known, they waited two; three with the stub's check, asked of
  // global memory before the staging). Entries up to the split's last key (a
  // whole window at most): a short split reads a few, not a window's worth.
  const int split_end = (split + 1) * p.keys_per_split;
  auto stage_table = [&](int key) {  // the window from key's block on; every thread, between barriers
    if constexpr (kStaged) {
      const int page = p.kv.page_keys();
      const int first = key / page, last = lab::imin(p.kv.table_entries(), lab::ceil_div(split_end, page));
      const int n = lab::imax(0, lab::imin(Kv::kTableWindow, last - first));
      for (int e = tid; e < n; e += THREADS)
        page_window[e] = p.kv.row_offset(b, (first + e) * page, kv_head, p.t_kv, p.h_kv, HEAD_DIM);
      window_key = first * page;
      window_end = window_key + n * page;
    }
  };
  const int keys = p.kv_len ? p.kv_len[b] : p.t_kv;  // (issued before the table read: both in flight)
  stage_table(split * p.keys_per_split);             // (05: nothing)
  const lab::KeyRange visible = lab::visible_keys(i, p.t_q, keys, p.causal, p.window);
  const lab::KeyRange range = lab::split_keys(visible, split, p.keys_per_split);

  // Q rows g and g+8 as A fragments for every 16-column k-step; padding rows are zero.
  const T* q = static_cast<const T*>(p.q);
  const int head_lo = head_of_row<Hooks>(p, kv_head, chunk, g), head_hi = head_of_row<Hooks>(p, kv_head, chunk, g + 8);
  const T* q_lo = q + ((int64_t(b) * p.t_q + i) * p.h + (head_lo < 0 ? 0 : head_lo)) * HEAD_DIM;
  const T* q_hi = q + ((int64_t(b) * p.t_q + i) * p.h + (head_hi < 0 ? 0 : head_hi)) * HEAD_DIM;
  uint32_t q_frag[TL::D_STEPS][4];
#pragma unroll
  for (int ks = 0; ks < TL::D_STEPS; ++ks) {
    const int c = ks * 16 + 2 * t4;
    q_frag[ks][0] = head_lo < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q_lo + c);
    q_frag[ks][1] = head_hi < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q_hi + c);
    q_frag[ks][2] = head_lo < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q_lo + c + 8);
    q_frag[ks][3] = head_hi < 0 ? 0u : *reinterpret_cast<const uint32_t*>(q_hi + c + 8);
  }

  // K/V tile loader. Each warp copies the 16 keys of every tile that it computes on (rows
  // 16·warp .. 16·warp + 15 of the tile), so a warp waits for its own rows only and the key loop
  // needs no block barrier: lane copies chunk lane % CHUNKS of rows lane / CHUNKS + ROW_STEP·n.
  // (A block-wide copy of the whole tile would need a __syncthreads per tile, and every warp would
  // wait for the slowest warp's rows: at short lengths, where a step is a few tiles, that barrier
  // costs a few percent.)
  const T* k = static_cast<const T*>(p.kv.k);
  const T* v = static_cast<const T*>(p.kv.v);
  const int first_tile = range.begin / BLOCK_N;
  const int n_tiles = range.empty() ? 0 : lab::ceil_div(range.end, BLOCK_N) - first_tile;
  const int ld_chunk = lane % TL::CHUNKS, ld_row = group * WARP_KEYS + lane / TL::CHUNKS;

  auto in_window = [&](int tile) {  // does the window hold the blocks of tile `tile`'s keys? (no division: once a tile)
    return !kStaged || lab::imin(range.end, (first_tile + tile + 1) * BLOCK_N) <= window_end;
  };
  // Where key j's K/V row starts, in elements. row_offset: the section's own answer (05: arithmetic;
  // 06: the block table in global memory), used by the groups at the ends of the range, row by row,
  // so that every part of 06's exercise (j / page, j % page) is exercised. fast_row_offset: the
  // same, for the first key of a 16-key group inside the range; 06 reads it from the window, as
  // its page's first row plus j's place in the page (a page's rows are H_kv·D apart).
  auto row_offset = [&](int j) { return p.kv.row_offset(b, j, kv_head, p.t_kv, p.h_kv, HEAD_DIM); };
  auto page_first_row = [&](int j) -> int64_t {  // (staged: window_key is a page start)
    if constexpr (kStaged) return page_window[unsigned(j - window_key) / unsigned(p.kv.page_keys())];
    else return row_offset(j);  // (not called)
  };
  auto fast_row_offset = [&](int j) -> int64_t {
    if constexpr (kStaged)
      return page_first_row(j) + int64_t(unsigned(j - window_key) % unsigned(p.kv.page_keys())) * p.kv.key_stride(p.h_kv) * HEAD_DIM;
    else
      return row_offset(j);
  };
  // A warp's 16 keys are an aligned group, and a group lies in one page (page sizes are multiples
  // of 16): in every layout, row r of a group is r·key_stride elements past the group's first row
  // (H_kv·D in [.., H_kv, D] layouts, D in 06's [block, H_kv, page, D] one). So the warp finds one
  // address a tile (for 06 one shared-memory read, the same for every lane) and each lane adds its
  // constant offsets: with two warps a scheduler little hides an instruction, so the time grows
  // with the instruction count, and a per-row address costs 06's loader about 15% more
  // instructions than 05's.
  int64_t in_group[TL::LOADS];  // bytes from the group's first row to the lane's n-th row, and its chunk
  uint32_t to[TL::LOADS];       // where that row's chunk goes in a stage (swizzled)
#pragma unroll
  for (int n = 0; n < TL::LOADS; ++n) {
    const int r = ld_row + n * TL::ROW_STEP;
    in_group[n] = (int64_t(r - group * WARP_KEYS) * p.kv.key_stride(p.h_kv) * HEAD_DIM + ld_chunk * 8) * int64_t(sizeof(T));
    to[n] = swizzle<TL::CHUNKS>(r, ld_chunk);
  }
  const int64_t v_minus_k = int64_t(reinterpret_cast<uintptr_t>(v) - reinterpret_cast<uintptr_t>(k));  // bytes from a row's K to its V
  uint8_t* ring = smem + set * STAGES * 2 * TL::TILE_BYTES;  // the warp's set's ring
  // K/V are read once a forward. Where they exceed the L2 (STREAM_KV, chosen on the host) they
  // cannot be there for the next one either, so they are copied evict_first and leave the L2 to what
  // is read again (Q, the block tables, the split partials): worth a few percent to 06 at long
  // lengths. Where they fit (B = 8, 1024 keys: 33.5 MB in a 50 MB L2), the next forward finds
  // them in the L2, and evict_first would throw that away (06 ran about 20% slower with it there;
  // even an evict_normal hint cost 5%), so that kernel copies without a hint.
  [[maybe_unused]] const uint64_t kv_policy = STREAM_KV ? l2_evict_first_policy() : 0;
  auto copy_kv = [&](uint32_t dst, const void* src, bool valid) {
    if constexpr (STREAM_KV) cp_async_16(dst, src, valid, kv_policy);
    else cp_async_16(dst, src, valid);
  };
  auto load_tile = [&](int t, int stage) {
    const uint32_t k_dst = smem_addr(ring + stage * 2 * TL::TILE_BYTES);
    const uint32_t v_dst = k_dst + TL::TILE_BYTES;
    const int key0 = (first_tile + t) * BLOCK_N, group_key = key0 + group * WARP_KEYS;  // the tile's first key, the warp's
    if (group_key >= range.begin && group_key + WARP_KEYS <= range.end) {  // the whole group in the range (the same in every lane)
      const char* group = reinterpret_cast<const char*>(k + fast_row_offset(group_key));
#pragma unroll
      for (int n = 0; n < TL::LOADS; ++n) {
        copy_kv(k_dst + to[n], group + in_group[n], true);
        copy_kv(v_dst + to[n], group + in_group[n] + v_minus_k, true);
      }
      return;
    }
    // A group at an end of the range (a sequence's partial last tile, a sliding window's first):
    // each row's own address; a row outside the range gets its nearest key's (a table entry that
    // exists) and copies nothing. Every address first, then the copies: with no copy (asm with a
    // memory clobber) between them, the table reads overlap.
    int64_t off[TL::LOADS];
#pragma unroll
    for (int n = 0; n < TL::LOADS; ++n) {
      const int j = key0 + ld_row + n * TL::ROW_STEP;
      off[n] = row_offset(lab::imin(lab::imax(j, range.begin), range.end - 1)) + ld_chunk * 8;
    }
#pragma unroll
    for (int n = 0; n < TL::LOADS; ++n) {
      const bool valid = range.contains(key0 + ld_row + n * TL::ROW_STEP);
      copy_kv(k_dst + to[n], k + off[n], valid);
      copy_kv(v_dst + to[n], v + off[n], valid);
    }
  };

  // Per warp: the running state of rows g (index 0) and g+8 (index 1) over this warp's keys.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o_acc[TL::O_BLOCKS][4];
#pragma unroll
  for (int nb = 0; nb < TL::O_BLOCKS; ++nb) o_acc[nb][0] = o_acc[nb][1] = o_acc[nb][2] = o_acc[nb][3] = 0.f;

  // ldmatrix lane roles: matrix mi = lane / 8, its row lane % 8.
  const int mi = lane / 8, mr = lane % 8;
  const int k_row = group * WARP_KEYS + (mi >> 1) * 8 + mr, k_chunk = mi & 1;  // K: (keys 0-7 | 8-15) x (d lo | hi)
  const int v_row = group * WARP_KEYS + (mi & 1) * 8 + mr, v_chunk = mi >> 1;  // V: (keys lo | hi) x (d 0-7 | 8-15)

  if (kStaged) {
    __syncthreads();  // the window is in shared memory
    if (n_tiles > 0 && !in_window(lab::imin(SETS * (STAGES - 1) - 1, n_tiles - 1))) {  // the keys start past it (a sliding
      stage_table(range.begin);                                            // window's): a window from there
      __syncthreads();  // the new window is in shared memory (no thread read the first one)
    }
  }
  // 06's address stub returns -1: the block skips its work rather than copy from a wild address.
  // The question is asked of the staged window: asked of the table in global memory, before the
  // staging, it was one more round trip that every block waited out before its first copy.
  if constexpr (Kv::kAddressMayFail)
    if (n_tiles > 0 && page_first_row(range.begin) < 0) return;  // (the same answer in every thread)
  // Round r: set s computes tile r·SETS + s (none in the last round of an odd count) from stage
  // r % STAGES of its ring, while its copies of round r + STAGES - 1 are in flight.
  const int rounds = lab::ceil_div(n_tiles, SETS);
  auto tile_of = [&](int r) { return r * SETS + set; };
#pragma unroll 1  // (one copy of the loader's code here, not STAGES - 1)
  for (int s = 0; s < STAGES - 1; ++s) {
    if (tile_of(s) < n_tiles) load_tile(tile_of(s), s);  // (in the window: checked above)
    cp_async_commit();
  }
  bool failed = false;  // the stub's online step: the block writes nothing
  for (int r = 0; r < rounds; ++r) {
    cp_async_wait<STAGES - 2>();
    __syncwarp();  // the warp's rows of its round-r tile are in shared memory; the warp is done with its rows of round r-1's stage
    const int next = r + STAGES - 1;
    if (kStaged && next < rounds && !in_window(lab::imin(next * SETS + SETS - 1, n_tiles - 1))) {  // (the same in every thread)
      __syncthreads();  // every warp's last window read is done
      stage_table((first_tile + next * SETS) * BLOCK_N);
      __syncthreads();  // the new window is in shared memory
    }
    if (tile_of(next) < n_tiles) load_tile(tile_of(next), next % STAGES);
    cp_async_commit();  // (an empty group near the end keeps the wait count uniform)
    const int t = tile_of(r);
    if (t >= n_tiles) continue;

    const uint32_t k_tile = smem_addr(ring + (r % STAGES) * 2 * TL::TILE_BYTES);
    const uint32_t v_tile = k_tile + TL::TILE_BYTES;
    // S = Q Kᵀ for this warp's 16 keys: [16 heads, 16 keys] as two n-blocks of 8 keys.
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int ks = 0; ks < TL::D_STEPS; ++ks) {
      uint32_t kb[4];
      ldmatrix_x4(kb, k_tile + swizzle<TL::CHUNKS>(k_row, 2 * ks + k_chunk));
      mma_16816<T>(s[0], q_frag[ks], kb[0], kb[1]);
      mma_16816<T>(s[1], q_frag[ks], kb[2], kb[3]);
    }
    // Scale into the log2 domain; keys outside the split (zero-filled) become -inf.
    const int key_w = (first_tile + t) * BLOCK_N + group * WARP_KEYS;
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = key_w + nb * 8 + 2 * t4 + (e & 1);
        s[nb][e] = range.contains(j) ? s[nb][e] * p.scale_log2 : -INFINITY;
        tile_max[e >> 1] = fmaxf(tile_max[e >> 1], s[nb][e]);
      }
    float alpha[2], base[2];
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {  // the 4 lanes of a row agree on its tile max
      tile_max[rr] = fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 1));
      tile_max[rr] = fmaxf(tile_max[rr], __shfl_xor_sync(0xffffffffu, tile_max[rr], 2));
      if (!Hooks::online_step(tile_max[rr], m[rr], l[rr], alpha[rr], base[rr])) failed = true;
    }
    if (failed) break;  // (the stub fails on every warp's first tile: no warp is left at a barrier)
    // P = exp2(S - base), straight into the A fragment of O += P V; l sums this lane's share.
    float pr[2][4];
#pragma unroll
    for (int nb = 0; nb < 2; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pr[nb][e] = exp2f(s[nb][e] - base[e >> 1]);
        l[e >> 1] += pr[nb][e];
      }
    const uint32_t p_frag[4] = {pack2<T>(pr[0][0], pr[0][1]), pack2<T>(pr[0][2], pr[0][3]),
                                pack2<T>(pr[1][0], pr[1][1]), pack2<T>(pr[1][2], pr[1][3])};
#pragma unroll
    for (int nb = 0; nb < TL::O_BLOCKS; ++nb) {
      o_acc[nb][0] *= alpha[0];
      o_acc[nb][1] *= alpha[0];
      o_acc[nb][2] *= alpha[1];
      o_acc[nb][3] *= alpha[1];
    }
    // O += P V: V [16 keys, D] as B fragments, two n-blocks (16 columns) per ldmatrix.x4.trans.
#pragma unroll
    for (int dn = 0; dn < TL::O_BLOCKS / 2; ++dn) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, v_tile + swizzle<TL::CHUNKS>(v_row, 2 * dn + v_chunk));
      mma_16816<T>(o_acc[2 * dn], p_frag, vb[0], vb[1]);
      mma_16816<T>(o_acc[2 * dn + 1], p_frag, vb[2], vb[3]);
    }
  }
  cp_async_wait<0>();
  if (__syncthreads_or(failed)) return;  // every warp is done with the ring (the merge below reuses it); the stub writes nothing

  // Each warp's state -> (LSE, normalised O) in shared memory; then the block merges them.
  float* o_smem = reinterpret_cast<float*>(smem);          // [NUM_WARPS][ROWS][O_STRIDE]
  float* lse_w = o_smem + NUM_WARPS * ROWS * TL::O_STRIDE;  // [NUM_WARPS][ROWS]
  float* weight = lse_w + NUM_WARPS * ROWS;                 // [NUM_WARPS][ROWS]
  float* lse_row = weight + NUM_WARPS * ROWS;               // [ROWS]
  int* is_last = reinterpret_cast<int*>(lse_row + ROWS);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
    const float inv_l = l[rr] > 0.f ? 1.f / l[rr] : 0.f;
    const int row = g + 8 * rr;
    if (t4 == 0) lse_w[warp * ROWS + row] = Hooks::split_lse(m[rr], l[rr]);
    float* dst = o_smem + (warp * ROWS + row) * TL::O_STRIDE + 2 * t4;
#pragma unroll
    for (int nb = 0; nb < TL::O_BLOCKS; ++nb)
      *reinterpret_cast<float2*>(dst + nb * 8) = make_float2(o_acc[nb][2 * rr] * inv_l, o_acc[nb][2 * rr + 1] * inv_l);
  }
  __syncthreads();  // every warp's state is in shared memory
  if (tid < ROWS) {
    const float lse = Hooks::merged_lse(lse_w + tid, NUM_WARPS, ROWS);
    lse_row[tid] = lse;
    for (int w = 0; w < NUM_WARPS; ++w) weight[w * ROWS + tid] = Hooks::partial_weight(lse_w[w * ROWS + tid], lse);
  }
  __syncthreads();  // the merged LSE and the weights are ready
  // O = Σ_w weight_w · O_w, 4 columns per thread: float4 reads of shared memory, one 16-byte
  // (partial, fp32) or 8-byte (O) store.
  constexpr int VEC = 4, ROW_VECS = HEAD_DIM / VEC;
  for (int e = tid; e < ROWS * ROW_VECS; e += THREADS) {
    const int row = e / ROW_VECS, col = (e % ROW_VECS) * VEC;
    const int head = head_of_row<Hooks>(p, kv_head, chunk, row);
    if (head < 0) continue;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < NUM_WARPS; ++w) {
      const float wt = weight[w * ROWS + row];
      const float4 x = *reinterpret_cast<const float4*>(o_smem + (w * ROWS + row) * TL::O_STRIDE + col);
      o.x += wt * x.x;
      o.y += wt * x.y;
      o.z += wt * x.z;
      o.w += wt * x.w;
    }
    const int64_t out_row = (int64_t(b) * p.t_q + i) * p.h + head;  // also the partial-state row
    if (p.part_o) {
      *reinterpret_cast<float4*>(p.part_o + (out_row * p.num_splits + split) * HEAD_DIM + col) = o;
      if (col == 0) p.part_lse[out_row * p.num_splits + split] = lse_row[row];
    } else {
      *reinterpret_cast<uint2*>(static_cast<T*>(p.o) + out_row * HEAD_DIM + col) =
          make_uint2(pack2<T>(o.x, o.y), pack2<T>(o.z, o.w));  // 8 bytes, aligned: col % 4 == 0
      if (col == 0) p.lse[(int64_t(b) * p.h + head) * p.t_q + i] = lse_row[row];
    }
  }
  if (!p.part_o) return;

  // The split merge, done by the last of the row group's num_splits blocks to finish (an atomic
  // ticket; no second kernel launch): LSE = log Σ exp(LSE_s), O = Σ exp(LSE_s - LSE)·O_s, an empty
  // split (LSE_s = -inf) weighing exactly 0.
  // The ticket publishes the partials: the block's stores, a barrier, then one thread's atomic with
  // acquire-release semantics at device scope. Its release covers the whole block's stores (the
  // barrier ordered them before it); its acquire, the other splits' (their tickets released them),
  // and the barrier after it passes that on to the block's threads (CUTLASS's split-K semaphore
  // works the same way). A __threadfence() in every thread, as this code had, is a sequentially
  // consistent fence (MEMBAR.SC.GPU) that waits for every outstanding memory operation of the GPU:
  // the merge then starts microseconds late, a large part of a ~16 us decode step.
  __syncthreads();  // every thread's partials are stored
  if (tid == 0) {
    cuda::atomic_ref<int, cuda::thread_scope_device> ticket(p.tickets[blockIdx.x]);
    *is_last = ticket.fetch_add(1, cuda::memory_order_acq_rel) == p.num_splits - 1;
  }
  __syncthreads();  // everyone sees the verdict (and, the last block, the other splits' partials)
  if (!*is_last) return;
  // O = Σ_s exp(LSE_s - LSE) · O_s: each thread merges 4 columns of one row, loading a group of
  // splits' LSEs and partial O's together (independent loads: one round trip per 16 splits) and
  // folding them in as an online softmax over the splits (the section's LseFold), with no barrier between
  // loading the LSEs and the O's. A row some split never wrote (its LSE still the poison's bits: a
  // stub) stays unwritten. A split LSE that is another NaN was computed (-inf - -inf in a split's
  // state or its block's merged_lse): it weighs nothing in O, and the row's LSE is stored NaN, so
  // the check names the rows (a fold's fmaxf, w > 0 and l > 0 would drop the NaN without a trace).
  for (int e = tid; e < ROWS * ROW_VECS; e += THREADS) {
    const int row = e / ROW_VECS, col = (e % ROW_VECS) * VEC;
    const int head = head_of_row<Hooks>(p, kv_head, chunk, row);
    if (head < 0) continue;
    const int64_t out_row = (int64_t(b) * p.t_q + i) * p.h + head;
    const float* lse_s = p.part_lse + out_row * p.num_splits;
    const float4* o_s = reinterpret_cast<const float4*>(p.part_o + out_row * p.num_splits * HEAD_DIM + col);
    typename Hooks::LseFold merge;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    bool complete = true, nan_part = false;
    for (int s0 = 0; s0 < p.num_splits; s0 += MERGE_GROUP) {
      float x[MERGE_GROUP], w[MERGE_GROUP];
      float4 v[MERGE_GROUP];
#pragma unroll
      for (int k = 0; k < MERGE_GROUP; ++k) {
        const bool in = s0 + k < p.num_splits;
        x[k] = in ? __ldcg(lse_s + s0 + k) : -INFINITY;
        v[k] = in ? __ldcg(o_s + (s0 + k) * ROW_VECS) : make_float4(0.f, 0.f, 0.f, 0.f);
        complete = complete && __float_as_uint(x[k]) != lab::kPoisonBits32;
        if (isnan(x[k])) {
          nan_part = true;
          x[k] = -INFINITY;
        }
      }
      const float alpha = merge.fold(x, MERGE_GROUP, w);
      o = make_float4(o.x * alpha, o.y * alpha, o.z * alpha, o.w * alpha);
#pragma unroll
      for (int k = 0; k < MERGE_GROUP; ++k)
        if (w[k] > 0.f) {  // an empty split weighs 0 (and its partial never enters O)
          o.x += w[k] * v[k].x;
          o.y += w[k] * v[k].y;
          o.z += w[k] * v[k].z;
          o.w += w[k] * v[k].w;
        }
    }
    if (!complete) continue;
    const float inv_l = merge.inv_l();
    *reinterpret_cast<uint2*>(static_cast<T*>(p.o) + out_row * HEAD_DIM + col) =
        make_uint2(pack2<T>(o.x * inv_l, o.y * inv_l), pack2<T>(o.z * inv_l, o.w * inv_l));  // col % 4 == 0
    if (col == 0) p.lse[(int64_t(b) * p.h + head) * p.t_q + i] = nan_part ? NAN : merge.lse();
  }
  if (tid == 0) p.tickets[blockIdx.x] = 0;  // every split has taken its ticket: reset for the next forward
}

// ---------------------------------------------------------------------------------------------
// Launch plan: how many head chunks and splits, shared by the GPU launcher and the CPU model.
struct Plan {
  int group, head_chunks, rows;  // rows = blocks per split: B·T_q·H_kv·head_chunks
  lab::SplitPlan split;
  int64_t busy_blocks;           // blocks with keys to read (the others exit at once)
};

inline Plan make_plan(const lab::Problem& pr, const std::string& variant, int sms, int forced_splits) {
  Plan pl;
  pl.group = pr.h / pr.h_kv;
  pl.head_chunks = lab::ceil_div(pl.group, ROWS);
  pl.rows = pr.b * pr.t_q * pr.h_kv * pl.head_chunks;
  std::vector<lab::KeyRange> ranges;  // the keys each (sequence, query row) sees
  for (int b = 0; b < pr.b; ++b)
    for (int i = 0; i < pr.t_q; ++i) ranges.push_back(lab::visible_keys(i, pr.t_q, pr.keys_of(b), pr.causal, pr.window));
  if (variant == "split")  // one wave, one block per SM (the measurement behind it: lab::plan_splits)
    pl.split = lab::plan_splits(ranges, pr.h_kv * pl.head_chunks, BLOCK_N, sms, MIN_TILES_PER_SPLIT, MAX_SPLITS,
                                forced_splits);
  else
    pl.split = {1, lab::ceil_div(pr.t_kv, BLOCK_N) * BLOCK_N};
  pl.busy_blocks = lab::nonempty_blocks(ranges, pr.h_kv * pl.head_chunks, pl.split.keys_per_split);
  return pl;
}

inline int64_t split_workspace_bytes(const lab::Problem& pr, const Plan& pl) {
  if (pl.split.num_splits == 1) return 0;
  return int64_t(pr.b) * pr.t_q * pr.h * pl.split.num_splits * (int64_t(pr.d) + 1) * 4 + int64_t(pl.rows) * 4;
}

// The keys some query row of sequence b's step can see: from the smallest begin to the largest end
// of its T_q rows' ranges (rows that see no key left out; {0, 0} when none sees one). Rows of a
// window overlap, so nothing in between is unseen. Host only: the byte models of 05 and 06.
inline lab::KeyRange keys_of_step(const lab::Problem& pr, int b) {
  int begin = pr.keys_of(b), end = 0;
  for (int i = 0; i < pr.t_q; ++i) {
    const lab::KeyRange r = lab::visible_keys(i, pr.t_q, pr.keys_of(b), pr.causal, pr.window);
    if (r.empty()) continue;
    begin = std::min(begin, r.begin);
    end = std::max(end, r.end);
  }
  return begin < end ? lab::KeyRange{begin, end} : lab::KeyRange{0, 0};
}

// K/V bytes a decode step must read: the rows some query row can see, each read once.
inline int64_t kv_bytes_read(const lab::Problem& pr) {
  int64_t kv_rows = 0;
  for (int b = 0; b < pr.b; ++b) {
    const lab::KeyRange r = keys_of_step(pr, b);
    kv_rows += r.end - r.begin;
  }
  return kv_rows * pr.h_kv * pr.d * 2 * lab::dtype_bytes(pr.dtype);
}

// HBM bytes a decode step must move: its K/V, Q read, O written, LSE written. The GB/s the harness
// reports from it is the bandwidth story.
inline int64_t hbm_bytes(const lab::Problem& pr) {
  return kv_bytes_read(pr) + 2 * pr.q_elems() * lab::dtype_bytes(pr.dtype) + pr.lse_elems() * 4;
}

// The kernel of a run, and what its launch needs.
template <class Kv>
struct Kernel {
  void (*fn)(Params<Kv>);
  int threads, smem;
};

template <class Hooks, int HEAD_DIM, class T, int STAGES, int SETS>
Kernel<typename Hooks::Kv> kernel_of(bool stream_kv) {
  return {stream_kv ? decode_kernel<Hooks, HEAD_DIM, T, STAGES, SETS, true> : decode_kernel<Hooks, HEAD_DIM, T, STAGES, SETS, false>,
          Tiles<HEAD_DIM, STAGES, SETS>::THREADS, smem_bytes({STAGES, SETS}, HEAD_DIM, Hooks::Kv::kTableWindow)};
}

// The kernel of configuration c (one of choose_config's), with or without the evict_first K/V
// copies (Params::stream_kv).
template <class Hooks, int HEAD_DIM, class T>
Kernel<typename Hooks::Kv> kernel_for(Config c, bool stream_kv) {
  if (c.sets == 1) return kernel_of<Hooks, HEAD_DIM, T, 2, 1>(stream_kv);
  if (c.stages == 2) return kernel_of<Hooks, HEAD_DIM, T, 2, 2>(stream_kv);
  return kernel_of<Hooks, HEAD_DIM, T, Hooks::Kv::kStages, 2>(stream_kv);
}

// The forward of a run: the split workspace, the parameters, the launch. `kv` says where K and V
// are; `keep` holds whatever else the forward reads (06's pool and tables) alive as long as it.
template <class Hooks>
lab::GpuRun make_gpu_run(const lab::RunContext& ctx, const typename Hooks::Kv& kv, std::shared_ptr<void> keep) {
  using Kv = typename Hooks::Kv;
  const lab::Problem& pr = ctx.problem;
  const Plan pl = make_plan(pr, ctx.variant, ctx.device.sms, ctx.options.splits);
  const int splits = pl.split.num_splits;
  auto workspace = std::make_shared<lab::DeviceBuffer>(size_t(split_workspace_bytes(pr, pl)));
  workspace->poison();  // a partial LSE no split wrote keeps the poison's bits: the merge then leaves its row unwritten

  Params<Kv> p{};
  p.q = ctx.tensors.q;
  p.kv = kv;
  p.o = ctx.tensors.o;
  p.lse = ctx.tensors.lse;
  p.kv_len = ctx.tensors.kv_len;
  p.part_o = splits > 1 ? workspace->as<float>() : nullptr;
  p.part_lse = splits > 1 ? p.part_o + int64_t(pr.b) * pr.t_q * pr.h * splits * pr.d : nullptr;
  p.tickets = splits > 1 ? reinterpret_cast<int*>(p.part_lse + int64_t(pr.b) * pr.t_q * pr.h * splits) : nullptr;
  if (p.tickets) CUDA_CHECK(cudaMemset(p.tickets, 0, size_t(pl.rows) * sizeof(int)));
  p.t_q = pr.t_q;
  p.t_kv = pr.t_kv;
  p.h = pr.h;
  p.h_kv = pr.h_kv;
  p.group = pl.group;
  p.head_chunks = pl.head_chunks;
  p.causal = pr.causal;
  p.window = pr.window;
  p.num_splits = splits;
  p.keys_per_split = pl.split.keys_per_split;
  p.scale_log2 = pr.softmax_scale() * kLog2e;
  p.gqa_bug = ctx.bug == "gqa-index";
  const int64_t kv_bytes = kv_bytes_read(pr);
  p.stream_kv = kv_bytes > ctx.device.l2_bytes;

  // The configuration this GPU's shared memory per block allows (or --smem-limit's).
  const int smem_limit = lab::shared_memory_limit();
  const Config config = choose_config<Kv>(pr.d, smem_limit);
  const bool bf16 = pr.dtype == lab::DType::bf16;
  const Kernel<Kv> kernel = pr.d == 64 ? (bf16 ? kernel_for<Hooks, 64, __nv_bfloat16>(config, p.stream_kv)
                                               : kernel_for<Hooks, 64, __half>(config, p.stream_kv))
                                       : (bf16 ? kernel_for<Hooks, 128, __nv_bfloat16>(config, p.stream_kv)
                                               : kernel_for<Hooks, 128, __half>(config, p.stream_kv));
  lab::opt_in_shared_memory(kernel.fn, kernel.smem);
  if (config != layout_config<Kv>() && !ctx.options.quiet)
    std::printf("smaller configuration: %d warp set%s of %d warps, %d-stage rings, %d KB of shared memory a block "
                "(the full one needs %d KB; a block may have %d KB here%s)\n",
                config.sets, config.sets > 1 ? "s" : "", GROUPS, config.stages, kernel.smem / 1024,
                smem_bytes(layout_config<Kv>(), pr.d, Kv::kTableWindow) / 1024, smem_limit / 1024,
                lab::forced_shared_memory_limit == smem_limit ? ", under --smem-limit" : "");
  int blocks_per_sm = 0;  // what this GPU runs at once (registers and shared memory)
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel.fn, kernel.threads, kernel.smem));
  if (lab::forced_shared_memory_limit == smem_limit)  // the GPU --smem-limit stands for: its SM holds the
    // per-block limit plus the 1 KB a block reserves (A100: 164 KB, 99 KB GPUs: 100 KB), and every sm_80+
    // SM has this one's 64K registers, so only shared memory can hold fewer blocks there
    blocks_per_sm = std::min(blocks_per_sm, (smem_limit + 1024) / (kernel.smem + 1024));

  lab::GpuRun run;
  run.extra_device_bytes = split_workspace_bytes(pr, pl);
  run.hbm_bytes_model = hbm_bytes(pr);
  run.metrics["splits"] = splits;
  run.metrics["keys_per_split"] = pl.split.keys_per_split;
  run.metrics["blocks"] = int64_t(pl.rows) * splits;
  run.metrics["blocks_with_keys"] = pl.busy_blocks;
  run.metrics["stages"] = config.stages;
  run.metrics["warp_sets"] = config.sets;
  run.metrics["warps"] = kernel.threads / 32;
  run.metrics["smem_bytes"] = kernel.smem;
  run.metrics["smem_limit_bytes"] = smem_limit;
  run.metrics["blocks_per_sm"] = blocks_per_sm;
  run.metrics["splits_forced"] = ctx.options.splits > 0;
  run.metrics["kv_bytes_read"] = kv_bytes;
  run.metrics["kv_evict_first"] = p.stream_kv;
  const int rows = pl.rows;
  run.graph_replay = true;  // one kernel launch: timed launched and replayed from a graph, as SDPA is
  run.forward = [=](cudaStream_t st) {
    kernel.fn<<<dim3(unsigned(rows), unsigned(splits)), kernel.threads, kernel.smem, st>>>(p);
    CUDA_CHECK_LAST();
    (void)workspace;  // keep the workspace ...
    (void)keep;       // ... and the section's buffers alive as long as the forward
  };
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: the same blocks, warps, tiles and splits in plain C++ (float; P rounded to the
// element type before P V, as the mma sees it), with the same online_step / split_lse and the
// same merges. The split count and the warps are those an H200 (132 SMs, 227 KB of shared memory
// per block) would use, or those --splits and --smem-limit ask for.
// k_row(b, j, kv_head) / v_row: the K / V row in host memory, or nullptr where the section's
// address stub has no answer yet (the block then skips its work, as on the GPU).
template <class Hooks, class KRow, class VRow>
lab::CpuRun run_cpu_model(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                          std::vector<float>& o, std::vector<float>& lse, KRow k_row, VRow v_row) {
  constexpr int kModelSms = 132, kModelSmem = 227 * 1024;
  const Plan pl = make_plan(pr, opt.variant, kModelSms, opt.splits);
  const Config config = choose_config<typename Hooks::Kv>(pr.d, opt.smem_limit_kb > 0 ? opt.smem_limit_kb * 1024 : kModelSmem);
  const int splits = pl.split.num_splits, d = pr.d, sets = config.sets, warps = sets * GROUPS;
  const bool bug = opt.bug == "gqa-index";
  const float scale_log2 = pr.softmax_scale() * kLog2e;
  std::vector<float> part_o(splits > 1 ? size_t(pr.b) * pr.t_q * pr.h * splits * d : 0, lab::poison_float());
  std::vector<float> part_lse(splits > 1 ? size_t(pr.b) * pr.t_q * pr.h * splits : 0, lab::poison_float());

  lab::parallel_for(int64_t(pl.rows) * splits, [&](int64_t block) {  // one GPU block
    const int split = int(block % splits);
    int64_t idx = block / splits;
    const int chunk = int(idx % pl.head_chunks);
    idx /= pl.head_chunks;
    const int kv_head = int(idx % pr.h_kv);
    idx /= pr.h_kv;
    const int i = int(idx % pr.t_q), b = int(idx / pr.t_q);
    int head[ROWS];
    for (int r = 0; r < ROWS; ++r) {
      const int rr = chunk * ROWS + r;
      head[r] = rr < pl.group ? query_head<Hooks>(kv_head, rr, pl.group, pr.h_kv, bug) : -1;
    }
    if (head[0] < 0) return;
    const lab::KeyRange visible = lab::visible_keys(i, pr.t_q, pr.keys_of(b), pr.causal, pr.window);
    const lab::KeyRange range = lab::split_keys(visible, split, pl.split.keys_per_split);
    if (!range.empty() && !k_row(b, range.begin, kv_head)) return;  // the address stub: skip the work
    // Per warp and row: m, l and the unnormalised O.
    std::vector<float> m(warps * ROWS, -INFINITY), l(warps * ROWS, 0.f), acc(size_t(warps) * ROWS * d, 0.f);
    const int first_tile = range.begin / BLOCK_N;
    const int n_tiles = range.empty() ? 0 : lab::ceil_div(range.end, BLOCK_N) - first_tile;
    for (int t = 0; t < n_tiles; ++t)
      for (int g = 0; g < GROUPS; ++g) {
        const int w = (t % sets) * GROUPS + g;  // the warp of set t % sets that takes group g
        const int key_w = (first_tile + t) * BLOCK_N + g * WARP_KEYS;
        for (int r = 0; r < ROWS; ++r) {
          if (head[r] < 0) continue;  // a zero row on the GPU: computed there, never written
          const float* qr = &in.q[size_t(pr.q_index(b, i, head[r]))];
          float s[WARP_KEYS], tile_max = -INFINITY;
          for (int kk = 0; kk < WARP_KEYS; ++kk) {
            const int j = key_w + kk;
            s[kk] = -INFINITY;
            if (!range.contains(j)) continue;
            const float* kr = k_row(b, j, kv_head);
            float dot = 0.f;
            for (int c = 0; c < d; ++c) dot += qr[c] * kr[c];
            s[kk] = dot * scale_log2;
            tile_max = std::max(tile_max, s[kk]);
          }
          float alpha, base;
          const int wr = w * ROWS + r;
          if (!Hooks::online_step(tile_max, m[size_t(wr)], l[size_t(wr)], alpha, base)) return;  // the stub
          float* a = &acc[size_t(wr) * d];
          for (int c = 0; c < d; ++c) a[c] *= alpha;
          for (int kk = 0; kk < WARP_KEYS; ++kk) {
            if (!range.contains(key_w + kk)) continue;  // a zero row on the GPU (never read)
            const float pk = std::exp2(s[kk] - base);
            l[size_t(wr)] += pk;
            const float p16 = lab::round_to(pr.dtype, pk);
            const float* vr = v_row(b, key_w + kk, kv_head);
            for (int c = 0; c < d; ++c) a[c] += p16 * vr[c];
          }
        }
      }
    std::vector<float> lse_w(size_t(warps), 0.f);
    for (int r = 0; r < ROWS; ++r) {  // the block's merge of its warps, then the store
      if (head[r] < 0) continue;
      for (int w = 0; w < warps; ++w) lse_w[size_t(w)] = Hooks::split_lse(m[size_t(w * ROWS + r)], l[size_t(w * ROWS + r)]);
      const float lse_b = Hooks::merged_lse(lse_w.data(), warps, 1);
      const int64_t out_row = (int64_t(b) * pr.t_q + i) * pr.h + head[r];
      for (int c = 0; c < d; ++c) {
        float v = 0.f;
        for (int w = 0; w < warps; ++w) {
          const float lw = l[size_t(w * ROWS + r)];
          const float on = lw > 0.f ? acc[size_t(w * ROWS + r) * d + c] * (1.f / lw) : 0.f;
          v += Hooks::partial_weight(lse_w[size_t(w)], lse_b) * on;
        }
        if (splits > 1) part_o[size_t((out_row * splits + split) * d + c)] = v;
        else o[size_t(out_row * d + c)] = lab::round_to(pr.dtype, v);
      }
      if (splits > 1) part_lse[size_t(out_row * splits + split)] = lse_b;
      else lse[size_t(pr.lse_index(b, head[r], i))] = lse_b;
    }
  });
  if (splits > 1)  // the last block's merge: an online softmax over the splits, MERGE_GROUP at a time
    lab::parallel_for(int64_t(pr.b) * pr.t_q * pr.h, [&](int64_t row) {
      const float* pl_lse = &part_lse[size_t(row * splits)];
      for (int s = 0; s < splits; ++s)
        if (lab::is_poison(pl_lse[s])) return;  // a split that never ran
      typename Hooks::LseFold merge;
      std::vector<float> acc(size_t(d), 0.f);
      bool nan_part = false;  // a computed NaN LSE: it weighs nothing, and the row's LSE is NaN (as on the GPU)
      for (int s0 = 0; s0 < splits; s0 += MERGE_GROUP) {
        const int n = std::min(MERGE_GROUP, splits - s0);
        float x[MERGE_GROUP], w[MERGE_GROUP];
        for (int k = 0; k < n; ++k) {
          nan_part = nan_part || std::isnan(pl_lse[s0 + k]);
          x[k] = std::isnan(pl_lse[s0 + k]) ? -INFINITY : pl_lse[s0 + k];
        }
        const float alpha = merge.fold(x, n, w);
        for (int c = 0; c < d; ++c) {
          acc[size_t(c)] *= alpha;
          for (int k = 0; k < n; ++k)
            if (w[k] > 0.f) acc[size_t(c)] += w[k] * part_o[size_t((row * splits + s0 + k) * d + c)];
        }
      }
      for (int c = 0; c < d; ++c) o[size_t(row * d + c)] = lab::round_to(pr.dtype, acc[size_t(c)] * merge.inv_l());
      const int i = int((row / pr.h) % pr.t_q), b = int(row / pr.h / pr.t_q), h = int(row % pr.h);
      lse[size_t(pr.lse_index(b, h, i))] = nan_part ? NAN : merge.lse();
    });
  lab::CpuRun run;
  run.extra_host_bytes = split_workspace_bytes(pr, pl);
  run.hbm_bytes_model = hbm_bytes(pr);
  run.metrics["splits"] = splits;
  run.metrics["keys_per_split"] = pl.split.keys_per_split;
  run.metrics["splits_model_sms"] = kModelSms;
  run.metrics["warp_sets"] = sets;
  run.metrics["warps"] = warps;
  // The split count the plan chose (as a GPU of 132 SMs would), said: a --splits beyond one split a
  // BLOCK_N-key tile is clamped, never silently.
  if (opt.variant == "split")
    run.header = "split-KV: " + std::to_string(splits) + (splits > 1 ? " splits of " : " split of ") +
                 std::to_string(pl.split.keys_per_split) + " keys" +
                 (opt.splits > splits ? " (--splits " + std::to_string(opt.splits) + " asks more than one split a " +
                                            std::to_string(BLOCK_N) + "-key tile of the longest sequence)"
                  : opt.splits > 0   ? " (--splits)"
                                     : " (chosen for 132 SMs: one wave)") +
                 "\n";
  return run;
}

}  // namespace decode
