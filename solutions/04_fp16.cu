// 04 fp16/bf16 storage, fp32 accumulation, Tensor Cores (exercise 3, §12.4).
//
// What this step adds over 03 (fp32, FlashAttention-2 loop order): 16-bit inputs and outputs
// (fp16 by default, bf16 with --dtype bf16), every sum still in fp32. Two variants:
//   scalar  Exercise 3 exactly: 03's loop order (one block per 32-row Q tile and head, K/V tiles
//           streamed past it, online softmax, 1/l deferred to the end) with Q, K, V and their
//           shared-memory tiles in __half / __nv_bfloat16, and the dot products, the row sums and
//           the O accumulator in float. It loads half the bytes of an fp32 kernel, but its
//           arithmetic is still one CUDA-core FMA per multiply-add, so it is NOT much faster than
//           03: the lesson is the precision split (store 16 bits, accumulate 32), not speed.
//   mma     The production path of §12.4, FlashAttention-2's design, on the same loop:
//           - S = Q Kᵀ and O = P V on Tensor Cores (mma.sync.m16n8k16: fp16/bf16 in, fp32
//             accumulators). On the lab's H200 (results/h200/ceilings.json) an 8192³ GEMM ran
//             785 TFLOP/s in bf16 against 51.3 in fp32 (no TF32): that, not the smaller loads, is
//             the speed-up. (mma.sync is the Ampere instruction; the 785 needs Hopper's wgmma,
//             which section 08 uses.)
//           - Split-Q: each of the 4 warps owns 16 query rows (one m16 tile). Its Q fragments are
//             loaded once and stay in registers for the whole K/V sweep; the scores never leave
//             registers either: the accumulator fragment of S = Q Kᵀ has exactly the layout of the
//             A operand of O = P V, so P is converted to 16 bits in place (no shared-memory trip).
//           - K/V tiles stream through a 2-stage cp.async ring: tile j+1 is in flight while tile
//             j is computed; one __syncthreads per tile. Rows past T_kv are zero-filled by
//             cp.async's src-size-0 form and masked with -inf.
//           - ldmatrix.x4 (Q, K) and ldmatrix.x4.trans (V) read shared memory stored with an XOR
//             swizzle (16-byte chunk c of row r lives at chunk c ^ (r % 8)): both the ldmatrix
//             reads and the cp.async writes are free of bank conflicts, with no padding.
//           - exp2 with scale·log2(e) folded into one constant (scale_log2): one FFMA and one
//             MUFU.EX2 per score.
//           - Causal: K/V tiles past the diagonal are never loaded, only the diagonal tile(s) are
//             masked, and the heaviest Q tiles (the bottom ones) are launched first.
//           Target on an H200: >= 0.9x PyTorch SDPA's FlashAttention-2 backend (~300-350 TFLOP/s at
//           D = 128, T >= 4096). `scripts/lab bench 04` measures it; results/ holds real numbers.
//   mma-no-ldmatrix, mma-no-cp-async   Ablations: mma with one feature turned off, to measure
//           what it buys (ch12/04_fp16.md). no-ldmatrix gathers each fragment with 32-bit (V:
//           16-bit) shared loads; no-cp-async loads each K/V tile through registers into a single
//           stage while the block waits (shared memory unchanged, so occupancy is the same).
// --bug fp16-accum (the chapter's "fp16 累加 → 长序列下数值崩": fp16 accumulation, long sequences
// collapse numerically): the O accumulator and the row
// sum l are kept in the 16-bit element type. Both variants implement it: scalar rounds after every
// key; mma runs O += P V as mma.m16n8k16.f16.f16.f16.f16 (fp16 accumulators; with bf16, for which
// no 16-bit-accumulator mma exists, the fp32 accumulators are rounded to bf16 after every mma) and
// adds each p to a 16-bit l. fp16 keeps 11 significant bits: once a sum passes 2^11, a term below
// half an ulp rounds away and the sum stalls. The error grows with T (CPU model, fp16, D = 64,
// against a bound of ~6e-4: 0.004 at T = 128, 0.013 at T = 1024, 0.47 at T = 8192); rounding once
// per 16-key mma, as the mma variant does, is milder but still ~30x the bound at T = 8192.
// --bug no-smem-optin (the chapter's pitfall 3): the mma kernel (64 KB of shared memory at
// D = 128) launched without cudaFuncSetAttribute(MaxDynamicSharedMemorySize): the launch is
// refused and the check says so in one line.
// Exercise (ch12/04_fp16.md): in `scalar`, the half/float conversions and the float accumulation
// (EXERCISE scalar-scores, scalar-pv, scalar-store: the CPU model runs them too); in `mma`
// (GPU only: its CPU model of a stub exits 77), the online softmax on the mma
// fragment layout (EXERCISE mma-online-softmax) and the deferred normalisation (mma-finalize).
// Run: scripts/lab run 04 -- --t 4096 --causal                 (your stub)
//      build/bin/04_fp16 --variant mma --t 4096 --d 128 --h 16 --dtype bf16   (the solution)
//      build/bin/04_fp16 --cpu --t 1000 --causal                  (the CPU model)
#include <cstdint>
#include <type_traits>

#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"  // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers

using namespace lab::sm80;

struct Shape {  // what the kernels need of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  float scale;       // 1/sqrt(D)
  float scale_log2;  // scale · log2(e): exp(scale·x) = exp2(scale_log2·x)
};

// 16-bit <-> float on the host and the device alike (the CPU model runs the scalar exercises).
template <class T>
LAB_HD float widen(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else return __bfloat162float(x);
}
template <class T>
LAB_HD T narrow(float x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}
// Elements c and c+1 of a 16-bit row, as floats: one 32-bit load (Vec2<T>) on the device.
template <class T>
LAB_HD float2 widen2(const T* p) {
#if defined(__CUDA_ARCH__)
  return to_float2(*reinterpret_cast<const Vec2<T>*>(p));
#else
  return make_float2(widen(p[0]), widen(p[1]));
#endif
}

// What an accumulator can hold. Correct: a float. --bug fp16-accum (ACC16): the 16-bit type T,
// as an fp16 accumulator would; with 11 significant bits, once the sum passes 2048 every term
// below 1 is less than half an ulp and rounds away.
template <class T, bool ACC16>
LAB_HD float keep(float x) {
  if constexpr (ACC16) return widen(narrow<T>(x));
  else return x;
}
// One accumulator update, acc + x, stored as keep() says.
template <class T, bool ACC16>
LAB_HD float accumulate(float acc, float x) { return keep<T, ACC16>(acc + x); }

// The accumulator type of the scalar variant: float, or under --bug fp16-accum a float that is
// rounded to T after every update. The exercises add to it with += and never see the difference:
// the pitfall is injected by the type, outside the code the student writes.
template <class T>
struct Acc16 {
  float v = 0.f;
  LAB_HD Acc16& operator+=(float x) { v = keep<T, true>(v + x); return *this; }
  LAB_HD Acc16& operator*=(float x) { v = keep<T, true>(v * x); return *this; }
  LAB_HD Acc16& operator=(float x) { v = keep<T, true>(x); return *this; }  // acc = fmaf(p, v, acc) rounds too
  LAB_HD operator float() const { return v; }
};
template <class T, bool ACC16>
using Accumulator = std::conditional_t<ACC16, Acc16<T>, float>;

// What a row's output is once its sweep is over.
struct RowEnd {
  float inv_l;  // O = (unnormalised O) · inv_l
  float lse;    // natural log
};

// =============================================================================================
// Variant `scalar` (exercise 3): CUDA cores, 16-bit storage, float arithmetic.
// A quad of 4 lanes owns one query row: lane `part` of the quad computes the scores of keys
// part, part+4, ... (whole D-long dot products), the quad agrees on the row max with two
// shuffles, and for O = P V each lane owns D/4 output columns (pairs 2·(part + 4u), +1).
namespace scalar {
constexpr int THREADS = 128;
constexpr int LANES_PER_ROW = 4;
constexpr int BLOCK_Q = THREADS / LANES_PER_ROW;           // 32 query rows per block
constexpr int BLOCK_KV = 32;                               // keys per K/V tile
constexpr int KEYS_PER_LANE = BLOCK_KV / LANES_PER_ROW;    // 8
constexpr int PAD = 8;  // elements (16 bytes) of padding per row of the Q/K/V tiles
constexpr int P_STRIDE = BLOCK_KV + 4;
// Bank check (a warp = 8 rows x 4 parts). Q/K/V rows are D+8 elements = D/2+4 words: rows r and
// r+1 start 4 banks apart, so the 8 rows a warp reads at one column fall in 8 distinct banks, and
// the 4 keys part+4n in 4 distinct ones. p_smem rows are 36 words: 8 rows x 4 parts writing
// p_smem[row][part+4n] hit 32 distinct banks.
static_assert(BLOCK_KV % LANES_PER_ROW == 0 && THREADS % 32 == 0, "whole quads, whole warps");
static_assert(P_STRIDE % 32 == 4, "conflict-free P writes");
}  // namespace scalar

// A [ROWS, D] tile -> shared memory (row stride STRIDE elements), 16 bytes per copy; rows past
// `rows_valid` are zero-filled (a zero key gives a finite score that the mask turns into -inf; a
// zero value row contributes 0·0 where garbage could be NaN, and 0·NaN = NaN).
template <int ROWS, int HEAD_DIM, int STRIDE, class T>
__device__ __forceinline__ void load_rows(T* smem, const T* gmem /* row 0 */, int64_t row_stride, int rows_valid) {
  constexpr int CHUNKS = HEAD_DIM / 8;
  for (int idx = threadIdx.x; idx < ROWS * CHUNKS; idx += blockDim.x) {
    const int r = idx / CHUNKS, c = idx % CHUNKS;
    uint4 x = make_uint4(0, 0, 0, 0);
    if (r < rows_valid) x = *reinterpret_cast<const uint4*>(gmem + r * row_stride + c * 8);
    *reinterpret_cast<uint4*>(smem + r * STRIDE + c * 8) = x;
  }
}

// The scalar variant's exercises. Both scalar_kernel and the CPU model call them, so `--cpu`
// checks the code the kernel runs.
// BEGIN EXERCISE scalar-scores: one score, q_row · k_row over n = D columns, summed in float.
//   The rows are 16-bit (T is __half or __nv_bfloat16). Read them two elements at a time with
//   widen2() (one 32-bit load on the GPU) and multiply-add in float: 16-bit arithmetic
//   (__hmul2/__hfma2) would round every product and every partial sum to 11 (fp16) or 8 (bf16)
//   significant bits. Code shape: ch12/hints/04_fp16.md.
// STUB: template <class T>
// STUB: LAB_HD float dot_f32(const T* q_row, const T* k_row, int n) {
// STUB:   (void)q_row; (void)k_row; (void)n;
// STUB:   return NAN;
// STUB: }
template <class T>
LAB_HD float dot_f32(const T* q_row, const T* k_row, int n) {
  float dot = 0.f;
#pragma unroll 8
  for (int c = 0; c < n; c += 2) {
    const float2 qf = widen2(q_row + c), kf = widen2(k_row + c);
    dot = fmaf(qf.x, kf.x, dot);
    dot = fmaf(qf.y, kf.y, dot);
  }
  return dot;
}
// END EXERCISE

// BEGIN EXERCISE scalar-pv: one key's share of O = P V for the columns one lane of a quad owns.
//   The lane `part` (0..3) owns the column pairs 2·(part + 4u), +1 for u < pairs (so the quad's
//   four lanes cover the row's D columns). Add p · V[key][those columns] (v_row: the key's row of
//   V, 16-bit) to acc[2u], acc[2u + 1], widening V to float first. acc is an Acc: a float, or a
//   type that behaves as one (the --bug fp16-accum accumulator): add with +=.
// STUB: template <class T, class Acc>
// STUB: LAB_HD void pv_add(Acc* acc, float p, const T* v_row, int part, int pairs) {
// STUB:   (void)acc; (void)p; (void)v_row; (void)part; (void)pairs;
// STUB: }
template <class T, class Acc>
LAB_HD void pv_add(Acc* acc, float p, const T* v_row, int part, int pairs) {
#pragma unroll
  for (int u = 0; u < pairs; ++u) {
    const float2 vf = widen2(v_row + 2 * (part + 4 * u));
    acc[2 * u] += p * vf.x;
    acc[2 * u + 1] += p * vf.y;
  }
}
// END EXERCISE

// BEGIN EXERCISE scalar-store: the deferred normalisation of one row, after its last K/V tile.
//   m: the row's running max of the scaled scores (natural units: p = expf(s - m)); l: the row's
//   whole sum of p. Return the factor that normalises O and the row's LSE (natural log). A row
//   that saw no key (l == 0) gets O = 0 and LSE = -INFINITY.
// STUB: LAB_HD RowEnd row_end(float m, float l) {
// STUB:   (void)m; (void)l;
// STUB:   return {NAN, NAN};
// STUB: }
LAB_HD RowEnd row_end(float m, float l) {
  if (!(l > 0.f)) return {0.f, -INFINITY};
  return {1.f / l, m + logf(l)};
}
// END EXERCISE

template <class T, int HEAD_DIM, bool ACC16>
__global__ void __launch_bounds__(scalar::THREADS)
scalar_kernel(const T* __restrict__ q,  // [B, T_q, H, D]
              const T* __restrict__ k,  // [B, T_kv, H_kv, D]
              const T* __restrict__ v,  // [B, T_kv, H_kv, D]
              T* __restrict__ o,        // [B, T_q, H, D]
              float* __restrict__ lse,  // [B, H, T_q]
              Shape sh) {
  using namespace scalar;
  using T2 = Vec2<T>;
  constexpr int STRIDE = HEAD_DIM + PAD;
  constexpr int PAIRS = HEAD_DIM / 2 / LANES_PER_ROW;  // output column pairs per lane
  __shared__ __align__(16) T q_smem[BLOCK_Q][STRIDE];
  __shared__ __align__(16) T k_smem[BLOCK_KV][STRIDE];
  __shared__ __align__(16) T v_smem[BLOCK_KV][STRIDE];
  __shared__ float p_smem[BLOCK_Q][P_STRIDE];

  const int bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int q0 = blockIdx.x * BLOCK_Q;
  const int row = threadIdx.x / LANES_PER_ROW, part = threadIdx.x % LANES_PER_ROW;
  const int i = q0 + row;  // this quad's query row (may be >= T_q in the last tile: never written)
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;
  const T* q_head = q + (int64_t(b) * sh.t_q * sh.h + head) * HEAD_DIM;      // row i at + i·q_stride
  const T* k_head = k + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;
  const T* v_head = v + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;

  load_rows<BLOCK_Q, HEAD_DIM, STRIDE>(&q_smem[0][0], q_head + q0 * q_stride, q_stride, sh.t_q - q0);
  const lab::KeyRange row_keys = lab::visible_keys(i, sh.t_q, sh.t_kv, sh.causal, 0);
  const lab::KeyRange tile_keys =
      lab::visible_keys_of_rows(q0, lab::imin(q0 + BLOCK_Q, sh.t_q), sh.t_q, sh.t_kv, sh.causal);

  float m = -INFINITY;  // running max of the row's scaled scores (the same in the 4 lanes)
  float l = 0.f;        // this lane's part of the row sum (its keys part + 4n), reduced at the end
  Accumulator<T, ACC16> acc[2 * PAIRS] = {};  // unnormalised O: columns 2·(part + 4u) and 2·(part + 4u) + 1
  for (int kv0 = tile_keys.begin / BLOCK_KV * BLOCK_KV; kv0 < tile_keys.end; kv0 += BLOCK_KV) {
    __syncthreads();  // every quad is done with the previous K/V tile before it is overwritten
    load_rows<BLOCK_KV, HEAD_DIM, STRIDE>(&k_smem[0][0], k_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    load_rows<BLOCK_KV, HEAD_DIM, STRIDE>(&v_smem[0][0], v_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    __syncthreads();  // the K/V tile (and, on the first pass, the Q tile) is complete

    // S = Q Kᵀ · scale for this lane's keys part + 4n   [1 row x KEYS_PER_LANE]
    float s[KEYS_PER_LANE];
#pragma unroll
    for (int n = 0; n < KEYS_PER_LANE; ++n) {
      const int jj = part + LANES_PER_ROW * n;
      const float dot = dot_f32(&q_smem[row][0], &k_smem[jj][0], HEAD_DIM);
      s[n] = row_keys.contains(kv0 + jj) ? dot * sh.scale : -INFINITY;
    }

    // Online softmax (03's, in float): the quad agrees on the new row max, rescales what it has
    // summed so far by exp(m_old - m_new), and turns its scores into p = exp(s - m_new).
    float tile_max = s[0];
#pragma unroll
    for (int n = 1; n < KEYS_PER_LANE; ++n) tile_max = fmaxf(tile_max, s[n]);
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m, tile_max);
    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: exp(-inf - 0) = 0
    const float alpha = expf(m - m_use);
    m = m_new;
    l = keep<T, ACC16>(l * alpha);
#pragma unroll
    for (int c = 0; c < 2 * PAIRS; ++c) acc[c] *= alpha;
#pragma unroll
    for (int n = 0; n < KEYS_PER_LANE; ++n) {
      const float p = expf(s[n] - m_use);
      l = accumulate<T, ACC16>(l, p);
      p_smem[row][part + LANES_PER_ROW * n] = p;
    }
    __syncwarp();  // the quad's row of P is in shared memory before its lanes read all of it

    // O += P V for this lane's columns   [1 row x BLOCK_KV] · [BLOCK_KV x D/4]
#pragma unroll 4
    for (int jj = 0; jj < BLOCK_KV; ++jj) pv_add(acc, p_smem[row][jj], &v_smem[jj][0], part, PAIRS);
  }

  // The deferred normalisation: l is split over the quad; the quad adds its parts, then row_end.
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (i < sh.t_q) {
    const RowEnd end = row_end(m, l);
    T* o_row = o + (int64_t(b) * sh.t_q + i) * q_stride + int64_t(head) * HEAD_DIM;
#pragma unroll
    for (int u = 0; u < PAIRS; ++u)
      *reinterpret_cast<T2*>(o_row + 2 * (part + LANES_PER_ROW * u)) =
          from_float2<T>(float(acc[2 * u]) * end.inv_l, float(acc[2 * u + 1]) * end.inv_l);
    if (part == 0) lse[(int64_t(b) * sh.h + head) * sh.t_q + i] = end.lse;
  }
}

// =============================================================================================
// Variant `mma`: Tensor Cores. Fragment layouts of mma.sync.m16n8k16 (lane = 4·g + t):
//   A (16 x 16, row-major) 4 regs: a0 = (row g,   cols 2t, 2t+1)   a1 = (row g+8, cols 2t, 2t+1)
//                                  a2 = (row g,   cols 2t+8, +9)   a3 = (row g+8, cols 2t+8, +9)
//   B (16 x 8, "col")      2 regs: b0 = (rows 2t, 2t+1 of col g)   b1 = (rows 2t+8, 2t+9 of col g)
//   C/D (16 x 8, fp32)     4 regs: c0, c1 = (row g, cols 2t, 2t+1)  c2, c3 = (row g+8, same cols)
// Two n-blocks of C side by side (16 x 16) hold exactly an A fragment: that is how P = exp(S)
// feeds O = P V from registers.
namespace mma {
constexpr int NUM_WARPS = 4;
constexpr int THREADS = NUM_WARPS * 32;
constexpr int ROWS_PER_WARP = 16;                  // one m16 tile of query rows per warp
constexpr int BLOCK_Q = NUM_WARPS * ROWS_PER_WARP;  // 64
constexpr int STAGES = 2;                           // K/V ring: tile j computes while j+1 loads

template <int HEAD_DIM>
struct Tiles {
  // 64-key tiles: S is 16 x 64 per warp (32 fp32 registers per thread). Registers per thread
  // (ptxas, sm_90): D = 64: 153, so 3 blocks (12 warps) share an SM; D = 128: 211 (Q fragments 32,
  // O accumulator 64, S 32, addresses and prefetched fragments the rest), 2 blocks per SM. Capping
  // D = 128 at 168 registers (3 blocks) costs ~24 bytes of spills outside the K/V loop; 128-key
  // tiles at D = 64 need ~205 registers (2 blocks). Both are worth measuring; neither is the default.
  static constexpr int BLOCK_KV = 64;
  static constexpr int CHUNKS = HEAD_DIM / 8;       // 16-byte chunks per row of a tile
  static constexpr int D_STEPS = HEAD_DIM / 16;     // k-steps of S = Q Kᵀ (16 columns of D each)
  static constexpr int KV_STEPS = BLOCK_KV / 16;    // k-steps of O = P V (16 keys each)
  static constexpr int S_BLOCKS = BLOCK_KV / 8;     // n-blocks of S (8 keys each)
  static constexpr int O_BLOCKS = HEAD_DIM / 8;     // n-blocks of O (8 columns each)
  static constexpr int ROW_BYTES = HEAD_DIM * 2;
  static constexpr int TILE_BYTES = BLOCK_KV * ROW_BYTES;
  static constexpr int SMEM_BYTES = STAGES * 2 * TILE_BYTES;  // [STAGES][K, V][BLOCK_KV][D]
  static constexpr int ROW_STEP = THREADS / CHUNKS;           // rows one pass of cp.async covers
  static constexpr int MIN_BLOCKS = HEAD_DIM == 64 ? 3 : 2;   // per SM (launch bounds, see above)
};
static_assert(Tiles<64>::SMEM_BYTES == 32768 && Tiles<128>::SMEM_BYTES == 65536, "32 / 64 KB of shared memory");
static_assert(Tiles<64>::ROW_STEP % 8 == 0 && Tiles<128>::ROW_STEP % 8 == 0,
              "a thread's rows differ by multiples of 8: its swizzled chunk is the same in every row");
static_assert(BLOCK_Q <= Tiles<64>::BLOCK_KV && BLOCK_Q <= Tiles<128>::BLOCK_KV, "the Q tile fits in a K slot");
static_assert(Tiles<64>::S_BLOCKS % 2 == 0 && Tiles<128>::O_BLOCKS % 2 == 0, "ldmatrix.x4 covers 2 n-blocks");
static_assert(32 * (Tiles<128>::D_STEPS - 1) < Tiles<128>::ROW_BYTES && 32 * (Tiles<64>::D_STEPS - 1) < Tiles<64>::ROW_BYTES,
              "the k-step XOR stays inside a row");
}  // namespace mma

// O += P V for one n-block. --bug fp16-accum (ACC16): 16-bit accumulators. fp16 has the real
// instruction (f16 C and D: two registers of (row g, cols 2t, 2t+1) and (row g+8, ...)); the
// accumulator is packed to fp16 before and widened after, so between mmas it only ever holds
// fp16 values, as a register-resident fp16 accumulator would. bf16 has no 16-bit-accumulator
// mma: the fp32 result is rounded to bf16 after each one instead.
template <class T, bool ACC16>
__device__ __forceinline__ void mma_pv(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (ACC16 && std::is_same_v<T, __half>) {
    uint32_t c0 = pack2<__half>(d[0], d[1]), c1 = pack2<__half>(d[2], d[3]);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
                 "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
                 : "+r"(c0), "+r"(c1)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    const float2 lo = __half22float2(*reinterpret_cast<__half2*>(&c0));
    const float2 hi = __half22float2(*reinterpret_cast<__half2*>(&c1));
    d[0] = lo.x; d[1] = lo.y; d[2] = hi.x; d[3] = hi.y;
  } else {
    mma_16816<T>(d, a, b0, b1);
    if constexpr (ACC16)
      for (int e = 0; e < 4; ++e) d[e] = to_float(from_float<T>(d[e]));
  }
}

// Ablation `mma-no-ldmatrix`: the four 8x8 fragments of one ldmatrix.x4 gathered with ordinary
// shared loads. addr_of(l) is the row address lane l would hand to ldmatrix. Register m of this
// lane is row g of matrix m, columns 2t, 2t+1 (one 32-bit load); with TRANS, column g of rows 2t
// and 2t+1 (two 16-bit loads). So 4 (TRANS: 8) load instructions and their address arithmetic
// per fragment, where ldmatrix issues one.
template <bool TRANS, class AddrOf>
__device__ __forceinline__ void gather_x4(uint32_t (&r)[4], AddrOf addr_of) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    if constexpr (!TRANS) {
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(r[m]) : "r"(addr_of(8 * m + g) + 4u * t));
    } else {
      uint16_t lo, hi;
      asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(lo) : "r"(addr_of(8 * m + 2 * t) + 2u * g));
      asm volatile("ld.shared.b16 %0, [%1];\n" : "=h"(hi) : "r"(addr_of(8 * m + 2 * t + 1) + 2u * g));
      r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
}

// LDMATRIX, CP_ASYNC: false only in the ablation variants (mma-no-ldmatrix, mma-no-cp-async).
template <class T, int HEAD_DIM, bool ACC16, bool LDMATRIX = true, bool CP_ASYNC = true>
__global__ void __launch_bounds__(mma::THREADS, ACC16 ? 2 : mma::Tiles<HEAD_DIM>::MIN_BLOCKS)
mma_kernel(const T* __restrict__ q,  // [B, T_q, H, D]
           const T* __restrict__ k,  // [B, T_kv, H_kv, D]
           const T* __restrict__ v,  // [B, T_kv, H_kv, D]
           T* __restrict__ o,        // [B, T_q, H, D]
           float* __restrict__ lse,  // [B, H, T_q]
           Shape sh) {
  using namespace mma;
  using TL = Tiles<HEAD_DIM>;
  constexpr int BLOCK_KV = TL::BLOCK_KV;
  extern __shared__ __align__(128) unsigned char smem[];  // [STAGES][K, V][BLOCK_KV][D], swizzled
  const uint32_t smem_base = smem_addr(smem);
  auto k_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 0) * TL::TILE_BYTES); };
  auto v_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 1) * TL::TILE_BYTES); };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates: rows g, g+8; columns 2t, 2t+1
  const int q_tile = sh.causal ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);  // heaviest first
  const int bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int q0 = q_tile * BLOCK_Q;
  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;
  const T* q_head = q + (int64_t(b) * sh.t_q * sh.h + head) * HEAD_DIM;  // row i at + i·q_stride
  const T* k_head = k + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;
  const T* v_head = v + (int64_t(b) * sh.t_kv * sh.h_kv + kv_head) * HEAD_DIM;

  // The K/V tiles any row of this Q tile sees (causal: up to the diagonal, no further).
  const lab::KeyRange block_keys =
      lab::visible_keys_of_rows(q0, lab::imin(q0 + BLOCK_Q, sh.t_q), sh.t_q, sh.t_kv, sh.causal);
  const int tile_begin = block_keys.begin / BLOCK_KV;
  const int tile_end = block_keys.empty() ? tile_begin : lab::ceil_div(block_keys.end, BLOCK_KV);
  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BLOCK_KV;
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS, CP_ASYNC>(k_tile(stage), k_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS, CP_ASYNC>(v_tile(stage), v_head + kv0 * kv_stride, kv_stride, sh.t_kv - kv0);
  };

  // Prologue: the Q tile goes through stage 1's K slot (free until tile 1 is issued), the first
  // K/V tile into stage 0, then Q moves to registers for good: q_frag[kk] is the A fragment of
  // this warp's 16 rows, columns 16·kk .. 16·kk + 15.
  load_tile_swizzled<BLOCK_Q, TL::CHUNKS, THREADS, CP_ASYNC>(k_tile(1), q_head + q0 * q_stride, q_stride, sh.t_q - q0);
  if constexpr (CP_ASYNC) {
    if (tile_begin < tile_end) load_kv(0, tile_begin);
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();  // the Q tile (and K/V tile 0) written by every thread is visible to all
  // ldmatrix row addresses of this lane at k-step 0 (byte offsets in a tile; step kk: ^ 32·kk):
  //   Q (A operand):  matrices (rows 0-7 | 8-15) x (cols lo | hi):      row lane % 16, chunk lane / 16
  //   K (B operand):  matrices (keys 0-7, lo | hi), (keys 8-15, lo | hi): key (lane % 8) + 8·(lane / 16),
  //                   chunk (lane / 8) % 2 — registers 0, 1: n-block 2·nb2; 2, 3: n-block 2·nb2 + 1
  //   V (B, .trans):  matrices (keys 0-7 | 8-15, cols lo), (.., cols hi): key lane % 16, chunk lane / 16
  //                   — registers 0, 1: O n-block 2·db2; 2, 3: n-block 2·db2 + 1
  auto q_addr = [&](int l) { return swizzle<TL::CHUNKS>(warp * ROWS_PER_WARP + (l & 15), l >> 4); };
  auto k_addr = [](int l) { return swizzle<TL::CHUNKS>((l & 7) + ((l >> 4) << 3), (l >> 3) & 1); };
  auto v_addr = [](int l) { return swizzle<TL::CHUNKS>(l & 15, l >> 4); };
  const uint32_t q_lane = q_addr(lane), k_lane = k_addr(lane), v_lane = v_addr(lane);
  // One x4 fragment at byte address base + (lane's address ^ x): ldmatrix, or the ablation's gather.
  auto load_x4 = [&](uint32_t(&r)[4], uint32_t base, uint32_t lane_addr, auto addr_of, uint32_t x) {
    if constexpr (LDMATRIX) ldmatrix_x4(r, base + (lane_addr ^ x));
    else gather_x4<false>(r, [&](int l) { return base + (addr_of(l) ^ x); });
  };
  constexpr uint32_t ROWS16 = 16 * TL::ROW_BYTES;  // 16 rows further down a tile
  uint32_t q_frag[TL::D_STEPS][4];
#pragma unroll
  for (int kk = 0; kk < TL::D_STEPS; ++kk) load_x4(q_frag[kk], k_tile(1), q_lane, q_addr, 32u * kk);

  // Per-thread state of rows g and g+8 of the warp: index r = 0 for row g, 1 for row g+8.
  float o_acc[TL::O_BLOCKS][4] = {};  // unnormalised O, C-fragment layout (c0, c1: row g; c2, c3: row g+8)
  float m[2] = {-INFINITY, -INFINITY};  // running row max of the raw scores Q·K (all 4 lanes of a quad agree)
  Accumulator<T, ACC16> l[2] = {};      // this lane's part of the row sum (its 2 columns per n-block)
  const int row_g = q0 + warp * ROWS_PER_WARP + g;
  // Keys past this are invisible to the warp's first row (the one that sees the fewest): a tile
  // reaching past it needs the per-element mask; the others (all but the diagonal) do not.
  const int warp_keys_end = lab::visible_keys(q0 + warp * ROWS_PER_WARP, sh.t_q, sh.t_kv, sh.causal, 0).end;
  const float scale_log2 = sh.scale_log2;

  int stage = 0;
  for (int tile = tile_begin; tile < tile_end; ++tile, stage ^= 1) {
    if constexpr (CP_ASYNC) {
      cp_async_wait<0>();  // this thread's copies of `tile` have landed ...
      __syncthreads();     // ... and everyone's; and every warp is done reading the other stage
                           // (tile - 1, or Q on the first pass), which the next line overwrites
      if (tile + 1 < tile_end) load_kv(stage ^ 1, tile + 1);
      cp_async_commit();
    } else {  // the ablation: one stage, loaded while nobody computes
      stage = 0;
      __syncthreads();  // every warp is done reading tile - 1 (Q stays in stage 1, never reused)
      load_kv(0, tile);
      __syncthreads();  // the tile written by every thread is visible to all
    }

    // S = Q K_tileᵀ   [16 rows x BLOCK_KV keys] per warp, fp32. One ldmatrix.x4 (k_lane) gives the
    // B fragments of two n-blocks, keys 16·nb2 .. 16·nb2 + 15, at k-step kk.
    float s[TL::S_BLOCKS][4] = {};
#pragma unroll
    for (int nb2 = 0; nb2 < TL::S_BLOCKS / 2; ++nb2)
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        uint32_t kf[4];
        load_x4(kf, k_tile(stage) + nb2 * ROWS16, k_lane, k_addr, 32u * kk);
        mma_16816<T>(s[2 * nb2], q_frag[kk], kf[0], kf[1]);
        mma_16816<T>(s[2 * nb2 + 1], q_frag[kk], kf[2], kf[3]);
      }

    // Mask (diagonal tile, ragged end of K/V): element e of n-block nb is row g (e < 2) or g+8,
    // key kv0 + 8·nb + 2t + (e & 1).
    const int kv0 = tile * BLOCK_KV;
    if (kv0 + BLOCK_KV > warp_keys_end) {
      // Keys row g (g+8) sees: [0, keys_end[0 (1)]) (this section has no window: all start at 0).
      const int keys_end[2] = {lab::visible_keys(row_g, sh.t_q, sh.t_kv, sh.causal, 0).end,
                               lab::visible_keys(row_g + 8, sh.t_q, sh.t_kv, sh.causal, 0).end};
#pragma unroll
      for (int nb = 0; nb < TL::S_BLOCKS; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (kv0 + 8 * nb + 2 * t + (e & 1) >= keys_end[e >> 1]) s[nb][e] = -INFINITY;
    }

    // BEGIN EXERCISE mma-online-softmax: the online softmax of rows g and g+8 on the fragment.
    //   This thread holds, of row g, s[nb][0], s[nb][1] for every n-block nb (and of row g+8,
    //   s[nb][2], s[nb][3]); the other columns of those rows are in the 3 other lanes of the quad
    //   (lanes 4g .. 4g+3). For each row r (0: g, 1: g+8):
    //   1. tile max over the thread's values, then over the quad: x = fmaxf(x,
    //      __shfl_xor_sync(0xffffffffu, x, 1)), then the same with 2.
    //   2. m_new = max(m[r], tile max). A row can still have seen no key (everything -inf):
    //      subtract beta = m_new·scale_log2, or 0 where m_new is -inf (exp2(-inf - -inf) = NaN).
    //   3. alpha = fast_exp2(m[r]·scale_log2 - beta) (one fmaf; not (m[r] - m_new)·scale_log2,
    //      NaN on such a row): rescale l[r] and the row's half of every o_acc[nb] (elements 2r,
    //      2r+1) by alpha; m[r] = m_new.
    //   4. s = fast_exp2(s·scale_log2 - beta) (one fmaf), and add each p to l[r]
    //      (l[r] is a float, or the --bug fp16-accum accumulator: use *= and +=). P stays in s:
    //      the PV step below packs it. Code shape: ch12/hints/04_fp16.md.
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

    // O += P V   [16 x BLOCK_KV] · [BLOCK_KV x D]. The A fragment of k-step kk (keys 16kk..16kk+15)
    // is n-blocks 2kk and 2kk+1 of S, rounded to T. One ldmatrix.x4.trans (v_lane) gives the B
    // fragments of two n-blocks of O, columns 16·db2 .. 16·db2 + 15.
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) {
      const uint32_t p_frag[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                  pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int db2 = 0; db2 < TL::O_BLOCKS / 2; ++db2) {
        uint32_t vf[4];
        if constexpr (LDMATRIX) ldmatrix_x4_trans(vf, v_tile(stage) + kk * ROWS16 + (v_lane ^ (32u * db2)));
        else gather_x4<true>(vf, [&](int l) { return v_tile(stage) + kk * ROWS16 + (v_addr(l) ^ (32u * db2)); });
        mma_pv<T, ACC16>(o_acc[2 * db2], p_frag, vf[0], vf[1]);
        mma_pv<T, ACC16>(o_acc[2 * db2 + 1], p_frag, vf[2], vf[3]);
      }
    }
  }

  // BEGIN EXERCISE mma-finalize: the deferred normalisation, once per row: O = o_acc / l, LSE.
  //   l[r] holds only this lane's columns: add the quad's other three parts (__shfl_xor_sync with
  //   1 and 2). A row that saw no key has l = 0: O = 0, LSE = -INFINITY. Rows past T_q are not
  //   written. Row g is q0 + 16·warp + g: write O[.., 8·nb + 2t], +1 = o_acc[nb][0], [1] / l as
  //   one Vec2<T> (from_float2<T>), row g+8 from o_acc[nb][2], [3]; one lane of the quad
  //   (t == 0) writes LSE = m·scale + log(l) (natural log: m is a raw score Q·K).
  // STUB: (void)o; (void)lse; (void)o_acc;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float row_sum = float(l[r]);
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
  // END EXERCISE
}

// ---------------------------------------------------------------------------------------------
// Launchers.
template <class T, int HEAD_DIM, bool ACC16>
std::function<void(cudaStream_t)> make_scalar(const lab::RunContext& ctx, const Shape& sh) {
  const auto* q = static_cast<const T*>(ctx.tensors.q);
  const auto* k = static_cast<const T*>(ctx.tensors.k);
  const auto* v = static_cast<const T*>(ctx.tensors.v);
  auto* o = static_cast<T*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  const dim3 grid(unsigned(lab::ceil_div(sh.t_q, scalar::BLOCK_Q)), unsigned(ctx.problem.b * sh.h));
  return [=](cudaStream_t st) {
    scalar_kernel<T, HEAD_DIM, ACC16><<<grid, scalar::THREADS, 0, st>>>(q, k, v, o, lse, sh);
    CUDA_CHECK_LAST();
  };
}

// --bug no-smem-optin (the chapter's pitfall: shared memory over 48 KB): launches the mma kernel
// without the cudaFuncSetAttribute opt-in. A block may use more than 48 KB of dynamic shared
// memory only after that call, so the launch itself is refused (cudaErrorInvalidValue): no block
// runs and O stays unwritten. The error is read right after the launch and becomes the verdict.
constexpr int kDefaultSmemLimit = 48 * 1024;

template <class T, int HEAD_DIM, bool ACC16, bool LDMATRIX = true, bool CP_ASYNC = true>
std::function<void(cudaStream_t)> make_mma(const lab::RunContext& ctx, const Shape& sh,
                                           std::shared_ptr<std::string> launch_error = nullptr) {
  const auto* q = static_cast<const T*>(ctx.tensors.q);
  const auto* k = static_cast<const T*>(ctx.tensors.k);
  const auto* v = static_cast<const T*>(ctx.tensors.v);
  auto* o = static_cast<T*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  constexpr int smem = mma::Tiles<HEAD_DIM>::SMEM_BYTES;
  // More than 48 KB of dynamic shared memory must be asked for (§12 常见坑); and the largest
  // carveout lets MIN_BLOCKS blocks of 64 KB share an SM.
  auto* kernel = mma_kernel<T, HEAD_DIM, ACC16, LDMATRIX, CP_ASYNC>;
  const dim3 grid(unsigned(lab::ceil_div(sh.t_q, mma::BLOCK_Q)), unsigned(ctx.problem.b * sh.h));
  if (launch_error) {  // --bug no-smem-optin: no opt-in; the launch's own error is the verdict
    return [=](cudaStream_t st) {
      kernel<<<grid, mma::THREADS, smem, st>>>(q, k, v, o, lse, sh);
      const cudaError_t err = cudaGetLastError();  // a refused launch: reported here, not sticky
      if (err != cudaSuccess && launch_error->empty())
        *launch_error = "the launch was refused (" + std::string(cudaGetErrorName(err)) + "): the kernel asks for " +
                        std::to_string(smem / 1024) + " KB of dynamic shared memory, over the 48 KB a kernel gets " +
                        "without cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)";
    };
  }
  lab::opt_in_shared_memory(kernel, smem);
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  int(cudaSharedmemCarveoutMaxShared)));
  return [=](cudaStream_t st) {
    kernel<<<grid, mma::THREADS, smem, st>>>(q, k, v, o, lse, sh);
    CUDA_CHECK_LAST();
  };
}

template <class T, int HEAD_DIM>
std::function<void(cudaStream_t)> make_forward(const lab::RunContext& ctx, const Shape& sh, bool acc16,
                                               std::shared_ptr<std::string> launch_error) {
  if (launch_error) return make_mma<T, HEAD_DIM, false>(ctx, sh, launch_error);
  if (ctx.variant == "mma") return acc16 ? make_mma<T, HEAD_DIM, true>(ctx, sh) : make_mma<T, HEAD_DIM, false>(ctx, sh);
  // The ablations: mma with one feature turned off (no --bug: validate() refuses it).
  if (ctx.variant == "mma-no-ldmatrix") return make_mma<T, HEAD_DIM, false, /*LDMATRIX=*/false, true>(ctx, sh);
  if (ctx.variant == "mma-no-cp-async") return make_mma<T, HEAD_DIM, false, true, /*CP_ASYNC=*/false>(ctx, sh);
  return acc16 ? make_scalar<T, HEAD_DIM, true>(ctx, sh) : make_scalar<T, HEAD_DIM, false>(ctx, sh);
}

Shape make_shape(const lab::Problem& p) {
  return Shape{p.t_q, p.t_kv, p.h, p.h_kv, p.causal, p.softmax_scale(), p.softmax_scale() * lab::kLog2e};
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Shape sh = make_shape(pr);
  const bool acc16 = ctx.bug == "fp16-accum";
  const bool f16 = pr.dtype == lab::DType::f16;
  auto launch_error = ctx.bug == "no-smem-optin" ? std::make_shared<std::string>() : nullptr;
  lab::GpuRun run;
  if (pr.d == 64) run.forward = f16 ? make_forward<__half, 64>(ctx, sh, acc16, launch_error) : make_forward<__nv_bfloat16, 64>(ctx, sh, acc16, launch_error);
  else run.forward = f16 ? make_forward<__half, 128>(ctx, sh, acc16, launch_error) : make_forward<__nv_bfloat16, 128>(ctx, sh, acc16, launch_error);
  if (launch_error) run.after_check_run = [launch_error](nlohmann::json&) { return *launch_error; };
  if (ctx.variant != "scalar") {
    const int block_kv = pr.d == 64 ? mma::Tiles<64>::BLOCK_KV : mma::Tiles<128>::BLOCK_KV;
    const int smem = pr.d == 64 ? mma::Tiles<64>::SMEM_BYTES : mma::Tiles<128>::SMEM_BYTES;
    run.metrics = {{"block_q", mma::BLOCK_Q}, {"block_kv", block_kv}, {"warps", mma::NUM_WARPS},
                   {"stages", ctx.variant == "mma-no-cp-async" ? 1 : mma::STAGES}, {"smem_bytes", smem}};
  } else {
    run.metrics = {{"block_q", scalar::BLOCK_Q}, {"block_kv", scalar::BLOCK_KV}, {"warps", scalar::THREADS / 32}};
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU models.
// scalar: the scalar kernel's work for one query row, with the kernel's own exercise functions
// (dot_f32, pv_add, row_end) on 16-bit copies of the inputs, its 32-key tiles (keys past T_kv
// are zero rows, as the kernel's zero-filled tiles), its float online softmax, and the quad's
// four lanes (part 0..3) each with its own accumulators; --bug fp16-accum by the same
// Accumulator type.
template <class T, int HEAD_DIM, bool ACC16>
void scalar_cpu(const lab::Problem& pr, const lab::HostInputs& in, std::vector<float>& o, std::vector<float>& lse) {
  using namespace scalar;
  constexpr int PAIRS = HEAD_DIM / 2 / LANES_PER_ROW;
  auto to16 = [](const std::vector<float>& x) {
    std::vector<T> y(x.size());
    for (size_t n = 0; n < x.size(); ++n) y[n] = narrow<T>(x[n]);  // exact: the inputs are 16-bit values
    return y;
  };
  const std::vector<T> q = to16(in.q), k = to16(in.k), v = to16(in.v);
  const std::vector<T> zero_row(HEAD_DIM, narrow<T>(0.f));
  const float scale = pr.softmax_scale();
  lab::parallel_for(int64_t(pr.b) * pr.h * pr.t_q, [&](int64_t row) {
    const int i = int(row % pr.t_q), bh = int(row / pr.t_q), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const int q0 = i / BLOCK_Q * BLOCK_Q;
    const lab::KeyRange row_keys = lab::visible_keys(i, pr.t_q, pr.t_kv, pr.causal, 0);
    const lab::KeyRange tile_keys =
        lab::visible_keys_of_rows(q0, std::min(q0 + BLOCK_Q, pr.t_q), pr.t_q, pr.t_kv, pr.causal);
    const T* q_row = &q[size_t(pr.q_index(b, i, h))];
    auto kv_row = [&](const std::vector<T>& x, int j) { return j < pr.t_kv ? &x[size_t(pr.kv_index(b, j, hk))] : zero_row.data(); };
    float m = -INFINITY;
    Accumulator<T, ACC16> l[LANES_PER_ROW] = {};
    Accumulator<T, ACC16> acc[LANES_PER_ROW][2 * PAIRS] = {};
    float p[BLOCK_KV];
    for (int kv0 = tile_keys.begin / BLOCK_KV * BLOCK_KV; kv0 < tile_keys.end; kv0 += BLOCK_KV) {
      float s[BLOCK_KV], tile_max = -INFINITY;
      for (int jj = 0; jj < BLOCK_KV; ++jj) {
        const float dot = dot_f32(q_row, kv_row(k, kv0 + jj), HEAD_DIM);
        s[jj] = row_keys.contains(kv0 + jj) ? dot * scale : -INFINITY;
        tile_max = std::max(tile_max, s[jj]);
      }
      const float m_new = std::max(m, tile_max);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = std::exp(m - m_use);
      m = m_new;
      for (int part = 0; part < LANES_PER_ROW; ++part) {
        l[part] *= alpha;
        for (auto& a : acc[part]) a *= alpha;
      }
      for (int jj = 0; jj < BLOCK_KV; ++jj) {
        p[jj] = std::exp(s[jj] - m_use);
        l[jj % LANES_PER_ROW] += p[jj];
      }
      for (int part = 0; part < LANES_PER_ROW; ++part)
        for (int jj = 0; jj < BLOCK_KV; ++jj) pv_add(acc[part], p[jj], kv_row(v, kv0 + jj), part, PAIRS);
    }
    float l_sum = 0.f;
    for (int part = 0; part < LANES_PER_ROW; ++part) l_sum += float(l[part]);
    const RowEnd end = row_end(m, l_sum);
    float* orow = &o[size_t(pr.q_index(b, i, h))];
    for (int part = 0; part < LANES_PER_ROW; ++part)
      for (int u = 0; u < PAIRS; ++u)
        for (int e = 0; e < 2; ++e)
          orow[2 * (part + LANES_PER_ROW * u) + e] = widen(narrow<T>(float(acc[part][2 * u + e]) * end.inv_l));
    lse[size_t(pr.lse_index(b, h, i))] = end.lse;
  });
}

// mma: FlashAttention-2's loop for one query row at a time, in plain C++, with the mma kernel's
// rounding points: scores and sums in float, exp2 with scale_log2, P rounded to the element type
// before the PV product (as the mma path feeds it to the Tensor Cores), O rounded once at the
// end; --bug fp16-accum rounds the O accumulator and l after every update. It is the algorithm,
// not the kernel's fragment code: a stub's mma exercises run only on a GPU, so a stub's CPU model
// of this variant says so instead of checking (exit 77).
void mma_cpu(const lab::Problem& pr, bool acc16, const lab::HostInputs& in, std::vector<float>& o,
             std::vector<float>& lse) {
  constexpr int BLOCK_KV = 64;
  const lab::DType t = pr.dtype;
  auto keep = [&](float x) { return acc16 ? lab::round_to(t, x) : x; };  // the accumulator's storage
  const Shape sh = make_shape(pr);
  lab::parallel_for(int64_t(pr.b) * pr.h * pr.t_q, [&](int64_t row) {
    const int i = int(row % pr.t_q), bh = int(row / pr.t_q), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const lab::KeyRange keys = lab::visible_keys(i, pr.t_q, pr.t_kv, pr.causal, 0);
    const float* qr = &in.q[size_t(pr.q_index(b, i, h))];
    std::vector<float> acc(size_t(pr.d), 0.f);
    float s[BLOCK_KV];
    float m = -INFINITY, l = 0.f;
    for (int kv0 = keys.begin / BLOCK_KV * BLOCK_KV; kv0 < keys.end; kv0 += BLOCK_KV) {
      const int j0 = std::max(kv0, keys.begin), j1 = std::min(kv0 + BLOCK_KV, keys.end);
      float tile_max = -INFINITY;
      for (int j = j0; j < j1; ++j) {  // S = q·k (float)
        const float* kr = &in.k[size_t(pr.kv_index(b, j, hk))];
        float dot = 0.f;
        for (int c = 0; c < pr.d; ++c) dot += qr[c] * kr[c];
        s[j - kv0] = dot;
        tile_max = std::max(tile_max, dot);
      }
      const float m_new = std::max(m, tile_max);  // online softmax, base 2
      const float max_scaled = m_new * sh.scale_log2;
      const float alpha = std::exp2(m * sh.scale_log2 - max_scaled);
      m = m_new;
      l = keep(l * alpha);
      for (float& a : acc) a = keep(a * alpha);
      for (int j = j0; j < j1; ++j) {
        const float p = std::exp2(s[j - kv0] * sh.scale_log2 - max_scaled);
        l = keep(l + p);
        const float p16 = lab::round_to(t, p);  // P enters the PV product as a 16-bit value
        const float* vr = &in.v[size_t(pr.kv_index(b, j, hk))];
        for (int c = 0; c < pr.d; ++c) acc[size_t(c)] = keep(acc[size_t(c)] + p16 * vr[c]);
      }
    }
    float* orow = &o[size_t(pr.q_index(b, i, h))];
    const RowEnd end = row_end(m * sh.scale, l);  // m is a raw score Q·K: scaled, it is in natural units
    for (int c = 0; c < pr.d; ++c) orow[c] = lab::round_to(t, acc[size_t(c)] * end.inv_l);
    lse[size_t(pr.lse_index(b, h, i))] = end.lse;
  });
}

template <class T, int HEAD_DIM>
void scalar_cpu_acc(const lab::Problem& pr, bool acc16, const lab::HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
  if (acc16) scalar_cpu<T, HEAD_DIM, true>(pr, in, o, lse);
  else scalar_cpu<T, HEAD_DIM, false>(pr, in, o, lse);
}

lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
  lab::CpuRun run;
  const bool acc16 = opt.bug == "fp16-accum";
  const bool f16 = pr.dtype == lab::DType::f16;
  if (opt.variant == "scalar") {
    if (pr.d == 64) f16 ? scalar_cpu_acc<__half, 64>(pr, acc16, in, o, lse) : scalar_cpu_acc<__nv_bfloat16, 64>(pr, acc16, in, o, lse);
    else f16 ? scalar_cpu_acc<__half, 128>(pr, acc16, in, o, lse) : scalar_cpu_acc<__nv_bfloat16, 128>(pr, acc16, in, o, lse);
    return run;
  }
  mma_cpu(pr, acc16, in, o, lse);  // the solution's mma algorithm (a lab's mma runs only on a GPU: gpu_only)
  return run;
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "04_fp16";
  s.title = "fp16/bf16 storage, fp32 accumulation: scalar (exercise 3) and Tensor Cores (mma.sync, §12.4)";
  // mma-no-ldmatrix and mma-no-cp-async: the ablations of ch12/04_fp16.md (what each feature buys).
  s.variants = {"scalar", "mma", "mma-no-ldmatrix", "mma-no-cp-async"};
  s.bugs = {"fp16-accum", "no-smem-optin"};
  s.dtypes = {lab::DType::f16, lab::DType::bf16};
  s.default_problem.dtype = lab::DType::f16;
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 2048;
  s.default_problem.d = 64;
  s.validate = [](const lab::Problem& p, const lab::Options& opt) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid dimension per head)";
    if (!opt.bug.empty() && opt.variant.rfind("mma-no-", 0) == 0)
      return "--bug " + opt.bug + " applies to the scalar and mma variants, not to the ablation " + opt.variant;
    if (opt.bug == "no-smem-optin" && opt.variant != "mma")
      return "--bug no-smem-optin applies to --variant mma (the scalar kernel's tiles are static shared memory)";
    if (opt.bug == "no-smem-optin" && mma::Tiles<64>::SMEM_BYTES <= kDefaultSmemLimit && p.d == 64)
      return "--bug no-smem-optin needs --d 128: the mma tiles take " + std::to_string(mma::Tiles<64>::SMEM_BYTES / 1024) +
             " KB at D = 64, under the 48 KB default (" + std::to_string(mma::Tiles<128>::SMEM_BYTES / 1024) + " KB at D = 128)";
    return "";
  };
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  // The CPU model runs the scalar exercises (shared with scalar_kernel); a lab's mma exercises live
  // on mma.sync fragments, and a launch pitfall needs a launch. For a stub that is "not checked
  // here", never a pass of the solution's algorithm.
  s.gpu_only = [](const lab::Options& opt) -> std::string {
    if (opt.bug == "no-smem-optin") return "--bug no-smem-optin is a kernel launch without the shared-memory opt-in";
    if (opt.variant != "scalar" && std::string(LAB_BUILD_KIND) == "lab")
      return "the " + opt.variant + " variant's exercises run on mma.sync fragments; --cpu checks --variant scalar";
    return "";
  };
  return lab::lab_main(argc, argv, s);
}
