// Section 08's `fp8` variant: FlashAttention-3's third weapon, the forward pass on e4m3 operands.
// The skeleton and the schedule are ws_forward.cuh's (producer warp, mbarrier ring, the ring
// protocol and the rules asked of the policy H; two consumer warpgroups in variant ws-pingpong's
// schedule: consumer_overlapped in PingPongTurns); what changes is the data and the two products:
//
//   quantise pass (before the forward, timed on its own): per (sequence b, K/V head hk) and tensor
//     one scale, amax / 448 (Q's group is the H / H_kv query heads of hk); Q and K become e4m3 in
//     their own layouts, V becomes Vᵀ [B, H_kv, D, T_pad] e4m3 (keys contiguous, T_pad = T_kv
//     rounded up to 16; see vt_key_at for the order of the keys inside each group of 16).
//   S = Q Kᵀ   wgmma m64n128k32 e4m3 x e4m3 -> fp32, both operands K-major in shared memory (rows of
//              D bytes: the swizzle is D bytes wide, 128 or 64), descaled in the softmax:
//              scale_log2 · q_scale · k_scale multiplies the raw score.
//   softmax    04's online softmax in fp32, with P = exp2(S·c - m·c + 8): its largest value is
//              2^8 = 256, not 1 (the factor is a power of two: exact, and free inside the exp2's
//              FFMA), so e4m3 keeps normal precision for P down to 2^-14 instead of 2^-6, and
//              flushes only P < 2^-18 to zero. The row sum l uses the same P in fp32 (the 2^8
//              cancels in O = (P V) / l; the LSE subtracts 8 ln 2).
//   P V        wgmma m64n{D}k32 with P from registers (e4m3) and Vᵀ from shared memory: fp8 wgmma
//              reads B only K-major, so V must arrive transposed (keys contiguous). Here the
//              quantise pass writes it so in global memory (simpler than FlashAttention-3, whose
//              producer warps transpose V in shared memory with ldmatrix/stmatrix).
//   O = O·α + PV  each tile's P V goes into a fresh accumulator (its first k-step does not add),
//              and the consumer folds it into O with one FFMA per register, in full fp32: the fp8
//              tensor core adds into its accumulator with fewer bits than fp32 (see ConsumerTile).
//   epilogue   O = o_acc · v_scale / l, stored in the inputs' 16-bit type; LSE in fp32.
//
// P from the S accumulator. A thread's S registers hold, per 8-key n-block, keys 2t and 2t + 1 of
// its two rows; the e4m3 A fragment of m64nNk32 wants keys 4t .. 4t + 3 (and 16 + 4t ..) of a row
// in one register. Rather than shuffle bytes between the 4 lanes of a quad (FlashAttention-3's
// permute_Cregs_fp8), this kernel lets every register keep the keys it has: register a0 of k-step
// kk packs keys 2t, 2t + 1, 8 + 2t, 9 + 2t, which wgmma reads as k = 4t .. 4t + 3. A product sums
// over k, so any order of the keys is right as long as Vᵀ holds its keys in the same order: the
// quantise pass stores key vt_key_at(k) at position k of each group of 16. No shuffle, no cost.
//
// Build for sm_90a. The variant is registered in solutions/08_tma_skeleton.cu (its host side: the
// quantise pass, the tensor maps, the descale factors); the protocol (ring_slot, the producer loop,
// consumer_wait / consumer_release) is that file's, the student's exercise, run unchanged.
#pragma once
#include <cuda_fp8.h>

#include "hopper/ws_forward.cuh"

namespace lab::ws::fp8 {

constexpr float P_LOG2_FACTOR = 8.f;  // P = exp2(... + 8): the largest P is 256 (e4m3's range ends at 448)

// Position k (0..15) of a group of 16 keys in Vᵀ holds key vt_key_at(k) of that group: the key the
// P fragment holds at k (see above). Thread t's register bytes i = 0..3 are keys 2t + (i & 1) + 8(i >> 1).
LAB_HD int vt_key_at(int k) { return 2 * (k >> 2) + (k & 1) + 8 * ((k >> 1) & 1); }

template <int HEAD_DIM>
struct Tiles {
  static constexpr int STAGES = HEAD_DIM == 64 ? 5 : 4;       // K/V slots: half of 16-bit's bytes, more fit
  static constexpr int SWIZZLE = HEAD_DIM;                     // a row of Q or K is D bytes: a swizzle of D bytes
  static constexpr int Q_BYTES = BLOCK_Q * HEAD_DIM;           // Q [128 rows][D], one box
  static constexpr int KV_TILE_BYTES = BLOCK_KV * HEAD_DIM;    // K [128 keys][D] or Vᵀ [D][128 keys], one box each
  static constexpr int OFF_K = Q_BYTES;
  static constexpr int OFF_V = OFF_K + STAGES * KV_TILE_BYTES;
  static constexpr int OFF_BAR = OFF_V + STAGES * KV_TILE_BYTES;
  static constexpr int SMEM_BYTES = OFF_BAR + BAR_BYTES + 1024;  // + slack to align the base
  static constexpr int D_STEPS = HEAD_DIM / 32;                // k-steps of S = Q Kᵀ (K = 32 per fp8 wgmma)
  static constexpr int KV_STEPS = BLOCK_KV / 32;               // k-steps of O = P V
  static constexpr int S_REGS = BLOCK_KV / 2;                  // fp32 S accumulator per thread
  static constexpr int O_REGS = HEAD_DIM / 2;                  // fp32 O accumulator per thread
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "rows of 64 or 128 bytes: the 64- or 128-byte swizzle");
  static_assert(BLOCK_KV == 128, "a Vᵀ row of a tile is 128 keys = 128 bytes: one 128-byte swizzle row");
  static_assert(SMEM_BYTES <= 227 * 1024, "fits one block per SM");
  static_assert(Q_BYTES % 1024 == 0 && KV_TILE_BYTES % 1024 == 0, "every tile starts on a swizzle atom");
};

// Shared-memory addresses of one block's buffers and barriers (the same accessors as ws's Smem,
// so the producer loop of solutions/08_tma_skeleton.cu runs on it unchanged).
template <int HEAD_DIM>
struct Smem : BarrierArea<Tiles<HEAD_DIM>::STAGES> {
  using TL = Tiles<HEAD_DIM>;
  uint32_t base;
  __device__ Smem(uint32_t base_, uint8_t* generic)
      : BarrierArea<TL::STAGES>(base_, generic, TL::OFF_BAR), base(base_) {}
  __device__ uint32_t q() const { return base; }
  __device__ uint32_t k(int stage) const { return base + TL::OFF_K + stage * TL::KV_TILE_BYTES; }
  __device__ uint32_t v(int stage) const { return base + TL::OFF_V + stage * TL::KV_TILE_BYTES; }  // Vᵀ
};
// The kernel's parameters: ws's, and where the descale factors are.
struct Params : lab::ws::Params {
  const float* scales;    // [3][B·H_kv]: q, k, v scales (x ≈ x8 · scale), written by the quantise pass
  int groups;             // B · H_kv
  bool forget_k_descale;  // --bug forget-descale: S descaled by q_scale only
};

// ---------------------------------------------------------------------------------------------
// Loads (the producer's): Q once, one box of 128 rows x D bytes; a K tile, one box of 128 keys x D
// bytes at (0, kv_head, key, b); a Vᵀ tile, one box of D rows x 128 keys at (key, 0, kv_head, b).
// Boxes past T_q / T_kv / T_pad are zero-filled by TMA and still complete their bytes.
template <int HEAD_DIM>
__device__ __forceinline__ void load_kv_tile(const CUtensorMap& map, const Smem<HEAD_DIM>& sm, int which, int stage,
                                             int tile, int b, int kv_head, uint32_t bar) {
  if (which == 0) tma_load_4d(sm.k(stage), &map, 0, kv_head, tile * BLOCK_KV, b, bar);
  else tma_load_4d(sm.v(stage), &map, tile * BLOCK_KV, 0, kv_head, b, bar);
}

// Four floats -> four e4m3 bytes of one register, x0 in the low byte (round to nearest, saturate).
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(x0, x1), __NV_SATFINITE, __NV_E4M3);  // x0: low byte
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(x2, x3), __NV_SATFINITE, __NV_E4M3);
  return lo | (hi << 16);
}

// P (the S accumulator after the softmax, fp32) -> the e4m3 A registers of k-step kk of O += P V
// (keys 32kk .. 32kk + 31 = n-blocks 4kk .. 4kk + 3), each register keeping the keys its thread
// holds: Vᵀ's key order matches (vt_key_at).
template <int S_REGS>
__device__ __forceinline__ void pack_p(const float (&s)[S_REGS], uint32_t (&p_frag)[S_REGS / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < S_REGS / 16; ++kk) {
    const float* x = &s[16 * kk];
    p_frag[kk][0] = pack4_e4m3(x[0], x[1], x[4], x[5]);      // row g:     n-blocks 4kk, 4kk + 1
    p_frag[kk][1] = pack4_e4m3(x[2], x[3], x[6], x[7]);      // row g + 8
    p_frag[kk][2] = pack4_e4m3(x[8], x[9], x[12], x[13]);    // row g:     n-blocks 4kk + 2, 4kk + 3
    p_frag[kk][3] = pack4_e4m3(x[10], x[11], x[14], x[15]);  // row g + 8
  }
}

// ---------------------------------------------------------------------------------------------
// The consumer warpgroup's state and the steps of one K/V tile, for ws_forward.cuh's walker
// (consumer_overlapped, in FlashAttention-3's ping-pong: the same schedule as variant ws-pingpong).
// Thread lane = 4g + t of warp w owns rows r0 = 16w + g and r0 + 8 (ws_forward.cuh).
//
// O is promoted out of the tensor core: each tile's P V goes into a fresh accumulator pv (its first
// k-step does not add) and is folded into O on the CUDA cores, O = O·α + PV in full fp32. An fp8
// wgmma adds into its fp32 accumulator with fewer bits than fp32 (about 14 mantissa bits: DeepSeek-
// V3's report measured it on Hopper's fp8 GEMMs). Summed over a long row of tiles inside the
// tensor core, O would drop the low bits of each tile's share once O is large beside it. A tile's
// 4 k-steps are a short sum; the long sum over tiles is the FFMA here. The walker runs PV(n - 1)
// while the softmax of tile n overwrites alpha, so the fold of a tile uses the alpha saved when its
// PV was issued (pv_alpha).
// O_IN_TC (--bug o-in-tensor-core) leaves O in the wgmma's accumulator, every tile's P V added to it
// there and rescaled in place, as the 16-bit tile does: the long sum the promotion avoids. It runs
// the same schedule and reads the same operands; only O's sum differs.
template <class T, int HEAD_DIM, class H, bool O_IN_TC = false>
struct ConsumerTile {
  using TL = Tiles<HEAD_DIM>;
  using Rules = H;
  static constexpr int BLOCK_KV = lab::ws::BLOCK_KV;
  static constexpr int STAGES = TL::STAGES;
  float s[TL::S_REGS];               // S = Q Kᵀ (raw, in units of q_scale·k_scale), then P·2^8 in fp32
  uint32_t p_frag[TL::KV_STEPS][4];  // P in e4m3, the A registers of P V
  float pv[O_IN_TC ? 1 : TL::O_REGS];  // the P V of the tile in flight (O_IN_TC: unused)
  float o_acc[TL::O_REGS];           // unnormalised O, in full fp32 on the CUDA cores
  float m[2], l[2], alpha[2];        // running max (raw scores), row sums of P·2^8, the last tile's rescale
  float pv_alpha[2];                 // the rescale of pv's tile, applied when pv is folded into O
  float scale_log2, qk_scale, v_scale;  // the descales of this (sequence, K/V head)

  // This warpgroup's 64 rows of Q: Q's slot is one box of rows of D bytes.
  __device__ __forceinline__ static uint32_t q_rows(uint32_t q_slot, int wg) {
    return q_slot + uint32_t(wg * WG_ROWS * HEAD_DIM);
  }
  // S8 = Q8 K8ᵀ is in units of q_scale·k_scale: the softmax's scale_log2 takes both factors; O's
  // v_scale waits for the epilogue.
  __device__ __forceinline__ void begin(const Params& p, int b, int head) {
    const int group = b * p.h_kv + lab::kv_head_of(head, p.h, p.h_kv);
    const float q_scale = p.scales[group];
    const float k_scale = p.forget_k_descale ? 1.f : p.scales[p.groups + group];
    v_scale = p.scales[2 * p.groups + group];
    qk_scale = p.scale * q_scale * k_scale;  // natural-log units, for the LSE
    scale_log2 = p.scale_log2 * q_scale * k_scale;
#pragma unroll
    for (int i = 0; i < TL::O_REGS; ++i) o_acc[i] = 0.f;
    if constexpr (!O_IN_TC)
#pragma unroll
      for (int i = 0; i < TL::O_REGS; ++i) pv[i] = 0.f;  // the first fold adds nothing
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
    pv_alpha[0] = pv_alpha[1] = 0.f;
  }
  // S = Q K_tileᵀ: D/32 wgmmas of m64n128k32; each k-step is 32 bytes further along the rows, so
  // the descriptors are built once a tile and advanced (desc_advance).
  __device__ __forceinline__ void issue_s(uint32_t q_rows, uint32_t k_slot) {
    const uint64_t a0 = desc_k_major<TL::SWIZZLE>(q_rows), b0 = desc_k_major<TL::SWIZZLE>(k_slot);
#pragma unroll
    for (int kk = 0; kk < TL::D_STEPS; ++kk)
      wgmma_ss_e4m3_n128(s, desc_advance(a0, uint32_t(kk * 32)), desc_advance(b0, uint32_t(kk * 32)), kk > 0);
  }
  // PV = P Vᵀ_tileᵀ: 4 wgmmas of m64n{D}k32; B = Vᵀ [D rows][128 keys], 32 keys per k-step. The
  // first k-step overwrites pv (scale-d = 0), as S's first does: no zeroing, no old O.
  __device__ __forceinline__ void issue_pv(uint32_t vt_slot) {
    const uint64_t vt0 = desc_k_major<128>(vt_slot);
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) {
      const uint64_t vt = desc_advance(vt0, uint32_t(kk * 32));
      if constexpr (O_IN_TC) wgmma_rs_e4m3<HEAD_DIM>(o_acc, p_frag[kk], vt, true);
      else wgmma_rs_e4m3<HEAD_DIM>(pv, p_frag[kk], vt, kk > 0);
    }
  }
  __device__ __forceinline__ void fence_pv_operands() {
    if constexpr (O_IN_TC) fence_accumulators(o_acc);
    else fence_accumulators(pv);
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) fence_registers(p_frag[kk]);
  }
  __device__ __forceinline__ void mask_all(const lab::ws::Params& p, int kv0, int row_g, int t) {
    H::mask_tile(s, p, kv0, row_g, t, INT_MAX, INT_MIN);  // no key range is whole: every element tested
  }
  // Online softmax (04's, base 2), P scaled by 2^8 inside the exp2: bias = 8 - m·c.
  __device__ __forceinline__ void online_softmax(const lab::ws::Params&) {
    online_softmax_rows<int(P_LOG2_FACTOR)>(s, m, l, alpha, scale_log2);
  }
  // O = O·α + PV, one FFMA per register (the promotion above).
  __device__ __forceinline__ void fold_pv() {
    if constexpr (!O_IN_TC)
#pragma unroll
      for (int j = 0; j < TL::O_REGS / 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o_acc[4 * j + e] = fmaf(o_acc[4 * j + e], pv_alpha[e / 2], pv[4 * j + e]);
  }
  // The walker's rescale point (the previous PV is done, the next is about to be issued): fold
  // the finished tile into O, and keep alpha for the tile whose PV comes next (O_IN_TC: O *= alpha).
  __device__ __forceinline__ void rescale_o() {
    if constexpr (O_IN_TC) {
#pragma unroll
      for (int i = 0; i < TL::O_REGS; ++i) o_acc[i] *= alpha[(i % 4) / 2];
      return;
    }
    fold_pv();
    pv_alpha[0] = alpha[0];
    pv_alpha[1] = alpha[1];
  }
  __device__ __forceinline__ void pack_p() { fp8::pack_p(s, p_frag); }  // P -> e4m3, keys where S has them

  // Finalize: the last tile folded in, O = o_acc · v_scale / l; LSE = m·scale·q_scale·k_scale +
  // log(l) - 8 ln 2 (l counts P·2^8). Rows past T_q are not written.
  __device__ __forceinline__ void finalize(const lab::ws::Params& p, int b, int head, int row_g, int t) {
    fold_pv();
    store_o_lse<T, HEAD_DIM>(o_acc, m, l, p, b, head, row_g, t, v_scale, qk_scale, P_LOG2_FACTOR * lab::kLn2);
  }
};

// The register split: S (64) + P (16) + PV (D/2) + O (D/2) live at once while a PV overlaps the
// softmax, 208 at D = 128: FlashAttention-3's 24 for the producer, 240 for each consumer.
constexpr uint32_t PRODUCER_REGS = 24, CONSUMER_REGS = 240;
static_assert(PRODUCER_REGS * WG_THREADS + CONSUMER_REGS * WG_THREADS * CONSUMERS <= 65536, "fits the SM's 64K registers");

// ---------------------------------------------------------------------------------------------
// One block: 128 query rows of one (sequence, head), 384 threads; grid = (ceil(T_q / 128), B·H).
// ws_kernel's structure: barriers, then the roles as one if/else with their register budgets;
// the consumers take turns at the tensor core as ws-pingpong's do.
template <class T, int HEAD_DIM, class H, bool O_IN_TC = false>
__global__ void __launch_bounds__(THREADS, 1)
ws_fp8_kernel(const __grid_constant__ CUtensorMap q_map,   // Q8 (D, H, T_q, B), box (D, 1, 128, 1)
              const __grid_constant__ CUtensorMap k_map,   // K8 (D, H_kv, T_kv, B), box (D, 1, 128, 1)
              const __grid_constant__ CUtensorMap vt_map,  // Vᵀ8 (T_pad, D, H_kv, B), box (128, D, 1, 1)
              const typename H::KernelParams p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // compiled for another GPU: the host never launches this
#else
  using TL = Tiles<HEAD_DIM>;
  if (H::ring_slot(0, TL::STAGES).stage < 0) return;  // the ring-slot stub: no work, nothing written

  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
  const Smem<HEAD_DIM> sm{base, smem_raw + (base - raw)};

  if (threadIdx.x == 0) sm.init(CONSUMERS);
  __syncthreads();  // the barriers are initialised before any thread waits on or arrives at them

  // The block's one job: x its Q tile, y its (sequence, head).
  auto block_job = [&] {
    return job_at<H>(p, int(blockIdx.y * gridDim.x + blockIdx.x), int(gridDim.x), BLOCK_Q, BLOCK_KV, no_job());
  };
  if (!block_job().run) return;
  if (threadIdx.x / WG_THREADS == 0) {
    regs_release<PRODUCER_REGS>();
    if (threadIdx.x / 32 == 0) H::template produce<HEAD_DIM, CONSUMERS>(q_map, k_map, vt_map, p, sm, block_job());
  } else {
    regs_claim<CONSUMER_REGS>();
    const Job job = block_job();  // worked out again on each side of the split: nothing live across it
    const int wg = threadIdx.x / WG_THREADS - 1;
    PingPongTurns<CONSUMERS> turns(wg);
    consumer_overlapped<ConsumerTile<T, HEAD_DIM, H, O_IN_TC>>(wg, p, sm, job, turns);
    turns.close();
  }
#endif
}

// ---------------------------------------------------------------------------------------------
// The quantise pass: amax per (tensor, sequence, K/V head), the scales, then Q8, K8 and Vᵀ8.
// Plain CUDA (any architecture); its time is reported apart from the forward's.

// amax_bits [3][B·H_kv] (zeroed before): the largest |x| of Q's group (which = 0), K (1) or V (2)
// of (sequence b, K/V head hk) = blockIdx.y, as float bits (atomicMax on non-negative floats'
// bits is their max). grid (chunks, B·H_kv, 3), 256 threads, 8 elements (16 bytes) per load.
template <class T>
__global__ void __launch_bounds__(256) amax_kernel(const T* q, const T* k, const T* v, uint32_t* amax_bits, int t_q,
                                                   int t_kv, int h, int h_kv, int d) {
  const int which = blockIdx.z, g = blockIdx.y, b = g / h_kv, hk = g % h_kv;
  const int group = which == 0 ? h / h_kv : 1;  // heads of this K/V head: its query heads, or itself
  const int heads = which == 0 ? h : h_kv, rows = which == 0 ? t_q : t_kv;
  const T* x = which == 0 ? q : which == 1 ? k : v;
  const int vecs = d / 8;
  const int64_t items = int64_t(rows) * group * vecs;
  float m = 0.f;
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < items; it += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(it % vecs), hh = int((it / vecs) % group);
    const int64_t r = it / (int64_t(vecs) * group);
    const uint4 raw =
        *reinterpret_cast<const uint4*>(x + ((int64_t(b) * rows + r) * heads + hk * group + hh) * d + 8 * c);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(to_float(e[i])));
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
  __shared__ float warp_max[8];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();  // every warp's max is in shared memory before thread 0 reads them
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x) / 32; ++w) m = fmaxf(m, warp_max[w]);
    atomicMax(&amax_bits[which * gridDim.y + g], __float_as_uint(m));
  }
}

// scales [3][B·H_kv] = amax / 448 (1 for all zeros): harness/fp8.h's e4m3_scale_of, in IEEE fp32.
__global__ void scales_kernel(const uint32_t* amax_bits, float* scales, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float amax = __uint_as_float(amax_bits[i]);
    scales[i] = amax > 0.f ? __fdiv_rn(amax, 448.f) : 1.f;
  }
}

__device__ __forceinline__ uint8_t to_e4m3(float x) {
  return uint8_t(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// Q or K [B, rows, heads, D] -> e4m3 in the same layout: x / scale of its (b, K/V head), 8 per thread.
template <class T>
__global__ void __launch_bounds__(256) quantise_kernel(const T* x, uint8_t* x8, const float* scales, int batch,
                                                       int rows, int heads, int h_per_kv, int h_kv, int d) {
  const int64_t vecs = int64_t(batch) * rows * heads * (d / 8);
  for (int64_t it = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; it < vecs; it += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e0 = it * 8;
    const int head = int((e0 / d) % heads);
    const int b = int(e0 / (int64_t(d) * heads * rows));
    const float scale = scales[b * h_kv + head / h_per_kv];
    const uint4 raw = *reinterpret_cast<const uint4*>(x + e0);
    const T* e = reinterpret_cast<const T*>(&raw);
    uint32_t out[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 8; ++i) out[i / 4] |= uint32_t(to_e4m3(__fdiv_rn(to_float(e[i]), scale))) << (8 * (i % 4));
    *reinterpret_cast<uint2*>(x8 + e0) = make_uint2(out[0], out[1]);
  }
}

// V [B, T_kv, H_kv, D] -> Vᵀ [B, H_kv, D, T_pad] e4m3: block (64-key slab, b·H_kv + hk), 256
// threads. The slab is quantised into shared memory [key][d], then written out as rows of 64 keys,
// position k of each group of 16 holding key vt_key_at(k) of the group; keys >= T_kv are zeros.
template <class T, int HEAD_DIM>
__global__ void __launch_bounds__(256) transpose_v_kernel(const T* v, uint8_t* vt, const float* v_scales, int t_kv,
                                                          int t_pad, int h_kv) {
  constexpr int KEYS = 64, PITCH = HEAD_DIM + 4;
  __shared__ uint8_t slab[KEYS * PITCH];
  const int g = blockIdx.y, b = g / h_kv, hk = g % h_kv, key0 = blockIdx.x * KEYS;
  const float scale = v_scales[g];
  for (int it = threadIdx.x; it < KEYS * (HEAD_DIM / 8); it += blockDim.x) {
    const int key = it / (HEAD_DIM / 8), c = it % (HEAD_DIM / 8);
    uint8_t* dst = &slab[key * PITCH + 8 * c];
    if (key0 + key < t_kv) {
      const uint4 raw = *reinterpret_cast<const uint4*>(v + ((int64_t(b) * t_kv + key0 + key) * h_kv + hk) * HEAD_DIM + 8 * c);
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i] = to_e4m3(__fdiv_rn(to_float(e[i]), scale));
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i] = 0;
    }
  }
  __syncthreads();  // the slab is complete before it is read across keys
  for (int it = threadIdx.x; it < HEAD_DIM * (KEYS / 4); it += blockDim.x) {
    const int d = it / (KEYS / 4), pos = 4 * (it % (KEYS / 4));  // 4 positions of row d
    if (key0 + pos >= t_pad) continue;
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int k = pos + i, key = (k & ~15) + vt_key_at(k & 15);
      word |= uint32_t(slab[key * PITCH + d]) << (8 * i);
    }
    *reinterpret_cast<uint32_t*>(vt + (int64_t(g) * HEAD_DIM + d) * t_pad + key0 + pos) = word;
  }
}

}  // namespace lab::ws::fp8

namespace lab::ws {
// Q for the fp8 kernel (the producer's load_q, by the type of its shared memory): one box of 128
// rows x D bytes.
template <int HEAD_DIM, int CONS = CONSUMERS>
__device__ __forceinline__ void load_q(const CUtensorMap& q_map, const fp8::Smem<HEAD_DIM>& sm, int b, int head,
                                       int q0) {
  static_assert(CONS == CONSUMERS, "the fp8 kernel runs two consumer warpgroups");
  mbar_arrive_expect_tx(sm.q_full(), fp8::Tiles<HEAD_DIM>::Q_BYTES);
  tma_load_4d(sm.q(), &q_map, 0, head, q0, b, sm.q_full());
}
}  // namespace lab::ws
