// 03 FlashAttention-2 loop order (§12.9.1, exercise 2): Q tile outside, K/V streamed inside.
//
// What it changes over 02 (FlashAttention-1's order), and where each change is in this file:
//  1. Loop order. One block per (Q tile, head): grid (Q tiles, B·H) in launch_v2. The Q tile is
//     loaded once (the prologue in v2_kernel) and stays on chip for the whole sweep (in shared
//     memory here; FA2's Tensor Core kernel keeps it in registers); the K/V tiles stream past it
//     (the kv_tile loop). The running O, m, l of a row never
//     leave the registers of the thread that owns them: 02's read-modify-write of O/m/l in HBM at
//     every K/V step is gone, and so are its T/64 launches. Q tiles are independent, so blocks run
//     in parallel over the sequence too (FA1's code had only B·H blocks).
//  2. Deferred normalisation. O is accumulated unnormalised and divided by l once, after the last
//     K/V tile (the epilogue). FA1 divides by l at every step. The rescale by exp(m_old - m_new)
//     is NOT deferred: the maximum can grow at any tile, and whatever was summed before must be
//     rescaled then (online_softmax, in registers, cheap). §12.9.1 point 2 says v2 postpones that
//     rescale to the end; it postpones the division by l. --bug no-rescale shows the difference.
//  3. Causal blocks stop at the diagonal. The K/V tiles a Q tile visits come from
//     lab::visible_keys_of_rows; per-element masks are applied only on tiles that cross the
//     diagonal (or the ragged end of K/V). Blocks start in reverse tile order so the longest
//     (bottom) causal rows are scheduled first.
//  4. Split-Q across warps. Each of the 4 warps owns 16 query rows of the tile: it computes those
//     rows of S against the whole K/V tile, their softmax, and those rows of O. Row max and row
//     sum are reductions inside one warp (shuffles); warps share only the K/V tiles in shared
//     memory, and never reduce across each other. §12.9.1 point 3 has this backwards: FA1 split
//     K/V across warps ("split-K": each warp a slice of the KEYS, i.e. a column block of S), so
//     every warp held a partial row max, sum and O that had to be combined through shared memory
//     with extra barriers; FA2 splits Q ("split-Q": each warp a block of ROWS of S).
// Engineering (not FA2's ideas, but what makes an fp32 kernel fast, no Tensor Cores here):
//  - Register tiling of both products. A thread holds a 4 x 8 block of S (4 rows x 8 keys; 4 x 4
//    at D = 128) and a 4 x 8 block of O (4 x 16 at D = 128); each float4 read from shared memory
//    feeds 8 to 13 FMAs, where 02 reads one or two floats from shared memory per FMA.
//  - cp.async (Ampere+): V_j streams into shared memory while S_j is computed, K_{j+1} while P_j V_j
//    is; two barriers per K/V tile.
//  - P goes from registers to a per-warp slice of shared memory so the PV product can read it by
//    rows. Strides are padded so every shared access is conflict-free (see Tiles).
// Target: >= 25% of fp32 SGEMM (~13 TFLOP/s on an H200) at T = 4096, D = 64, B·H = 32, and >= 3x
// section 02. Measure with `scripts/lab bench 03`; the generated tables hold the real numbers.
//
// Exercises (ch12/03_v2_loop_order.md), shared by the kernel and the CPU model: the K/V sweep of
// a Q tile with its causal stop at the diagonal (EXERCISE loop-order), and the deferred
// normalisation (EXERCISE deferred-normalisation). The cp.async pipeline is given.
// Run: scripts/lab run 03 -- --t 4096 --causal --h 32     (your stub)
//      build/bin/03_v2_loop_order --t 4096 --h 32            (the solution)
//      build/bin/03_v2_loop_order --cpu --t 1000 --causal    (the CPU model)
#include <cuda_pipeline.h>

#include <atomic>

#include "lab.cuh"

constexpr int NUM_WARPS = 4;
constexpr int ROWS_PER_WARP = 16;                    // split-Q: query rows owned by one warp
constexpr int BLOCK_Q = NUM_WARPS * ROWS_PER_WARP;   // Br = 64 query rows per block
constexpr int THREADS = NUM_WARPS * 32;
// Inside a warp, lane = ly·8 + lx. Lanes with the same ly share query rows; lanes with the same
// lx share keys (in S) and output columns (in O).
constexpr int LANE_ROWS = 4, LANE_COLS = 8;
constexpr int TM = ROWS_PER_WARP / LANE_ROWS;        // 4 rows per thread: ly, ly+4, ly+8, ly+12
static_assert(LANE_ROWS * LANE_COLS == 32, "a warp is 4 x 8 lanes");
static_assert(ROWS_PER_WARP % LANE_ROWS == 0, "whole rows per thread");

// Tile shapes and the shared-memory layout of one block, by head dimension. Strides are in
// floats and chosen for conflict-free access (a warp's float4 access is served in quarter-warp
// phases of 8 lanes; scalar accesses in one phase of 32):
//   q_smem [BLOCK_Q][D+4]   read as float4 by 4 distinct rows ly+4tm: stride ≡ 4 (mod 32 banks)
//   k_smem [BLOCK_KV][D+4]  read as float4 by 8 distinct keys lx+8n: the same argument
//   v_smem [BLOCK_KV][D]    read as float4 by 8 lanes at consecutive columns: no padding needed
//   p_smem [BLOCK_Q][BKV+8] written as scalars by 4 rows x 8 keys: stride ≡ 8 (mod 32)
// D = 128 uses 32-key tiles: 64-key ones would need 116 KB and allow one block per SM.
template <int HEAD_DIM>
struct Tiles {
  static constexpr int BLOCK_KV = HEAD_DIM == 64 ? 64 : 32;   // Bc
  static constexpr int TN = BLOCK_KV / LANE_COLS;              // keys per thread in S: lx + 8n
  static constexpr int TD = HEAD_DIM / (4 * LANE_COLS);        // float4 of O per row: cols 4lx + 32c
  static constexpr int Q_STRIDE = HEAD_DIM + 4, K_STRIDE = HEAD_DIM + 4, V_STRIDE = HEAD_DIM;
  static constexpr int P_STRIDE = BLOCK_KV + 8;
  static constexpr int Q_FLOATS = BLOCK_Q * Q_STRIDE, K_FLOATS = BLOCK_KV * K_STRIDE;
  static constexpr int V_FLOATS = BLOCK_KV * V_STRIDE, P_FLOATS = BLOCK_Q * P_STRIDE;
  static constexpr size_t SMEM_BYTES = sizeof(float) * (Q_FLOATS + K_FLOATS + V_FLOATS + P_FLOATS);
  static constexpr int MIN_BLOCKS_PER_SM = HEAD_DIM == 64 ? 3 : 2;  // 68 KB / 76 KB of shared memory
};
static_assert(Tiles<64>::SMEM_BYTES == 69632 && Tiles<128>::SMEM_BYTES == 77312, "layout as documented");
static_assert(Tiles<64>::TN * LANE_COLS == Tiles<64>::BLOCK_KV && Tiles<128>::TD * 32 == 128, "whole tiles");
static_assert(Tiles<64>::Q_STRIDE % 32 == 4 && Tiles<128>::Q_STRIDE % 32 == 4, "conflict-free Q/K reads");
static_assert(Tiles<64>::P_STRIDE % 32 == 8 && Tiles<128>::P_STRIDE % 32 == 8, "conflict-free P writes");

enum Bug : int { kNoBug = 0, kNoRescale = 1 };

struct Shape {  // what the kernel needs of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  float scale;
};

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 x) { *reinterpret_cast<float4*>(p) = x; }

// ---------------------------------------------------------------------------------------------
// A [ROWS, D] tile of Q, K or V -> shared memory, asynchronously (cp.async, 16 bytes a copy; the
// caller commits the group and waits for it). Rows past `rows_valid` are zero-filled: a zero
// key gives a finite score that the mask turns into -inf, and a zero value row contributes 0·0
// (garbage there could be NaN, and 0·NaN is NaN).
template <int ROWS, int HEAD_DIM, int STRIDE>
__device__ __forceinline__ void load_tile_async(float* smem, const float* gmem /* row 0 */, int64_t row_stride,
                                                int rows_valid) {
  constexpr int C4 = HEAD_DIM / 4;
  static_assert(ROWS * C4 % THREADS == 0, "every thread copies the same number of float4");
#pragma unroll
  for (int n = 0; n < ROWS * C4 / THREADS; ++n) {
    const int idx = threadIdx.x + n * THREADS, r = idx / C4, c = (idx % C4) * 4;
    float* dst = smem + r * STRIDE + c;
    if (r < rows_valid) __pipeline_memcpy_async(dst, gmem + r * row_stride + c, 16);
    else st4(dst, make_float4(0.f, 0.f, 0.f, 0.f));
  }
}

// S = Q_i K_jᵀ for this thread's TM x TN scores: tile rows row0 + 4·tm, keys lx + 8·n.
// Per 4 columns of D: TM + TN float4 loads feed 4·TM·TN FMAs.
template <int HEAD_DIM>
__device__ __forceinline__ void compute_scores(const float* q_smem, const float* k_smem, int row0, int lx,
                                               float (&s)[TM][Tiles<HEAD_DIM>::TN]) {
  using T = Tiles<HEAD_DIM>;
#pragma unroll
  for (int tm = 0; tm < TM; ++tm)
#pragma unroll
    for (int n = 0; n < T::TN; ++n) s[tm][n] = 0.f;
#pragma unroll 1  // 12 float4 loads feed 128 FMAs per step already; unrolling more spills at D = 64
  for (int d = 0; d < HEAD_DIM; d += 4) {
    float4 a[TM];
#pragma unroll
    for (int tm = 0; tm < TM; ++tm) a[tm] = ld4(q_smem + (row0 + 4 * tm) * T::Q_STRIDE + d);
#pragma unroll
    for (int n = 0; n < T::TN; ++n) {
      const float4 kb = ld4(k_smem + (lx + 8 * n) * T::K_STRIDE + d);
#pragma unroll
      for (int tm = 0; tm < TM; ++tm) {
        s[tm][n] = fmaf(a[tm].x, kb.x, s[tm][n]);
        s[tm][n] = fmaf(a[tm].y, kb.y, s[tm][n]);
        s[tm][n] = fmaf(a[tm].z, kb.z, s[tm][n]);
        s[tm][n] = fmaf(a[tm].w, kb.w, s[tm][n]);
      }
    }
  }
}

// The online softmax of one K/V tile, for this thread's TM rows (scores in log2 units, masked
// ones -inf). Row max: a reduction over the 8 lanes that share the row (shuffles, inside the
// warp: split-Q). Rescales O and l by exp2(m_old - m_new) and turns s into P (unnormalised).
// l stays a per-lane partial sum over this lane's keys, reduced across lanes once at the end.
template <int HEAD_DIM>
__device__ __forceinline__ void online_softmax(float (&s)[TM][Tiles<HEAD_DIM>::TN], float (&m_run)[TM],
                                               float (&l_run)[TM], float4 (&o_acc)[TM][Tiles<HEAD_DIM>::TD],
                                               bool no_rescale) {
  using T = Tiles<HEAD_DIM>;
#pragma unroll
  for (int tm = 0; tm < TM; ++tm) {
    float m_tile = s[tm][0];
#pragma unroll
    for (int n = 1; n < T::TN; ++n) m_tile = fmaxf(m_tile, s[tm][n]);
#pragma unroll
    for (int off = 1; off < LANE_COLS; off <<= 1) m_tile = fmaxf(m_tile, __shfl_xor_sync(0xffffffffu, m_tile, off));
    const float m_new = fmaxf(m_run[tm], m_tile);
    // A row that has seen no key yet keeps m = -inf; exponentiate against 0 then, so that
    // exp2(-inf - -inf) = NaN never happens (every term is exp2(-inf) = 0).
    const float m_base = m_new == -INFINITY ? 0.f : m_new;
    const float alpha = no_rescale ? 1.f : exp2f(m_run[tm] - m_base);  // 0 on the row's first keys
    float row_sum = 0.f;
#pragma unroll
    for (int n = 0; n < T::TN; ++n) {
      s[tm][n] = exp2f(s[tm][n] - m_base);
      row_sum += s[tm][n];
    }
    l_run[tm] = l_run[tm] * alpha + row_sum;
    m_run[tm] = m_new;
#pragma unroll
    for (int c = 0; c < T::TD; ++c) {
      o_acc[tm][c].x *= alpha;
      o_acc[tm][c].y *= alpha;
      o_acc[tm][c].z *= alpha;
      o_acc[tm][c].w *= alpha;
    }
  }
}

// O += P_ij V_j for this thread's TM rows x TD float4 columns (4·lx + 32·c). P is read back from
// this warp's rows of p_smem (row0 + 4·tm), 4 keys at a time.
template <int HEAD_DIM>
__device__ __forceinline__ void accumulate_pv(const float* p_smem, const float* v_smem, int row0, int lx,
                                              float4 (&o_acc)[TM][Tiles<HEAD_DIM>::TD]) {
  using T = Tiles<HEAD_DIM>;
#pragma unroll 2
  for (int key = 0; key < T::BLOCK_KV; key += 4) {
    float p[TM][4];
#pragma unroll
    for (int tm = 0; tm < TM; ++tm) {
      const float4 x = ld4(p_smem + (row0 + 4 * tm) * T::P_STRIDE + key);
      p[tm][0] = x.x; p[tm][1] = x.y; p[tm][2] = x.z; p[tm][3] = x.w;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
      for (int c = 0; c < T::TD; ++c) {
        const float4 vb = ld4(v_smem + (key + u) * T::V_STRIDE + 4 * lx + 32 * c);
#pragma unroll
        for (int tm = 0; tm < TM; ++tm) {
          o_acc[tm][c].x = fmaf(p[tm][u], vb.x, o_acc[tm][c].x);
          o_acc[tm][c].y = fmaf(p[tm][u], vb.y, o_acc[tm][c].y);
          o_acc[tm][c].z = fmaf(p[tm][u], vb.z, o_acc[tm][c].z);
          o_acc[tm][c].w = fmaf(p[tm][u], vb.w, o_acc[tm][c].w);
        }
      }
  }
}

// ---------------------------------------------------------------------------------------------
// The exercises: the loop order with its causal stop, and the deferred normalisation. They are
// __host__ __device__, and both the kernel and the CPU model run them: what `--cpu` checks is the
// code the kernel runs. The cp.async pipeline, the products and the online softmax are given.

// The K/V tiles a Q tile visits, [begin, end), and where per-element masking starts: keys below
// unmasked_end are visible to every row of the Q tile.
struct KvSpan {
  int begin, end;
  int unmasked_end;
};

// BEGIN EXERCISE loop-order: the K/V sweep of one Q tile, FlashAttention-2's order.
//   kv_span: which K/V tiles (of block_kv keys) the Q tile [q0, q0 + q_rows) must visit. Without
//   a mask, all of them. Under causal, a Q tile stops at the diagonal: tiles that no row of it
//   may see are never loaded (attention_math.h says which keys a range of rows sees, bottom-right
//   aligned). begin and end count tiles; unmasked_end is a key index: every row of the tile sees
//   the keys below it, and a tile reaching past it needs the per-element mask (the diagonal
//   tiles, and the ragged end of K/V).
//   sweep_kv: the loop itself. The Q tile and the running O, m, l of its rows stay where they are
//   (shared memory, registers) for the whole sweep; call step(kv_tile, needs_mask) for each K/V
//   tile of the span, in order, then finish() once: the normalisation by 1/l is deferred to after
//   the last tile.
//   The code shape: ch12/hints/03_v2_loop_order.md.
// STUB: LAB_HD KvSpan kv_span(int q0, int q_rows, const Shape& sh, int block_kv) {
// STUB:   (void)q0; (void)q_rows; (void)sh; (void)block_kv;
// STUB:   return {0, 0, 0};
// STUB: }
// STUB: #pragma nv_exec_check_disable
// STUB: template <class Step, class Finish>
// STUB: __host__ __device__ void sweep_kv(const KvSpan& span, int block_kv, Step&& step, Finish&& finish) {
// STUB:   (void)span; (void)block_kv; (void)step; (void)finish;
// STUB: }
LAB_HD KvSpan kv_span(int q0, int q_rows, const Shape& sh, int block_kv) {
  const lab::KeyRange keys = lab::visible_keys_of_rows(q0, q0 + q_rows, sh.t_q, sh.t_kv, sh.causal);
  const int begin = keys.begin / block_kv;
  const int end = keys.empty() ? begin : lab::ceil_div(keys.end, block_kv);
  return {begin, end, lab::visible_keys(q0, sh.t_q, sh.t_kv, sh.causal, 0).end};
}

#pragma nv_exec_check_disable
template <class Step, class Finish>
__host__ __device__ void sweep_kv(const KvSpan& span, int block_kv, Step&& step, Finish&& finish) {
  for (int kv_tile = span.begin; kv_tile < span.end; ++kv_tile)
    step(kv_tile, (kv_tile + 1) * block_kv > span.unmasked_end);  // crosses the diagonal or the end of K/V
  finish();
}
// END EXERCISE

// What a row's output is once its sweep is over.
struct RowEnd {
  float inv_l;  // O = (unnormalised O) · inv_l
  float lse;    // natural log
};

// BEGIN EXERCISE deferred-normalisation: the end of one row, after its last K/V tile.
//   m_log2 is the row's running max in log2 units (the kernel works with exp2: scores were
//   multiplied by scale·log2(e)); l is the row's sum of exp2(s - m_log2) over every key it saw.
//   Return the factor that normalises the row's O, and its LSE in natural log (the harness and
//   a backward pass want ln). A row that saw no key (l == 0) gets O = 0 and LSE = -INFINITY.
//   Use lab::kLn2 / lab::kLog2e (attention_math.h) rather than typed constants.
// STUB: LAB_HD RowEnd row_end(float m_log2, float l) {
// STUB:   (void)m_log2; (void)l;
// STUB:   return {NAN, NAN};
// STUB: }
LAB_HD RowEnd row_end(float m_log2, float l) {
  if (!(l > 0.f)) return {0.f, -INFINITY};
  return {1.f / l, m_log2 * lab::kLn2 + logf(l)};
}
// END EXERCISE

// ---------------------------------------------------------------------------------------------
// The kernel: one block per (Q tile, head), 4 warps, each warp 16 of the tile's 64 query rows.
template <int HEAD_DIM>
__global__ void __launch_bounds__(THREADS, Tiles<HEAD_DIM>::MIN_BLOCKS_PER_SM)
v2_kernel(const float* __restrict__ q,  // [B, T_q, H, D]
          const float* __restrict__ k,  // [B, T_kv, H_kv, D]
          const float* __restrict__ v,  // [B, T_kv, H_kv, D]
          float* __restrict__ o,        // [B, T_q, H, D]
          float* __restrict__ lse,      // [B, H, T_q]
          Shape sh, int bug) {
  using T = Tiles<HEAD_DIM>;
  extern __shared__ float4 smem_raw[];
  float* q_smem = reinterpret_cast<float*>(smem_raw);  // [BLOCK_Q][Q_STRIDE]  whole sweep
  float* k_smem = q_smem + T::Q_FLOATS;                 // [BLOCK_KV][K_STRIDE] one K/V tile
  float* v_smem = k_smem + T::K_FLOATS;                 // [BLOCK_KV][V_STRIDE]
  float* p_smem = v_smem + T::V_FLOATS;                 // [BLOCK_Q][P_STRIDE]  each warp its 16 rows

  const int q_tile = int(gridDim.x) - 1 - int(blockIdx.x);  // reversed: longest causal rows first
  const int bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int q0 = q_tile * BLOCK_Q, q_rows = lab::imin(BLOCK_Q, sh.t_q - q0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ly = lane / LANE_COLS, lx = lane % LANE_COLS;
  const int row0 = warp * ROWS_PER_WARP + ly;  // this thread's tile rows: row0 + 4·tm
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;  // row to row
  const float* q_tile_g = q + ((int64_t(b) * sh.t_q + q0) * sh.h + head) * HEAD_DIM;
  const float* k_head_g = k + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;  // key j: + j·kv_stride
  const float* v_head_g = v + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;
  const float scale_log2 = sh.scale * lab::kLog2e;  // scores in log2 units: exp(x) = exp2(x·log2 e)
  const bool no_rescale = bug == kNoRescale;
  constexpr int BKV = T::BLOCK_KV;

  // The state of this thread's TM rows, in registers for the whole sweep.
  float4 o_acc[TM][T::TD];  // unnormalised O
  float m_run[TM], l_run[TM];
#pragma unroll
  for (int tm = 0; tm < TM; ++tm) {
    m_run[tm] = -INFINITY;
    l_run[tm] = 0.f;
#pragma unroll
    for (int c = 0; c < T::TD; ++c) o_acc[tm][c] = make_float4(0.f, 0.f, 0.f, 0.f);
  }

  const KvSpan span = kv_span(q0, q_rows, sh, BKV);
  if (span.begin < span.end) {  // prologue: Q once, and the first K tile
    load_tile_async<BLOCK_Q, HEAD_DIM, T::Q_STRIDE>(q_smem, q_tile_g, q_stride, q_rows);
    const int kv0 = span.begin * BKV;
    load_tile_async<BKV, HEAD_DIM, T::K_STRIDE>(k_smem, k_head_g + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    __pipeline_commit();
  }

  // One K/V tile: S = Q K_jᵀ, mask, online softmax, O += P V_j; the copies of V_j and K_{j+1}
  // overlap the two products.
  auto step = [&](int kv_tile, bool need_mask) {
    const int kv0 = kv_tile * BKV;
    __pipeline_wait_prior(0);  // this thread's copies of K_j (and Q) have landed
    __syncthreads();           // everyone's have: K_j is complete; and every warp is done with V_{j-1}
    load_tile_async<BKV, HEAD_DIM, T::V_STRIDE>(v_smem, v_head_g + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    __pipeline_commit();       // V_j streams in while S_j is computed

    float s[TM][T::TN];  // S = Q_i K_jᵀ, this thread's 4 rows x TN keys
    compute_scores<HEAD_DIM>(q_smem, k_smem, row0, lx, s);
#pragma unroll
    for (int tm = 0; tm < TM; ++tm)
#pragma unroll
      for (int n = 0; n < T::TN; ++n) {
        s[tm][n] *= scale_log2;
        if (need_mask && !lab::key_visible(q0 + row0 + 4 * tm, kv0 + lx + 8 * n, sh.t_q, sh.t_kv, sh.causal, 0))
          s[tm][n] = -INFINITY;
      }
    online_softmax<HEAD_DIM>(s, m_run, l_run, o_acc, no_rescale);
#pragma unroll
    for (int tm = 0; tm < TM; ++tm)
#pragma unroll
      for (int n = 0; n < T::TN; ++n) p_smem[(row0 + 4 * tm) * T::P_STRIDE + lx + 8 * n] = s[tm][n];

    __pipeline_wait_prior(0);  // this thread's copies of V_j have landed
    __syncthreads();           // V_j is complete, P is visible to the warp; every warp is done with K_j
    if (kv_tile + 1 < span.end) {
      const int next0 = kv0 + BKV;
      load_tile_async<BKV, HEAD_DIM, T::K_STRIDE>(k_smem, k_head_g + next0 * kv_stride, kv_stride, sh.t_kv - next0);
    }
    __pipeline_commit();       // K_{j+1} streams in while P_j V_j is computed (an empty group at the end)
    accumulate_pv<HEAD_DIM>(p_smem, v_smem, row0, lx, o_acc);
  };

  // Epilogue: l is a per-lane partial sum; the 8 lanes of a row add theirs, then row_end.
  auto finish = [&]() {
#pragma unroll
    for (int tm = 0; tm < TM; ++tm) {
      float l = l_run[tm];
#pragma unroll
      for (int off = 1; off < LANE_COLS; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
      const int r = row0 + 4 * tm, i = q0 + r;
      if (r >= q_rows) continue;  // past T_q (ragged last Q tile)
      const RowEnd end = row_end(m_run[tm], l);
      float* o_row = o + ((int64_t(b) * sh.t_q + i) * sh.h + head) * HEAD_DIM;
#pragma unroll
      for (int c = 0; c < T::TD; ++c) {
        const float4 x = o_acc[tm][c];
        st4(o_row + 4 * lx + 32 * c, make_float4(x.x * end.inv_l, x.y * end.inv_l, x.z * end.inv_l, x.w * end.inv_l));
      }
      if (lx == 0) lse[int64_t(bh) * sh.t_q + i] = end.lse;
    }
  };

  sweep_kv(span, BKV, step, finish);
}

// ---------------------------------------------------------------------------------------------
// Tile counts (the kernel's kv_span) for the record.
struct TileCounts {
  int64_t visited = 0, total = 0;
};

TileCounts count_tiles(const lab::Problem& p) {
  const int bkv = p.d == 64 ? Tiles<64>::BLOCK_KV : Tiles<128>::BLOCK_KV;
  const int nq = lab::ceil_div(p.t_q, BLOCK_Q), nkv = lab::ceil_div(p.t_kv, bkv);
  const Shape sh{p.t_q, p.t_kv, p.h, p.h_kv, p.causal, p.softmax_scale()};
  TileCounts t;
  for (int qt = 0; qt < nq; ++qt) {
    const int q0 = qt * BLOCK_Q, rows = std::min(BLOCK_Q, p.t_q - q0);
    const KvSpan span = kv_span(q0, rows, sh, bkv);
    t.visited += lab::imax(0, span.end - span.begin);
  }
  t.visited *= int64_t(p.b) * p.h;
  t.total = int64_t(nq) * nkv * p.b * p.h;
  return t;
}

// ---------------------------------------------------------------------------------------------
// Launcher.
template <int HEAD_DIM>
void prepare_v2() {
  // 68 KB (D = 64) / 76 KB (D = 128) of shared memory per block: above the default 48 KB, so the
  // kernel opts in. And ask for the largest shared-memory carveout, so that 3 (D = 64) or 2
  // (D = 128) blocks fit on an SM together; one block alone could not hide its own barriers.
  lab::opt_in_shared_memory(v2_kernel<HEAD_DIM>, int(Tiles<HEAD_DIM>::SMEM_BYTES));
  CUDA_CHECK(cudaFuncSetAttribute(v2_kernel<HEAD_DIM>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
}

template <int HEAD_DIM>
void launch_v2(const float* q, const float* k, const float* v, float* o, float* lse, const lab::Problem& pr,
               const Shape& sh, int bug, cudaStream_t stream) {
  const dim3 grid(lab::ceil_div(pr.t_q, BLOCK_Q), pr.b * pr.h);  // one block per (Q tile, head)
  v2_kernel<HEAD_DIM><<<grid, THREADS, Tiles<HEAD_DIM>::SMEM_BYTES, stream>>>(q, k, v, o, lse, sh, bug);
  CUDA_CHECK_LAST();
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Shape sh{pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.causal, pr.softmax_scale()};
  if (pr.d == 64) prepare_v2<64>();
  else prepare_v2<128>();
  const auto* q = static_cast<const float*>(ctx.tensors.q);
  const auto* k = static_cast<const float*>(ctx.tensors.k);
  const auto* v = static_cast<const float*>(ctx.tensors.v);
  auto* o = static_cast<float*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  const int bug = ctx.bug == "no-rescale" ? kNoRescale : kNoBug;

  const TileCounts tiles = count_tiles(pr);
  lab::GpuRun run;
  run.extra_device_bytes = 0;  // the whole state lives on chip
  run.metrics["tiles_visited"] = tiles.visited;
  run.metrics["tiles_total"] = tiles.total;
  run.metrics["block_q"] = BLOCK_Q;
  run.metrics["block_kv"] = pr.d == 64 ? Tiles<64>::BLOCK_KV : Tiles<128>::BLOCK_KV;
  run.metrics["smem_bytes_per_block"] = pr.d == 64 ? Tiles<64>::SMEM_BYTES : Tiles<128>::SMEM_BYTES;
  run.forward = [=](cudaStream_t st) {
    if (pr.d == 64) launch_v2<64>(q, k, v, o, lse, pr, sh, bug, st);
    else launch_v2<128>(q, k, v, o, lse, pr, sh, bug, st);
  };
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: the kernel's sweep (kv_span, sweep_kv, row_end: the exercises) around a plain C++
// step, one (Q tile, head) at a time: its state (O unnormalised, m, l) local to it for the whole
// sweep, scores in log2 units, the same per-tile masks, rows past T_kv as zero keys and values
// (as the kernel's zero-filled tiles), the online softmax (with --bug no-rescale) per row.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  const bool no_rescale = opt.bug == "no-rescale";
  const int d = pr.d, bkv = d == 64 ? Tiles<64>::BLOCK_KV : Tiles<128>::BLOCK_KV;
  const int nq = lab::ceil_div(pr.t_q, BLOCK_Q), nkv = lab::ceil_div(pr.t_kv, bkv);
  const Shape sh{pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.causal, pr.softmax_scale()};
  const float scale_log2 = sh.scale * lab::kLog2e;
  std::atomic<bool> out_of_range{false};
  lab::parallel_for(int64_t(pr.b) * pr.h * nq, [&](int64_t blk) {  // one block: (Q tile, head)
    const int q_tile = int(blk % nq), bh = int(blk / nq), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const int q0 = q_tile * BLOCK_Q, q_rows = std::min(BLOCK_Q, pr.t_q - q0);
    std::vector<float> o_acc(size_t(q_rows) * d, 0.f), m_run(size_t(q_rows), -INFINITY), l_run(size_t(q_rows), 0.f);
    std::vector<float> s(static_cast<size_t>(bkv));
    auto step = [&](int kv_tile, bool need_mask) {
      if (kv_tile < 0 || kv_tile >= nkv) { out_of_range = true; return; }  // the kernel would read past K/V
      const int kv0 = kv_tile * bkv, kv_rows = std::min(bkv, pr.t_kv - kv0);
      for (int r = 0; r < q_rows; ++r) {
        const int i = q0 + r;
        const float* qr = &in.q[size_t(pr.q_index(b, i, h))];
        float m_tile = -INFINITY;
        for (int c = 0; c < bkv; ++c) {
          const int j = kv0 + c;
          float dot = 0.f;  // a key past T_kv is a zero row of the tile
          if (c < kv_rows) {
            const float* kr = &in.k[size_t(pr.kv_index(b, j, hk))];
            for (int x = 0; x < d; ++x) dot += qr[x] * kr[x];
          }
          s[size_t(c)] = dot * scale_log2;
          if (need_mask && !lab::key_visible(i, j, pr.t_q, pr.t_kv, pr.causal, 0)) s[size_t(c)] = -INFINITY;
          m_tile = std::max(m_tile, s[size_t(c)]);
        }
        float& m = m_run[size_t(r)];
        float& l = l_run[size_t(r)];
        const float m_new = std::max(m, m_tile);
        const float m_base = m_new == -INFINITY ? 0.f : m_new;
        const float alpha = no_rescale ? 1.f : std::exp2(m - m_base);
        float* acc = &o_acc[size_t(r) * d];
        for (int x = 0; x < d; ++x) acc[x] *= alpha;  // the rescale, every tile
        float row_sum = 0.f;
        for (int c = 0; c < bkv; ++c) {
          const float p = std::exp2(s[size_t(c)] - m_base);
          row_sum += p;
          if (p == 0.f || c >= kv_rows) continue;  // a zero value row adds nothing
          const float* vr = &in.v[size_t(pr.kv_index(b, kv0 + c, hk))];
          for (int x = 0; x < d; ++x) acc[x] += p * vr[x];
        }
        l = l * alpha + row_sum;
        m = m_new;
      }
    };
    auto finish = [&]() {
      for (int r = 0; r < q_rows; ++r) {
        const int i = q0 + r;
        const RowEnd end = row_end(m_run[size_t(r)], l_run[size_t(r)]);
        float* orow = &o[size_t(pr.q_index(b, i, h))];
        for (int x = 0; x < d; ++x) orow[x] = o_acc[size_t(r) * d + x] * end.inv_l;
        lse[size_t(pr.lse_index(b, h, i))] = end.lse;
      }
    };
    sweep_kv(kv_span(q0, q_rows, sh, bkv), bkv, step, finish);
  });
  const TileCounts tiles = count_tiles(pr);
  lab::CpuRun run;
  run.metrics["tiles_visited"] = tiles.visited;
  run.metrics["tiles_total"] = tiles.total;
  if (out_of_range) run.failure = "the sweep visited a K/V tile outside [0, ceil(T_kv / block_kv))";
  return run;
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "03_v2_loop_order";
  s.title = "FlashAttention-2 loop order: Q tile on chip, K/V streamed, deferred 1/l, split-Q warps (§12.9.1)";
  s.variants = {"v2"};
  s.bugs = {"no-rescale"};
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 1024;
  s.validate = [](const lab::Problem& p, const lab::Options&) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid row per head)";
    return "";
  };
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
