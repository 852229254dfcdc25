// 11 The backward pass: dQ, dK, dV from Q, K, V, O, dO and the forward's LSE (FlashAttention-2).
//
// What this step adds: the gradients, on the Tensor Cores of 04 (mma.sync m16n8k16, ldmatrix,
// cp.async, swizzled shared memory). With S = Q Kᵀ·scale, P = softmax(S), O = P V:
//   dV = Pᵀ dO        dP = dO Vᵀ        dS = P ∘ (dP − D),  D = rowsum(dO ∘ O)
//   dQ = dS K·scale   dK = dSᵀ Q·scale
// Nothing of size T² is stored: the forward kept only O and the per-row LSE, so P is recomputed
// tile by tile, P = exp(S − LSE), exactly, with no max or sum to track. D = rowsum(dO ∘ O) equals
// rowsum(dP ∘ P) (the softmax's Jacobian term) but costs one pass over dO and O, done first (the
// same pass zeroes the atomic variants' fp32 dQ).
//
// Loop order (FlashAttention-2's backward): one block per K/V tile (128 keys) and K/V head; its
// dK, dV stay in registers while every Q tile of every query head of the group streams past
// (GQA: dK, dV sum over the group's heads with no atomics); the Q and dO tiles stream through a
// two-stage cp.async ring (with their rows' LSE and D), the next one in flight during the current
// one's math. The 8 warps of a block split each GEMM's output in 2-D tiles (32 keys x 32 rows for
// the scores), so P and dS pass through shared memory once, and every warp reads only the
// operand rows of its own tile: the kernel is bound by shared-memory reads. dQ is the problem: each Q tile gets a contribution from every K/V tile, i.e.
// from every block. Two variants:
//   atomic         each block adds its dS K into an fp32 dQ buffer with 16-byte atomics; a last
//                  pass scales and rounds it. Fast, but the order of the fp32 additions varies from
//                  run to run, so dQ is not bitwise reproducible.
//   deterministic  the main kernel computes dK, dV only; a second kernel, one block per Q tile,
//                  recomputes P and dS and sums dQ over the K/V tiles in a fixed order, the K/V
//                  tiles streaming through a two-stage ring. Bitwise reproducible, at the cost of
//                  computing S and dP twice.
// Both print whether two runs gave identical bits (the `repeat` line, metrics.bitwise_reproducible).
// Their main kernel takes 161 KB of shared memory a block (162 KB at D = 64), which an A100 allows;
// the atomic one restages dQ in 8 KB of its own where a block may have them too (Hopper), else in
// Pᵀ's buffer, after one more barrier per Q tile. A 99 KB GPU (RTX 30/40) cannot run them.
// On a Hopper GPU (H100, H200) two more variants run the same algorithm on wgmma, with TMA and
// warp specialisation (the given kernel of common/hopper/ws_backward.cuh; your exercise functions
// are its element step):
//   wgmma                one block per 128-key tile, two consumer warpgroups (64 keys each, dK
//                        and dV in registers), Q and dO streamed by a TMA producer; dQ staged in
//                        shared memory and added by bulk fp32 reductions that a writer warp
//                        issues, then the conversion pass.
//   wgmma-deterministic  the same kernel for dK, dV only; dQ by the deterministic variant's pass.
//
// Exercises (ch12/11_backward.md), __host__ __device__ functions that the kernels and the CPU
// model both call: EXERCISE dsdp (P recomputed from the LSE, dS from dP and D) and EXERCISE
// accumulate (which score tile meets which row tile in dK and dV).
// --bug d-without-do    D = rowsum(O): the preprocessing pass forgets dO.
// --bug unscaled-p      P = exp(Q·K − LSE): the recomputed scores miss the softmax scale.
// --bug dq-no-accumulate  dQ stored instead of accumulated over the K/V tiles: the last one wins.
// Run: scripts/lab run 11 -- --t 1000 --causal                       (your stub)
//      build/bin/11_backward --dtype bf16 --t 4096 --d 128 --h 16 --causal   (the solution)
//      build/bin/11_backward --cpu --t 300 --causal --h 4 --h-kv 2          (the CPU model)
//      build/bin/11_backward --variant wgmma --dtype bf16 --t 4096 --d 128 --h 16 --causal   (Hopper)
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "harness/backward.h"
#include "lab.cuh"
#include "toolbox/forward_fp32.cuh"  // the forward that makes the backward's O and LSE
#include "toolbox/mma_sm80.cuh"      // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers
#include "hopper/ws_backward.cuh"    // the Hopper kernel of the wgmma variants (sm_90a)

using namespace lab::sm80;

// Main kernel (dK, dV; dQ by atomics): one block of 8 warps per 128-key tile, Tiles::BLOCK_Q query
// rows a step (64 at D = 128, 128 at D = 64).
// Each of its GEMM steps splits its output among the warps in 2-D tiles (FlashAttention-2's warp
// layout), so that a warp reads from shared memory only the rows of both operands its own tile
// needs. Shared-memory reads, not the Tensor Cores, bound this kernel: a warp that owned 16 keys
// against all 64 rows would read every Q and dO row once per 16 keys.
constexpr int BLOCK_KV = 128;      // keys per block of the main kernel
constexpr int NUM_WARPS = 8;
constexpr int THREADS = 32 * NUM_WARPS;
constexpr int KEY_WARPS = 4;                                 // Sᵀ, dPᵀ and dK, dV: 4 warps along the keys
constexpr int WARP_KEYS = BLOCK_KV / KEY_WARPS;              // 32 keys a warp
static_assert(WARP_KEYS == 32, "two m16 tiles of keys a warp");
// dQ kernel (deterministic variant): one block of 4 warps per 64-row Q tile, 64 keys a step.
constexpr int DQ_BLOCK_Q = 64;
constexpr int DQ_BLOCK_KV = 64;
constexpr int DQ_WARPS = 4;
constexpr int DQ_THREADS = 32 * DQ_WARPS;
constexpr int ROWS_PER_WARP = 16;  // one m16 tile of query rows a warp
static_assert(DQ_BLOCK_Q == DQ_WARPS * ROWS_PER_WARP && DQ_BLOCK_KV == DQ_BLOCK_Q, "one m16 tile a warp; square tiles");
static_assert(BLOCK_KV % 16 == 0 && DQ_BLOCK_KV % 16 == 0, "whole k-steps of 16");

// =============================================================================================
// The exercises. Each returns true once written (the stub returns false, and then no gradient is
// stored: the self-check reports the outputs unwritten).

// P of one (query row, key) pair, recomputed from the raw score s = q·k and the row's LSE (in
// base 2: lse_log2 = LSE·log2 e), and dS from dP = dO·v and the row's D = rowsum(dO ∘ O).
LAB_HD bool recompute_p_and_ds(float s, float dp, float lse_log2, float d_row, float scale_log2, float* p, float* ds) {
  // BEGIN EXERCISE dsdp: P = exp(s·scale − LSE), written in base 2; dS = P ∘ (dP − D).
  //   scale_log2 = scale·log2(e) and lse_log2 = LSE·log2(e) are given, so P is one lab::fast_exp2
  //   of a single fused multiply-add (one FFMA and one MUFU.EX2). Then dS from P, dP and D. Return true.
  //   No mask here: the callers zero P and dS of the pairs a row does not see.
  // STUB: (void)s; (void)dp; (void)lse_log2; (void)d_row; (void)scale_log2; *p = 0.f; *ds = 0.f; return false;
  *p = lab::fast_exp2(s * scale_log2 - lse_log2);
  *ds = *p * (dp - d_row);
  return true;
  // END EXERCISE
}

// The weights of one (key j, query row i) pair in the two sums a K/V block owns:
//   dV[j] += dv_weight · dO[i]        dK[j] += dk_weight · Q[i]     (dK's ·scale is applied once, at the end)
LAB_HD bool dkdv_weights(float p, float ds, float* dv_weight, float* dk_weight) {
  // BEGIN EXERCISE accumulate: dV = Pᵀ dO and dK = dSᵀ Q: which of P and dS weighs which rows.
  //   The kernel packs dv_weight into the A operand of the mma with dO's rows, dk_weight into the
  //   one with Q's rows; the CPU model adds weight·row. dk_weight is also K's row weight in
  //   dQ = dS K, so a wrong one shows in dQ as well as dK. Return true.
  // STUB: (void)p; (void)ds; *dv_weight = 0.f; *dk_weight = 0.f; return false;
  *dv_weight = p;
  *dk_weight = ds;
  return true;
  // END EXERCISE
}

// =============================================================================================
// What the main kernel does about dQ. The atomic variant restages each warp's dQ through 8 KB of
// shared memory (the dQ step); where a block may not have those 8 KB on top of the rest (an A100
// allows 163 KB), the stage borrows Pᵀ's buffer instead, after one more barrier per Q tile.
enum class DqMode {
  separate,              // the deterministic variant: dQ is dq_kernel's, nothing staged
  atomic,                // fp32 atomics, staged in an area of their own
  atomic_staged_in_pt,   // fp32 atomics, staged in Pᵀ's buffer once every warp has read Pᵀ
};
constexpr int A100_SMEM_PER_BLOCK = 163 * 1024;  // cudaDevAttrMaxSharedMemoryPerBlockOptin on sm_80

struct Shape {  // what the kernels need of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  float scale;       // 1/sqrt(D): dQ, dK
  float scale_log2;  // scale·log2 e for P (--bug unscaled-p: log2 e alone)
  bool dq_store;     // --bug dq-no-accumulate
  int row_stride;    // row length of the LSE·log2 e and D arrays: T_q padded to a whole Q tile
};

template <int HEAD_DIM>
struct Tiles {
  static constexpr int CHUNKS = HEAD_DIM / 8;              // 16-byte chunks per row
  static constexpr int ROW_BYTES = HEAD_DIM * 2;
  static constexpr int D_STEPS = HEAD_DIM / 16;            // k-steps over D
  static constexpr int D_BLOCKS = HEAD_DIM / 8;            // n-blocks over D
  // Main kernel: query rows a step. At D = 64 the dK, dV accumulators take half the registers they
  // take at D = 128, and the scores take them instead: twice the rows, so every K or V fragment a
  // warp reads meets twice the Q and dO rows.
  static constexpr int BLOCK_Q = HEAD_DIM == 64 ? 128 : 64;
  static constexpr int WARP_ROWS = BLOCK_Q / (NUM_WARPS / KEY_WARPS);  // scores: 32 keys x WARP_ROWS rows a warp
  static_assert(BLOCK_Q % 16 == 0 && WARP_ROWS % 16 == 0, "whole k-steps and n-block pairs");
  // Main kernel's shared memory: K, V [128 keys][D]; STAGES x (Q, dO) [BLOCK_Q rows][D]; Pᵀ and dSᵀ
  // [128 keys][BLOCK_Q rows], the scores every warp's dV, dK and dQ steps read; STAGES x the Q tile's
  // LSE·log2 e and D; dQ's staging for the atomics (DqMode::atomic), a warp's 8 rows x 32 fp32.
  static constexpr int KV_TILE_BYTES = BLOCK_KV * ROW_BYTES;
  static constexpr int Q_TILE_BYTES = BLOCK_Q * ROW_BYTES;
  static constexpr int SCORE_BYTES = BLOCK_KV * BLOCK_Q * 2;
  static constexpr int STAGES = 2;                         // the Q/dO ring
  static constexpr int K_AT = 0, V_AT = KV_TILE_BYTES, Q_AT = 2 * KV_TILE_BYTES;  // Q_AT + (2 stage + 0|1)·Q_TILE_BYTES
  static constexpr int PT_AT = Q_AT + 2 * STAGES * Q_TILE_BYTES, DST_AT = PT_AT + SCORE_BYTES;
  static constexpr int ROWS_AT = DST_AT + SCORE_BYTES;     // [STAGES][LSE·log2 e, D][BLOCK_Q] fp32
  static constexpr int DQ_STAGE_AT = ROWS_AT + STAGES * 2 * BLOCK_Q * 4;
  static constexpr int DQ_STAGE_BYTES = NUM_WARPS * 8 * 32 * 4;
  static constexpr int smem_bytes(DqMode mode) { return DQ_STAGE_AT + (mode == DqMode::atomic ? DQ_STAGE_BYTES : 0); }
  static_assert(DQ_STAGE_BYTES <= SCORE_BYTES, "dQ's stage fits in Pᵀ's buffer");
  // The warp grids of the steps after the scores: dK, dV as 4 x 2 warps of 32 keys x D/2; dQ as
  // warps of 32 columns (D/32 of them) x the rows that leaves (32 rows: 2 x 4 warps at D = 128,
  // 4 x 2 at D = 64), so that every warp stages and adds dQ in 8-row x 32-column pieces.
  static constexpr int DKV_COLS = HEAD_DIM / 2;
  static constexpr int DQ_COL_WARPS = HEAD_DIM / 32;
  static constexpr int DQ_WARP_ROWS = BLOCK_Q * DQ_COL_WARPS / NUM_WARPS;
  static_assert(DQ_WARP_ROWS % 16 == 0, "whole m16 tiles of dQ rows a warp");
  // dQ kernel: Q, dO [64 rows][D], DQ_STAGES x (K, V) [64 keys][D].
  static constexpr int DQ_TILE_BYTES = DQ_BLOCK_KV * ROW_BYTES;  // = DQ_BLOCK_Q rows of Q, dO
  static constexpr int DQ_STAGES = 2;
  static constexpr int DQ_SMEM_BYTES = (2 + 2 * DQ_STAGES) * DQ_TILE_BYTES;
  static_assert(STAGES == 2 && DQ_STAGES == 2, "the rings alternate two stages (stage ^ 1)");
  // One main block an SM: 169 KB at D = 128, 170 KB at D = 64 with dQ's own stage, 8 KB less
  // without; two dQ blocks an SM cover each other's barriers.
  static_assert(smem_bytes(DqMode::atomic) <= 227 * 1024 && 2 * DQ_SMEM_BYTES <= 227 * 1024, "fits an SM");
  static_assert(smem_bytes(DqMode::atomic_staged_in_pt) <= A100_SMEM_PER_BLOCK &&
                    smem_bytes(DqMode::separate) <= A100_SMEM_PER_BLOCK && DQ_SMEM_BYTES <= A100_SMEM_PER_BLOCK,
                "an A100 runs both mma.sync variants");
};
constexpr uint32_t ROWS16(int row_bytes) { return uint32_t(16 * row_bytes); }

// ---- pass 1: D = rowsum(dO ∘ O), and LSE in base 2 (+inf for rows that see no key or do not
// exist, so that their P is exp2(−inf) = 0 with no mask). A row of O (and of dO) is D contiguous
// elements: D/8 neighbouring lanes read a 16-byte chunk of it each and sum by shuffles, so a warp's
// loads are whole rows. The same lanes zero the row of the fp32 dQ accumulator (atomic variants),
// which saves a memset's pass over it: [B, T_q, H, D] for mma.sync; for wgmma [B, H, row_stride, D]
// as the kernel orders it (lab::wsbwd::dq_acc_index), a permutation within each head's
// row_stride x D block, so zeroing the block row by row in LSE order zeroes the same floats.
// Each (b, head)'s rows are padded to row_stride, a whole Q tile, so that a tile's rows are aligned
// 16-byte copies; the padding rows get LSE·log2 e = +inf and D = 0.
template <class T, int HEAD_DIM>
__global__ void preprocess_kernel(const T* __restrict__ o, const T* __restrict__ d_o,  // [B, T_q, H, D]
                                  const float* __restrict__ lse,                       // [B, H, T_q]
                                  float* __restrict__ d_rows, float* __restrict__ lse_log2,  // [B, H, row_stride]
                                  float* __restrict__ dq_acc,  // fp32, or nullptr (deterministic)
                                  int b_count, int t_q, int row_stride, int h, bool without_do, bool dq_wgmma_order) {
  constexpr int LANES = HEAD_DIM / 8;  // lanes per row, one 16-byte chunk each
  static_assert(32 % LANES == 0, "a row's lanes within one warp");
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / LANES;  // (b, head, i) in LSE order
  const int chunk = threadIdx.x % LANES;
  const bool exists = row < int64_t(b_count) * h * row_stride;
  const int i = int(row % row_stride), head = int(row / row_stride % h), b = int(row / row_stride / h);
  const bool real = exists && i < t_q;
  float sum = 0.f;
  if (real) {
    const int64_t at = ((int64_t(b) * t_q + i) * h + head) * HEAD_DIM + 8 * chunk;
    const uint4 o_raw = *reinterpret_cast<const uint4*>(o + at), do_raw = *reinterpret_cast<const uint4*>(d_o + at);
    const Vec2<T>* o2 = reinterpret_cast<const Vec2<T>*>(&o_raw);
    const Vec2<T>* do2 = reinterpret_cast<const Vec2<T>*>(&do_raw);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 of = to_float2(o2[e]), df = to_float2(do2[e]);
      sum += without_do ? of.x + of.y : df.x * of.x + df.y * of.y;
    }
    if (dq_acc != nullptr && !dq_wgmma_order) {
      float4* zero = reinterpret_cast<float4*>(dq_acc + at);
      zero[0] = zero[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  if (exists && dq_acc != nullptr && dq_wgmma_order) {  // padding rows too: the wgmma kernel adds into them
    float4* zero = reinterpret_cast<float4*>(dq_acc + row * HEAD_DIM + 8 * chunk);
    zero[0] = zero[1] = make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // The whole warp takes part (the block size is a multiple of 32): rows past the end add zeros.
#pragma unroll
  for (int lanes = LANES / 2; lanes > 0; lanes /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, lanes);
  if (!exists || chunk != 0) return;
  const float l = real ? lse[(int64_t(b) * h + head) * t_q + i] : -INFINITY;
  d_rows[row] = real ? sum : 0.f;
  lse_log2[row] = l == -INFINITY ? INFINITY : l * lab::kLog2e;
}

// dst[0..3] += v. One 16-byte atomic (red.global.add.v4.f32) on sm_90 and later, four 4-byte ones before.
__device__ __forceinline__ void atomic_add4(float4* dst, float4 v) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(dst, v);
#else
  atomicAdd(&dst->x, v.x);
  atomicAdd(&dst->y, v.y);
  atomicAdd(&dst->z, v.z);
  atomicAdd(&dst->w, v.w);
#endif
}

// ---- pass 2: one block per (K/V tile of 128 keys, K/V head); its dK, dV stay in registers while
// every Q tile of the group streams past. Per Q tile, three steps with a barrier between them:
//   scores   Sᵀ = K Qᵀ, dPᵀ = V dOᵀ (4 x 2 warps of 32 keys x 32 rows); P and dS per element
//            (the exercises), then the dV and dK weights to shared memory as Pᵀ and dSᵀ, rounded to T
//   dK, dV   dV += Pᵀ dO, dK += dSᵀ Q (4 x 2 warps of 32 keys x D/2)
//   dQ       (atomic) dQ[rows] += dS K (warps of 32 columns), added to the fp32 dQ by atomics
//            (DqMode::atomic_staged_in_pt: a barrier first, as dQ's stage overwrites Pᵀ)
// ldmatrix row addresses of this lane (byte offsets in a swizzled tile; k-step kk: ^ 32·kk):
//   A operand, rows r0..r0+15 of a [rows][k] tile (K, V, Pᵀ, dSᵀ):  row r0 + lane % 16, chunk lane / 16
//   B operand from a [n][k] tile (Q, dO as Qᵀ, dOᵀ):              row (lane % 8) + 8·(lane / 16), chunk (lane / 8) % 2
//   B operand from a [k][n] tile, .trans (Q, dO, K):              row lane % 16, chunk lane / 16 (n-block pair: ^ 32·pair)
//   A operand from a [k][m] tile, .trans (dSᵀ as dS):              row (lane % 8) + 8·(lane / 16), chunk m0 / 8 + (lane / 8) % 2
template <class T, int HEAD_DIM, DqMode DQ>
__global__ void __launch_bounds__(THREADS, 1)
dkdv_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,  // Q [B,T_q,H,D]; K, V [B,T_kv,H_kv,D]
            const T* __restrict__ d_o,                                                 // [B, T_q, H, D]
            const float* __restrict__ lse_log2, const float* __restrict__ d_rows,      // [B, H, row_stride]
            float* __restrict__ dq_acc,                                                // [B, T_q, H, D] fp32 (atomic modes)
            T* __restrict__ dk, T* __restrict__ dv,                                    // [B, T_kv, H_kv, D]
            Shape sh) {
  using TL = Tiles<HEAD_DIM>;
  constexpr uint32_t R16 = ROWS16(TL::ROW_BYTES);  // 16 rows of a [rows][D] tile
  constexpr uint32_t S16 = ROWS16(TL::BLOCK_Q * 2);    // 16 key rows of Pᵀ or dSᵀ
  constexpr int SCORE_CHUNKS = TL::BLOCK_Q / 8;        // 16-byte chunks per key row of Pᵀ, dSᵀ
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = smem_addr(smem);
  const uint32_t k_tile = base + TL::K_AT, v_tile = base + TL::V_AT;
  auto q_tile_of = [&](int stage) { return base + uint32_t(TL::Q_AT + 2 * stage * TL::Q_TILE_BYTES); };
  auto do_tile_of = [&](int stage) { return base + uint32_t(TL::Q_AT + (2 * stage + 1) * TL::Q_TILE_BYTES); };
  const uint32_t pt_tile = base + TL::PT_AT, dst_tile = base + TL::DST_AT;
  const float* rows_smem = reinterpret_cast<const float*>(smem + TL::ROWS_AT);  // [STAGES][LSE·log2 e, D][TL::BLOCK_Q]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int key_warp = warp % KEY_WARPS;  // scores, dK, dV: keys WARP_KEYS·key_warp ..
  const int row_warp = warp / KEY_WARPS;  // scores: query rows TL::WARP_ROWS·row_warp .. of the Q tile
  const int col_warp = warp / KEY_WARPS;  // dK, dV: columns DKV_COLS·col_warp ..
  const int kv0 = blockIdx.x * BLOCK_KV, bhk = blockIdx.y, b = bhk / sh.h_kv, hk = bhk % sh.h_kv;
  const int group = sh.h / sh.h_kv;
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;
  const int64_t kv_base = (int64_t(b) * sh.t_kv * sh.h_kv + hk) * HEAD_DIM;
  load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(k_tile, k + kv_base + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
  load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(v_tile, v + kv_base + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
  cp_async_commit();

  const uint32_t a_lane = swizzle<TL::CHUNKS>(WARP_KEYS * key_warp + (lane & 15), lane >> 4);
  const uint32_t bn_lane = swizzle<TL::CHUNKS>(TL::WARP_ROWS * row_warp + (lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t bt_lane = swizzle<TL::CHUNKS>(lane & 15, lane >> 4);
  const uint32_t score_lane = swizzle<SCORE_CHUNKS>(WARP_KEYS * key_warp + (lane & 15), lane >> 4);

  float dk_acc[2][TL::DKV_COLS / 8][4] = {}, dv_acc[2][TL::DKV_COLS / 8][4] = {};  // [m-tile of keys][n-block]
  bool written = true;  // false while an exercise is still the stub
  // The first query row that sees key kv0 (causal, bottom-right aligned: i + T_kv − T_q >= j).
  const int first_row = sh.causal ? lab::imax(0, kv0 - (sh.t_kv - sh.t_q)) : 0;
  const int kv_end = kv0 + BLOCK_KV;  // past T_kv: tile_visibility calls the tile partial (masked)
  const int key_g = kv0 + WARP_KEYS * key_warp + g;  // this lane's keys: key_g + 16·m-tile + 8·(e / 2)
  const int col_g = TL::WARP_ROWS * row_warp + 2 * t;    // this lane's rows of the Q tile: col_g + 8·n-block + e % 2

  // The (query head, Q tile) pairs this block visits: every head of the group, and per head the Q
  // tiles from the first that sees key kv0 to the last (causal: all of them see some key of the tile).
  const int qt_begin = first_row / TL::BLOCK_Q, qt_count = lab::imax(0, lab::ceil_div(sh.t_q, TL::BLOCK_Q) - qt_begin);
  const int items = group * qt_count;
  auto head_of = [&](int item) { return hk * group + item / qt_count; };
  auto q0_of = [&](int item) { return (qt_begin + item % qt_count) * TL::BLOCK_Q; };
  auto load_q_tile = [&](int stage, int item) {  // Q, dO and the rows' LSE·log2 e, D, all by cp.async
    const int head = head_of(item), q0 = q0_of(item);
    const int64_t at = (int64_t(b) * sh.t_q * sh.h + head) * HEAD_DIM + q0 * q_stride;
    load_tile_swizzled<TL::BLOCK_Q, TL::CHUNKS, THREADS>(q_tile_of(stage), q + at, q_stride, sh.t_q - q0);
    load_tile_swizzled<TL::BLOCK_Q, TL::CHUNKS, THREADS>(do_tile_of(stage), d_o + at, q_stride, sh.t_q - q0);
    // A copy, not a load and a store: no thread waits for these rows before the tile's math.
    constexpr int ROW_CHUNKS = TL::BLOCK_Q / 4;  // 16-byte chunks of a tile's LSE (or D) row
    if (threadIdx.x < 2 * ROW_CHUNKS) {      // the padding to row_stride makes every chunk exist (LSE +inf: P = 0)
      const int which = threadIdx.x / ROW_CHUNKS, chunk = threadIdx.x % ROW_CHUNKS;
      const float* src = (which == 0 ? lse_log2 : d_rows) + (int64_t(b) * sh.h + head) * sh.row_stride + q0 + 4 * chunk;
      cp_async_16(smem_addr(rows_smem + stage * 2 * TL::BLOCK_Q) + uint32_t(threadIdx.x * 16), src, true);
    }
  };
  if (items > 0) load_q_tile(0, 0);
  cp_async_commit();

  for (int item = 0; item < items; ++item) {
    const int stage = item & 1, head = head_of(item), q0 = q0_of(item);
    cp_async_wait<0>();  // this thread's copies of this item (and, the first time, of K, V) have landed ...
    __syncthreads();     // ... and everyone's; every warp is done with the previous item: with its
                         // stage, which the next line refills, and with Pᵀ, dSᵀ (and dQ staged in
                         // Pᵀ's buffer), which this item rewrites
    if (item + 1 < items) load_q_tile(stage ^ 1, item + 1);  // in flight during this item's math
    cp_async_commit();
    const uint32_t q_tile = q_tile_of(stage), do_tile = do_tile_of(stage);
    const float* lse_smem = rows_smem + stage * 2 * TL::BLOCK_Q;
    const float* d_smem = lse_smem + TL::BLOCK_Q;
    const lab::TileVisibility vis =
        lab::tile_visibility(q0, lab::imin(q0 + TL::BLOCK_Q, sh.t_q), kv0, kv_end, sh.t_q, sh.t_kv, sh.causal);

    // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ   [32 keys x 32 rows] per warp, fp32.
    float st[2][TL::WARP_ROWS / 8][4] = {}, dpt[2][TL::WARP_ROWS / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < TL::D_STEPS; ++kk) {
      uint32_t ka[2][4], va[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        ldmatrix_x4(ka[mt], k_tile + mt * R16 + (a_lane ^ (32u * kk)));
        ldmatrix_x4(va[mt], v_tile + mt * R16 + (a_lane ^ (32u * kk)));
      }
#pragma unroll
      for (int nb2 = 0; nb2 < TL::WARP_ROWS / 16; ++nb2) {
        uint32_t qb[4], ob[4];
        ldmatrix_x4(qb, q_tile + nb2 * R16 + (bn_lane ^ (32u * kk)));
        ldmatrix_x4(ob, do_tile + nb2 * R16 + (bn_lane ^ (32u * kk)));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_16816<T>(st[mt][2 * nb2], ka[mt], qb[0], qb[1]);
          mma_16816<T>(st[mt][2 * nb2 + 1], ka[mt], qb[2], qb[3]);
          mma_16816<T>(dpt[mt][2 * nb2], va[mt], ob[0], ob[1]);
          mma_16816<T>(dpt[mt][2 * nb2 + 1], va[mt], ob[2], ob[3]);
        }
      }
    }

    // P and dS per element (the exercises), then the weights of dV and dK in place of them:
    // element e of (m-tile mt, n-block nb) is key key_g + 16·mt + 8·(e / 2), query row
    // q0 + col_g + 8·nb + e % 2. Every element is computed; in a tile that crosses the causal
    // diagonal or T_q, T_kv a masked one is then set to 0 by a select. No branch per element: the
    // step stays straight-line code.
    auto element_step = [&](auto masked) {
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nb = 0; nb < TL::WARP_ROWS / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int col = col_g + 8 * nb + (e & 1);
            float p, ds;
            written &= recompute_p_and_ds(st[mt][nb][e], dpt[mt][nb][e], lse_smem[col], d_smem[col], sh.scale_log2,
                                          &p, &ds);
            if constexpr (decltype(masked)::value) {
              const int i = q0 + col, j = key_g + 16 * mt + 8 * (e >> 1);
              const bool visible = i < sh.t_q && lab::key_visible(i, j, sh.t_q, sh.t_kv, sh.causal, 0);
              p = visible ? p : 0.f;
              ds = visible ? ds : 0.f;
            }
            written &= dkdv_weights(p, ds, &st[mt][nb][e], &dpt[mt][nb][e]);
          }
    };
    if (vis == lab::TileVisibility::full) element_step(std::false_type{});
    else element_step(std::true_type{});
    // Pᵀ and dSᵀ to shared memory, rounded to T: the dV and dK steps need them by key row across
    // the row warps, dQ by query row across the key warps. Each lane stores a pair of neighbouring
    // rows (one 32-bit word) of key rows g and g + 8; the swizzle puts a warp's 32 words in 32 banks.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int nb = 0; nb < TL::WARP_ROWS / 8; ++nb)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int key = WARP_KEYS * key_warp + 16 * mt + g + 8 * r, col = col_g + 8 * nb;
          const uint32_t at = swizzle<SCORE_CHUNKS>(key, col / 8) + uint32_t(col % 8) * 2;
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pt_tile + at), "r"(pack2<T>(st[mt][nb][2 * r], st[mt][nb][2 * r + 1]))
                       : "memory");
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(dst_tile + at), "r"(pack2<T>(dpt[mt][nb][2 * r], dpt[mt][nb][2 * r + 1]))
                       : "memory");
        }
    __syncthreads();  // Pᵀ and dSᵀ of every warp are in shared memory

    // dV += Pᵀ dO and dK += dSᵀ Q   [32 keys x 64 rows] · [64 rows x D/2] per warp.
#pragma unroll
    for (int kk = 0; kk < TL::BLOCK_Q / 16; ++kk) {
      uint32_t pa[2][4], sa[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        ldmatrix_x4(pa[mt], pt_tile + mt * S16 + (score_lane ^ (32u * kk)));
        ldmatrix_x4(sa[mt], dst_tile + mt * S16 + (score_lane ^ (32u * kk)));
      }
#pragma unroll
      for (int db2 = 0; db2 < TL::DKV_COLS / 16; ++db2) {
        const uint32_t pair = uint32_t(col_warp * (TL::DKV_COLS / 16) + db2);  // columns 16·pair ..
        uint32_t ob[4], qb[4];
        ldmatrix_x4_trans(ob, do_tile + kk * R16 + (bt_lane ^ (32u * pair)));
        ldmatrix_x4_trans(qb, q_tile + kk * R16 + (bt_lane ^ (32u * pair)));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_16816<T>(dv_acc[mt][2 * db2], pa[mt], ob[0], ob[1]);
          mma_16816<T>(dv_acc[mt][2 * db2 + 1], pa[mt], ob[2], ob[3]);
          mma_16816<T>(dk_acc[mt][2 * db2], sa[mt], qb[0], qb[1]);
          mma_16816<T>(dk_acc[mt][2 * db2 + 1], sa[mt], qb[2], qb[3]);
        }
      }
    }

    if constexpr (DQ != DqMode::separate) {
      // Staged in Pᵀ's buffer, dQ must wait for the warps still in their dV step, which reads Pᵀ.
      // Pᵀ's next writer, the next item's score step, starts after the loop-top barrier, which
      // every warp reaches after its last stage read.
      if constexpr (DQ == DqMode::atomic_staged_in_pt) __syncthreads();  // every warp is done with Pᵀ
      // dQ[rows] += dS K   [DQ_WARP_ROWS rows x 128 keys] · [128 keys x 32 columns] per warp;
      // dS is read transposed out of dSᵀ (ldmatrix.trans), K as the B operand (.trans).
      constexpr int MT = TL::DQ_WARP_ROWS / 16;
      const int dq_row0 = TL::DQ_WARP_ROWS * (warp / TL::DQ_COL_WARPS), dq_col0 = 32 * (warp % TL::DQ_COL_WARPS);
      float dq[MT][4][4] = {};
#pragma unroll
      for (int kk = 0; kk < BLOCK_KV / 16; ++kk) {
        uint32_t dsa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
          ldmatrix_x4_trans(dsa[mt], dst_tile + kk * S16 +
                                         swizzle<SCORE_CHUNKS>((lane & 7) + ((lane >> 4) << 3),
                                                               (dq_row0 + 16 * mt) / 8 + ((lane >> 3) & 1)));
#pragma unroll
        for (int db2 = 0; db2 < 2; ++db2) {
          uint32_t kb[4];
          ldmatrix_x4_trans(kb, k_tile + kk * R16 + (bt_lane ^ (32u * uint32_t(dq_col0 / 16 + db2))));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            mma_16816<T>(dq[mt][2 * db2], dsa[mt], kb[0], kb[1]);
            mma_16816<T>(dq[mt][2 * db2 + 1], dsa[mt], kb[2], kb[3]);
          }
        }
      }
      // Many blocks (one per K/V tile) add into the same dQ rows: fp32 atomics, in whatever
      // order the blocks arrive. Each 128-byte line an atomic instruction touches is a request of
      // its own to the L2, and a C fragment gives a lane two columns of two rows (16 lines per
      // instruction). So the warp trades values through shared memory first: per 8 rows x 32
      // columns, each lane stores its pairs, then reads back 4 consecutive columns of one row, and
      // one 16-byte atomic a lane covers 4 whole lines (the stage's layout: row_stage_word).
      // --bug dq-no-accumulate stores instead of adding: the last block wins.
      constexpr int STAGE_AT = DQ == DqMode::atomic ? TL::DQ_STAGE_AT : TL::PT_AT;
      float* stage_words = reinterpret_cast<float*>(smem + STAGE_AT) + warp * (8 * 32);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // fragment rows g (half 0) or g + 8 (half 1)
#pragma unroll
          for (int n = 0; n < 4; ++n)  // this lane's columns 8n + 2t, +1 of the 32: chunk 2n + t/2
            *reinterpret_cast<float2*>(stage_words + row_stage_word(g, 2 * n + (t >> 1), 2 * (t & 1))) =
                make_float2(dq[mt][n][2 * half], dq[mt][n][2 * half + 1]);
          __syncwarp();
#pragma unroll
          for (int quad = 0; quad < 2; ++quad) {  // staged rows 4·quad + lane / 8, chunk lane % 8
            const int r = 4 * quad + lane / 8, chunk = lane % 8;
            const float4 v4 = *reinterpret_cast<const float4*>(stage_words + row_stage_word(r, chunk, 0));
            const int i = q0 + dq_row0 + 16 * mt + 8 * half + r;
            float4* at = reinterpret_cast<float4*>(dq_acc + (int64_t(b) * sh.t_q + i) * q_stride +
                                                   int64_t(head) * HEAD_DIM + dq_col0 + 4 * chunk);
            if (written && i < sh.t_q) {
              if (sh.dq_store) *at = v4;
              else atomic_add4(at, v4);
            }
          }
          __syncwarp();  // the stage is read before the next 8 rows overwrite it
        }
    }
  }
  cp_async_wait<0>();  // a block whose tile no query row sees still has K, V copies in flight

  if (!written) return;
  // dK = scale·(dSᵀ Q), dV = Pᵀ dO: this warp's 32 key rows x D/2 columns, one 32-bit pair per C-fragment half.
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = key_g + 16 * mt + 8 * r;
      if (j >= sh.t_kv) continue;
      T* dk_row = dk + kv_base + j * kv_stride;
      T* dv_row = dv + kv_base + j * kv_stride;
#pragma unroll
      for (int nb = 0; nb < TL::DKV_COLS / 8; ++nb) {
        const int c = TL::DKV_COLS * col_warp + 8 * nb + 2 * t;
        *reinterpret_cast<Vec2<T>*>(dk_row + c) =
            from_float2<T>(dk_acc[mt][nb][2 * r] * sh.scale, dk_acc[mt][nb][2 * r + 1] * sh.scale);
        *reinterpret_cast<Vec2<T>*>(dv_row + c) = from_float2<T>(dv_acc[mt][nb][2 * r], dv_acc[mt][nb][2 * r + 1]);
      }
    }
}

// ---- atomic variants, pass 3: dQ = scale · dq_acc, rounded to T, four elements a thread.
template <class T>
__global__ void dq_convert_kernel(const float* __restrict__ dq_acc, T* __restrict__ dq, int64_t n4, float scale) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // elements 4x .. 4x + 3
  if (x >= n4) return;
  const float4 acc = reinterpret_cast<const float4*>(dq_acc)[x];
  Vec2<T>* out = reinterpret_cast<Vec2<T>*>(dq) + 2 * x;
  out[0] = from_float2<T>(acc.x * scale, acc.y * scale);
  out[1] = from_float2<T>(acc.z * scale, acc.w * scale);
}

// ---- wgmma variant, pass 3: the same out of the wgmma kernel's order (lab::wsbwd::dq_acc_index),
// two neighbouring columns a thread in dQ's order, so that the stores are whole rows.
template <class T, int HEAD_DIM>
__global__ void dq_convert_wgmma_kernel(const float* __restrict__ dq_acc, T* __restrict__ dq, int64_t n2, int t_q,
                                        int h, int row_stride, float scale) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // elements 2x, 2x + 1 of dQ
  if (x >= n2) return;
  const int col = int(2 * x % HEAD_DIM);
  const int64_t row = 2 * x / HEAD_DIM;  // (b, i, head) of [B, T_q, H]
  const int head = int(row % h), i = int(row / h % t_q), b = int(row / h / t_q);
  const int64_t head_acc = (int64_t(b) * h + head) * row_stride * HEAD_DIM;
  const float2 acc = *reinterpret_cast<const float2*>(dq_acc + lab::wsbwd::dq_acc_index(head_acc, i, col, HEAD_DIM));
  reinterpret_cast<Vec2<T>*>(dq)[x] = from_float2<T>(acc.x * scale, acc.y * scale);
}

// ---- deterministic variant, pass 3: one block per (Q tile, query head); warp w owns query rows
// q0 + 16w .. +15 and sums their dQ over the K/V tiles in order, in registers. P, dP and dS are
// recomputed (as the main kernel did) with the roles of the operands swapped: S = Q Kᵀ,
// dP = dO Vᵀ, dQ += dS K. The K/V tiles stream through a two-stage cp.async ring: the next one
// is in flight during the current one's math.
template <class T, int HEAD_DIM>
__global__ void __launch_bounds__(DQ_THREADS)
dq_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ d_o,
          const float* __restrict__ lse_log2, const float* __restrict__ d_rows, T* __restrict__ dq, Shape sh) {
  using TL = Tiles<HEAD_DIM>;
  constexpr uint32_t R16 = ROWS16(TL::ROW_BYTES);
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t q_tile = smem_addr(smem), do_tile = q_tile + TL::DQ_TILE_BYTES;
  auto k_tile_of = [&](int stage) { return q_tile + uint32_t((2 + 2 * stage) * TL::DQ_TILE_BYTES); };
  auto v_tile_of = [&](int stage) { return q_tile + uint32_t((3 + 2 * stage) * TL::DQ_TILE_BYTES); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int q0 = blockIdx.x * DQ_BLOCK_Q, bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int hk = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;
  const int64_t q_base = (int64_t(b) * sh.t_q * sh.h + head) * HEAD_DIM;
  const int64_t kv_base = (int64_t(b) * sh.t_kv * sh.h_kv + hk) * HEAD_DIM;
  load_tile_swizzled<DQ_BLOCK_Q, TL::CHUNKS, DQ_THREADS>(q_tile, q + q_base + q0 * q_stride, q_stride, sh.t_q - q0);
  load_tile_swizzled<DQ_BLOCK_Q, TL::CHUNKS, DQ_THREADS>(do_tile, d_o + q_base + q0 * q_stride, q_stride, sh.t_q - q0);
  cp_async_commit();

  const lab::KeyRange block_keys =
      lab::visible_keys_of_rows(q0, lab::imin(q0 + DQ_BLOCK_Q, sh.t_q), sh.t_q, sh.t_kv, sh.causal);
  const int tile_begin = block_keys.begin / DQ_BLOCK_KV;
  const int tile_end = block_keys.empty() ? tile_begin : lab::ceil_div(block_keys.end, DQ_BLOCK_KV);
  auto load_kv_tile = [&](int stage, int tile) {
    const int kv0 = tile * DQ_BLOCK_KV;
    load_tile_swizzled<DQ_BLOCK_KV, TL::CHUNKS, DQ_THREADS>(k_tile_of(stage), k + kv_base + kv0 * kv_stride, kv_stride,
                                                      sh.t_kv - kv0);
    load_tile_swizzled<DQ_BLOCK_KV, TL::CHUNKS, DQ_THREADS>(v_tile_of(stage), v + kv_base + kv0 * kv_stride, kv_stride,
                                                      sh.t_kv - kv0);
  };
  if (tile_begin < tile_end) load_kv_tile(0, tile_begin);
  cp_async_commit();
  cp_async_wait<1>();  // this thread's Q and dO copies have landed (the first K/V tile may not have) ...
  __syncthreads();     // ... and everyone's; Q and dO move to registers for good

  const uint32_t a_lane = swizzle<TL::CHUNKS>(warp * ROWS_PER_WARP + (lane & 15), lane >> 4);
  const uint32_t bn_lane = swizzle<TL::CHUNKS>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t bt_lane = swizzle<TL::CHUNKS>(lane & 15, lane >> 4);
  uint32_t qa[TL::D_STEPS][4], oa[TL::D_STEPS][4];
#pragma unroll
  for (int kk = 0; kk < TL::D_STEPS; ++kk) {
    ldmatrix_x4(qa[kk], q_tile + (a_lane ^ (32u * kk)));
    ldmatrix_x4(oa[kk], do_tile + (a_lane ^ (32u * kk)));
  }
  const int row_g = q0 + warp * ROWS_PER_WARP + g;  // this lane's rows: row_g, row_g + 8
  float lse_r[2], d_r[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row_g + 8 * r;
    const int64_t at = (int64_t(b) * sh.h + head) * sh.row_stride + i;
    lse_r[r] = i < sh.t_q ? lse_log2[at] : INFINITY;
    d_r[r] = i < sh.t_q ? d_rows[at] : 0.f;
  }

  float dq_acc[TL::D_BLOCKS][4] = {};
  bool written = true;
  for (int tile = tile_begin; tile < tile_end; ++tile) {
    const int kv0 = tile * DQ_BLOCK_KV, stage = (tile - tile_begin) & 1;
    cp_async_wait<0>();  // this thread's copies of this K/V tile have landed ...
    __syncthreads();     // ... and everyone's; every warp is done with the previous tile, whose stage
                         // the next line refills
    if (tile + 1 < tile_end) load_kv_tile(stage ^ 1, tile + 1);  // in flight during this tile's math
    cp_async_commit();
    const uint32_t k_tile = k_tile_of(stage), v_tile = v_tile_of(stage);

    float s[DQ_BLOCK_KV / 8][4] = {}, dp[DQ_BLOCK_KV / 8][4] = {};
#pragma unroll
    for (int nb2 = 0; nb2 < DQ_BLOCK_KV / 16; ++nb2)
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        uint32_t kb[4], vb[4];
        ldmatrix_x4(kb, k_tile + nb2 * R16 + (bn_lane ^ (32u * kk)));
        ldmatrix_x4(vb, v_tile + nb2 * R16 + (bn_lane ^ (32u * kk)));
        mma_16816<T>(s[2 * nb2], qa[kk], kb[0], kb[1]);
        mma_16816<T>(s[2 * nb2 + 1], qa[kk], kb[2], kb[3]);
        mma_16816<T>(dp[2 * nb2], oa[kk], vb[0], vb[1]);
        mma_16816<T>(dp[2 * nb2 + 1], oa[kk], vb[2], vb[3]);
      }
    const lab::TileVisibility vis =
        lab::tile_visibility(q0, lab::imin(q0 + DQ_BLOCK_Q, sh.t_q), kv0, kv0 + DQ_BLOCK_KV, sh.t_q, sh.t_kv, sh.causal);
    auto element_step = [&](auto masked) {  // as in the main kernel: a select, not a branch, per element
#pragma unroll
      for (int nb = 0; nb < DQ_BLOCK_KV / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float p, ds, dv_weight;
          written &= recompute_p_and_ds(s[nb][e], dp[nb][e], lse_r[e >> 1], d_r[e >> 1], sh.scale_log2, &p, &ds);
          if constexpr (decltype(masked)::value) {
            const int i = row_g + 8 * (e >> 1), j = kv0 + 8 * nb + 2 * t + (e & 1);
            const bool visible = i < sh.t_q && lab::key_visible(i, j, sh.t_q, sh.t_kv, sh.causal, 0);
            p = visible ? p : 0.f;
            ds = visible ? ds : 0.f;
          }
          written &= dkdv_weights(p, ds, &dv_weight, &s[nb][e]);  // s[nb][e] := the weight of K's row: dS
        }
    };
    if (vis == lab::TileVisibility::full) element_step(std::false_type{});
    else element_step(std::true_type{});
    if (sh.dq_store)  // --bug dq-no-accumulate: each K/V tile overwrites what the previous ones summed
      for (auto& blk : dq_acc) for (float& x : blk) x = 0.f;
    // dQ += dS K   [16 rows x 64 keys] · [64 keys x D]: dS's C fragments are the A fragments.
#pragma unroll
    for (int kk = 0; kk < DQ_BLOCK_KV / 16; ++kk) {
      const uint32_t sa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int db2 = 0; db2 < TL::D_BLOCKS / 2; ++db2) {
        uint32_t kb[4];
        ldmatrix_x4_trans(kb, k_tile + kk * R16 + (bt_lane ^ (32u * db2)));
        mma_16816<T>(dq_acc[2 * db2], sa, kb[0], kb[1]);
        mma_16816<T>(dq_acc[2 * db2 + 1], sa, kb[2], kb[3]);
      }
    }
  }
  if (!written) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row_g + 8 * r;
    if (i >= sh.t_q) continue;
    T* row = dq + q_base + i * q_stride;
#pragma unroll
    for (int nb = 0; nb < TL::D_BLOCKS; ++nb)
      *reinterpret_cast<Vec2<T>*>(row + 8 * nb + 2 * t) =
          from_float2<T>(dq_acc[nb][2 * r] * sh.scale, dq_acc[nb][2 * r + 1] * sh.scale);
  }
}

// ---------------------------------------------------------------------------------------------
// Launcher: preprocess, the K/V-tile kernel, then dQ's pass (atomic: convert; deterministic:
// dq_kernel). Plain pointers and sizes, so that the harness and the PyTorch op
// (common/torch_op/) launch the very same code.
struct BackwardArgs {
  const void *q, *k, *v;  // [B, T_q, H, D], [B, T_kv, H_kv, D] x 2, contiguous, element type T
  const void *o, *d_o;    // [B, T_q, H, D]
  const float* lse;       // [B, H, T_q], natural log
  void *dq, *dk, *dv;     // shapes of q, k, v
  float* workspace;       // workspace_floats() floats
  int b, h, h_kv, t_q, t_kv, d;
  bool causal;
  bool atomic;            // variant: atomic (true) or deterministic
  bool hopper = false;    // the wgmma variants (sm_90a)
};

// The row arrays' row length: T_q rounded up to a whole Q tile of the kernel that reads them (the
// larger of the main kernel's two, for either D), so that a tile's rows are whole, aligned 16-byte copies (cp.async, or one bulk copy on Hopper). It
// also keeps the fp32 dQ that follows them in the workspace 16-byte aligned, for its float4 atomics
// (mma.sync) or bulk reductions (wgmma).
inline int row_stride_of(int t_q, bool hopper) {
  const int pad = hopper ? lab::wsbwd::ROW_PAD : lab::imax(Tiles<64>::BLOCK_Q, Tiles<128>::BLOCK_Q);
  return lab::ceil_div(t_q, pad) * pad;
}
static_assert(Tiles<64>::BLOCK_Q % 4 == 0 && Tiles<128>::BLOCK_Q % 4 == 0 && lab::wsbwd::ROW_PAD % 4 == 0, "row arrays of whole 16-byte chunks");

// D and LSE·log2 e per row; the atomic variants' fp32 dQ (wgmma: t_pad rows a head, whole 64-row
// blocks of lab::wsbwd::dq_acc_index).
inline int64_t workspace_floats(int b, int h, int t_q, int d, bool atomic, bool hopper = false) {
  const int64_t rows = int64_t(b) * h * row_stride_of(t_q, hopper);
  return 2 * rows + (atomic ? (hopper ? rows : int64_t(b) * t_q * h) * d : 0);
}

inline Shape make_shape(const BackwardArgs& a, const std::string& bug) {
  const float scale = 1.0f / std::sqrt(float(a.d));
  return Shape{a.t_q, a.t_kv, a.h, a.h_kv, a.causal, scale, bug == "unscaled-p" ? lab::kLog2e : scale * lab::kLog2e,
               bug == "dq-no-accumulate", row_stride_of(a.t_q, a.hopper)};
}

// The exercises as the Hopper kernel's element step (common/hopper/ws_backward.cuh).
struct Exercises {
  __device__ __forceinline__ static bool p_and_ds(float s, float dp, float lse_log2, float d_row, float scale_log2,
                                                  float* p, float* ds) {
    return recompute_p_and_ds(s, dp, lse_log2, d_row, scale_log2, p, ds);
  }
  __device__ __forceinline__ static bool weights(float p, float ds, float* dv_weight, float* dk_weight) {
    return dkdv_weights(p, ds, dv_weight, dk_weight);
  }
};

// The wgmma variants: the Hopper kernel for dK, dV (and dQ by bulk reductions, variant wgmma), then
// dQ's pass: the conversion (wgmma) or the deterministic variant's dq_kernel (wgmma-deterministic).
template <class T, int HEAD_DIM>
void launch_backward_hopper(const BackwardArgs& a, const Shape& sh, const float* d_rows, const float* lse_log2,
                            float* dq_acc, bool exercises_written, cudaStream_t st) {
  namespace hb = lab::wsbwd;
  constexpr int smem = hb::Tiles<HEAD_DIM>::SMEM_BYTES, dq_smem = Tiles<HEAD_DIM>::DQ_SMEM_BYTES;
  static const bool configured = [] {  // more than 48 KB of dynamic shared memory must be asked for, once
    lab::opt_in_shared_memory(hb::dkdv_kernel<T, HEAD_DIM, true, Exercises>, smem);
    lab::opt_in_shared_memory(hb::dkdv_kernel<T, HEAD_DIM, false, Exercises>, smem);
    lab::opt_in_shared_memory(dq_kernel<T, HEAD_DIM>, dq_smem);
    return true;
  }();
  (void)configured;
  constexpr bool f16 = std::is_same_v<T, __half>;
  constexpr int block_q = hb::Tiles<HEAD_DIM>::BLOCK_Q;
  const CUtensorMap q_map = hb::make_map(f16, a.q, a.b, a.t_q, a.h, HEAD_DIM, block_q);
  const CUtensorMap do_map = hb::make_map(f16, a.d_o, a.b, a.t_q, a.h, HEAD_DIM, block_q);
  const CUtensorMap k_map = hb::make_map(f16, a.k, a.b, a.t_kv, a.h_kv, HEAD_DIM, hb::BLOCK_KV);
  const CUtensorMap v_map = hb::make_map(f16, a.v, a.b, a.t_kv, a.h_kv, HEAD_DIM, hb::BLOCK_KV);
  const hb::Params p{lse_log2, d_rows, dq_acc, a.dk, a.dv, a.t_q, a.t_kv, a.h, a.h_kv, sh.row_stride,
                     a.causal, sh.scale, sh.scale_log2, sh.dq_store};
  const dim3 grid(unsigned(lab::ceil_div(a.t_kv, hb::BLOCK_KV)), unsigned(a.b * a.h_kv));
  const int64_t q_elems = int64_t(a.b) * a.h * a.t_q * a.d;
  if (a.atomic) {  // dq_acc was zeroed by the preprocessing pass
    hb::dkdv_kernel<T, HEAD_DIM, true, Exercises><<<grid, hb::THREADS, smem, st>>>(q_map, do_map, k_map, v_map, p);
    CUDA_CHECK_LAST();
    if (exercises_written)
      dq_convert_wgmma_kernel<T, HEAD_DIM><<<unsigned((q_elems / 2 + 255) / 256), 256, 0, st>>>(
          dq_acc, static_cast<T*>(a.dq), q_elems / 2, a.t_q, a.h, sh.row_stride, sh.scale);
  } else {
    hb::dkdv_kernel<T, HEAD_DIM, false, Exercises><<<grid, hb::THREADS, smem, st>>>(q_map, do_map, k_map, v_map, p);
    CUDA_CHECK_LAST();
    const dim3 q_grid(unsigned(lab::ceil_div(a.t_q, DQ_BLOCK_Q)), unsigned(a.b * a.h));
    dq_kernel<T, HEAD_DIM><<<q_grid, DQ_THREADS, dq_smem, st>>>(
        static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v), static_cast<const T*>(a.d_o),
        lse_log2, d_rows, static_cast<T*>(a.dq), sh);
  }
  CUDA_CHECK_LAST();
}

// The main kernel's dQ mode on this GPU (or under --smem-limit): the atomic variant keeps dQ's
// stage apart where a block may have the 8 KB (Hopper), else stages it in Pᵀ's buffer (A100).
template <int HEAD_DIM>
DqMode dq_mode_here(bool atomic) {
  if (!atomic) return DqMode::separate;
  return Tiles<HEAD_DIM>::smem_bytes(DqMode::atomic) <= lab::shared_memory_limit() ? DqMode::atomic
                                                                                  : DqMode::atomic_staged_in_pt;
}

template <class T, int HEAD_DIM>
struct MainKernel {  // the main kernel of one dQ mode, opted in to its shared memory
  decltype(&dkdv_kernel<T, HEAD_DIM, DqMode::separate>) kernel;
  int smem_bytes;
};

template <class T, int HEAD_DIM, DqMode DQ>
MainKernel<T, HEAD_DIM> opted_in_main_kernel() {
  constexpr int smem = Tiles<HEAD_DIM>::smem_bytes(DQ);
  // More than 48 KB of dynamic shared memory must be asked for, once a kernel (exit 77 where a
  // block may not have them).
  static const bool configured = (lab::opt_in_shared_memory(dkdv_kernel<T, HEAD_DIM, DQ>, smem), true);
  (void)configured;
  return {dkdv_kernel<T, HEAD_DIM, DQ>, smem};
}

template <class T, int HEAD_DIM>
MainKernel<T, HEAD_DIM> opted_in_main_kernel(DqMode mode) {
  if (mode == DqMode::separate) return opted_in_main_kernel<T, HEAD_DIM, DqMode::separate>();
  if (mode == DqMode::atomic) return opted_in_main_kernel<T, HEAD_DIM, DqMode::atomic>();
  return opted_in_main_kernel<T, HEAD_DIM, DqMode::atomic_staged_in_pt>();
}

template <class T, int HEAD_DIM>
void launch_backward(const BackwardArgs& a, const std::string& bug, cudaStream_t st) {
  constexpr int dq_smem = Tiles<HEAD_DIM>::DQ_SMEM_BYTES;
  MainKernel<T, HEAD_DIM> main_kernel{};
  if (!a.hopper) {  // opted in before any launch: a GPU that cannot run them says so first
    main_kernel = opted_in_main_kernel<T, HEAD_DIM>(dq_mode_here<HEAD_DIM>(a.atomic));
    if (!a.atomic) {
      static const bool dq_configured = (lab::opt_in_shared_memory(dq_kernel<T, HEAD_DIM>, dq_smem), true);
      (void)dq_configured;
    }
  }
  const Shape sh = make_shape(a, bug);
  const T *q = static_cast<const T*>(a.q), *k = static_cast<const T*>(a.k), *v = static_cast<const T*>(a.v);
  const T *o = static_cast<const T*>(a.o), *d_o = static_cast<const T*>(a.d_o);
  T *dq = static_cast<T*>(a.dq), *dk = static_cast<T*>(a.dk), *dv = static_cast<T*>(a.dv);
  const int64_t rows = int64_t(a.b) * a.h * sh.row_stride, q_elems = int64_t(a.b) * a.h * a.t_q * a.d;
  float* d_rows = a.workspace;
  float* lse_log2 = d_rows + rows;
  float* dq_acc = a.atomic ? lse_log2 + rows : nullptr;
  float p, ds, wv, wk;  // an exercise left as the stub leaves dQ unwritten (the kernels skip their stores)
  const bool exercises_written = recompute_p_and_ds(0.f, 0.f, 0.f, 0.f, 1.f, &p, &ds) && dkdv_weights(p, ds, &wv, &wk);

  // D/8 threads per row; the atomic variants' dQ accumulator (mma.sync or wgmma) is zeroed here.
  preprocess_kernel<T, HEAD_DIM><<<unsigned((rows * (HEAD_DIM / 8) + 255) / 256), 256, 0, st>>>(
      o, d_o, a.lse, d_rows, lse_log2, dq_acc, a.b, a.t_q, sh.row_stride, a.h, bug == "d-without-do", a.hopper);
  CUDA_CHECK_LAST();
  if (a.hopper) {
    launch_backward_hopper<T, HEAD_DIM>(a, sh, d_rows, lse_log2, dq_acc, exercises_written, st);
    return;
  }
  const dim3 kv_grid(unsigned(lab::ceil_div(a.t_kv, BLOCK_KV)), unsigned(a.b * a.h_kv));
  // dq_acc: zeroed by the preprocessing pass (atomic), nullptr (deterministic)
  main_kernel.kernel<<<kv_grid, THREADS, main_kernel.smem_bytes, st>>>(q, k, v, d_o, lse_log2, d_rows, dq_acc, dk, dv, sh);
  CUDA_CHECK_LAST();
  if (a.atomic) {
    if (exercises_written)
      dq_convert_kernel<T><<<unsigned((q_elems / 4 + 255) / 256), 256, 0, st>>>(dq_acc, dq, q_elems / 4, sh.scale);
  } else {
    const dim3 q_grid(unsigned(lab::ceil_div(a.t_q, DQ_BLOCK_Q)), unsigned(a.b * a.h));
    dq_kernel<T, HEAD_DIM><<<q_grid, DQ_THREADS, dq_smem, st>>>(q, k, v, d_o, lse_log2, d_rows, dq, sh);
  }
  CUDA_CHECK_LAST();
}

// fp16 or bf16, D = 64 or 128: the four builds of the kernels.
inline void launch_backward_any(const BackwardArgs& a, bool f16, const std::string& bug, cudaStream_t st) {
  if (a.d == 64) f16 ? launch_backward<__half, 64>(a, bug, st) : launch_backward<__nv_bfloat16, 64>(a, bug, st);
  else f16 ? launch_backward<__half, 128>(a, bug, st) : launch_backward<__nv_bfloat16, 128>(a, bug, st);
}

#ifndef LAB_KERNELS_ONLY  // the PyTorch op includes this file for the kernels and the launcher alone
// The two exercises asked on the host before every run, CPU model and GPU alike, on the handout's
// worked example (one query row, two keys, D = 64 so scale = 1/8; raw scores s = 8 and 0, i.e.
// scaled scores 1 and 0; dO·v = dP = 1 and 0), where the usual slips give values apart from the
// right ones and from each other (not a row with one key: there P = 1 in any base, with + or −
// LSE alike). The first exercise that is unwritten or wrong, with what it gave, what it should
// give and the likely cause; "" when both are right. The gradients alone would only say "too far".
std::string exercise_failure() {
  float p = 0.f, ds = 0.f, dv_weight = 0.f, dk_weight = 0.f;
  if (!recompute_p_and_ds(0.f, 0.f, 0.f, 0.f, 1.f, &p, &ds))
    return "EXERCISE dsdp is not written yet: recompute_p_and_ds() returns false, so no gradient is stored";
  const double e = std::exp(1.0);
  const float scale_log2 = 0.125f * lab::kLog2e;                  // scale = 1/sqrt(64), in base 2
  const float lse_log2 = float(std::log1p(e)) * lab::kLog2e;       // L = ln(e^1 + e^0), as pass 1 gives it
  const float d_row = float(e / (1 + e));                          // D = dO·O = Σ_j P_j dP_j = P_1
  struct Pair { float s, dp, lse_log2, d_row, p, ds; const char* what; };  // the arguments, the right answers
  const Pair pairs[] = {
      {8.f, 1.f, lse_log2, d_row, float(e / (1 + e)), float(e / ((1 + e) * (1 + e))), " (the handout's worked example, key 1)"},
      {0.f, 0.f, lse_log2, d_row, float(1 / (1 + e)), -float(e / ((1 + e) * (1 + e))), " (the handout's worked example, key 2)"},
      {8.f, 1.f, INFINITY, 0.f, 0.f, 0.f, ""}};  // a row that sees no key: pass 1 gives it LSE +inf, D = 0
  auto near = [](float got, double want) { return std::fabs(got - want) <= 1e-3 * std::fabs(want) + 1e-6; };
  auto num = [](double x) { return lab::format_number("%.4g", x); };
  for (const Pair& a : pairs) {
    recompute_p_and_ds(a.s, a.dp, a.lse_log2, a.d_row, scale_log2, &p, &ds);
    const bool p_ok = near(p, a.p);
    if (p_ok && near(ds, a.ds)) continue;
    const std::string call = "recompute_p_and_ds(s=" + num(a.s) + ", dp=" + num(a.dp) + ", lse_log2=" + num(a.lse_log2) +
                             ", d_row=" + num(a.d_row) + ", scale_log2=" + num(scale_log2) + ")";
    const double x = double(a.s) * scale_log2, l = a.lse_log2;  // the exponent's two terms, base 2
    std::string why;
    if (a.lse_log2 == INFINITY)
      why = "a row that sees no key (or lies past T_q) has lse_log2 = +inf, and its P must be exp2(-inf) = 0 and its dS 0";
    else if (!p_ok && near(p, std::exp(x - l)))
      why = "P = exp2(s·scale_log2 − lse_log2) is base 2 (expf of a base-2 argument?)";
    else if (!p_ok && (near(p, std::exp2(x + l)) || near(p, std::exp(x + l))))
      why = "the LSE is subtracted: P = exp(S − LSE) <= 1 (+ lse_log2 instead of −?)";
    else if (!p_ok && near(p, std::exp2(x)))
      why = "P = exp(S − LSE): the LSE is the row's normaliser and must be subtracted";
    else if (!p_ok && near(p, std::exp2(a.s - l)))
      why = "s is the raw q·k: it takes the softmax scale, scale_log2 = scale·log2 e";
    else if (!p_ok)
      why = "P = exp(s·scale − LSE), in base 2 with the two given factors, lies in [0, 1]";
    else if (near(ds, -a.ds))
      why = "dS = P ∘ (dP − D), not (D − dP)";
    else
      why = "dS = P ∘ (dP − D), from the P just computed";
    return "EXERCISE dsdp gives a wrong answer: " + call + " gave " +
           (p_ok ? "dS = " + num(ds) + ", want " + num(a.ds) : "P = " + num(p) + ", want " + num(a.p)) +
           a.what + ": " + why;
  }
  if (!dkdv_weights(1.f, 1.f, &dv_weight, &dk_weight))
    return "EXERCISE accumulate is not written yet: dkdv_weights() returns false, so no gradient is stored "
           "(dQ, dK and dV are stored only once both exercises are written)";
  const Pair& key2 = pairs[1];  // P and dS of the worked example's key 2: two different values
  dkdv_weights(key2.p, key2.ds, &dv_weight, &dk_weight);
  if (near(dv_weight, key2.p) && near(dk_weight, key2.ds)) return "";
  const bool swapped = near(dv_weight, key2.ds) && near(dk_weight, key2.p);
  return "EXERCISE accumulate gives a wrong answer: dkdv_weights(p=" + num(key2.p) + ", ds=" + num(key2.ds) + ") = {dv " +
         num(dv_weight) + ", dk " + num(dk_weight) + "}, want {dv " + num(key2.p) + ", dk " + num(key2.ds) +
         "}: dV is weighed by P, dK by dS (dV = Pᵀ dO, dK = dSᵀ Q): " +
         (swapped ? "the two are swapped" : "each weight is P or dS unchanged (dK's scale comes after the sum)");
}

bool is_atomic(const std::string& variant) { return variant == "atomic" || variant == "wgmma"; }
bool is_hopper(const std::string& variant) { return variant.rfind("wgmma", 0) == 0; }

int64_t workspace_bytes(const lab::Problem& p, const std::string& variant) {
  return 4 * workspace_floats(p.b, p.h, p.t_q, p.d, is_atomic(variant), is_hopper(variant));
}

// The main kernel's shared memory in the configuration this GPU runs (dq_mode_here).
int main_kernel_smem_bytes(int d, bool atomic) {
  return d == 64 ? Tiles<64>::smem_bytes(dq_mode_here<64>(atomic)) : Tiles<128>::smem_bytes(dq_mode_here<128>(atomic));
}

lab::BackwardGpuRun make_run(const lab::BackwardContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const lab::BackwardTensors tn = ctx.tensors;
  auto work = std::make_shared<lab::DeviceBuffer>(size_t(workspace_bytes(pr, ctx.variant)));
  const BackwardArgs args{tn.q, tn.k, tn.v, tn.o, tn.d_o, tn.lse, tn.dq, tn.dk, tn.dv, work->as<float>(),
                          pr.b, pr.h, pr.h_kv, pr.t_q, pr.t_kv, pr.d, pr.causal, is_atomic(ctx.variant),
                          is_hopper(ctx.variant)};
  const bool f16 = pr.dtype == lab::DType::f16;
  const std::string bug = ctx.bug;
  lab::BackwardGpuRun run;
  run.failure = exercise_failure();  // leads the verdict; the gradients' check follows it
  run.forward = [=](cudaStream_t st) {
    if (f16) lab::fwd32::forward<__half>(tn.q, tn.k, tn.v, tn.o, tn.lse, pr.b, pr.h, pr.h_kv, pr.t_q, pr.t_kv, pr.d, pr.causal, st);
    else lab::fwd32::forward<__nv_bfloat16>(tn.q, tn.k, tn.v, tn.o, tn.lse, pr.b, pr.h, pr.h_kv, pr.t_q, pr.t_kv, pr.d, pr.causal, st);
  };
  run.backward = [=](cudaStream_t st) {
    (void)work;  // the workspace lives as long as the backward
    launch_backward_any(args, f16, bug, st);
  };
  run.extra_device_bytes = workspace_bytes(pr, ctx.variant);
  run.metrics = {{"block_q", pr.d == 64 ? Tiles<64>::BLOCK_Q : Tiles<128>::BLOCK_Q}, {"block_kv", BLOCK_KV}, {"warps", NUM_WARPS}, {"stages", Tiles<64>::STAGES},
                 {"smem_bytes", main_kernel_smem_bytes(pr.d, is_atomic(ctx.variant))},
                 {"dq", is_atomic(ctx.variant) ? "fp32 atomics" : "separate pass"}};
  run.metrics["smem_limit_bytes"] = lab::shared_memory_limit();  // what a block may have here (--smem-limit)
  if (!is_hopper(ctx.variant) && is_atomic(ctx.variant))  // where the atomics' 8 KB stage lives
    run.metrics["dq_stage"] = (pr.d == 64 ? dq_mode_here<64>(true) : dq_mode_here<128>(true)) == DqMode::atomic ? "own" : "in Pt";
  if (is_hopper(ctx.variant)) {
    namespace hb = lab::wsbwd;
    run.metrics["block_q"] = pr.d == 64 ? hb::Tiles<64>::BLOCK_Q : hb::Tiles<128>::BLOCK_Q;
    run.metrics["block_kv"] = hb::BLOCK_KV;
    run.metrics["warps"] = hb::THREADS / 32;
    run.metrics["stages"] = pr.d == 64 ? hb::Tiles<64>::STAGES : hb::Tiles<128>::STAGES;
    run.metrics["smem_bytes"] = pr.d == 64 ? hb::Tiles<64>::SMEM_BYTES : hb::Tiles<128>::SMEM_BYTES;
    if (is_atomic(ctx.variant)) run.metrics["dq"] = "fp32 bulk reductions";
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: the main kernel's loop (K/V tile outer, every Q tile of the group's heads inner) in
// plain C++, calling the same exercise functions, with the kernels' rounding points: scores and
// dP in float from the stored 16-bit values, the dV and dK weights (P, dS) rounded to T before
// they meet dO and Q (the kernels pack them into 16-bit mma operands), sums in float, each
// gradient rounded once. dQ is summed over the K/V tiles in order (both variants' result, up to
// the order of the fp32 additions).
std::string run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::BackwardInputs& in, lab::Gradients& g) {
  const std::string exercises_wrong = exercise_failure();  // asked first; the run's gradients follow it
  const lab::DType ty = pr.dtype;
  const BackwardArgs dims{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                          pr.b, pr.h, pr.h_kv, pr.t_q, pr.t_kv, pr.d, pr.causal, is_atomic(opt.variant)};
  const Shape sh = make_shape(dims, opt.bug);
  const int d = pr.d, group = pr.h / pr.h_kv;
  const int block_q = d == 64 ? Tiles<64>::BLOCK_Q : Tiles<128>::BLOCK_Q;  // the main kernel's Q tile
  // D and LSE·log2 e per row, as the preprocessing pass.
  std::vector<float> d_rows(size_t(pr.lse_elems())), lse_log2(d_rows.size());
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.h; ++h)
      for (int i = 0; i < pr.t_q; ++i) {
        const float* o = &in.o[size_t(pr.q_index(b, i, h))];
        const float* d_o = &in.d_o[size_t(pr.q_index(b, i, h))];
        float sum = 0.f;
        for (int c = 0; c < d; ++c) sum += opt.bug == "d-without-do" ? o[c] : d_o[c] * o[c];
        const size_t row = size_t(pr.lse_index(b, h, i));
        d_rows[row] = sum;
        lse_log2[row] = in.lse[row] == -INFINITY ? INFINITY : in.lse[row] * lab::kLog2e;
      }
  std::vector<float> dq_acc(size_t(pr.q_elems()), 0.f);
  std::atomic<bool> written{true};
  lab::parallel_for(int64_t(pr.b) * pr.h_kv, [&](int64_t bhk) {  // a (b, K/V head) owns its group's dQ rows
    const int b = int(bhk / pr.h_kv), hk = int(bhk % pr.h_kv);
    std::vector<float> dk_acc(size_t(BLOCK_KV) * d), dv_acc(dk_acc.size()), tile_dq(size_t(block_q) * d);
    for (int kv0 = 0; kv0 < pr.t_kv; kv0 += BLOCK_KV) {
      std::fill(dk_acc.begin(), dk_acc.end(), 0.f);
      std::fill(dv_acc.begin(), dv_acc.end(), 0.f);
      const int first_row = sh.causal ? std::max(0, kv0 - (pr.t_kv - pr.t_q)) : 0;
      for (int h = hk * group; h < (hk + 1) * group; ++h)
        for (int q0 = first_row / block_q * block_q; q0 < pr.t_q; q0 += block_q) {
          const auto vis = lab::tile_visibility(q0, std::min(q0 + block_q, pr.t_q), kv0, kv0 + BLOCK_KV, pr.t_q, pr.t_kv,
                                                pr.causal);
          if (vis == lab::TileVisibility::none) continue;
          std::fill(tile_dq.begin(), tile_dq.end(), 0.f);
          for (int jj = 0; jj < BLOCK_KV && kv0 + jj < pr.t_kv; ++jj) {
            const int j = kv0 + jj;
            const float* kr = &in.qkv.k[size_t(pr.kv_index(b, j, hk))];
            const float* vr = &in.qkv.v[size_t(pr.kv_index(b, j, hk))];
            for (int i = q0; i < std::min(q0 + block_q, pr.t_q); ++i) {
              if (!lab::key_visible(i, j, pr.t_q, pr.t_kv, pr.causal, 0)) continue;
              const float* qr = &in.qkv.q[size_t(pr.q_index(b, i, h))];
              const float* dor = &in.d_o[size_t(pr.q_index(b, i, h))];
              float s = 0.f, dp = 0.f;
              for (int c = 0; c < d; ++c) {
                s += qr[c] * kr[c];
                dp += dor[c] * vr[c];
              }
              const size_t row = size_t(pr.lse_index(b, h, i));
              float p, ds, wv, wk;
              bool ok = recompute_p_and_ds(s, dp, lse_log2[row], d_rows[row], sh.scale_log2, &p, &ds);
              ok = dkdv_weights(p, ds, &wv, &wk) && ok;
              if (!ok) written = false;
              wv = lab::round_to(ty, wv);
              wk = lab::round_to(ty, wk);
              float* dkr = &dk_acc[size_t(jj) * d];
              float* dvr = &dv_acc[size_t(jj) * d];
              float* dqr = &tile_dq[size_t(i - q0) * d];
              for (int c = 0; c < d; ++c) {
                dvr[c] += wv * dor[c];
                dkr[c] += wk * qr[c];
                dqr[c] += wk * kr[c];
              }
            }
          }
          for (int i = q0; i < std::min(q0 + block_q, pr.t_q); ++i) {  // this K/V tile's part of dQ
            float* acc = &dq_acc[size_t(pr.q_index(b, i, h))];
            const float* part = &tile_dq[size_t(i - q0) * d];
            for (int c = 0; c < d; ++c) acc[c] = sh.dq_store ? part[c] : acc[c] + part[c];
          }
        }
      if (!written) continue;
      for (int jj = 0; jj < BLOCK_KV && kv0 + jj < pr.t_kv; ++jj) {
        float* dk = &g.dk[size_t(pr.kv_index(b, kv0 + jj, hk))];
        float* dv = &g.dv[size_t(pr.kv_index(b, kv0 + jj, hk))];
        for (int c = 0; c < d; ++c) {
          dk[c] = lab::round_to(ty, dk_acc[size_t(jj) * d + c] * sh.scale);
          dv[c] = lab::round_to(ty, dv_acc[size_t(jj) * d + c]);
        }
      }
    }
  });
  if (written)
    for (size_t x = 0; x < dq_acc.size(); ++x) g.dq[x] = lab::round_to(ty, dq_acc[x] * sh.scale);
  return exercises_wrong;
}

int main(int argc, char** argv) {
  lab::BackwardSection s;
  s.name = "11_backward";
  s.title = "the backward pass: dQ, dK, dV on mma.sync, or wgmma on Hopper (P recomputed from the LSE; dQ by atomics or a separate pass)";
  s.build = LAB_BUILD_KIND;
  s.variants = {"atomic", "deterministic", "wgmma", "wgmma-deterministic"};
  s.sm90a_variants = {"wgmma", "wgmma-deterministic"};
  s.bugs = {"d-without-do", "unscaled-p", "dq-no-accumulate"};
  s.default_problem.dtype = lab::DType::f16;
  s.default_problem.b = 1;
  s.default_problem.h = 4;
  s.default_problem.h_kv = 4;
  s.default_problem.t_q = s.default_problem.t_kv = 1024;
  s.default_problem.d = 64;
  s.validate = [](const lab::Problem& p, const lab::Options&) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid dimension per head)";
    return "";
  };
  s.workspace_bytes = workspace_bytes;
  s.gpu = make_run;
  s.cpu = run_cpu;
  return lab::run_backward_section(argc, argv, s);
}
#endif  // LAB_KERNELS_ONLY
