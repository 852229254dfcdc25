// 07 sliding window (§12.9.5, Mistral): causal attention in which query i sees only its W most
// recent keys, i - W < j <= i (absolute positions; bottom-right aligned when T_q != T_kv, as
// everywhere in the lab). The work drops from T²/2 query-key pairs to T·W - W²/2: O(T·W).
//
// What this step adds over 04 (whose mma kernel it keeps as it is: Tensor Cores, 4 warps of 16
// query rows, Q in registers, 64-key K/V tiles in a 2-stage cp.async ring, swizzled shared memory):
//   - The tile skip. The rows [q0, q1) of a Q tile attend key ranges whose two ends both grow
//     with the row, so together they attend one run of keys, and the K/V tiles that meet it are
//     exactly those holding a key some row attends. A block walks only those: once the window is
//     full, W/64 + 1 or + 2 tiles per Q tile wherever the tile sits, against 04's q0/64 + 1
//     under a plain causal mask. (EXERCISE tile-span.)
//   - The second mask edge. 04 masks one tile per warp, the diagonal; a window adds the tile(s)
//     where it starts. A warp masks per element only the tiles its 16 rows do not all see whole;
//     every other tile runs 04's loop untouched. (EXERCISE edge-mask.)
//   - The kernel counts the K/V tiles its blocks visit (one atomicAdd per block); the host counts
//     them row by row (count_tiles); a difference fails the run (metrics tiles_visited,
//     tiles_expected, tiles_total), so a skip that is wrong but hidden by the mask is caught too.
// Variants. The lesson (the tile span and the edge mask) runs on two kernels: 04's mma kernel in
// this file, and section 08's Hopper kernel (common/hopper/ws_forward.cuh: TMA, an mbarrier ring, a
// producer warp, two consumer warpgroups on wgmma), which asks this file for its rules
// (HopperRules below: the same kv_tile_span and mask_edges the mma kernel calls) and section 08's
// file for its ring protocol (08 comes first for the Hopper variants: until 08's ring_slot() is
// written, `window` and `full` say so and run the mma kernel).
//   window       the tile skip, on the Hopper kernel where it runs (an H100/H200 and 08's protocol
//                written), else on the mma kernel (metrics.kernel says which). With --causal and no
//                --window it is plain causal attention on the same kernel: the time the window's is
//                compared with (the bench runs both). With neither, and no --t: --causal --window 512.
//   full         the same kernel with SKIP = false: every K/V tile 0 .. ceil(T_kv / tile) is
//                loaded and computed, what lies outside the window masked. Its time minus window's
//                is what the skip saves, measured on one kernel.
//   window-mma, full-mma   the same two on the mma kernel everywhere (64-row Q, 64-key K/V tiles):
//                FlashAttention-2's design, the ceiling of mma.sync on an H200 (see the handout).
//   window-q128  window-mma with 8 warps (128-row Q tiles): each K/V tile brought into shared memory
//                serves twice the query rows, halving the L2 -> SM traffic (~5 TB/s of K/V at 04's
//                ~330 TFLOP/s with 64-row tiles: a large share of what the L2 can deliver, not
//                measured here). One block (8 warps) per SM instead of two of 4. An experiment:
//                which of the two is faster is for the H200 to say.
// Expected effect: the window's time over plain causal's, at W = 4096, should approach the FLOP
// ratio (T·W - W²/2) / (T²/2): 1 at T = 4096, 0.75 at 8192, 0.44 at 16384, 0.23 at 32768, 0.12 at 65536. Above it:
// the 1-2 extra tiles per Q tile at the window edge (~1.5 / 64 at W = 4096) and their masking.
// --bug inverted-window (常见坑 "sliding window + causal mask 双重判断写颠倒"): the window's test written
// the wrong way round, keeping keys j <= i - W and dropping those inside the window; both the tile
// skip and the mask follow it, so the kernel attends the causal keys before the window instead.
// Exercise (ch12/07_sliding_window.md): kv_tile_span (EXERCISE tile-span) and the per-element
// edge mask (EXERCISE edge-mask), which the kernels and the CPU model share; and, in the mma
// kernel, 04's online softmax again (EXERCISE mma-online-softmax: GPU only).
// Registers per thread (ptxas -v, CUDA 13.0, sm_90, no spills): window and full D=64: 156-157,
// D=128: 215 (3 blocks of 4 warps per SM at D=64, 2 at D=128); window-q128 D=64: 155, D=128: 211
// (1 block of 8 warps). sm_80: 4 fewer.
// Shared memory: 32 KB (D=64) / 64 KB (D=128) per block.
// Run: build/bin/07_sliding_window                 (T = 2048, causal, W = 512: prints the tiles skipped)
//      scripts/lab run 07 -- --t 4096 --causal --window 1024            (your stub)
//      build/bin/07_sliding_window --t 16384 --causal --window 4096 --h 16 --d 128 --dtype bf16
//      build/bin/07_sliding_window --variant full --t 16384 --causal --window 4096 --h 16 --d 128 --dtype bf16
//      build/bin/07_sliding_window --cpu --t 1000 --causal --window 100   (the CPU model)
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"    // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers
#include "hopper/ws_forward.cuh"  // section 08's Hopper kernel skeleton, run with this section's rules (below)

// Section 08's ring protocol, as written in section 08's file beside this one (yours, in labs/):
// 07's Hopper variants run on it. Without that file, or until its ring_slot() is written, they
// run on the mma kernel and say so.
#if __has_include("08_tma_skeleton.cu")
#define LAB_RING_PROTOCOL_ONLY
#include "08_tma_skeleton.cu"
#undef LAB_RING_PROTOCOL_ONLY
#define LAB_HAVE_RING_PROTOCOL 1
#else
#define LAB_HAVE_RING_PROTOCOL 0
#endif

using namespace lab::sm80;

struct Shape {  // what the kernel and the CPU model need of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  int window;            // W (0: none)
  bool inverted_window;  // --bug inverted-window
  float scale;           // 1/sqrt(D)
  float scale_log2;      // scale · log2(e): exp(scale·x) = exp2(scale_log2·x)
};

constexpr int ROWS_PER_WARP = 16;  // one m16 tile of query rows per warp
constexpr int BLOCK_KV = 64;       // keys per K/V tile
constexpr int STAGES = 2;          // K/V ring: tile j computes while j+1 loads

template <int HEAD_DIM, int WARPS>
struct Tiles {
  static constexpr int THREADS = WARPS * 32;
  static constexpr int BLOCK_Q = WARPS * ROWS_PER_WARP;  // 64 (window, full) or 128 (window-q128)
  static constexpr int CHUNKS = HEAD_DIM / 8;            // 16-byte chunks per row of a tile
  static constexpr int D_STEPS = HEAD_DIM / 16;          // k-steps of S = Q Kᵀ (16 columns of D each)
  static constexpr int KV_STEPS = BLOCK_KV / 16;         // k-steps of O = P V (16 keys each)
  static constexpr int S_BLOCKS = BLOCK_KV / 8;          // n-blocks of S (8 keys each)
  static constexpr int O_BLOCKS = HEAD_DIM / 8;          // n-blocks of O (8 columns each)
  static constexpr int ROW_BYTES = HEAD_DIM * 2;
  static constexpr int TILE_BYTES = BLOCK_KV * ROW_BYTES;
  static constexpr int SMEM_BYTES = STAGES * 2 * TILE_BYTES;  // [STAGES][K, V][BLOCK_KV][D]: 32 / 64 KB
  // Blocks per SM (launch bounds): 4 warps as 04 (registers allow 3 at D = 64, 2 at D = 128); 8 warps: 1.
  static constexpr int MIN_BLOCKS = WARPS == 8 ? 1 : HEAD_DIM == 64 ? 3 : 2;
  static_assert(WARPS == 4 || WARPS == 8, "64- or 128-row Q tiles");
  static_assert(BLOCK_Q * ROW_BYTES <= 2 * TILE_BYTES, "the Q tile fits in stage 1's K and V slots");
  static_assert(S_BLOCKS % 2 == 0 && O_BLOCKS % 2 == 0, "ldmatrix.x4 covers 2 n-blocks");
  static_assert(32 * (D_STEPS - 1) < ROW_BYTES, "the k-step XOR stays inside a row");
};

// ---------------------------------------------------------------------------------------------
// The keys query row i attends: lab::visible_keys (causal bottom-right aligned; with a window, the
// W most recent keys of its position, itself included). --bug inverted-window writes the window's
// test the wrong way round: keys j <= pos - W kept, the W inside the window dropped. The tile
// skip and the mask below both derive from this one range, so the bug corrupts them together.
LAB_HD lab::KeyRange attended_keys(int i, const Shape& sh) {
  const lab::KeyRange keys = lab::visible_keys(i, sh.t_q, sh.t_kv, sh.causal, sh.window);
  if (!sh.inverted_window || sh.window <= 0) return keys;
  return {lab::visible_keys(i, sh.t_q, sh.t_kv, sh.causal, 0).begin, keys.begin};  // [0, window start)
}

using TileSpan = lab::ws::TileSpan;  // the K/V tiles [first, end) a Q tile visits; end < first: not computed (the stub)

// The K/V tiles of block_kv keys that the query rows [q_begin, q_end) visit (q_begin < q_end <= T_q).
// skip = false (variant full): all of them. (block_kv: 64 in the mma kernel, 128 in the Hopper one.)
LAB_HD TileSpan kv_tile_span(int q_begin, int q_end, const Shape& sh, bool skip, int block_kv) {
  // BEGIN EXERCISE tile-span: the K/V tiles of block_kv keys that the Q tile [q_begin, q_end) must visit.
  //   skip == false (variant full): every K/V tile of the sequence.
  //   skip == true: only the tiles holding a key that some row of the Q tile attends. Row i
  //   attends attended_keys(i, sh) (use it: --bug inverted-window changes it). Both ends of that
  //   range grow with i: which rows decide where the Q tile's keys start and where they end?
  //   Turn that run of keys into tiles of block_kv; an empty run is an empty span (a block that
  //   writes O = 0), not the stub's span.
  //   The host counts, row by row, the tiles holding a key some row attends; the kernel's count of
  //   the tiles it visited must agree, so a span that is too wide fails even when the mask hides it.
  //   Until this returns a span with end >= first, the kernel and the CPU model write nothing.
  //   Stuck? ch12/hints/07_sliding_window.md has the formula.
  // STUB: (void)q_begin; (void)q_end; (void)sh; (void)skip; (void)block_kv;
  // STUB: return {0, -1};
  if (!skip) return {0, lab::ceil_div(sh.t_kv, block_kv)};
  const int begin = attended_keys(q_begin, sh).begin, end = attended_keys(q_end - 1, sh).end;
  if (end <= begin) return {0, 0};
  return {begin / block_kv, lab::ceil_div(end, block_kv)};
  // END EXERCISE
}

// The edge mask of one S tile of a warp: 16 rows (this thread's row_g and row_g + 8) x 8·N_BLOCKS
// keys from kv0, in the m16n8 accumulator layout: element e of n-block nb is row row_g (e < 2) or
// row_g + 8 (e >= 2), key kv0 + 8·nb + 2t + (e & 1). Every key of [whole_begin, whole_end) is
// attended by all 16 rows of the warp. (The Hopper kernel's wgmma accumulator is this layout too,
// repeated over its 16 n-blocks: the same function masks both kernels.)
template <int N_BLOCKS>
LAB_HD void mask_edges(float (&s)[N_BLOCKS][4], int kv0, int row_g, int t, int whole_begin, int whole_end,
                       const Shape& sh) {
  // BEGIN EXERCISE edge-mask: in the tiles at the edges of the warp's keys, set the score of every key its row does not attend to -INFINITY.
  //   Every key of [whole_begin, whole_end) is attended by all 16 rows of the warp: a tile inside
  //   it needs no mask (most tiles: leave them alone, it is the fast path). A tile that is not has
  //   an edge in it: the diagonal (or the ragged end of K/V), or the window's start. There, each
  //   element whose key its row does not attend (attended_keys(row, sh)) becomes -INFINITY. The
  //   layout of s is in the comment above. Testing only the diagonal, as 04 does, leaves the
  //   window open at the bottom: every row would see all the keys before it.
  //   Stuck? ch12/hints/07_sliding_window.md has the test and the loop's shape.
  // STUB: (void)s; (void)kv0; (void)row_g; (void)t; (void)whole_begin; (void)whole_end; (void)sh;
  if (kv0 < whole_begin || kv0 + 8 * N_BLOCKS > whole_end) {
    const lab::KeyRange keys[2] = {attended_keys(row_g, sh), attended_keys(row_g + 8, sh)};
#pragma unroll
    for (int nb = 0; nb < N_BLOCKS; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (!keys[e >> 1].contains(kv0 + 8 * nb + 2 * t + (e & 1))) s[nb][e] = -INFINITY;
  }
  // END EXERCISE
}

// ---------------------------------------------------------------------------------------------
// The kernel: 04's mma kernel (see 04_fp16.cu and ch12/04_fp16.md for the fragment layouts of
// mma.m16n8k16, ldmatrix and the swizzle), walking the span above. One block = one Q tile of
// BLOCK_Q rows of one (sequence, head); warp w owns rows q0 + 16w .. q0 + 16w + 15.
template <class T, int HEAD_DIM, int WARPS, bool SKIP>
__global__ void __launch_bounds__(WARPS * 32, Tiles<HEAD_DIM, WARPS>::MIN_BLOCKS)
window_kernel(const T* __restrict__ q,  // [B, T_q, H, D]
              const T* __restrict__ k,  // [B, T_kv, H_kv, D]
              const T* __restrict__ v,  // [B, T_kv, H_kv, D]
              T* __restrict__ o,        // [B, T_q, H, D]
              float* __restrict__ lse,  // [B, H, T_q]
              unsigned long long* __restrict__ tiles_visited,  // [1]: K/V tiles visited, all blocks
              Shape sh) {
  using TL = Tiles<HEAD_DIM, WARPS>;
  constexpr int BLOCK_Q = TL::BLOCK_Q, THREADS = TL::THREADS;
  extern __shared__ __align__(128) unsigned char smem[];  // [STAGES][K, V][BLOCK_KV][D], swizzled
  const uint32_t smem_base = smem_addr(smem);
  auto k_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 0) * TL::TILE_BYTES); };
  auto v_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 1) * TL::TILE_BYTES); };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates: rows g, g+8; columns 2t, 2t+1
  // Causal: the bottom Q tiles go first. Without a window they are the heaviest; with one, every
  // Q tile past the first W/BLOCK_Q costs the same and the light ones (whose window the start of
  // the sequence cuts short) are left for the tail.
  const int q_tile = sh.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int q0 = q_tile * BLOCK_Q;
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;
  const T* q_head = q + (int64_t(b) * sh.t_q * sh.h + head) * HEAD_DIM;  // row i at + i·q_stride
  const T* k_head = k + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;
  const T* v_head = v + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;

  const TileSpan span = kv_tile_span(q0, lab::imin(q0 + BLOCK_Q, sh.t_q), sh, SKIP, BLOCK_KV);
  if (span.end < span.first) return;  // the stub's span: nothing visited, nothing written
  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BLOCK_KV;
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(k_tile(stage), k_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(v_tile(stage), v_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
  };

  // Prologue: the Q tile goes through stage 1's K and V slots (free until tile 1 is issued), the
  // first K/V tile into stage 0, then Q moves to registers for good.
  load_tile_swizzled<BLOCK_Q, TL::CHUNKS, THREADS>(k_tile(1), q_head + q0 * q_stride, q_stride, sh.t_q - q0);
  if (span.first < span.end) load_kv(0, span.first);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // the Q tile (and K/V tile 0) written by every thread is visible to all
  // ldmatrix row addresses of this lane at k-step 0 (byte offsets in a tile; step kk: ^ 32·kk), as 04.
  const uint32_t q_lane = swizzle<TL::CHUNKS>(warp * ROWS_PER_WARP + (lane & 15), lane >> 4);
  const uint32_t k_lane = swizzle<TL::CHUNKS>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzle<TL::CHUNKS>(lane & 15, lane >> 4);
  constexpr uint32_t ROWS16 = 16 * TL::ROW_BYTES;  // 16 rows further down a tile
  uint32_t q_frag[TL::D_STEPS][4];
#pragma unroll
  for (int kk = 0; kk < TL::D_STEPS; ++kk) ldmatrix_x4(q_frag[kk], k_tile(1) + (q_lane ^ (32u * kk)));

  // Per-thread state of rows g and g+8 of the warp: index r = 0 for row g, 1 for row g+8.
  float o_acc[TL::O_BLOCKS][4] = {};  // unnormalised O, C-fragment layout (c0, c1: row g; c2, c3: row g+8)
  float m[2] = {-INFINITY, -INFINITY};  // running row max of the raw scores Q·K (the quad agrees)
  float l[2] = {0.f, 0.f};              // this lane's part of the row sum (its 2 columns per n-block)
  const int warp_q0 = q0 + warp * ROWS_PER_WARP;
  const int row_g = warp_q0 + g;
  // The keys every row of the warp attends: [whole_begin, whole_end), from the last row's first
  // key to the first row's last (both ends grow with the row). A tile inside it is whole for all
  // 16 rows and needs no mask; the others are the edges.
  const int whole_begin = attended_keys(warp_q0 + ROWS_PER_WARP - 1, sh).begin;
  const int whole_end = attended_keys(warp_q0, sh).end;
  const float scale_log2 = sh.scale_log2;

  int visited = 0;
  int stage = 0;
  for (int tile = span.first; tile < span.end; ++tile, stage ^= 1) {
    cp_async_wait<0>();  // this thread's copies of `tile` have landed ...
    __syncthreads();     // ... and everyone's; and every warp is done reading the other stage
                         // (tile - 1, or Q on the first pass), which the next line overwrites
    if (tile + 1 < span.end) load_kv(stage ^ 1, tile + 1);
    cp_async_commit();
    ++visited;

    // S = Q K_tileᵀ   [16 rows x BLOCK_KV keys] per warp, fp32.
    float s[TL::S_BLOCKS][4] = {};
#pragma unroll
    for (int nb2 = 0; nb2 < TL::S_BLOCKS / 2; ++nb2)
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        uint32_t kf[4];
        ldmatrix_x4(kf, k_tile(stage) + nb2 * ROWS16 + (k_lane ^ (32u * kk)));
        mma_16816<T>(s[2 * nb2], q_frag[kk], kf[0], kf[1]);
        mma_16816<T>(s[2 * nb2 + 1], q_frag[kk], kf[2], kf[3]);
      }

    mask_edges<TL::S_BLOCKS>(s, tile * BLOCK_KV, row_g, t, whole_begin, whole_end, sh);  // (EXERCISE edge-mask)

    // BEGIN EXERCISE mma-online-softmax: the online softmax of rows g and g+8 on the fragment, as
    //   you wrote it in 04 (EXERCISE mma-online-softmax there: this kernel is 04's, with the window
    //   added). One case matters more here: a row can meet a tile in which it attends no key (at the
    //   window's start the block visits a tile for its later rows), so its max can still be -inf.
    // STUB: (void)m; (void)l; (void)scale_log2;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < TL::S_BLOCKS; ++nb) tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m[r], tile_max);
      const float max_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
      const float alpha = fast_exp2(fmaf(m[r], scale_log2, -max_scaled));
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int nb = 0; nb < TL::O_BLOCKS; ++nb) {
        o_acc[nb][2 * r] *= alpha;
        o_acc[nb][2 * r + 1] *= alpha;
      }
#pragma unroll
      for (int nb = 0; nb < TL::S_BLOCKS; ++nb)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          s[nb][e] = fast_exp2(fmaf(s[nb][e], scale_log2, -max_scaled));
          l[r] += s[nb][e];
        }
    }
    // END EXERCISE

    // O += P V   [16 x BLOCK_KV] · [BLOCK_KV x D]: P from the S registers, V by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) {
      const uint32_t p_frag[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int db2 = 0; db2 < TL::O_BLOCKS / 2; ++db2) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, v_tile(stage) + kk * ROWS16 + (v_lane ^ (32u * db2)));
        mma_16816<T>(o_acc[2 * db2], p_frag, vf[0], vf[1]);
        mma_16816<T>(o_acc[2 * db2 + 1], p_frag, vf[2], vf[3]);
      }
    }
  }

  // The deferred normalisation (04's EXERCISE mma-finalize): O = o_acc / l, LSE = m·scale + log l;
  // a row that saw no key (T_q > T_kv) gets O = 0, LSE = -inf.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float row_sum = l[r];
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
    const int i = row_g + 8 * r;
    if (i >= sh.t_q) continue;
    const float inv_l = row_sum > 0.f ? 1.f / row_sum : 0.f;
    T* o_row = o + (int64_t(b) * sh.t_q + i) * q_stride + int64_t(head) * HEAD_DIM;
#pragma unroll
    for (int nb = 0; nb < TL::O_BLOCKS; ++nb)
      *reinterpret_cast<Vec2<T>*>(o_row + 8 * nb + 2 * t) =
          from_float2<T>(o_acc[nb][2 * r] * inv_l, o_acc[nb][2 * r + 1] * inv_l);
    if (t == 0)
      lse[(int64_t(b) * sh.h + head) * sh.t_q + i] = row_sum > 0.f ? m[r] * sh.scale + logf(row_sum) : -INFINITY;
  }
  if (threadIdx.x == 0) atomicAdd(tiles_visited, static_cast<unsigned long long>(visited));
}

// ---------------------------------------------------------------------------------------------
// The same lesson on the Hopper kernel (common/hopper/ws_forward.cuh: section 08's warp-specialised
// forward in its ws-pingpong schedule, TMA into an mbarrier ring, wgmma; 128 query rows, 192 at
// D = 64, and 128 keys per tile). The kernel asks this section for its rules: the keys a row
// attends (attended_keys), the K/V tiles a block and each of its consumer warpgroups walk
// (kv_tile_span at 128 keys: EXERCISE tile-span) and the mask of an S tile (mask_edges on the wgmma
// accumulator, 16 n-blocks: EXERCISE edge-mask). A block counts the tiles it loads, as the mma
// kernel does. The ring protocol (slots, phases, the producer loop, the consumers' wait and
// release) is section 08's exercise: it comes from 08's file.
namespace ws = lab::ws;
// The kernel's parameters with this section's own fields (the kernel passes them on as ws::Params).
struct WindowParams : ws::Params {
  int inverted_window;                // --bug inverted-window
  unsigned long long* tiles_visited;  // [1]: the K/V tiles the blocks visit
};
#if LAB_HAVE_RING_PROTOCOL
template <bool SKIP>
struct HopperRules : ring::Protocol<ring::KvSource::contiguous> {
  using KernelParams = WindowParams;
  LAB_HD static const WindowParams& own(const ws::Params& p) { return static_cast<const WindowParams&>(p); }
  LAB_HD static Shape shape_of(const ws::Params& p) {
    return Shape{p.t_q, p.t_kv, p.h, p.h_kv, p.causal, p.window, own(p).inverted_window != 0, p.scale, p.scale_log2};
  }
  LAB_HD static lab::KeyRange visible_keys(int row, const ws::Params& p) { return attended_keys(row, shape_of(p)); }
  LAB_HD static TileSpan tile_span(int q_begin, int q_end, const ws::Params& p, int block_kv) {
    if (q_begin >= p.t_q) return {0, 0};  // a warpgroup whose rows are all past T_q
    return kv_tile_span(q_begin, lab::imin(q_end, p.t_q), shape_of(p), SKIP, block_kv);  // (128: the kernel's default)
  }
  __device__ __forceinline__ static void mask_tile(float (&s)[ws::BLOCK_KV / 2], const ws::Params& p, int kv0,
                                                   int row_g, int t, int whole_begin, int whole_end) {
    mask_edges<ws::BLOCK_KV / 8>(reinterpret_cast<float (&)[ws::BLOCK_KV / 8][4]>(s), kv0, row_g, t, whole_begin,
                                 whole_end, shape_of(p));
  }
  __device__ __forceinline__ static bool begin_block(const ws::Params& p, TileSpan span) {
    if (span.end < span.first) return false;  // the stub's span: nothing visited, nothing written
    if (threadIdx.x == 0) atomicAdd(own(p).tiles_visited, static_cast<unsigned long long>(span.count()));
    return true;
  }
};
#endif

// ---------------------------------------------------------------------------------------------
// Host side: which kernel a variant is, the tile count the predicate expects, the launchers.
//   window, full      the Hopper kernel where it can run (an H100/H200, this binary built for
//                     sm_90a: CMake adds it), else the mma kernel; the record says which (metrics.kernel)
//   window-mma, full-mma, window-q128   the mma kernel everywhere (04's, 64 or 128 query rows)
enum class Kernel { mma, hopper };
struct VariantConfig {
  Kernel kernel;
  int warps;  // mma: 4 or 8 warps of 16 rows
  bool skip;
  int d;
  int block_q() const {
    return kernel == Kernel::hopper ? ws::pingpong_consumers(d) * ws::WG_ROWS : warps * ROWS_PER_WARP;
  }
  int block_kv() const { return kernel == Kernel::hopper ? ws::BLOCK_KV : BLOCK_KV; }
  const char* name() const { return kernel == Kernel::hopper ? "hopper (wgmma, TMA, warp-specialised)" : "mma (mma.sync, cp.async)"; }
};
VariantConfig config_of(const std::string& variant, bool hopper, int d) {
  const Kernel k = hopper ? Kernel::hopper : Kernel::mma;
  if (variant == "full") return {k, 4, false, d};
  if (variant == "window-mma") return {Kernel::mma, 4, true, d};
  if (variant == "full-mma") return {Kernel::mma, 4, false, d};
  if (variant == "window-q128") return {Kernel::mma, 8, true, d};
  return {k, 4, true, d};
}

// The Hopper kernel runs here: an H100/H200, sm_90a code in this binary, and section 08's ring
// protocol written (its file beside this one, its ring_slot() no longer the stub); else `window`
// and `full` say so and run the mma kernel.
bool hopper_kernel_runs(const lab::DeviceInfo& dev, bool quiet) {
#if LAB_HAVE_RING_PROTOCOL
  return ws::hopper_kernel_runs(dev, ws::ws_kernel<__nv_bfloat16, 64, true, HopperRules<true>, 3, true>,
                                ring::ring_slot(0, 3).stage >= 0, "07_sliding_window", quiet);
#else
  return ws::hopper_kernel_runs(dev, nullptr, false, "07_sliding_window", quiet);
#endif
}

// The K/V tiles a variant must visit, counted row by row over every (Q tile, K/V tile) pair of
// one (sequence, head) (all of them have the same T_q and T_kv), times B·H: `window` visits the
// tiles holding a key some row attends, `full` every one. It is the independent count the kernel's
// span is checked against, so it takes each row's range from lab::visible_keys (the rule itself,
// not attended_keys: --bug inverted-window must disagree with it) and assumes nothing about how
// the ranges move from row to row.
struct TileCount {
  int64_t visible = 0;  // tiles holding a key some row attends: what the skip visits
  int64_t partial = 0;  // of those, the tiles some row does not attend whole: masked at an edge
  int64_t total = 0;    // every tile: what `full` visits
  int64_t expected(bool skip) const { return skip ? visible : total; }
};
TileCount count_tiles(const lab::Problem& p, int block_q, int block_kv) {
  const int q_tiles = lab::ceil_div(p.t_q, block_q), kv_tiles = lab::ceil_div(p.t_kv, block_kv);
  std::vector<TileCount> per_q_tile(static_cast<size_t>(q_tiles));
  lab::parallel_for(q_tiles, [&](int64_t qt) {
    const int q0 = int(qt) * block_q, q1 = std::min(q0 + block_q, p.t_q);
    // One pass over the rows: each row that sees a key adds +1 at its first tile and -1 past its
    // last (a running sum over the tiles is then the number of rows meeting each one), and the
    // keys every row attends are [latest begin, earliest end) (none if some row sees no key).
    std::vector<int> rows_meeting_step(static_cast<size_t>(kv_tiles) + 1, 0);
    int latest_begin = 0, earliest_end = p.t_kv;
    bool every_row_sees = true;
    for (int i = q0; i < q1; ++i) {
      const lab::KeyRange keys = lab::visible_keys(i, p.t_q, p.t_kv, p.causal, p.window);
      if (keys.empty()) {
        every_row_sees = false;
        continue;
      }
      ++rows_meeting_step[size_t(keys.begin / block_kv)];
      --rows_meeting_step[size_t(lab::ceil_div(keys.end, block_kv))];
      latest_begin = std::max(latest_begin, keys.begin);
      earliest_end = std::min(earliest_end, keys.end);
    }
    TileCount& c = per_q_tile[size_t(qt)];
    int rows_meeting = 0;
    for (int kt = 0; kt < kv_tiles; ++kt) {
      rows_meeting += rows_meeting_step[size_t(kt)];
      if (rows_meeting == 0) continue;  // no row attends a key of it: skipped
      ++c.visible;
      // Whole for every row: inside [latest_begin, earliest_end), hence also inside T_kv (a
      // ragged last tile is always masked).
      const bool whole = every_row_sees && latest_begin <= kt * block_kv && earliest_end >= (kt + 1) * block_kv;
      c.partial += !whole;
    }
  });
  TileCount all;
  for (const TileCount& c : per_q_tile) {
    all.visible += c.visible;
    all.partial += c.partial;
  }
  const int64_t heads = int64_t(p.b) * p.h;
  all.visible *= heads;
  all.partial *= heads;
  all.total = int64_t(q_tiles) * kv_tiles * heads;
  return all;
}

// The tile metrics of a run, a one-line summary for humans, and the verdict on the count. The
// summary is printed (a GPU run) or, where `line` is given, handed back (the CPU model's header,
// printed under its banner).
std::string report_tiles(nlohmann::json& metrics, const TileCount& want, bool skip, int64_t visited, bool quiet,
                         bool cpu, std::string* line = nullptr) {
  metrics["tiles_visited"] = visited;
  metrics["tiles_expected"] = want.expected(skip);
  metrics["tiles_total"] = want.total;
  metrics["tiles_partial"] = want.partial;
  if (!quiet) {
    char buf[256];
    // No tile visited where rows see keys is no saving: an empty span (a stub's), said so.
    const std::string skipped =
        visited == 0 && want.visible > 0
            ? std::string("none visited: an empty span, still the stub?")
            : lab::format_number("%.1f", want.total ? 100.0 * double(want.total - visited) / double(want.total) : 0.0) +
                  "% skipped";
    std::snprintf(buf, sizeof buf, "07_sliding_window%s: visited %lld of %lld K/V tiles (%s); row by row: %lld visible, %lld of them masked at an edge\n",
                  cpu ? " (CPU model)" : "", static_cast<long long>(visited), static_cast<long long>(want.total),
                  skipped.c_str(), static_cast<long long>(want.visible), static_cast<long long>(want.partial));
    if (line) *line += buf;
    else std::fputs(buf, stdout);
  }
  if (visited == want.expected(skip)) return "";
  return std::string(cpu ? "the CPU model" : "the kernel") + " visited " + std::to_string(visited) + " K/V tiles, but the row-by-row count says " +
         std::to_string(want.expected(skip)) + (skip ? " (those holding a key some row attends)" : " (every tile)") +
         ": the tile span is wrong";
}

// mask_edges asked directly (EXERCISE edge-mask), on one warp's fragments, every lane, at the edges:
// the diagonal tile, the window's start and a tile between them that all 16 rows attend whole
// (T = 300, causal, W = 160, rows 192..207), and the ragged end of K/V (T = 100, not causal, rows
// 0..15). A wrong mask shows in O as an error at some row; this names the call and the element.
// Every score is 1 before the call; an element must come back -inf where its row does not attend
// the key (attended_keys), 1 elsewhere. Asked on the host by the CPU model and after a GPU run: the
// same source the kernels compile. The first wrong element, or "".
std::string edge_mask_probe() {
  struct Probe {
    Shape sh;
    const char* shape;
    int warp_q0, kv0;
  };
  const Shape windowed{300, 300, 1, 1, true, 160, false, 1.f, 1.f}, ragged{100, 100, 1, 1, false, 0, false, 1.f, 1.f};
  const Probe probes[] = {{windowed, "T=300, causal, W=160", 192, 192},  // the diagonal
                          {windowed, "T=300, causal, W=160", 192, 0},    // the window's start
                          {windowed, "T=300, causal, W=160", 192, 64},   // whole for rows 192..207
                          {ragged, "T=100, not causal", 0, 64}};         // keys 100..127 past T_kv
  for (const Probe& p : probes) {
    const int whole_begin = attended_keys(p.warp_q0 + ROWS_PER_WARP - 1, p.sh).begin;
    const int whole_end = attended_keys(p.warp_q0, p.sh).end;
    for (int row_g = p.warp_q0; row_g < p.warp_q0 + 8; ++row_g)
      for (int t = 0; t < 4; ++t) {
        float s[8][4];
        std::fill(&s[0][0], &s[0][0] + 8 * 4, 1.f);
        mask_edges<8>(s, p.kv0, row_g, t, whole_begin, whole_end, p.sh);
        for (int nb = 0; nb < 8; ++nb)
          for (int e = 0; e < 4; ++e) {
            const int row = row_g + 8 * (e >> 1), key = p.kv0 + 8 * nb + 2 * t + (e & 1);
            const lab::KeyRange keys = attended_keys(row, p.sh);
            const float want = keys.contains(key) ? 1.f : -INFINITY;
            if (s[nb][e] == want) continue;  // (NaN equals nothing)
            const std::string r = "row " + std::to_string(row), k = "key " + std::to_string(key);
            const std::string attends =
                r + " attends keys " + std::to_string(keys.begin) + ".." + std::to_string(keys.end - 1);
            std::string why;
            if (keys.contains(key)) why = attends + ": its score must stay as it was";
            else if (key >= p.sh.t_kv) why = k + " is past the end of K/V (T_kv = " + std::to_string(p.sh.t_kv) + ")";
            else if (key >= keys.end) why = k + " is after " + r + "'s diagonal (" + attends + ")";
            else why = k + " is before " + r + "'s window (W = " + std::to_string(p.sh.window) + ": " + attends + ")";
            return "EXERCISE edge-mask, asked on a shape of its own: mask_edges<8>(s, kv0=" + std::to_string(p.kv0) + ", row_g=" + std::to_string(row_g) + ", t=" +
                   std::to_string(t) + ", whole_begin=" + std::to_string(whole_begin) + ", whole_end=" +
                   std::to_string(whole_end) + ", sh: " + p.shape + ") left s[" + std::to_string(nb) + "][" +
                   std::to_string(e) + "] (" + r + ", " + k + ") = " + lab::format_number("%g", s[nb][e]) + ", want " +
                   lab::format_number("%g", want) + ": " + why;
          }
      }
  }
  return "";
}

Shape make_shape(const lab::Problem& p, const std::string& bug) {
  return Shape{p.t_q, p.t_kv, p.h, p.h_kv, p.causal, p.window, bug == "inverted-window",
               p.softmax_scale(), p.softmax_scale() * lab::kLog2e};
}

template <class T, int HEAD_DIM, int WARPS, bool SKIP>
std::function<void(cudaStream_t)> make_launch(const lab::RunContext& ctx, const Shape& sh, unsigned long long* counter) {
  using TL = Tiles<HEAD_DIM, WARPS>;
  const auto* q = static_cast<const T*>(ctx.tensors.q);
  const auto* k = static_cast<const T*>(ctx.tensors.k);
  const auto* v = static_cast<const T*>(ctx.tensors.v);
  auto* o = static_cast<T*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  auto* kernel = window_kernel<T, HEAD_DIM, WARPS, SKIP>;
  // More than 48 KB of dynamic shared memory must be asked for (§12 常见坑); the largest carveout
  // lets MIN_BLOCKS blocks share an SM.
  lab::opt_in_shared_memory(kernel, TL::SMEM_BYTES);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
  const dim3 grid(unsigned(lab::ceil_div(sh.t_q, TL::BLOCK_Q)), unsigned(ctx.problem.b * sh.h));
  return [=](cudaStream_t st) {
    kernel<<<grid, TL::THREADS, TL::SMEM_BYTES, st>>>(q, k, v, o, lse, counter, sh);
    CUDA_CHECK_LAST();
  };
}

// The Hopper kernel: tensor maps over Q, K, V (made on the host, 128-byte swizzle), a producer
// warpgroup and CONS consumer warpgroups in ping-pong.
#if LAB_HAVE_RING_PROTOCOL
template <class T, int HEAD_DIM, bool SKIP>
std::function<void(cudaStream_t)> make_hopper_launch(const lab::RunContext& ctx, const Shape& sh,
                                                     unsigned long long* counter) {
  const lab::Problem& pr = ctx.problem;
  WindowParams p{ws::params_of(pr, ctx.tensors.o, ctx.tensors.lse), 0, nullptr};  // (the same values as sh's)
  p.inverted_window = sh.inverted_window ? 1 : 0;
  p.tiles_visited = counter;
  constexpr int CONS = ws::pingpong_consumers(HEAD_DIM), BLOCK_Q = CONS * ws::WG_ROWS;
  const CUtensorMap q_map = ws::make_map(pr, ctx.tensors.q, pr.h, pr.t_q, pr.b, BLOCK_Q);
  const CUtensorMap k_map = ws::make_map(pr, ctx.tensors.k, pr.h_kv, pr.t_kv, pr.b, ws::BLOCK_KV);
  const CUtensorMap v_map = ws::make_map(pr, ctx.tensors.v, pr.h_kv, pr.t_kv, pr.b, ws::BLOCK_KV);
  auto* kernel = ws::ws_kernel<T, HEAD_DIM, true, HopperRules<SKIP>, CONS, true>;
  constexpr int smem = ws::Tiles<HEAD_DIM>::SMEM_BYTES;
  lab::opt_in_shared_memory(kernel, smem);
  const dim3 grid(unsigned(lab::ceil_div(pr.t_q, BLOCK_Q)), unsigned(pr.b * pr.h));
  return [=](cudaStream_t st) {
    kernel<<<grid, (1 + CONS) * ws::WG_THREADS, smem, st>>>(q_map, k_map, v_map, p);
    CUDA_CHECK_LAST();
  };
}
#endif

template <class T, int HEAD_DIM>
std::function<void(cudaStream_t)> make_forward(const lab::RunContext& ctx, const Shape& sh, VariantConfig c,
                                               unsigned long long* counter) {
#if LAB_HAVE_RING_PROTOCOL
  if (c.kernel == Kernel::hopper)
    return c.skip ? make_hopper_launch<T, HEAD_DIM, true>(ctx, sh, counter)
                  : make_hopper_launch<T, HEAD_DIM, false>(ctx, sh, counter);
#endif
  if (c.warps == 8) return make_launch<T, HEAD_DIM, 8, true>(ctx, sh, counter);
  if (c.skip) return make_launch<T, HEAD_DIM, 4, true>(ctx, sh, counter);
  return make_launch<T, HEAD_DIM, 4, false>(ctx, sh, counter);
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Shape sh = make_shape(pr, ctx.bug);
  const VariantConfig c = config_of(ctx.variant, hopper_kernel_runs(ctx.device, ctx.options.quiet), pr.d);
  auto counter = std::make_shared<lab::DeviceBuffer>(sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(counter->get(), 0, counter->bytes()));  // the checked run counts from 0
  auto* count = counter->as<unsigned long long>();
  const bool f16 = pr.dtype == lab::DType::f16;
  lab::GpuRun run;
  std::function<void(cudaStream_t)> launch;
  if (pr.d == 64) launch = f16 ? make_forward<__half, 64>(ctx, sh, c, count) : make_forward<__nv_bfloat16, 64>(ctx, sh, c, count);
  else launch = f16 ? make_forward<__half, 128>(ctx, sh, c, count) : make_forward<__nv_bfloat16, 128>(ctx, sh, c, count);
  run.forward = [launch, counter](cudaStream_t st) { launch(st); };  // the counter lives as long as the forward
  run.extra_device_bytes = int64_t(counter->bytes());
  if (c.kernel == Kernel::hopper)
    run.metrics = {{"stages", pr.d == 64 ? ws::Tiles<64>::STAGES : ws::Tiles<128>::STAGES},
                   {"smem_bytes", pr.d == 64 ? ws::Tiles<64>::SMEM_BYTES : ws::Tiles<128>::SMEM_BYTES},
                   {"threads", (1 + ws::pingpong_consumers(pr.d)) * ws::WG_THREADS},
                   {"consumers", ws::pingpong_consumers(pr.d)}};
  else
    run.metrics = {{"warps", c.warps}, {"stages", STAGES},  // 8 warps: the same shared memory
                   {"smem_bytes", pr.d == 64 ? Tiles<64, 4>::SMEM_BYTES : Tiles<128, 4>::SMEM_BYTES}};
  run.metrics["kernel"] = c.name();
  run.metrics["block_q"] = c.block_q();
  run.metrics["block_kv"] = c.block_kv();
  run.metrics["skip"] = c.skip;
  const TileCount want = count_tiles(pr, c.block_q(), c.block_kv());
  const bool quiet = ctx.options.quiet;
  run.after_check_run = [counter, want, c, quiet](nlohmann::json& metrics) -> std::string {
    unsigned long long visited = 0;  // the checked run's count: the timed runs add to it later
    CUDA_CHECK(cudaMemcpy(&visited, counter->get(), sizeof visited, cudaMemcpyDeviceToHost));
    const std::string tiles = report_tiles(metrics, want, c.skip, static_cast<int64_t>(visited), quiet, false);
    return tiles.empty() ? edge_mask_probe() : tiles;  // what the output cannot name (the probe)
  };
  return run;
}

// ---------------------------------------------------------------------------------------------
// The keys of one K/V tile that the 16 rows of the warp from warp_q0 attend, as the kernels mask
// them: mask_edges (EXERCISE edge-mask) called for each lane's fragment of the tile, with the
// warp's whole range as the mma kernel computes it. attend: [16 rows][8·N_BLOCKS keys].
template <int N_BLOCKS>
void warp_tile_mask(std::vector<char>& attend, int warp_q0, int kv0, const Shape& sh) {
  const int whole_begin = attended_keys(warp_q0 + ROWS_PER_WARP - 1, sh).begin;
  const int whole_end = attended_keys(warp_q0, sh).end;
  for (int g = 0; g < 8; ++g)
    for (int t = 0; t < 4; ++t) {
      float s[N_BLOCKS][4] = {};
      mask_edges<N_BLOCKS>(s, kv0, warp_q0 + g, t, whole_begin, whole_end, sh);
      for (int nb = 0; nb < N_BLOCKS; ++nb)
        for (int e = 0; e < 4; ++e)
          attend[size_t((g + 8 * (e >> 1)) * 8 * N_BLOCKS + 8 * nb + 2 * t + (e & 1))] = s[nb][e] != -INFINITY;
    }
}

// CPU model: the kernel's loop in plain C++, one Q tile of the variant's BLOCK_Q rows at a time:
// the same kv_tile_span, the same mask_edges on each warp's 16 rows (so both exercises run here),
// the online softmax in base 2 with float scores and sums, P rounded to the element type before
// P V (as the mma sees it), O rounded once at the end. A key past T_kv that the mask leaves open
// scores 0 against a zero V row, as the kernels' zero-filled loads give it. It counts the tiles
// it visits against the row-by-row count (count_tiles), and then asks mask_edges about the edges
// directly (edge_mask_probe), as the GPU run does.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
  const Shape sh = make_shape(pr, opt.bug);
  const VariantConfig c = config_of(opt.variant, true, pr.d);  // window, full: the Hopper kernel's tiles
  const int block_q = c.block_q(), block_kv = c.block_kv(), d = pr.d;
  const int q_tiles = lab::ceil_div(pr.t_q, block_q);
  const lab::DType type = pr.dtype;
  std::atomic<int64_t> visited{0};
  lab::parallel_for(int64_t(pr.b) * pr.h * q_tiles, [&](int64_t task) {
    const int qt = int(task % q_tiles), bh = int(task / q_tiles), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const int q0 = qt * block_q, rows = std::min(q0 + block_q, pr.t_q) - q0;
    const TileSpan span = kv_tile_span(q0, q0 + rows, sh, c.skip, block_kv);
    if (span.end < span.first) return;  // the stub's span: nothing written
    std::vector<float> m(size_t(rows), -INFINITY), l(size_t(rows), 0.f), acc(size_t(rows) * size_t(d), 0.f);
    std::vector<float> scores(static_cast<size_t>(block_kv));
    std::vector<char> attend(size_t(ROWS_PER_WARP) * size_t(block_kv));  // one warp's mask of the tile
    for (int tile = span.first; tile < span.end; ++tile) {
      visited += 1;
      const int kv0 = tile * block_kv;
      for (int r = 0; r < rows; ++r) {
        if (r % ROWS_PER_WARP == 0)
          block_kv == 64 ? warp_tile_mask<8>(attend, q0 + r, kv0, sh) : warp_tile_mask<16>(attend, q0 + r, kv0, sh);
        const char* row_attends = &attend[size_t(r % ROWS_PER_WARP) * size_t(block_kv)];
        const float* qr = &in.q[size_t(pr.q_index(b, q0 + r, h))];
        float tile_max = -INFINITY;
        for (int jj = 0; jj < block_kv; ++jj) {  // S = q·k (float), -inf where the mask says so
          scores[size_t(jj)] = -INFINITY;
          if (!row_attends[jj]) continue;
          float dot = 0.f;
          if (kv0 + jj < pr.t_kv) {
            const float* kr = &in.k[size_t(pr.kv_index(b, kv0 + jj, hk))];
            for (int x = 0; x < d; ++x) dot += qr[x] * kr[x];
          }
          scores[size_t(jj)] = dot;
          tile_max = std::max(tile_max, dot);
        }
        const float m_new = std::max(m[size_t(r)], tile_max);  // online softmax, base 2
        const float max_scaled = m_new == -INFINITY ? 0.f : m_new * sh.scale_log2;
        const float alpha = std::exp2(m[size_t(r)] * sh.scale_log2 - max_scaled);
        m[size_t(r)] = m_new;
        l[size_t(r)] *= alpha;
        float* a = &acc[size_t(r) * size_t(d)];
        for (int x = 0; x < d; ++x) a[x] *= alpha;
        for (int jj = 0; jj < block_kv; ++jj) {
          if (scores[size_t(jj)] == -INFINITY) continue;
          const float p = std::exp2(scores[size_t(jj)] * sh.scale_log2 - max_scaled);
          l[size_t(r)] += p;
          if (kv0 + jj >= pr.t_kv) continue;  // a zero V row
          const float p16 = lab::round_to(type, p);  // P enters the PV product as a 16-bit value
          const float* vr = &in.v[size_t(pr.kv_index(b, kv0 + jj, hk))];
          for (int x = 0; x < d; ++x) a[x] += p16 * vr[x];
        }
      }
    }
    for (int r = 0; r < rows; ++r) {
      const float lr = l[size_t(r)];
      const float inv_l = lr > 0.f ? 1.f / lr : 0.f;
      float* orow = &o[size_t(pr.q_index(b, q0 + r, h))];
      for (int x = 0; x < d; ++x) orow[x] = lab::round_to(type, acc[size_t(r) * size_t(d) + size_t(x)] * inv_l);
      lse[size_t(pr.lse_index(b, h, q0 + r))] = lr > 0.f ? m[size_t(r)] * sh.scale + std::log(lr) : -INFINITY;
    }
  });
  lab::CpuRun run;
  run.metrics = {{"kernel", c.name()}, {"block_q", block_q}, {"block_kv", block_kv}, {"skip", c.skip}};
  run.failure = report_tiles(run.metrics, count_tiles(pr, block_q, block_kv), c.skip, visited.load(), opt.quiet, true,
                             &run.header);
  if (run.failure.empty()) run.failure = edge_mask_probe();
  if (std::string(LAB_BUILD_KIND) == "lab")  // your build: one of your exercises runs only on a GPU
    run.gpu_only_rest = "needs a GPU: EXERCISE mma-online-softmax runs in the mma kernel only; the CPU model "
                        "checked your tile-span and edge-mask on this run";
  return run;
}

// With no mask and no length given, a run shows the lesson: causal attention with a window of
// DEFAULT_WINDOW keys (--causal alone: plain causal, the time the window's is compared with).
constexpr const char* DEFAULT_WINDOW = "512";
std::vector<char*> with_lesson_defaults(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  static char causal[] = "--causal", window[] = "--window", w[8];
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--causal" || a.rfind("--window", 0) == 0 || a.rfind("--t", 0) == 0 || a == "--help" || a == "-h")
      return args;
  }
  std::snprintf(w, sizeof w, "%s", DEFAULT_WINDOW);
  args.insert(args.end(), {causal, window, w});
  return args;
}

int main(int argc, char** argv) {
  std::vector<char*> args = with_lesson_defaults(argc, argv);
  lab::Section s;
  s.name = "07_sliding_window";
  s.title = "sliding-window attention (Mistral, §12.9.5): skip the K/V tiles outside the window";
  s.variants = {"window", "full", "window-mma", "full-mma", "window-q128"};
  s.bugs = {"inverted-window"};
  s.dtypes = {lab::DType::f16, lab::DType::bf16};
  s.supports_window = true;
  s.default_problem.dtype = lab::DType::f16;
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 2048;
  s.default_problem.d = 64;
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid dimension per head)";
    if (o.bug == "inverted-window" && p.window <= 0)
      return "--bug inverted-window needs a window (--causal --window W): without one there is nothing to invert";
    return "";
  };
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(int(args.size()), args.data(), s);
}
