// The Hopper backward of section 11 (variant wgmma): the gradients dK, dV (and dQ by bulk fp32
// reductions) of one 128-key K/V tile per block, on wgmma, with Q, dO and the rows' LSE and D
// streamed by TMA through an mbarrier ring. Build for sm_90a. Why it is built so is told in
// ch12/11_backward.md ("The Hopper variant"). The section's exercises (P and dS of one element,
// the weights of dV and dK) come in through the policy type Ex, so the answers stay in the
// section's file:
//   Ex::p_and_ds(s, dp, lse_log2, d_row, scale_log2, &p, &ds) -> bool (false: not written yet)
//   Ex::weights(p, ds, &dv_weight, &dk_weight) -> bool
//
// Roles (384 threads, three warpgroups, one if/else with its register budgets):
//   warpgroup 0, thread 0   the producer: K and V of the block once, then per Q tile (every
//                           query head of the K/V head's group, every Q tile that sees a key of
//                           the block) Q, dO by TMA and the rows' LSE·log2 e and D by a bulk copy,
//                           into ring slot n % STAGES.
//   warpgroup 0, warp 1     the dQ writer: per Q tile, each consumer warpgroup's share of dQ
//                           added from shared memory into the fp32 dQ accumulator by one bulk
//                           reduce (cp.reduce.async.bulk, 16 KB), issued by its lane 0.
//   warpgroups 1, 2         consumers: warpgroup w owns keys kv0 + 64w .. + 63 (the M = 64 of a
//                           wgmma) and their dK, dV accumulators (64 x D fp32 each) for the whole
//                           kernel. Per Q tile (BLOCK_Q query rows: 64 at D = 128, 128 at D = 64):
//     Sᵀ = K Qᵀ, dPᵀ = V dOᵀ   [64 keys x BLOCK_Q rows]: SS wgmma, both operands K-major
//     Pᵀ, dSᵀ per element        (the exercises; the causal mask where the tile needs it)
//     dV += Pᵀ dO, dK += dSᵀ Q   [64 keys x D]: RS wgmma, Pᵀ and dSᵀ from the accumulators'
//                                registers, dO and Q MN-major (transposed) from the ring slot
//     dQ += dS K                 [64 rows x 64 columns] over all 128 keys: SS wgmma, dS read
//                                transposed out of the dSᵀ both warpgroups stored in shared
//                                memory, K MN-major; warpgroup w owns columns 64w.. (D = 128) or
//                                rows 64w.. (D = 64) of the tile's dQ. Issued right behind dV and
//                                dK, so the Tensor Cores run the three back to back. The share
//                                then goes to shared memory, and the writer's bulk reduce adds
//                                it while the warpgroup goes on to the next Q tile: no consumer
//                                thread waits on a global atomic.
// dQ's hand-off, per consumer warpgroup w and Q tile n, on two named barriers of its 128 threads
// and the writer warp's 32. Where the share waits for its reduce, dq_stage(w, n % 2):
//   D = 128  a 16 KB buffer of its own, the same for every tile: its reduce was issued a whole
//            tile before the warpgroup fills it again, so the wait on DQ_EMPTY seldom has anything
//            left to wait for.
//   D = 64   box w of tile n's dSᵀ buffer ds(n % 2), which only warpgroup w's dQ wgmma reads (the
//            tile's query rows 64w..): dead once that wgmma has completed, and as large as the
//            share. Tile n + 2 writes its dSᵀ over both shares, so there DQ_EMPTY waits for the
//            reduces of the tile before last, and comes before the dSᵀ stores. No staging of its
//            own: the 32 KB are the ring's third slot.
//   warpgroup w, D = 128: [n > 0: sync DQ_EMPTY + w] dq -> dq_stage(w, n % 2), fence.proxy.async, arrive DQ_FULL + w
//   warpgroup w, D = 64:  [n > 0: sync DQ_EMPTY + w] dSᵀ -> ds(n % 2) ... dq -> dq_stage(w, n % 2), (same)
//   writer:      sync DQ_FULL + w, bulk reduce, commit (w = 0, 1); [n + 1 < items: wait_group.read
//                of tile n's reduce w (D = 128) or of tile n − 1's two (D = 64), arrive DQ_EMPTY + w]
// DQ_EMPTY also keeps each barrier's arrivals in turn: the writer arrives on it only after its
// sync on DQ_FULL + w, so a warpgroup never arrives on DQ_FULL + w twice before the writer syncs
// (and so D = 64 syncs at n = 1 too, with no reduce of tile n − 2 to wait for).
// dq_acc is laid out as the registers hold it (dq_acc_index): a share is one contiguous block, and
// each warp's stores of it to shared memory are 512 contiguous bytes (no bank conflict).
// Tails need no mask: TMA fills rows past T_q or T_kv with zeros, the rows past T_q have
// LSE·log2 e = +inf and D = 0 in the padded row arrays (P = 0, dS = 0), and key rows past T_kv
// are never stored (their K rows are zeros, so they add nothing to dQ). dQ's rows past T_q land in
// dq_acc's padding (t_pad rows a head), which the conversion pass never reads. Only the tiles that
// cross the causal diagonal or T_kv are tested element by element.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"  // 16-bit helpers: pack2, from_float2
#include "toolbox/sm90.cuh"      // mbarrier, TMA, setmaxnreg, wgmma and its descriptors

namespace lab::wsbwd {
using namespace lab::sm80;
using namespace lab::sm90;

constexpr int WG_THREADS = 128;                         // a warpgroup: 4 warps
constexpr int CONSUMERS = 2;                            // consumer warpgroups
constexpr int CONSUMER_THREADS = CONSUMERS * WG_THREADS;
constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;   // 384: producer warpgroup + consumers
constexpr int WG_KEYS = 64;                             // keys per consumer: the M of wgmma
constexpr int BLOCK_KV = CONSUMERS * WG_KEYS;           // 128 keys per block
constexpr int ROW_PAD = 128;                            // the row arrays are padded to a multiple of every Q tile
constexpr int BOX_COLS = 64;                            // columns per TMA box: 128 bytes, one swizzle atom
constexpr int ROW_BYTES = BOX_COLS * 2;                 // 128
constexpr uint32_t PRODUCER_REGS = 24;                  // setmaxnreg.dec: TMA issue needs few
constexpr uint32_t CONSUMER_REGS = 240;                 // dK + dV + Sᵀ + dPᵀ: 2 x 64 + 2 x 32 at D = 128, 2 x 32 + 2 x 64 at D = 64
// A block starts with the registers of __launch_bounds__(THREADS, 1): 65536 / 384, rounded down to
// a multiple of 8, for every thread. setmaxnreg.inc waits until the pool holds what it asks, and
// only the producer's dec fills the pool: what the consumers claim must not exceed what it frees.
constexpr uint32_t ENTRY_REGS = (65536 / THREADS) / 8 * 8;  // 168
// Named barriers (0 is __syncthreads): the 256 consumer threads exchange dSᵀ on DS_BARRIER; consumer
// warpgroup w and the dQ writer warp hand dQ's share over on DQ_FULL + w and DQ_EMPTY + w.
constexpr int DS_BARRIER = 1;
constexpr int DQ_FULL = 2;
constexpr int DQ_EMPTY = DQ_FULL + CONSUMERS;
constexpr int DQ_WRITER_WARP = 1;                       // of the producer warpgroup (warp 0's lane 0 loads)
constexpr int DQ_SYNC_THREADS = WG_THREADS + 32;        // a consumer warpgroup and the writer warp
constexpr int DQ_SHARE_FLOATS = 64 * 64;                // a warpgroup's share of a tile's dQ: 64 x 64 fp32
constexpr int DQ_SHARE_BYTES = DQ_SHARE_FLOATS * 4;     // 16 KB
static_assert(PRODUCER_REGS * WG_THREADS + CONSUMER_REGS * CONSUMER_THREADS <= 65536, "the registers fit the SM's 64K");
static_assert((ENTRY_REGS - PRODUCER_REGS) * WG_THREADS >= (CONSUMER_REGS - ENTRY_REGS) * CONSUMER_THREADS,
              "the consumers' setmaxnreg.inc is covered by the producer's dec (else it waits for ever)");
static_assert(WG_KEYS == 64, "wgmma: M = 64");

template <int HEAD_DIM>
struct Tiles {
  // Query rows per ring slot, the N of Sᵀ and dPᵀ. At D = 64 a 64-row tile leaves every wgmma of a
  // Q tile at N = 64, K = 64 and pays the tile's waits and barriers for half the work; 128 rows
  // double the work per wait and halve dQ's additions into global memory per score (the dQ tile
  // is 128 x 64 per 128 keys, not two 64 x 64 partials per 64 keys). At D = 128 Sᵀ and dPᵀ of 128
  // rows would not fit beside dK and dV in the registers.
  static constexpr int BLOCK_Q = HEAD_DIM == 64 ? 128 : 64;
  // Q/dO slots in the ring: the next two Q tiles land while the consumers work on the third.
  static constexpr int STAGES = 3;
  static constexpr int COL_BOXES = HEAD_DIM / BOX_COLS;      // 64-column boxes per row of a tile
  static constexpr int ROW_BOXES = BLOCK_Q / 64;             // 64-row boxes of dSᵀ (its rows are query rows)
  // Where a warpgroup's dQ share waits for its bulk reduce. When dSᵀ has a row box per warpgroup
  // (D = 64), warpgroup w's dQ wgmma is the only reader of box w, and the box (128 keys x 64 rows,
  // 16-bit) is as large as the share (64 x 64 fp32): once that wgmma has completed, the share goes
  // into the box. A separate staging (2 x 16 KB) would leave room for two ring slots only, 1 KB
  // short of three. At D = 128 both warpgroups read the one 16 KB box, too small for two shares,
  // and the staging fits beside three slots.
  static constexpr bool DQ_IN_DS = ROW_BOXES == CONSUMERS;
  static constexpr int KV_BOX_BYTES = BLOCK_KV * ROW_BYTES;  // 16 KB: one box of K or V
  static constexpr int KV_TILE_BYTES = COL_BOXES * KV_BOX_BYTES;
  static constexpr int Q_BOX_BYTES = BLOCK_Q * ROW_BYTES;    // one box of Q or dO
  static constexpr int Q_TILE_BYTES = COL_BOXES * Q_BOX_BYTES;
  static constexpr int ROWS_BYTES = 2 * BLOCK_Q * 4;         // a slot's LSE·log2 e, then D, fp32
  static constexpr int DS_BOX_BYTES = BLOCK_KV * ROW_BYTES;  // dSᵀ [128 keys][64 rows], 16-bit
  static constexpr int DS_BYTES = ROW_BOXES * DS_BOX_BYTES;
  // Shared memory, from a 1024-byte aligned base (the 128-byte swizzle repeats every 1024 bytes):
  //   K [COL_BOXES][128][64] | V (same) | STAGES x (Q [COL_BOXES][BLOCK_Q][64] | dO (same)) |
  //   dSᵀ [ROW_BOXES][128][64] x 2 (double-buffered by Q tile) | dQ's staging, one 16 KB share per
  //   consumer warpgroup (none when DQ_IN_DS) | STAGES x rows | barriers
  //   D = 64:  16 + 16 + 3 x 32 + 2 x 32 + 0 + 3 x 1 KB + 56 + 1024 = 200,760 bytes
  //   D = 128: 32 + 32 + 3 x 32 + 2 x 16 + 32 + 3 x 0.5 KB + 56 + 1024 = 231,992 bytes (of 232,448)
  static constexpr int OFF_V = KV_TILE_BYTES;
  static constexpr int OFF_Q = 2 * KV_TILE_BYTES;
  static constexpr int OFF_DS = OFF_Q + STAGES * 2 * Q_TILE_BYTES;
  static constexpr int OFF_DQ = OFF_DS + 2 * DS_BYTES;
  static constexpr int OFF_ROWS = OFF_DQ + (DQ_IN_DS ? 0 : CONSUMERS * DQ_SHARE_BYTES);
  static constexpr int OFF_BAR = OFF_ROWS + STAGES * ROWS_BYTES;
  static constexpr int BARRIERS = 1 + 2 * STAGES;            // kv_full, full[], empty[]
  static constexpr int SMEM_BYTES = OFF_BAR + 8 * BARRIERS + 1024;  // + slack to align the base
  static constexpr int D_STEPS = HEAD_DIM / 16;              // k-steps of Sᵀ, dPᵀ
  static constexpr int Q_STEPS = BLOCK_Q / 16;               // k-steps of dV, dK
  static constexpr int ACC_REGS = HEAD_DIM / 2;              // dK or dV: 64 x D fp32 over 128 threads
  static constexpr int S_REGS = BLOCK_Q / 2;                 // Sᵀ or dPᵀ: 64 x BLOCK_Q fp32
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "D = 64 or 128");
  static_assert(ROW_BOXES * COL_BOXES == CONSUMERS, "dQ's tile is one 64 x 64 block per consumer warpgroup");
  // Warpgroup w's share of a tile's dQ: rows of box dq_row_box(w), columns of box dq_col_box(w).
  static constexpr int dq_row_box(int wg) { return ROW_BOXES == 2 ? wg : 0; }
  static constexpr int dq_col_box(int wg) { return COL_BOXES == 2 ? wg : 0; }
  // Warpgroup w's share of the Q tile whose dSᵀ is in buffer `buf`: that buffer's box w (DQ_IN_DS),
  // else the warpgroup's own staging.
  static constexpr int dq_stage_offset(int wg, int buf) {
    return DQ_IN_DS ? OFF_DS + buf * DS_BYTES + dq_row_box(wg) * DS_BOX_BYTES : OFF_DQ + wg * DQ_SHARE_BYTES;
  }
  static_assert(!DQ_IN_DS || DS_BOX_BYTES == DQ_SHARE_BYTES, "a share fills its dSᵀ box exactly");
  static_assert(ROW_PAD % BLOCK_Q == 0, "a Q tile never reads past a padded row array");
  static_assert(OFF_Q % 1024 == 0 && OFF_DS % 1024 == 0 && Q_BOX_BYTES % 1024 == 0, "tiles start on swizzle atoms");
  static_assert(SMEM_BYTES <= 227 * 1024, "fits one block per SM");
};

struct Params {
  const float* lse_log2;  // [B, H, t_pad]: LSE·log2 e, +inf past T_q (and for rows that see no key)
  const float* d_rows;    // [B, H, t_pad]: D = rowsum(dO ∘ O), 0 past T_q
  float* dq_acc;          // [B, H, t_pad, D] fp32 in the order of dq_acc_index (nullptr: dK, dV only)
  void* dk;               // [B, T_kv, H_kv, D]
  void* dv;
  int t_q, t_kv, h, h_kv, t_pad;  // t_pad = T_q rounded up to ROW_PAD: the row arrays' row length
  bool causal;
  float scale, scale_log2;
  bool dq_store;          // --bug dq-no-accumulate: dQ stored instead of added
};

// Where element (row, col) of one head's dQ lives in dq_acc (`head` = that head's first float,
// (b·H + head)·t_pad·D): a bulk copy moves bytes, not rows, so dq_acc is laid out as the wgmma
// accumulators hold it, and each 64 x 64 block of a head (row block after row block, the column
// blocks of a row block side by side) is one warpgroup's dq registers, as stored to shared memory:
// dq[4j .. 4j + 3] of thread 32w + 4g + t at float 4·(128j + 32w + 4g + t) of the block. That is
// rows 16w + g (first two floats) and 16w + g + 8 (last two), columns 8j + 2t, 8j + 2t + 1
// (sm90.cuh: the accumulator layout).
LAB_HD int64_t dq_acc_index(int64_t head, int row, int col, int d) {
  const int r = row % 64, c = col % 64;
  const int64_t block = int64_t(row / 64) * (d / 64) + col / 64;
  const int thread = 32 * (r / 16) + 4 * (r % 8) + (c % 8) / 2;
  return head + block * DQ_SHARE_FLOATS + 4 * (128 * (c / 8) + thread) + 2 * ((r / 8) % 2) + c % 2;
}

template <int HEAD_DIM>
struct Smem {
  using TL = Tiles<HEAD_DIM>;
  uint32_t base;     // shared-memory address, 1024-byte aligned
  uint8_t* generic;  // the same byte as a generic pointer
  __device__ uint32_t k() const { return base; }
  __device__ uint32_t v() const { return base + TL::OFF_V; }
  __device__ uint32_t q(int stage) const { return base + TL::OFF_Q + stage * 2 * TL::Q_TILE_BYTES; }
  __device__ uint32_t d_o(int stage) const { return q(stage) + TL::Q_TILE_BYTES; }
  __device__ uint32_t ds(int buf) const { return base + TL::OFF_DS + buf * TL::DS_BYTES; }
  __device__ uint8_t* ds_generic(int buf) const { return generic + TL::OFF_DS + buf * TL::DS_BYTES; }
  __device__ uint32_t dq_stage(int wg, int buf) const { return base + TL::dq_stage_offset(wg, buf); }
  __device__ uint8_t* dq_stage_generic(int wg, int buf) const { return generic + TL::dq_stage_offset(wg, buf); }
  __device__ uint32_t rows(int stage) const { return base + TL::OFF_ROWS + stage * TL::ROWS_BYTES; }
  __device__ const float* rows_generic(int stage) const {
    return reinterpret_cast<const float*>(generic + TL::OFF_ROWS + stage * TL::ROWS_BYTES);
  }
  __device__ uint32_t kv_full() const { return base + TL::OFF_BAR; }
  __device__ uint32_t full(int stage) const { return kv_full() + 8 * (1 + stage); }
  __device__ uint32_t empty(int stage) const { return kv_full() + 8 * (1 + TL::STAGES + stage); }
};

// A plain bulk copy (no tensor map): `bytes` (a multiple of 16, both addresses 16-byte aligned)
// from global to shared memory, completing on mbarrier `bar`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void consumer_sync() {  // the 256 consumer threads only (the producer never joins)
  asm volatile("bar.sync %0, %1;\n" ::"n"(DS_BARRIER), "n"(CONSUMER_THREADS) : "memory");
}

// SS wgmma with both operands MN-major (imm-trans-a = imm-trans-b = 1), N = 64:
// D (64 x 64) = A·B (+ D when accumulate). dQ = dS K with A = dS read out of dSᵀ [keys][rows]
// (rows contiguous) and B = K [keys][D] (D contiguous).
template <class T>
__device__ __forceinline__ void wgmma_ss_tt_n64(float (&d)[32], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  const uint32_t scale_d = accumulate ? 1u : 0u;
#define LAB_WGMMA_TT(TY)                                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                    \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY                                         \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
               "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 1, 1;\n}\n"   \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),         \
                 "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),       \
                 "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),       \
                 "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                                            \
               : "l"(a_desc), "l"(b_desc), "r"(scale_d))
  if constexpr (std::is_same_v<T, __half>) LAB_WGMMA_TT("f16");
  else LAB_WGMMA_TT("bf16");
#undef LAB_WGMMA_TT
}

// ---------------------------------------------------------------------------------------------
// One block per (K/V tile of 128 keys, sequence, K/V head): grid = (ceil(T_kv / 128), B·H_kv).
template <class T, int HEAD_DIM, bool WITH_DQ, class Ex>
__global__ void __launch_bounds__(THREADS, 1)
dkdv_kernel(const __grid_constant__ CUtensorMap q_map,   // (D, H, T_q, B), box (64, 1, BLOCK_Q, 1)
            const __grid_constant__ CUtensorMap do_map,  // likewise
            const __grid_constant__ CUtensorMap k_map,   // (D, H_kv, T_kv, B), box (64, 1, 128, 1)
            const __grid_constant__ CUtensorMap v_map,   // likewise
            const Params p) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // compiled for another GPU: the host launches this only on sm_90a
#else
  using TL = Tiles<HEAD_DIM>;
  constexpr int STAGES = TL::STAGES, BLOCK_Q = TL::BLOCK_Q;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
  const Smem<HEAD_DIM> sm{base, smem_raw + (base - raw)};

  const int kv0 = blockIdx.x * BLOCK_KV, bhk = blockIdx.y, b = bhk / p.h_kv, hk = bhk % p.h_kv;
  // The Q tiles that see a key of this block: causal (bottom-right aligned, i + T_kv − T_q >= j)
  // from the first row that sees key kv0; all of them otherwise. Every head of the group. Each
  // role computes them after its setmaxnreg (a value live across it would be spilled).
  struct Work {
    int group, qt_begin, qt_count, items;  // items: ring fills, (query head, Q tile) pairs
  };
  auto work_of = [&]() {
    int t_q = p.t_q;
    asm volatile("" : "+r"(t_q));  // computed here, not hoisted above the setmaxnreg
    const int first_row = p.causal ? lab::imax(0, kv0 - (p.t_kv - t_q)) : 0;
    const int qt_begin = first_row / BLOCK_Q, qt_count = lab::imax(0, lab::ceil_div(t_q, BLOCK_Q) - qt_begin);
    const int group = p.h / p.h_kv;
    return Work{group, qt_begin, qt_count, group * qt_count};
  };

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 1);  // the producer's arrive.expect_tx; the copies complete the bytes
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(sm.full(s), 1);
      mbar_init(sm.empty(s), CONSUMER_THREADS);  // every consumer thread has read the slot (wgmma and LDS)
    }
    fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised before any thread waits on or arrives at them

  if (threadIdx.x / WG_THREADS == 0) {
    // ---- producer
    regs_release<PRODUCER_REGS>();
    const auto [group, qt_begin, qt_count, items] = work_of();
    if (threadIdx.x == 0 && items > 0) {  // no item: nothing loaded (no copy may outlive the block)
      mbar_arrive_expect_tx(sm.kv_full(), 2 * TL::KV_TILE_BYTES);
#pragma unroll
      for (int c = 0; c < TL::COL_BOXES; ++c) {
        tma_load_4d(sm.k() + c * TL::KV_BOX_BYTES, &k_map, c * BOX_COLS, hk, kv0, b, sm.kv_full());
        tma_load_4d(sm.v() + c * TL::KV_BOX_BYTES, &v_map, c * BOX_COLS, hk, kv0, b, sm.kv_full());
      }
      for (int n = 0; n < items; ++n) {
        const int stage = n % STAGES;
        mbar_wait(sm.empty(stage), ((n / STAGES) & 1) ^ 1);  // the consumers released fill n − STAGES
        const int head = hk * group + n / qt_count, q0 = (qt_begin + n % qt_count) * BLOCK_Q;
        mbar_arrive_expect_tx(sm.full(stage), 2 * TL::Q_TILE_BYTES + TL::ROWS_BYTES);
#pragma unroll
        for (int c = 0; c < TL::COL_BOXES; ++c) {
          tma_load_4d(sm.q(stage) + c * TL::Q_BOX_BYTES, &q_map, c * BOX_COLS, head, q0, b, sm.full(stage));
          tma_load_4d(sm.d_o(stage) + c * TL::Q_BOX_BYTES, &do_map, c * BOX_COLS, head, q0, b, sm.full(stage));
        }
        const int64_t row = (int64_t(b) * p.h + head) * p.t_pad + q0;
        bulk_load(sm.rows(stage), p.lse_log2 + row, BLOCK_Q * 4, sm.full(stage));
        bulk_load(sm.rows(stage) + BLOCK_Q * 4, p.d_rows + row, BLOCK_Q * 4, sm.full(stage));
      }
    }
    if constexpr (WITH_DQ) {
      if (threadIdx.x / 32 == DQ_WRITER_WARP) {
        // ---- dQ writer. The whole warp takes part in the named barriers (a warp arrives as a
        // whole); lane 0 issues the bulk ops, and bulk groups are per thread, so it also waits.
        const bool issuer = threadIdx.x % 32 == 0;
        for (int n = 0; n < items; ++n) {
          const int head = hk * group + n / qt_count, qt = qt_begin + n % qt_count;
          const int64_t head_acc = (int64_t(b) * p.h + head) * p.t_pad * HEAD_DIM;
#pragma unroll
          for (int w = 0; w < CONSUMERS; ++w) {
            named_bar_sync(DQ_FULL + w, DQ_SYNC_THREADS);  // warpgroup w's share is in shared memory
            if (issuer) {
              const int row = qt * BLOCK_Q + 64 * TL::dq_row_box(w), col = BOX_COLS * TL::dq_col_box(w);
              float* share = p.dq_acc + dq_acc_index(head_acc, row, col, HEAD_DIM);
              if (p.dq_store) bulk_store(share, sm.dq_stage(w, n & 1), DQ_SHARE_BYTES);  // --bug dq-no-accumulate
              else bulk_reduce_add_f32(share, sm.dq_stage(w, n & 1), DQ_SHARE_BYTES);
              bulk_commit();
            }
          }
          if (n + 1 < items) {
            if constexpr (TL::DQ_IN_DS) {
              // Tile n + 1 writes its dSᵀ over tile n − 1's shares, both of them, from both warpgroups.
              if (issuer) bulk_wait_read<CONSUMERS>();  // tile n − 1's reduces have read (tile n's may still read)
              __syncwarp();
#pragma unroll
              for (int w = 0; w < CONSUMERS; ++w) named_bar_arrive(DQ_EMPTY + w, DQ_SYNC_THREADS);
            } else {  // warpgroup w refills its buffer once this tile's reduce has read it
              static_assert(CONSUMERS == 2, "one wait per share, oldest first");
              if (issuer) bulk_wait_read<1>();
              __syncwarp();
              named_bar_arrive(DQ_EMPTY + 0, DQ_SYNC_THREADS);
              if (issuer) bulk_wait_read<0>();
              __syncwarp();
              named_bar_arrive(DQ_EMPTY + 1, DQ_SYNC_THREADS);
            }
          }
        }
        if (issuer) bulk_wait_read<0>();  // the block's shared memory outlives the last reads
      }
    }
  } else {
    // ---- consumers
    regs_claim<CONSUMER_REGS>();
    const auto [group, qt_begin, qt_count, items] = work_of();
    const int wg = warp_uniform(int(threadIdx.x / WG_THREADS) - 1), tid = threadIdx.x % WG_THREADS;
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wg_k0 = kv0 + wg * WG_KEYS;         // this warpgroup's first key
    const int key_g = wg_k0 + 16 * warp + g;      // this thread's keys: key_g and key_g + 8
    const uint32_t k_rows = sm.k() + uint32_t(wg * WG_KEYS * ROW_BYTES);  // its 64 rows in each box
    const uint32_t v_rows = sm.v() + uint32_t(wg * WG_KEYS * ROW_BYTES);
    // dQ's share of this warpgroup, over all 128 keys (D = 128: columns 64w.., D = 64: rows 64w..).
    const int dq_row_box = TL::dq_row_box(wg), dq_col_box = TL::dq_col_box(wg);

    float dk_acc[TL::ACC_REGS], dv_acc[TL::ACC_REGS];
#pragma unroll
    for (int x = 0; x < TL::ACC_REGS; ++x) dk_acc[x] = dv_acc[x] = 0.f;
    bool written = true;  // false while an exercise is still the stub
    if (items > 0) mbar_wait(sm.kv_full(), 0);  // K and V have landed (phase 0, their only one)

    for (int n = 0; n < items; ++n) {
      const int stage = n % STAGES, head = hk * group + n / qt_count, q0 = (qt_begin + n % qt_count) * BLOCK_Q;
      mbar_wait(sm.full(stage), (n / STAGES) & 1);  // Q, dO and the rows of fill n have landed
      const float* lse_s = sm.rows_generic(stage);  // [BLOCK_Q] LSE·log2 e, then [BLOCK_Q] D
      const float* d_s = lse_s + BLOCK_Q;

      // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ   [64 keys x 64 rows]: walk D in k-steps of 16 columns (32
      // bytes along a box row), then on to the next 64-column box.
      float st[TL::S_REGS], dpt[TL::S_REGS];
      const uint64_t k_desc = desc_k_major_sw128(k_rows), q_desc = desc_k_major_sw128(sm.q(stage));
      const uint64_t v_desc = desc_k_major_sw128(v_rows), do_desc = desc_k_major_sw128(sm.d_o(stage));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        const uint32_t col = uint32_t((kk % 4) * 32), box = uint32_t(kk / 4);
        wgmma_ss<T, BLOCK_Q>(st, desc_advance(k_desc, box * TL::KV_BOX_BYTES + col),
                             desc_advance(q_desc, box * TL::Q_BOX_BYTES + col), kk > 0);
      }
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        const uint32_t col = uint32_t((kk % 4) * 32), box = uint32_t(kk / 4);
        wgmma_ss<T, BLOCK_Q>(dpt, desc_advance(v_desc, box * TL::KV_BOX_BYTES + col),
                             desc_advance(do_desc, box * TL::Q_BOX_BYTES + col), kk > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(st);
      fence_accumulators(dpt);

      // Pᵀ and dSᵀ per element (the exercises), then the weights of dV and dK in their place.
      // Element e of n-block j: key key_g + 8·(e / 2), query row q0 + 8j + 2t + (e % 2).
      // Every element is computed, and a masked one is then set to 0 by a select: the step is
      // straight-line code (FFMA, MUFU.EX2, FADD, FMUL), with no branch per element. Rows past T_q
      // need no mask (P = exp2(−inf) = 0, dO = 0); the causal diagonal and T_kv do, and only the
      // tiles that cross them take the masked copy of the loop.
      const bool whole = lab::tile_visibility(q0, lab::imin(q0 + BLOCK_Q, p.t_q), wg_k0, wg_k0 + WG_KEYS, p.t_q,
                                              p.t_kv, p.causal) == lab::TileVisibility::full;
      // There key = key_g + 8·(e / 2) is visible from row i = q0 + 8j + 2t + (e % 2) when it exists
      // (key < T_kv) and, causal, key − i <= T_kv − T_q (lab::key_visible, written with the
      // thread's constants: diag − 8·(e / 2) + 8j + (e % 2) >= 0, keys_left > 8·(e / 2)).
      const int diag = p.causal ? p.t_kv - p.t_q - key_g + q0 + 2 * t : BLOCK_Q;
      const int keys_left = p.t_kv - key_g;
      auto element_step = [&](auto masked) {
#pragma unroll
        for (int j = 0; j < BLOCK_Q / 8; ++j) {
          const float2 lse2 = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
          const float2 d2 = *reinterpret_cast<const float2*>(d_s + 8 * j + 2 * t);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float pe, dse;
            written &= Ex::p_and_ds(st[4 * j + e], dpt[4 * j + e], (e & 1) ? lse2.y : lse2.x, (e & 1) ? d2.y : d2.x,
                                    p.scale_log2, &pe, &dse);
            if constexpr (decltype(masked)::value) {
              const bool visible = 8 * (e >> 1) - 8 * j - (e & 1) <= diag && 8 * (e >> 1) < keys_left;
              pe = visible ? pe : 0.f;
              dse = visible ? dse : 0.f;
            }
            written &= Ex::weights(pe, dse, &st[4 * j + e], &dpt[4 * j + e]);
          }
        }
      };
      if (whole) element_step(std::false_type{});
      else element_step(std::true_type{});
      // The weights, 16-bit, as the A registers of k-step kk (rows 16kk .. 16kk + 15) = n-blocks
      // 2kk and 2kk + 1 of the accumulator (sm90.cuh: the layouts match).
      uint32_t pa[TL::Q_STEPS][4], dsa[TL::Q_STEPS][4];
#pragma unroll
      for (int kk = 0; kk < TL::Q_STEPS; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          pa[kk][r] = pack2<T>(st[8 * kk + 2 * r], st[8 * kk + 2 * r + 1]);
          dsa[kk][r] = pack2<T>(dpt[8 * kk + 2 * r], dpt[8 * kk + 2 * r + 1]);
        }

      if constexpr (WITH_DQ && TL::DQ_IN_DS) {
        // This tile's dSᵀ, stored below, goes over the shares of tile n − 2 (ds(n % 2) held them):
        // their reduces must have read them (at n = 1 the sync only keeps DQ_FULL's arrivals in
        // turn). Waited for here, with no wgmma in flight (a branch between a wgmma's issue and its
        // wait makes ptxas wait at the branch).
        if (n > 0) named_bar_sync(DQ_EMPTY + wg, DQ_SYNC_THREADS);
      }

      // dV += Pᵀ dO and dK += dSᵀ Q   [64 keys x 64 rows] · [64 rows x D]: dO and Q as MN-major
      // B operands (D contiguous): 16 rows (two 8-row groups, SBO = 1024) per k-step, the D
      // columns in 64-column boxes (LBO = one box).
      const uint64_t do_mn = desc_mn_major_sw128(sm.d_o(stage), TL::Q_BOX_BYTES);
      const uint64_t q_mn = desc_mn_major_sw128(sm.q(stage), TL::Q_BOX_BYTES);
      wgmma_fence();  // pa, dsa written since the last wgmma
#pragma unroll
      for (int kk = 0; kk < TL::Q_STEPS; ++kk) {
        wgmma_rs_mn<T, HEAD_DIM>(dv_acc, pa[kk], desc_advance(do_mn, uint32_t(kk * 16 * ROW_BYTES)));
        wgmma_rs_mn<T, HEAD_DIM>(dk_acc, dsa[kk], desc_advance(q_mn, uint32_t(kk * 16 * ROW_BYTES)));
      }
      wgmma_commit();

      if constexpr (WITH_DQ) {
        // dSᵀ to shared memory, [ROW_BOXES][128 keys][64 rows] in the 128-byte swizzle (chunk c of
        // row r at c ^ (r % 8)): dQ reads it as its A operand, MN-major. Double-buffered by Q tile:
        // a warpgroup may write tile n + 1's while the other still reads tile n's (and, DQ_IN_DS,
        // while the writer's reduces still read tile n's shares out of it).
        const int buf = n & 1;
        uint8_t* ds_smem = sm.ds_generic(buf);
#pragma unroll
        for (int kk = 0; kk < TL::Q_STEPS; ++kk)
#pragma unroll
          for (int r = 0; r < 4; ++r) {  // dsa[kk][r]: key row g + 8·(r % 2), columns 16kk + 8·(r / 2) + 2t, +1
            const int key = wg * WG_KEYS + 16 * warp + g + 8 * (r & 1), chunk = 2 * kk + (r >> 1);
            *reinterpret_cast<uint32_t*>(ds_smem + (chunk / 8) * TL::DS_BOX_BYTES + key * ROW_BYTES +
                                         (((chunk % 8) ^ (key & 7)) * 16) + 4 * t) = dsa[kk][r];
          }
        fence_proxy_async_smem();  // these generic stores -> the wgmma (async proxy) reads below
        consumer_sync();           // both warpgroups' dSᵀ are in shared memory (dV, dK run meanwhile)

        // dQ (this warpgroup's share) = dS K   [64 rows x 128 keys] · [128 keys x 64 columns],
        // queued behind dV and dK at once: the Tensor Cores go on from one to the other while this
        // warpgroup waits for the first batch only to release the slot.
        float dq[32];
        const uint64_t ds_desc = desc_mn_major_sw128(sm.ds(buf) + dq_row_box * TL::DS_BOX_BYTES, TL::DS_BOX_BYTES);
        const uint64_t k_mn = desc_mn_major_sw128(sm.k() + dq_col_box * TL::KV_BOX_BYTES, TL::KV_BOX_BYTES);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BLOCK_KV / 16; ++kk) {
          const uint32_t key_off = uint32_t(16 * kk * ROW_BYTES);
          wgmma_ss_tt_n64<T>(dq, desc_advance(ds_desc, key_off), desc_advance(k_mn, key_off), kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>();  // dV and dK are done (dQ may still run): the slot and pa, dsa may be reused
        fence_accumulators(dv_acc);
        fence_accumulators(dk_acc);
#pragma unroll
        for (int kk = 0; kk < TL::Q_STEPS; ++kk) {
          fence_registers(pa[kk]);
          fence_registers(dsa[kk]);
        }
        mbar_arrive(sm.empty(stage));  // dQ reads dSᵀ and K only: the producer may refill the slot
        wgmma_wait<0>();
        fence_accumulators(dq);

        // The share to shared memory in dq_acc's order (dq_acc_index): dq[4j .. 4j + 3] of thread
        // tid at float 4·(128j + tid), so each warp's 16-byte stores fill 512 contiguous bytes.
        // DQ_IN_DS: into dSᵀ box dq_row_box, whose one reader, this warpgroup's dQ wgmma, has
        // completed (wgmma_wait<0>: its reads are done and ordered before these generic stores).
        if constexpr (!TL::DQ_IN_DS) {
          if (n > 0) named_bar_sync(DQ_EMPTY + wg, DQ_SYNC_THREADS);  // the writer has read share n − 1
        }
        float4* stage_f4 = reinterpret_cast<float4*>(sm.dq_stage_generic(wg, buf));
#pragma unroll
        for (int j = 0; j < 8; ++j)
          stage_f4[128 * j + tid] = make_float4(dq[4 * j], dq[4 * j + 1], dq[4 * j + 2], dq[4 * j + 3]);
        fence_proxy_async_smem();  // these generic stores -> the bulk reduce's (async proxy) reads
        named_bar_arrive(DQ_FULL + wg, DQ_SYNC_THREADS);
      } else {
        wgmma_wait<0>();  // dV and dK are done: the slot and pa, dsa may be reused
        fence_accumulators(dv_acc);
        fence_accumulators(dk_acc);
#pragma unroll
        for (int kk = 0; kk < TL::Q_STEPS; ++kk) {
          fence_registers(pa[kk]);
          fence_registers(dsa[kk]);
        }
        mbar_arrive(sm.empty(stage));
      }
    }

    if (!written) return;
    // dK = scale·(dSᵀ Q), dV = Pᵀ dO: rows key_g, key_g + 8 (those < T_kv), columns 8j + 2t, +1.
    T* dk = static_cast<T*>(p.dk);
    T* dv = static_cast<T*>(p.dv);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int key = key_g + 8 * r;
      if (key >= p.t_kv) continue;
      const int64_t at = ((int64_t(b) * p.t_kv + key) * p.h_kv + hk) * HEAD_DIM;
#pragma unroll
      for (int j = 0; j < HEAD_DIM / 8; ++j) {
        const int c = 8 * j + 2 * t;
        *reinterpret_cast<Vec2<T>*>(dk + at + c) = from_float2<T>(dk_acc[4 * j + 2 * r] * p.scale, dk_acc[4 * j + 2 * r + 1] * p.scale);
        *reinterpret_cast<Vec2<T>*>(dv + at + c) = from_float2<T>(dv_acc[4 * j + 2 * r], dv_acc[4 * j + 2 * r + 1]);
      }
    }
  }
#endif
}

// A tensor map over a [B, rows, heads, D] 16-bit tensor: dims (D, heads, rows, B), box (64, 1,
// box_rows, 1), 128-byte swizzle; boxes hanging past `rows` read zeros.
inline CUtensorMap make_map(bool f16, const void* base, int batch, int rows, int heads, int d, int box_rows) {
  CUtensorMap map;
  const uint64_t eb = 2;
  const uint64_t dims[4] = {uint64_t(d), uint64_t(heads), uint64_t(rows), uint64_t(batch)};
  const uint64_t strides[3] = {d * eb, uint64_t(heads) * d * eb, uint64_t(rows) * heads * d * eb};
  const uint32_t box[4] = {uint32_t(BOX_COLS), 1u, uint32_t(box_rows), 1u};
  const std::string err = encode_tensor_map(&map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                            4, base, dims, strides, box);
  if (!err.empty()) lab::cuda_fail(cudaErrorInvalidValue, err.c_str(), __FILE__, __LINE__);  // the CUDA-error exit
  return map;
}

}  // namespace lab::wsbwd
