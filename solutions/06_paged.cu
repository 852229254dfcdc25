// 06 paged (§12.9.4, §12.6): the decode of 05 over a paged KV cache, vLLM's PagedAttention.
//
// What it adds: the cache is no longer one [T_max, H_kv, D] slab per sequence, reserved at the
// longest length a sequence may reach, but a pool of fixed-size physical blocks of page_size tokens
// (K and V each [num_blocks, page_size, H_kv, D]) handed out as sequences grow. Sequence b's block
// table maps its logical block j / page_size to a physical block; key j is at slot j % page_size.
// The kernel is 05's, line for line, except where a K/V row's address comes from (EXERCISE
// block-table): one extra table read per row, cached in L1, and 16-byte copies as before (a page
// of 16 tokens is 16 rows of 256 contiguous bytes per head: full 32-byte sectors, no waste).
// Same logical cache, same splits, same arithmetic: O and LSE are bit-identical to 05's
// (tests/paged_matches_decode.py checks it for several page sizes).
// What the pool holds here: the blocks of every sequence, allocated page by page from a free list
// shuffled with --seed (so logical neighbours are physically scattered), plus spare free blocks;
// every slot no sequence owns (free blocks, the tail of a last block) is NaN, so a read past
// kv_len poisons the output and fails the check. The block allocator (free list, reference counts,
// prefix sharing) is common/block_allocator.h; the tables are checked on the host before any
// launch: an entry outside the pool or a table too short for its length is bad input (exit 2).
// --bug table-entry-oob / table-too-short corrupt one table entry to show that check; with
// LAB_UNCHECKED_TABLES=1 the GPU run skips it and the kernel reads what the table says (an
// illegal address: run it under compute-sanitizer). --bug gqa-index as in 05.
// Variants: single, split (as in 05). --page-size P (a positive multiple of 16; default 16).
// Memory simulation (host only, no GPU): 06_paged --simulate [--help] runs a stream of requests
// through a continuously batched server and reports the KV memory that contiguous max_seq_len
// allocation reserves against what the paged pool uses, and what prefix sharing saves.
// Exercise (ch12/06_paged.md): the block-table address computation (EXERCISE block-table).
// Run: scripts/lab run 06 -- --t 1 --t-kv 4096 --h-kv 8 --page-size 16       (the stub)
//      build/bin/06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --page-size 16
//      build/bin/06_paged --simulate
#include <filesystem>
#include <type_traits>

#include "block_allocator.h"
#include "kv_cache.h"
#include "lab.cuh"
#include "mma_sm80.cuh"  // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers
#include "npy.h"

using namespace lab::sm80;

constexpr int NUM_WARPS = 4;
constexpr int THREADS = NUM_WARPS * 32;
constexpr int WARP_KEYS = 16;                   // keys per warp per tile: the k of one O = P V mma
constexpr int BLOCK_N = NUM_WARPS * WARP_KEYS;  // 64 keys per tile
constexpr int ROWS = 16;                        // query heads per block: the m of mma.m16n8k16
constexpr int STAGES = 3;                       // K/V ring: tiles t+1 and t+2 load while t computes
constexpr int MIN_TILES_PER_SPLIT = 2;
constexpr int MAX_SPLITS = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int HEAD_DIM>
struct Tiles {
  static constexpr int CHUNKS = HEAD_DIM / 8;     // 16-byte chunks per row of K or V
  static constexpr int D_STEPS = HEAD_DIM / 16;   // k-steps of S = Q Kᵀ
  static constexpr int O_BLOCKS = HEAD_DIM / 8;   // n-blocks (8 columns) of O
  static constexpr int TILE_BYTES = BLOCK_N * HEAD_DIM * 2;
  static constexpr int SMEM_BYTES = STAGES * 2 * TILE_BYTES;  // [STAGES][K, V][BLOCK_N][D]: 96 / 48 KB
  static constexpr int ROW_STEP = THREADS / CHUNKS;           // rows one pass of cp.async covers
  static constexpr int LOADS = BLOCK_N / ROW_STEP;            // rows per thread per tile (K and V each)
  static constexpr int MIN_BLOCKS = HEAD_DIM == 128 ? 2 : 4;  // per SM: what the shared memory allows
  // The end-of-block merge of the 4 warps' states reuses the ring: O [warp][row][D + 4] fp32
  // (4 floats of padding: rows start 4 banks apart), then LSE and weights [warp][row], LSE [row].
  // The split merge (last block of a row group) adds its weights [MAX_SPLITS][ROWS], a
  // completeness flag per row and the ticket verdict.
  static constexpr int O_STRIDE = HEAD_DIM + 4;
  static constexpr int MERGE_BYTES =
      (NUM_WARPS * ROWS * O_STRIDE + 2 * NUM_WARPS * ROWS + ROWS + MAX_SPLITS * ROWS + ROWS + 1) * 4;
};
static_assert(BLOCK_N % Tiles<64>::ROW_STEP == 0 && BLOCK_N % Tiles<128>::ROW_STEP == 0, "whole passes");
static_assert(Tiles<64>::ROW_STEP % 8 == 0 && Tiles<128>::ROW_STEP % 8 == 0,
              "a thread's rows differ by multiples of 8: its swizzled chunk is the same in every row");
static_assert(Tiles<64>::MERGE_BYTES <= Tiles<64>::SMEM_BYTES && Tiles<128>::MERGE_BYTES <= Tiles<128>::SMEM_BYTES,
              "the warp merge fits in the ring");
static_assert(Tiles<128>::MIN_BLOCKS * Tiles<128>::SMEM_BYTES <= 227 * 1024 &&
              Tiles<64>::MIN_BLOCKS * Tiles<64>::SMEM_BYTES <= 227 * 1024, "blocks per SM fit (sm_90)");

// ---------------------------------------------------------------------------------------------
// GQA: K/V head kv_head serves `group` = H / H_kv query heads. A block computes rows r = 0..group-1
// of that group (16 at a time); this says which query head row r is.
LAB_HD int query_head_of(int kv_head, int r, int group, int n_kv_heads, bool wrong_mapping) {
  // (05's EXERCISE gqa.) wrong_mapping is --bug gqa-index: the modulo mapping h_kv = h % H_kv.
  if (wrong_mapping) return r * n_kv_heads + kv_head;
  return kv_head * group + r;
}

// The online softmax of one query row over one split, in the log2 domain (scores are
// s·scale·log2(e), so exp(x) becomes exp2(x)). The state is m (the largest score so far) and l (the
// sum of exp2(s - m) so far); the running O is kept unnormalised beside it.
// online_step folds in a tile whose largest score is tile_max: it updates m and l and returns in
// `alpha` the factor the running O must be multiplied by, and in `base` the value to subtract from
// the tile's scores before exp2. split_lse turns the final state into the split's natural-log LSE.
// (05's EXERCISE online-softmax.) An empty state (m = -inf) uses base 0: never -inf - -inf. It
// always returns true here (05's stub returns false).
LAB_HD bool online_step(float tile_max, float& m, float& l, float& alpha, float& base) {
  const float m_new = fmaxf(m, tile_max);
  base = m_new == -INFINITY ? 0.f : m_new;
  alpha = exp2f(m - base);
  l *= alpha;
  m = m_new;
  return true;
}
LAB_HD float split_lse(float m, float l) { return l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY; }

// ---------------------------------------------------------------------------------------------
// The paged address: where K/V row (sequence b, key j, K/V head kv_head) starts in the pool,
// in elements. Used by the kernel's tile loader and by the CPU model.
LAB_HD int64_t kv_row_offset(const int* block_table, int table_stride, int page_size, int n_kv_heads,
                             int head_dim, int b, int j, int kv_head) {
  // BEGIN EXERCISE block-table: the element offset of row (b, j, kv_head) in the paged pool.
  //   Pool [num_blocks, page_size, H_kv, D]; block_table [B, table_stride] (int).
  //   1. logical block j / page_size of sequence b -> physical block: block_table[b·table_stride + j / page_size]
  //   2. slot = physical block · page_size + j % page_size   (the token's row of the pool)
  //   3. offset = (slot · H_kv + kv_head) · D. Compute in 64 bits: a large pool has > 2^31 elements.
  //   (Contiguous 05 had ((b·T_max + j)·H_kv + kv_head)·D: the table replaces b·T_max + j.)
  //   Until this returns an offset >= 0, every block skips its work and writes nothing.
  // STUB: (void)block_table; (void)table_stride; (void)page_size; (void)n_kv_heads; (void)head_dim;
  // STUB: (void)b; (void)j; (void)kv_head;
  // STUB: return -1;
  const int block = block_table[int64_t(b) * table_stride + j / page_size];
  const int64_t slot = int64_t(block) * page_size + j % page_size;
  return (slot * n_kv_heads + kv_head) * head_dim;
  // END EXERCISE
}

// ---------------------------------------------------------------------------------------------
struct DecodeParams {
  const void* q;      // [B, T_q, H, D]
  const void* k;      // the pool: [num_blocks, page_size, H_kv, D]
  const void* v;      // the pool: [num_blocks, page_size, H_kv, D]
  const int* block_table;  // [B, table_stride]: logical block -> physical block (-1: none)
  int table_stride, page_size;
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
  bool gqa_bug;
};

// Row r (0..15) of a block's chunk of heads -> its query head, or -1 (padding row, or a stub).
__device__ __forceinline__ int head_of_row(const DecodeParams& p, int kv_head, int chunk, int r) {
  const int rr = chunk * ROWS + r;
  return rr < p.group ? query_head_of(kv_head, rr, p.group, p.h_kv, p.gqa_bug) : -1;
}

// ---------------------------------------------------------------------------------------------
// One block = one query row i of sequence b, one K/V head, 16 of its query heads, one split.
// grid.x = ((b·T_q + i)·H_kv + kv_head)·head_chunks + chunk, grid.y = split.
template <int HEAD_DIM, class T>
__global__ void __launch_bounds__(THREADS, Tiles<HEAD_DIM>::MIN_BLOCKS) decode_kernel(const DecodeParams p) {
  using TL = Tiles<HEAD_DIM>;
  extern __shared__ __align__(128) uint8_t smem[];
  int idx = blockIdx.x;
  const int chunk = idx % p.head_chunks;
  idx /= p.head_chunks;
  const int kv_head = idx % p.h_kv;
  idx /= p.h_kv;
  const int i = idx % p.t_q, b = idx / p.t_q;
  const int split = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t4 = lane % 4;  // fragment row and column pair

  if (head_of_row(p, kv_head, chunk, 0) < 0) return;  // serves no head (the gqa stub): nothing to do

  const int keys = p.kv_len ? p.kv_len[b] : p.t_kv;
  const lab::KeyRange visible = lab::visible_keys(i, p.t_q, keys, p.causal, p.window);
  const lab::KeyRange range = lab::split_keys(visible, split, p.keys_per_split);
  // The address stub returns -1: skip the work rather than read at a wild address.
  if (!range.empty() && kv_row_offset(p.block_table, p.table_stride, p.page_size, p.h_kv, HEAD_DIM, b, range.begin, kv_head) < 0)
    return;

  // Q rows g and g+8 as A fragments for every 16-column k-step; padding rows are zero.
  const T* q = static_cast<const T*>(p.q);
  const int head_lo = head_of_row(p, kv_head, chunk, g), head_hi = head_of_row(p, kv_head, chunk, g + 8);
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

  // K/V tile loader: thread `tid` copies chunk tid % CHUNKS of rows tid / CHUNKS + ROW_STEP·n.
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  const int first_tile = range.begin / BLOCK_N;
  const int n_tiles = range.empty() ? 0 : lab::ceil_div(range.end, BLOCK_N) - first_tile;
  const int ld_chunk = tid % TL::CHUNKS, ld_row = tid / TL::CHUNKS;
  auto load_tile = [&](int t, int stage) {
    const uint32_t k_dst = smem_addr(smem + stage * 2 * TL::TILE_BYTES);
    const uint32_t v_dst = k_dst + TL::TILE_BYTES;
    const int key0 = (first_tile + t) * BLOCK_N;
#pragma unroll
    for (int n = 0; n < TL::LOADS; ++n) {
      const int r = ld_row + n * TL::ROW_STEP, j = key0 + r;
      const bool valid = range.contains(j);
      const int64_t off =
          valid ? kv_row_offset(p.block_table, p.table_stride, p.page_size, p.h_kv, HEAD_DIM, b, j, kv_head) + ld_chunk * 8 : 0;
      cp_async_16(k_dst + swizzle<TL::CHUNKS>(r, ld_chunk), k + off, valid);
      cp_async_16(v_dst + swizzle<TL::CHUNKS>(r, ld_chunk), v + off, valid);
    }
  };

  // Per warp: the running state of rows g (index 0) and g+8 (index 1) over this warp's keys.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o_acc[TL::O_BLOCKS][4];
#pragma unroll
  for (int nb = 0; nb < TL::O_BLOCKS; ++nb) o_acc[nb][0] = o_acc[nb][1] = o_acc[nb][2] = o_acc[nb][3] = 0.f;

  // ldmatrix lane roles: matrix mi = lane / 8, its row lane % 8.
  const int mi = lane / 8, mr = lane % 8;
  const int k_row = warp * WARP_KEYS + (mi >> 1) * 8 + mr, k_chunk = mi & 1;  // K: (keys 0-7 | 8-15) x (d lo | hi)
  const int v_row = warp * WARP_KEYS + (mi & 1) * 8 + mr, v_chunk = mi >> 1;  // V: (keys lo | hi) x (d 0-7 | 8-15)

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < n_tiles) load_tile(s, s);
    cp_async_commit();
  }
  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();  // tile t is in shared memory for every warp; every warp is done with tile t-1's stage
    if (t + STAGES - 1 < n_tiles) load_tile(t + STAGES - 1, (t + STAGES - 1) % STAGES);
    cp_async_commit();  // (an empty group near the end keeps the wait count uniform)

    const uint32_t k_tile = smem_addr(smem + (t % STAGES) * 2 * TL::TILE_BYTES);
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
    const int key_w = (first_tile + t) * BLOCK_N + warp * WARP_KEYS;
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
      if (!online_step(tile_max[rr], m[rr], l[rr], alpha[rr], base[rr])) {
        cp_async_wait<0>();
        return;  // the stub: this block writes nothing
      }
    }
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
  __syncthreads();  // every warp is done with the ring: the merge below reuses it

  // Each warp's state -> (LSE, normalised O) in shared memory; then the block merges the 4.
  float* o_smem = reinterpret_cast<float*>(smem);          // [NUM_WARPS][ROWS][O_STRIDE]
  float* lse_w = o_smem + NUM_WARPS * ROWS * TL::O_STRIDE;  // [NUM_WARPS][ROWS]
  float* weight = lse_w + NUM_WARPS * ROWS;                 // [NUM_WARPS][ROWS]
  float* lse_row = weight + NUM_WARPS * ROWS;               // [ROWS]
  float* split_weight = lse_row + ROWS;                     // [MAX_SPLITS][ROWS]
  int* row_complete = reinterpret_cast<int*>(split_weight + MAX_SPLITS * ROWS);  // [ROWS]
  int* is_last = row_complete + ROWS;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
    l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
    const float inv_l = l[rr] > 0.f ? 1.f / l[rr] : 0.f;
    const int row = g + 8 * rr;
    if (t4 == 0) lse_w[warp * ROWS + row] = split_lse(m[rr], l[rr]);
    float* dst = o_smem + (warp * ROWS + row) * TL::O_STRIDE + 2 * t4;
#pragma unroll
    for (int nb = 0; nb < TL::O_BLOCKS; ++nb)
      *reinterpret_cast<float2*>(dst + nb * 8) = make_float2(o_acc[nb][2 * rr] * inv_l, o_acc[nb][2 * rr + 1] * inv_l);
  }
  __syncthreads();  // every warp's state is in shared memory
  if (tid < ROWS) {
    const float lse = lab::merged_lse(lse_w + tid, NUM_WARPS, ROWS);
    lse_row[tid] = lse;
    for (int w = 0; w < NUM_WARPS; ++w) weight[w * ROWS + tid] = lab::partial_weight(lse_w[w * ROWS + tid], lse);
  }
  __syncthreads();  // the merged LSE and the weights are ready
  for (int e = tid; e < ROWS * HEAD_DIM; e += THREADS) {
    const int row = e / HEAD_DIM, col = e % HEAD_DIM;
    const int head = head_of_row(p, kv_head, chunk, row);
    if (head < 0) continue;
    float o = 0.f;
#pragma unroll
    for (int w = 0; w < NUM_WARPS; ++w) o += weight[w * ROWS + row] * o_smem[(w * ROWS + row) * TL::O_STRIDE + col];
    const int64_t out_row = (int64_t(b) * p.t_q + i) * p.h + head;  // also the partial-state row
    if (p.part_o) {
      p.part_o[(out_row * p.num_splits + split) * HEAD_DIM + col] = o;
      if (col == 0) p.part_lse[out_row * p.num_splits + split] = lse_row[row];
    } else {
      static_cast<T*>(p.o)[out_row * HEAD_DIM + col] = from_float<T>(o);
      if (col == 0) p.lse[(int64_t(b) * p.h + head) * p.t_q + i] = lse_row[row];
    }
  }
  if (!p.part_o) return;

  // The split merge, done by the last of the row group's num_splits blocks to finish (an atomic
  // ticket; no second kernel launch): LSE = log Σ exp(LSE_s), O = Σ exp(LSE_s - LSE)·O_s, an empty
  // split (LSE_s = -inf) weighing exactly 0.
  __threadfence();  // this thread's partials are visible device-wide before the ticket is taken
  __syncthreads();  // every thread of the block has fenced its partials
  if (tid == 0) *is_last = atomicAdd(&p.tickets[blockIdx.x], 1) == p.num_splits - 1;
  __syncthreads();  // everyone sees the verdict
  if (!*is_last) return;
  __threadfence();  // the other splits' partials are read after their tickets were seen
  if (tid < ROWS) {
    const int head = head_of_row(p, kv_head, chunk, tid);
    const int64_t out_row = (int64_t(b) * p.t_q + i) * p.h + (head < 0 ? 0 : head);
    const float* lse_s = p.part_lse + out_row * p.num_splits;
    float lse = -INFINITY;
    bool complete = head >= 0;
    for (int s = 0; s < p.num_splits && complete; ++s) {
      const float x = __ldcg(lse_s + s);
      complete = !isnan(x);  // still the poison: that split never ran (a stub); leave the row unwritten
      lse = lab::lse_merge(lse, x);
    }
    for (int s = 0; s < p.num_splits && complete; ++s) split_weight[s * ROWS + tid] = lab::partial_weight(__ldcg(lse_s + s), lse);
    lse_row[tid] = lse;
    row_complete[tid] = complete;
  }
  if (tid == 0) p.tickets[blockIdx.x] = 0;  // every split has taken its ticket: reset for the next forward
  __syncthreads();  // the merged LSE and the split weights are ready
  for (int e = tid; e < ROWS * HEAD_DIM; e += THREADS) {
    const int row = e / HEAD_DIM, col = e % HEAD_DIM;
    if (!row_complete[row]) continue;
    const int head = head_of_row(p, kv_head, chunk, row);
    const int64_t out_row = (int64_t(b) * p.t_q + i) * p.h + head;
    const float* o_s = p.part_o + out_row * p.num_splits * HEAD_DIM + col;
    float o = 0.f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float w = split_weight[s * ROWS + row];
      if (w > 0.f) o += w * __ldcg(o_s + s * HEAD_DIM);
    }
    static_cast<T*>(p.o)[out_row * HEAD_DIM + col] = from_float<T>(o);
    if (col == 0) p.lse[(int64_t(b) * p.h + head) * p.t_q + i] = lse_row[row];
  }
}

// ---------------------------------------------------------------------------------------------
// Launch plan: how many head chunks and splits, shared by the GPU launcher and the CPU model. The
// same as 05's (the page size plays no part), so 05 and 06 split the keys identically.
struct Plan {
  int group, head_chunks, rows;  // rows = blocks per split: B·T_q·H_kv·head_chunks
  lab::SplitPlan split;
};

Plan make_plan(const lab::Problem& pr, const std::string& variant, int sms, int forced_splits) {
  Plan pl;
  pl.group = pr.h / pr.h_kv;
  pl.head_chunks = lab::ceil_div(pl.group, ROWS);
  pl.rows = pr.b * pr.t_q * pr.h_kv * pl.head_chunks;
  const int min_blocks = pr.d == 128 ? Tiles<128>::MIN_BLOCKS : Tiles<64>::MIN_BLOCKS;
  if (variant == "split")
    pl.split = lab::plan_splits(pl.rows, pr.t_kv, BLOCK_N, sms * min_blocks, MIN_TILES_PER_SPLIT, MAX_SPLITS,
                                forced_splits);
  else
    pl.split = {1, lab::ceil_div(pr.t_kv, BLOCK_N) * BLOCK_N};
  return pl;
}

int64_t split_workspace_bytes(const lab::Problem& pr, const Plan& pl) {
  if (pl.split.num_splits == 1) return 0;
  return int64_t(pr.b) * pr.t_q * pr.h * pl.split.num_splits * (int64_t(pr.d) + 1) * 4 + int64_t(pl.rows) * 4;
}

std::vector<int> lengths_of(const lab::Problem& pr) {
  return pr.kv_len.empty() ? std::vector<int>(size_t(pr.b), pr.t_kv) : pr.kv_len;
}

// The paged cache of the problem: the allocator's tables (physical blocks shuffled with the seed),
// then, for --bug table-*, one entry corrupted. `clean` gets the tables before the corruption.
lab::PagedCache make_cache(const std::vector<int>& lengths, const lab::Problem& pr, uint64_t seed,
                           const std::string& bug, lab::PagedCache* clean = nullptr) {
  lab::PagedCache c = lab::build_paged_cache(lengths, pr.t_kv, pr.page_size, seed);
  if (clean) *clean = c;
  const int need0 = lab::blocks_for(lengths[0], pr.page_size);  // sequence 0 is never empty
  if (bug == "table-entry-oob") c.tables[size_t(need0 - 1)] = c.num_blocks + 7;
  if (bug == "table-too-short") c.tables[size_t(need0 - 1)] = -1;
  return c;
}

int64_t pool_bytes(const lab::Problem& pr, int num_blocks) {
  return int64_t(num_blocks) * pr.page_size * pr.h_kv * pr.d * 2 * lab::dtype_bytes(pr.dtype);  // K and V
}

// HBM bytes a decode step must move: the K/V rows some query row can see (each read once) and
// their block-table entries, Q read, O written, LSE written.
int64_t decode_hbm_bytes(const lab::Problem& pr) {
  const int e = lab::dtype_bytes(pr.dtype);
  int64_t kv_rows = 0, table_entries = 0;
  for (int b = 0; b < pr.b; ++b) {
    const lab::KeyRange r = lab::visible_keys_of_rows(0, pr.t_q, pr.t_q, pr.keys_of(b), pr.causal, pr.window);
    kv_rows += r.end - r.begin;
    if (!r.empty()) table_entries += (r.end - 1) / pr.page_size - r.begin / pr.page_size + 1;
  }
  return kv_rows * pr.h_kv * pr.d * 2 * e + table_entries * 4 + 2 * pr.q_elems() * e + pr.lse_elems() * 4;
}

// Memory of this run's cache: what contiguous allocation reserves against what the pool uses.
nlohmann::json memory_metrics(const lab::Problem& pr, const lab::PagedCache& c) {
  const int64_t per_token = int64_t(pr.h_kv) * pr.d * 2 * lab::dtype_bytes(pr.dtype);
  const lab::Footprint f = lab::footprint(c.lengths, pr.page_size, pr.t_kv);
  return {{"page_size", pr.page_size}, {"pool_blocks", c.num_blocks}, {"used_blocks", c.used_blocks()},
          {"pool_bytes", pool_bytes(pr, c.num_blocks)}, {"live_kv_bytes", f.live_tokens * per_token},
          {"paged_kv_bytes", f.paged_slots * per_token}, {"contiguous_kv_bytes", f.contiguous_slots * per_token},
          {"paged_waste", f.paged_waste()}, {"contiguous_waste", f.contiguous_waste()}};
}

void dump_tables(const std::string& dir, const lab::PagedCache& c) {
  std::filesystem::create_directories(dir);
  if (!lab::write_npy(dir + "/block_tables.npy", std::vector<int32_t>(c.tables.begin(), c.tables.end()),
                      {int64_t(c.lengths.size()), c.table_stride}))
    std::fprintf(stderr, "warning: could not write %s/block_tables.npy\n", dir.c_str());
}

template <int HEAD_DIM, class T>
void launch(const DecodeParams& p, int rows, cudaStream_t stream) {
  decode_kernel<HEAD_DIM, T><<<dim3(unsigned(rows), unsigned(p.num_splits)), THREADS, Tiles<HEAD_DIM>::SMEM_BYTES, stream>>>(p);
  CUDA_CHECK_LAST();
}

template <int HEAD_DIM, class T>
void prepare() {
  CUDA_CHECK(cudaFuncSetAttribute(decode_kernel<HEAD_DIM, T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  Tiles<HEAD_DIM>::SMEM_BYTES));
}

bool tables_unchecked() {
  const char* e = std::getenv("LAB_UNCHECKED_TABLES");
  return e && std::string(e) == "1";
}

// The pool, the tables and the split workspace, alive as long as the forward.
struct PagedBuffers {
  lab::DeviceBuffer k_pool, v_pool, tables, workspace;
};

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Plan pl = make_plan(pr, ctx.variant, ctx.device.sms, ctx.options.splits);
  const int splits = pl.split.num_splits;
  lab::PagedCache clean;
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, ctx.options.seed, ctx.bug, &clean);
  if (std::string bad = lab::check_block_tables(cache); !bad.empty() && !tables_unchecked()) {
    std::fprintf(stderr, "bad input: %s\n", bad.c_str());  // (Section::validate refused it already)
    std::exit(lab::kExitBadInput);
  }
  if (!ctx.options.dump_dir.empty()) dump_tables(ctx.options.dump_dir, cache);

  auto buf = std::make_shared<PagedBuffers>();
  buf->k_pool = lab::DeviceBuffer(size_t(pool_bytes(pr, cache.num_blocks) / 2));
  buf->v_pool = lab::DeviceBuffer(size_t(pool_bytes(pr, cache.num_blocks) / 2));
  buf->tables = lab::DeviceBuffer(cache.tables.size() * sizeof(int));
  buf->workspace = lab::DeviceBuffer(size_t(split_workspace_bytes(pr, pl)));
  buf->workspace.poison();  // a partial LSE no split wrote stays NaN: the merge then leaves its row unwritten
  buf->k_pool.poison();     // every slot no sequence owns stays NaN (0xFFFF: NaN in fp16 and bf16)
  buf->v_pool.poison();
  // The kernel reads through `cache` (corrupted only under --bug table-* with
  // LAB_UNCHECKED_TABLES=1); the pool is filled through the clean tables.
  CUDA_CHECK(cudaMemcpy(buf->tables.get(), cache.tables.data(), buf->tables.bytes(), cudaMemcpyHostToDevice));
  // Building the pool: each logical block of each sequence is copied from the contiguous cache the
  // harness uploaded, [B, T_kv, H_kv, D], to its physical block (a block's tokens are contiguous in
  // both layouts). Copy-engine copies, not a kernel: Nsight Compute's DRAM count of a run (bench
  // --ncu) then holds the decode kernel alone.
  const int64_t row_bytes = int64_t(pr.h_kv) * pr.d * lab::dtype_bytes(pr.dtype);
  for (auto [src, dst] : {std::pair{ctx.tensors.k, buf->k_pool.get()}, std::pair{ctx.tensors.v, buf->v_pool.get()}})
    for (int b = 0; b < pr.b; ++b)
      for (int j0 = 0; j0 < clean.lengths[size_t(b)]; j0 += pr.page_size) {
        const int keys = std::min(pr.page_size, clean.lengths[size_t(b)] - j0);
        const int64_t slot = lab::paged_slot(clean.tables.data(), clean.table_stride, pr.page_size, b, j0);
        CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + slot * row_bytes,
                                   static_cast<const char*>(src) + (int64_t(b) * pr.t_kv + j0) * row_bytes,
                                   size_t(keys * row_bytes), cudaMemcpyDeviceToDevice, 0));
      }
  CUDA_CHECK(cudaDeviceSynchronize());

  DecodeParams p{};
  p.q = ctx.tensors.q;
  p.k = buf->k_pool.get();
  p.v = buf->v_pool.get();
  p.block_table = buf->tables.as<int>();
  p.table_stride = cache.table_stride;
  p.page_size = pr.page_size;
  p.o = ctx.tensors.o;
  p.lse = ctx.tensors.lse;
  p.kv_len = ctx.tensors.kv_len;
  p.part_o = splits > 1 ? buf->workspace.as<float>() : nullptr;
  p.part_lse = splits > 1 ? p.part_o + int64_t(pr.b) * pr.t_q * pr.h * splits * pr.d : nullptr;
  p.tickets = splits > 1 ? reinterpret_cast<int*>(p.part_lse + int64_t(pr.b) * pr.t_q * pr.h * splits) : nullptr;
  if (p.tickets) CUDA_CHECK(cudaMemset(p.tickets, 0, size_t(pl.rows) * sizeof(int)));  // (after the poison, same stream)
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

  const bool bf16 = pr.dtype == lab::DType::bf16;
  if (pr.d == 64) bf16 ? prepare<64, __nv_bfloat16>() : prepare<64, __half>();
  else bf16 ? prepare<128, __nv_bfloat16>() : prepare<128, __half>();

  lab::GpuRun run;
  run.extra_device_bytes = pool_bytes(pr, cache.num_blocks) + int64_t(buf->tables.bytes()) + split_workspace_bytes(pr, pl);
  run.hbm_bytes_model = decode_hbm_bytes(pr);
  run.metrics = memory_metrics(pr, cache);
  run.metrics["splits"] = splits;
  run.metrics["keys_per_split"] = pl.split.keys_per_split;
  run.metrics["blocks"] = int64_t(pl.rows) * splits;
  run.metrics["blocks_per_sm"] = pr.d == 128 ? Tiles<128>::MIN_BLOCKS : Tiles<64>::MIN_BLOCKS;
  run.metrics["splits_forced"] = ctx.options.splits > 0;
  const int rows = pl.rows;
  run.forward = [=](cudaStream_t st) {
    if (pr.d == 64) bf16 ? launch<64, __nv_bfloat16>(p, rows, st) : launch<64, __half>(p, rows, st);
    else bf16 ? launch<128, __nv_bfloat16>(p, rows, st) : launch<128, __half>(p, rows, st);
    (void)buf;  // keeps the pool, the tables and the workspace alive as long as the forward
  };
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: 05's model reading K and V from a host pool built the same way (NaN where no
// sequence owns a slot) through kv_row_offset, the exercise's function. It always checks the tables.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  constexpr int kModelSms = 132;
  const Plan pl = make_plan(pr, opt.variant, kModelSms, opt.splits);
  const int splits = pl.split.num_splits, d = pr.d;
  const bool bug = opt.bug == "gqa-index";
  const float scale_log2 = pr.softmax_scale() * kLog2e;
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, opt.seed, opt.bug);
  if (std::string bad = lab::check_block_tables(cache); !bad.empty()) {
    std::fprintf(stderr, "bad input: %s\n", bad.c_str());
    std::exit(lab::kExitBadInput);
  }
  if (!opt.dump_dir.empty()) dump_tables(opt.dump_dir, cache);
  const int64_t row_elems = int64_t(pr.h_kv) * d;
  std::vector<float> k_pool(size_t(int64_t(cache.num_blocks) * pr.page_size * row_elems), NAN);
  std::vector<float> v_pool(k_pool.size(), NAN);
  for (int b = 0; b < pr.b; ++b)
    for (int j = 0; j < cache.lengths[size_t(b)]; ++j) {
      const int64_t slot = lab::paged_slot(cache.tables.data(), cache.table_stride, pr.page_size, b, j);
      std::copy_n(&in.k[size_t(pr.kv_index(b, j, 0))], row_elems, &k_pool[size_t(slot * row_elems)]);
      std::copy_n(&in.v[size_t(pr.kv_index(b, j, 0))], row_elems, &v_pool[size_t(slot * row_elems)]);
    }
  auto k_row = [&](int b, int j, int kv_head) -> const float* {
    const int64_t off = kv_row_offset(cache.tables.data(), cache.table_stride, pr.page_size, pr.h_kv, d, b, j, kv_head);
    return off < 0 ? nullptr : &k_pool[size_t(off)];
  };
  auto v_row = [&](int b, int j, int kv_head) -> const float* {
    const int64_t off = kv_row_offset(cache.tables.data(), cache.table_stride, pr.page_size, pr.h_kv, d, b, j, kv_head);
    return off < 0 ? nullptr : &v_pool[size_t(off)];
  };
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
      head[r] = rr < pl.group ? query_head_of(kv_head, rr, pl.group, pr.h_kv, bug) : -1;
    }
    if (head[0] < 0) return;
    const lab::KeyRange visible = lab::visible_keys(i, pr.t_q, pr.keys_of(b), pr.causal, pr.window);
    const lab::KeyRange range = lab::split_keys(visible, split, pl.split.keys_per_split);
    if (!range.empty() && !k_row(b, range.begin, kv_head)) return;  // the address stub: skip the work
    std::vector<float> m(NUM_WARPS * ROWS, -INFINITY), l(NUM_WARPS * ROWS, 0.f), acc(size_t(NUM_WARPS) * ROWS * d, 0.f);
    const int first_tile = range.begin / BLOCK_N;
    const int n_tiles = range.empty() ? 0 : lab::ceil_div(range.end, BLOCK_N) - first_tile;
    for (int t = 0; t < n_tiles; ++t)
      for (int w = 0; w < NUM_WARPS; ++w) {
        const int key_w = (first_tile + t) * BLOCK_N + w * WARP_KEYS;
        for (int r = 0; r < ROWS; ++r) {
          if (head[r] < 0) continue;
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
          if (!online_step(tile_max, m[size_t(wr)], l[size_t(wr)], alpha, base)) return;
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
    for (int r = 0; r < ROWS; ++r) {
      if (head[r] < 0) continue;
      float lse_w[NUM_WARPS];
      for (int w = 0; w < NUM_WARPS; ++w) lse_w[w] = split_lse(m[size_t(w * ROWS + r)], l[size_t(w * ROWS + r)]);
      const float lse_b = lab::merged_lse(lse_w, NUM_WARPS);
      const int64_t out_row = (int64_t(b) * pr.t_q + i) * pr.h + head[r];
      for (int c = 0; c < d; ++c) {
        float v = 0.f;
        for (int w = 0; w < NUM_WARPS; ++w) {
          const float lw = l[size_t(w * ROWS + r)];
          const float on = lw > 0.f ? acc[size_t(w * ROWS + r) * d + c] * (1.f / lw) : 0.f;
          v += lab::partial_weight(lse_w[w], lse_b) * on;
        }
        if (splits > 1) part_o[size_t((out_row * splits + split) * d + c)] = v;
        else o[size_t(out_row * d + c)] = lab::round_to(pr.dtype, v);
      }
      if (splits > 1) part_lse[size_t(out_row * splits + split)] = lse_b;
      else lse[size_t(pr.lse_index(b, head[r], i))] = lse_b;
    }
  });
  if (splits > 1)
    lab::parallel_for(int64_t(pr.b) * pr.t_q * pr.h, [&](int64_t row) {
      const float* pl_lse = &part_lse[size_t(row * splits)];
      for (int s = 0; s < splits; ++s)
        if (std::isnan(pl_lse[s])) return;
      const float lse_all = lab::merged_lse(pl_lse, splits);
      for (int c = 0; c < d; ++c) {
        float v = 0.f;
        for (int s = 0; s < splits; ++s) {
          const float w = lab::partial_weight(pl_lse[s], lse_all);
          if (w > 0.f) v += w * part_o[size_t((row * splits + s) * d + c)];
        }
        o[size_t(row * d + c)] = lab::round_to(pr.dtype, v);
      }
      const int i = int((row / pr.h) % pr.t_q), b = int(row / pr.h / pr.t_q), h = int(row % pr.h);
      lse[size_t(pr.lse_index(b, h, i))] = lse_all;
    });
  lab::CpuRun run;
  run.extra_host_bytes = int64_t(k_pool.size() + v_pool.size()) * 4 + split_workspace_bytes(pr, pl);
  run.metrics = memory_metrics(pr, cache);
  run.metrics["splits"] = splits;
  run.metrics["keys_per_split"] = pl.split.keys_per_split;
  run.metrics["splits_model_sms"] = kModelSms;
  return run;
}

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a)  // the host-only memory simulation has its own options
    if (std::string(argv[a]) == "--simulate") return lab::simulation_main(argc, argv);
  lab::Section s;
  s.name = "06_paged";
  s.title = "decode over a paged KV cache: block tables, block allocator (§12.9.4); --simulate: memory simulation";
  s.variants = {"single", "split"};
  s.bugs = {"gqa-index", "table-entry-oob", "table-too-short"};
  s.dtypes = {lab::DType::f16, lab::DType::bf16};
  s.supports_ragged_kv = true;
  s.has_splits = true;
  s.ragged_kv_default = true;
  s.default_problem.b = 8;
  s.default_problem.h = 32;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = 1;
  s.default_problem.t_kv = 4096;
  s.default_problem.d = 128;
  s.default_problem.dtype = lab::DType::f16;
  s.default_problem.page_size = 16;
  s.workspace_bytes = [](const lab::Problem& p, const std::string& variant) {
    const int blocks = lab::build_paged_cache(lengths_of(p), p.t_kv, p.page_size, 0).num_blocks;
    return pool_bytes(p, blocks) + split_workspace_bytes(p, make_plan(p, variant, 256, 128));  // splits: a 256-SM bound
  };
  s.workspace_what = "paged pool and split partials";
  // Runs before anything is printed or allocated: the tables are built (deterministic: lengths
  // and permutation come from --seed) and checked here, so a bad table is refused in one line.
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (p.page_size < 16) return "the paged cache needs --page-size (a positive multiple of 16)";
    if (int64_t(p.b) * p.t_q * p.h > (int64_t(1) << 31) - 1) return "B*T_q*H must be < 2^31 (one grid dimension)";
    const std::vector<int> lengths =
        o.ragged_kv ? lab::make_kv_lengths(p.b, p.t_kv, o.seed) : std::vector<int>(size_t(p.b), p.t_kv);
    if (o.cpu || !tables_unchecked())
      if (std::string bad = lab::check_block_tables(make_cache(lengths, p, o.seed, o.bug)); !bad.empty()) return bad;
    return "";
  };
  s.supports_window = true;
  s.paged = true;
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
