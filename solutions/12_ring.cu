// 12 ring attention (§12.10.5): one sequence too long for one GPU, sharded along T over N ranks.
//
// What this step adds: Q, K and V are cut along the sequence into N shards, one per rank (a GPU).
// Q stays where it is; the K/V blocks travel around a ring. At step s = 0 .. N-1 rank r holds the
// K/V block that started on rank (r - s) mod N; it computes the attention of its Q shard against
// that block alone (a partial O, normalised, and its LSE, in fp32), folds it into its running
// (O, LSE) with the log-sum-exp merge (05's split-KV merge: LSE = log(e^LSE_a + e^LSE_b), O =
// e^(LSE_a - LSE)·O_a + e^(LSE_b - LSE)·O_b), then passes the block to rank r + 1 and receives the
// next from rank r - 1. After N steps every Q row has seen every key exactly once, and each rank
// only ever held 1/N of K/V (plus the block in flight).
//   - The pass overlaps the compute: receive buffers are doubled, so the block of step s + 1 is in
//     flight (on a comm stream) while step s computes, ordered by events: a receive may overwrite
//     a slot only after the compute that read it (step s - 1) is done.
//   - Causal: a query at global position i sees keys at global positions j <= i, whatever shard
//     they sit in, so the mask of a (Q shard, K/V block) pair needs GLOBAL positions. A pair whose
//     keys all lie after its queries is skipped on the host (nothing is launched).
//   - Layouts (--layout): contiguous gives rank r rows [r·T/N, (r+1)·T/N): under causal, rank 0's
//     queries see one block and rank N-1's see N: the ring waits for the last rank at every
//     step. zigzag cuts T into 2N chunks and gives rank r chunks r and 2N-1-r (an early and a late
//     one): every rank does the same causal work (the figure of ch12/12_ring.md).
//   - Transports (--transport): local puts every rank's buffers on one GPU and passes blocks with
//     cudaMemcpyAsync on a comm stream (the ranks' compute runs one after another: a model of the
//     protocol, not a speed-up); nccl drives one GPU per rank from this one process (ncclCommInitAll,
//     ncclSend/ncclRecv in a group per step, a comm stream per GPU), --ranks = the GPU count.
// The partial kernel is the lab's fastest forward for the GPU, with two changes: positions come
// from the shard map, and the epilogue merges into the running state instead of writing O.
//   ring       on an H100/H200, section 08's warp-specialised kernel (TMA, wgmma, ping-pong)
//              with this section's rules and epilogue (section 08's protocol written: it comes
//              from 08's file); elsewhere pair_kernel below. metrics.kernel says which.
//   ring-mma   pair_kernel everywhere: 04's mma.sync forward (split-Q warps, 2-stage cp.async K/V
//              ring, swizzled shared memory), the kernel of your mma-online-softmax exercise.
// Exercises (ch12/12_ring.md; hints: ch12/hints/12_ring.md): the shard map and the ring schedule
// (EXERCISE shard-map) and the merge of a partial into the running state (EXERCISE ring-merge).
// The kernels, the scatter/gather and the CPU model (--cpu) all call them.
// --bug no-merge-rescale adds the partials without their e^LSE weights; --bug local-causal masks
// each pair with shard-local positions. Both are given code, outside the exercises.
// Run: scripts/lab run 12 -- --causal --layout zigzag                       (your stub)
//      build/bin/12_ring --ranks 4 --layout zigzag --causal --t 8192 --h 16 --d 128 --dtype bf16
//      build/bin/12_ring --transport nccl --ranks 8 --layout zigzag --causal --t 65536   (8 GPUs)
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"   // 16-bit helpers, swizzle, cp.async, ldmatrix, mma.sync wrappers
#include "hopper/ws_forward.cuh"  // section 08's Hopper kernel, run with this section's rules (variant ring)

// Section 08's ring protocol, as written in section 08's file beside this one (yours, in labs/):
// the Hopper partial runs on it. Without that file, or until its ring_slot() is written, `ring`
// runs the mma partial and says so.
#if __has_include("08_tma_skeleton.cu")
#define LAB_RING_PROTOCOL_ONLY
#include "08_tma_skeleton.cu"
#undef LAB_RING_PROTOCOL_ONLY
#define LAB_HAVE_RING_PROTOCOL 1
#else
#define LAB_HAVE_RING_PROTOCOL 0
#endif

#ifdef LAB_HAVE_NCCL
#include <nccl.h>
#endif

using namespace lab::sm80;

enum class Layout : int { contiguous = 0, zigzag = 1 };

// ---------------------------------------------------------------------------------------------
// The shard map and the ring schedule. T rows are split over `ranks` ranks, T/ranks rows each
// (the harness refuses a T the layout cannot split evenly).
//   shard_row(local, rank, ranks, t, layout): the global row (0 .. T-1) of row `local` of rank
//     `rank`'s shard (Q and K/V shards are cut alike). Local rows keep the global order.
//   block_at(rank, step, ranks): which rank's K/V block rank `rank` holds at step `step`
//     (step 0: its own; each step every rank passes its block to rank + 1).
// BEGIN EXERCISE shard-map: global row of a shard's local row (contiguous, zigzag); the block in hand.
//   contiguous: rank r holds rows [r·T/N, (r+1)·T/N). zigzag: T is cut into 2N chunks of
//   T/(2N) rows; rank r holds chunk r, then chunk 2N-1-r. Worked example: ch12/12_ring.md.
//   The stubs return -1: no row is scattered or gathered, and every pair is skipped.
// STUB: LAB_HD int shard_row(int local, int rank, int ranks, int t, Layout layout) {
// STUB:   (void)local; (void)rank; (void)ranks; (void)t; (void)layout;
// STUB:   return -1;
// STUB: }
// STUB: LAB_HD int block_at(int rank, int step, int ranks) {
// STUB:   (void)rank; (void)step; (void)ranks;
// STUB:   return -1;
// STUB: }
LAB_HD int shard_row(int local, int rank, int ranks, int t, Layout layout) {
  if (layout == Layout::contiguous) return rank * (t / ranks) + local;
  const int chunk = t / (2 * ranks);
  return local < chunk ? rank * chunk + local : (2 * ranks - 1 - rank) * chunk + (local - chunk);
}
LAB_HD int block_at(int rank, int step, int ranks) { return ((rank - step) % ranks + ranks) % ranks; }
// END EXERCISE

// The merge of a partial state into a row's running state. Both are (normalised O, natural-log
// LSE); an empty state (no key seen yet, or a pair whose keys are all masked for this row) has
// LSE = -inf and O = 0 and must weigh exactly 0, never produce a NaN, even when both are empty.
// The merged row is O = w_run·O_run + w_part·O_part with LSE = merged.lse.
struct RowMerge {
  float w_run, w_part, lse;
};
// BEGIN EXERCISE ring-merge: merge_rows(lse_run, lse_part), running LSE first: the weights and new
//   LSE that merge (O_part, lse_part) into the running (O_run, lse_run).
//   Subtract the larger LSE before exp (a softmax over two "super-keys"); if both are -inf, keep
//   the running state as it is. Formulas: ch12/hints/12_ring.md.
//   The stub's NaN weights leave NaN in every row the ring touches.
// STUB: LAB_HD RowMerge merge_rows(float lse_run, float lse_part) {
// STUB:   (void)lse_run; (void)lse_part;
// STUB:   return {NAN, NAN, NAN};
// STUB: }
LAB_HD RowMerge merge_rows(float lse_run, float lse_part) {
  const float hi = fmaxf(lse_run, lse_part);
  if (hi == -INFINITY) return {1.f, 0.f, -INFINITY};  // both empty: never -inf - -inf
  const float a = expf(lse_run - hi), b = expf(lse_part - hi);  // one of them is 1
  const float sum = a + b;
  return {a / sum, b / sum, hi + logf(sum)};
}
// END EXERCISE

// --bug no-merge-rescale: the partials added as they come, O_run + O_part, no e^LSE weights (the
// LSE itself still merged). Given code: it runs on a stub as on the solution.
LAB_HD RowMerge merge_of(float lse_run, float lse_part, bool no_rescale_bug) {
  const RowMerge m = merge_rows(lse_run, lse_part);
  return no_rescale_bug ? RowMerge{1.f, 1.f, m.lse} : m;
}

// Where a row of a (Q shard, K/V block) pair sits in the sequence: its global position from the
// shard map, or under --bug local-causal its row within the shard (the pitfall: every pair then
// looks like a diagonal block).
struct PairMap {
  int ranks, t;
  Layout layout;
  int q_rank, kv_rank;
  bool local_positions;  // --bug local-causal
  LAB_HD int q_pos(int i) const { return local_positions ? i : shard_row(i, q_rank, ranks, t, layout); }
  LAB_HD int k_pos(int j) const { return local_positions ? j : shard_row(j, kv_rank, ranks, t, layout); }
};

// Tiles of the partial kernel (04's mma tiles).
constexpr int NUM_WARPS = 4;
constexpr int THREADS = NUM_WARPS * 32;
constexpr int ROWS_PER_WARP = 16;                   // one m16 tile of query rows per warp
constexpr int BLOCK_Q = NUM_WARPS * ROWS_PER_WARP;  // 64
constexpr int BLOCK_KV = 64;
constexpr int STAGES = 2;  // K/V tile j computes while tile j + 1 loads

template <int HEAD_DIM>
struct Tiles {
  static constexpr int CHUNKS = HEAD_DIM / 8;     // 16-byte chunks per row
  static constexpr int D_STEPS = HEAD_DIM / 16;   // k-steps of S = Q Kᵀ
  static constexpr int KV_STEPS = BLOCK_KV / 16;  // k-steps of O = P V
  static constexpr int S_BLOCKS = BLOCK_KV / 8;   // n-blocks of S
  static constexpr int O_BLOCKS = HEAD_DIM / 8;   // n-blocks of O
  static constexpr int ROW_BYTES = HEAD_DIM * 2;
  static constexpr int TILE_BYTES = BLOCK_KV * ROW_BYTES;
  static constexpr int SMEM_BYTES = STAGES * 2 * TILE_BYTES;  // [STAGES][K, V][BLOCK_KV][D]
};
static_assert(Tiles<64>::SMEM_BYTES == 32768 && Tiles<128>::SMEM_BYTES == 65536, "32 / 64 KB of shared memory");
static_assert(BLOCK_Q <= BLOCK_KV, "the Q tile is staged in a K slot");
static_assert((THREADS / Tiles<128>::CHUNKS) % 8 == 0 && (THREADS / Tiles<64>::CHUNKS) % 8 == 0,
              "a thread's rows differ by multiples of 8: one swizzled chunk for all of them");

// How much of the tile (Q rows [q0, q1) x keys [k0, k1)) attends, from positions alone. The map
// keeps the order of rows within a shard, so the first and last rows decide (as
// lab::tile_visibility does for one sequence).
LAB_HD lab::TileVisibility pair_tile(const PairMap& m, bool causal, int q0, int q1, int k0, int k1) {
  if (!causal) return lab::TileVisibility::full;
  if (m.k_pos(k0) > m.q_pos(q1 - 1)) return lab::TileVisibility::none;
  return m.k_pos(k1 - 1) <= m.q_pos(q0) ? lab::TileVisibility::full : lab::TileVisibility::partial;
}

// The epilogue of both partial kernels: a thread's rows row_g and row_g + 8 of a pair's partial,
// (O / l, LSE), merged into the running state. o_acc[4j + 2r + c] is row row_g + 8r, column
// 8j + 2t + c: the C layout of mma.sync's n-blocks and of wgmma's accumulator alike. m is a row's
// max of the raw scores, l this thread's part of its sum. The 4 lanes of a quad share a row: all
// read its running LSE before lane t == 0 writes the new one.
template <int HEAD_DIM>
__device__ __forceinline__ void merge_into_running(const float (&o_acc)[HEAD_DIM / 2], const float (&m)[2],
                                                   const float (&l)[2], float scale, bool no_rescale_bug,
                                                   float* run_o, float* run_lse, int b, int head, int heads,
                                                   int t_local, int row_g, int t) {
  const int64_t bh = int64_t(b) * heads + head;
  RowMerge w[2];
  float inv_l[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float row_sum = l[r];
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
    const int i = row_g + 8 * r;
    const float lse_part = row_sum > 0.f ? m[r] * scale + logf(row_sum) : -INFINITY;
    const float lse_run = i < t_local ? run_lse[bh * t_local + i] : -INFINITY;
    w[r] = merge_of(lse_run, lse_part, no_rescale_bug);
    inv_l[r] = row_sum > 0.f ? 1.f / row_sum : 0.f;
  }
  __syncwarp();  // every lane has read its rows' running LSE
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row_g + 8 * r;
    if (i >= t_local) continue;
    float* o_row = run_o + ((int64_t(b) * t_local + i) * heads + head) * HEAD_DIM;
#pragma unroll
    for (int j = 0; j < HEAD_DIM / 8; ++j) {
      float2* at = reinterpret_cast<float2*>(o_row + 8 * j + 2 * t);
      const float2 run = *at;
      *at = make_float2(w[r].w_run * run.x + w[r].w_part * o_acc[4 * j + 2 * r] * inv_l[r],
                        w[r].w_run * run.y + w[r].w_part * o_acc[4 * j + 2 * r + 1] * inv_l[r]);
    }
    if (t == 0) run_lse[bh * t_local + i] = w[r].lse;
  }
}

struct PairArgs {
  const void* q;   // [B, T_local, H, D]     this rank's Q shard
  const void* k;   // [B, T_local, H_kv, D]  the K/V block in hand
  const void* v;   // [B, T_local, H_kv, D]
  float* run_o;    // [B, T_local, H, D] fp32, normalised running O
  float* run_lse;  // [B, H, T_local]   running LSE (natural log)
  int t_local, h, h_kv;
  PairMap map;
  bool causal, no_rescale_bug;
  float scale, scale_log2;
};

// One block = 64 query rows of one (sequence, head) of a rank's shard against the block in hand.
// grid = (ceil(T_local / 64), B·H).
template <class T, int HEAD_DIM>
__global__ void __launch_bounds__(THREADS) pair_kernel(const PairArgs a) {
  using TL = Tiles<HEAD_DIM>;
  extern __shared__ __align__(128) unsigned char smem[];  // [STAGES][K, V][BLOCK_KV][D], swizzled
  const uint32_t smem_base = smem_addr(smem);
  auto k_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 0) * TL::TILE_BYTES); };
  auto v_tile = [&](int stage) { return smem_base + uint32_t((2 * stage + 1) * TL::TILE_BYTES); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int q0 = blockIdx.x * BLOCK_Q, q1 = lab::imin(q0 + BLOCK_Q, a.t_local);
  const int bh = blockIdx.y, b = bh / a.h, head = bh % a.h, kv_head = lab::kv_head_of(head, a.h, a.h_kv);
  const int64_t q_stride = int64_t(a.h) * HEAD_DIM, kv_stride = int64_t(a.h_kv) * HEAD_DIM;
  const T* q_head = static_cast<const T*>(a.q) + (int64_t(b) * a.t_local * a.h + head) * HEAD_DIM;
  const T* k_head = static_cast<const T*>(a.k) + (int64_t(b) * a.t_local * a.h_kv + kv_head) * HEAD_DIM;
  const T* v_head = static_cast<const T*>(a.v) + (int64_t(b) * a.t_local * a.h_kv + kv_head) * HEAD_DIM;

  // The key tiles this Q tile sees: positions grow with the local row, so they are a prefix.
  int tile_end = 0;
  while (tile_end * BLOCK_KV < a.t_local &&
         pair_tile(a.map, a.causal, q0, q1, tile_end * BLOCK_KV, lab::imin((tile_end + 1) * BLOCK_KV, a.t_local)) !=
             lab::TileVisibility::none)
    ++tile_end;
  if (tile_end == 0) return;  // no key of this block is visible to these rows: the running state stays

  auto load_kv = [&](int stage, int tile) {
    const int kv0 = tile * BLOCK_KV;
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(k_tile(stage), k_head + kv0 * kv_stride, kv_stride, a.t_local - kv0);
    load_tile_swizzled<BLOCK_KV, TL::CHUNKS, THREADS>(v_tile(stage), v_head + kv0 * kv_stride, kv_stride, a.t_local - kv0);
  };
  // Q through stage 1's K slot (free until tile 1 is issued), K/V tile 0 into stage 0.
  load_tile_swizzled<BLOCK_Q, TL::CHUNKS, THREADS>(k_tile(1), q_head + q0 * q_stride, q_stride, a.t_local - q0);
  load_kv(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // Q and K/V tile 0, written by every thread, are visible to all
  auto q_addr = [&](int l) { return swizzle<TL::CHUNKS>(warp * ROWS_PER_WARP + (l & 15), l >> 4); };
  const uint32_t k_lane = swizzle<TL::CHUNKS>((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  const uint32_t v_lane = swizzle<TL::CHUNKS>(lane & 15, lane >> 4);
  constexpr uint32_t ROWS16 = 16 * TL::ROW_BYTES;
  uint32_t q_frag[TL::D_STEPS][4];
#pragma unroll
  for (int kk = 0; kk < TL::D_STEPS; ++kk) ldmatrix_x4(q_frag[kk], k_tile(1) + (q_addr(lane) ^ (32u * kk)));

  float o_acc[TL::O_BLOCKS][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const int row_g = q0 + warp * ROWS_PER_WARP + g;  // this lane's rows: row_g and row_g + 8
  const int warp_q0 = lab::imin(q0 + warp * ROWS_PER_WARP, a.t_local - 1);
  const int q_pos[2] = {a.map.q_pos(lab::imin(row_g, a.t_local - 1)), a.map.q_pos(lab::imin(row_g + 8, a.t_local - 1))};

  int stage = 0;
  for (int tile = 0; tile < tile_end; ++tile, stage ^= 1) {
    cp_async_wait<0>();  // this thread's copies of `tile` have landed ...
    __syncthreads();     // ... and everyone's; every warp is done with the other stage (tile - 1, or Q)
    if (tile + 1 < tile_end) load_kv(stage ^ 1, tile + 1);
    cp_async_commit();

    float s[TL::S_BLOCKS][4] = {};  // S = Q Kᵀ [16 rows x 64 keys] per warp
#pragma unroll
    for (int nb2 = 0; nb2 < TL::S_BLOCKS / 2; ++nb2)
#pragma unroll
      for (int kk = 0; kk < TL::D_STEPS; ++kk) {
        uint32_t kf[4];
        ldmatrix_x4(kf, k_tile(stage) + nb2 * ROWS16 + (k_lane ^ (32u * kk)));
        mma_16816<T>(s[2 * nb2], q_frag[kk], kf[0], kf[1]);
        mma_16816<T>(s[2 * nb2 + 1], q_frag[kk], kf[2], kf[3]);
      }
    // Mask: keys past the block's end, and (causal) keys later in the sequence than the query.
    // Only tiles that reach past what the warp's first row sees need it.
    const int kv0 = tile * BLOCK_KV, kv1 = lab::imin(kv0 + BLOCK_KV, a.t_local);
    if (kv0 + BLOCK_KV > a.t_local ||
        pair_tile(a.map, a.causal, warp_q0, warp_q0 + 1, kv0, kv1) != lab::TileVisibility::full) {
#pragma unroll
      for (int nb = 0; nb < TL::S_BLOCKS; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = kv0 + 8 * nb + 2 * t + (e & 1);
          if (j >= a.t_local || (a.causal && a.map.k_pos(j) > q_pos[e >> 1])) s[nb][e] = -INFINITY;
        }
    }
    // BEGIN EXERCISE mma-online-softmax: the online softmax of rows g and g+8 on the fragment, as
    //   you wrote it in 04 (EXERCISE mma-online-softmax there: this kernel is 04's, with global
    //   positions). A row can meet a block in which it attends no key yet, so its max can be -inf.
    // STUB: (void)m; (void)l;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int nb = 0; nb < TL::S_BLOCKS; ++nb) tile_max = fmaxf(tile_max, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float m_new = fmaxf(m[r], tile_max);
      const float max_scaled = m_new == -INFINITY ? 0.f : m_new * a.scale_log2;
      const float alpha = fast_exp2(fmaf(m[r], a.scale_log2, -max_scaled));
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
          s[nb][e] = fast_exp2(fmaf(s[nb][e], a.scale_log2, -max_scaled));
          l[r] += s[nb][e];
        }
    }
    // END EXERCISE
    // O += P V, P from the S registers (the C layout of two n-blocks is one A fragment).
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

  // Epilogue: this pair's partial merged into the running state.
  merge_into_running<HEAD_DIM>(reinterpret_cast<const float(&)[HEAD_DIM / 2]>(o_acc), m, l, a.scale, a.no_rescale_bug,
                               a.run_o, a.run_lse, b, head, a.h, a.t_local, row_g, t);
}

// ---------------------------------------------------------------------------------------------
// The partial on Hopper (variant ring on an H100/H200): section 08's warp-specialised forward
// (common/hopper/ws_forward.cuh in its ws-pingpong schedule: TMA into an mbarrier ring, wgmma, two
// consumer warpgroups taking turns at the tensor core, three at D = 64) run with this section's
// rules, as section 07 runs its window on it. The rules say which keys of the block in hand a row
// sees (global positions, through the shard map); the tile's epilogue is pair_kernel's merge. The
// ring protocol (slots, phases, producer loop) is section 08's exercise and comes from its file.
namespace ws = lab::ws;

// The kernel's parameters: ws::Params over the pair (t_q = t_kv = T_local; its o and lse unused)
// and the pair's own fields.
struct RingParams : ws::Params {
  PairMap map;
  float* run_o;    // [B, T_local, H, D] fp32, normalised running O
  float* run_lse;  // [B, H, T_local]   running LSE (natural log)
  int no_rescale_bug;
};

// How many keys of the block in hand local row `row` sees. Positions grow with the local row in
// both layouts (and under --bug local-causal), so the keys a row sees are a prefix [0, n) of the
// block: n is found by bisection on the map, log2(T_local) calls of shard_row.
LAB_HD int keys_seen(const PairMap& m, bool causal, int row, int t_local) {
  if (!causal) return t_local;
  const int pos = m.q_pos(lab::imin(row, t_local - 1));
  int lo = 0, hi = t_local;  // k_pos(j) <= pos for every j < lo, > pos for every j >= hi
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (m.k_pos(mid) <= pos) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

#if LAB_HAVE_RING_PROTOCOL
template <class T, int HEAD_DIM, int KV_TILE>
struct RingTile;
struct RingRules : ring::Protocol<ring::KvSource::contiguous> {
  using KernelParams = RingParams;
  template <class T, int HEAD_DIM, int KV_TILE>
  using Tile = RingTile<T, HEAD_DIM, KV_TILE>;
  LAB_HD static const RingParams& own(const ws::Params& p) { return static_cast<const RingParams&>(p); }
  LAB_HD static lab::KeyRange visible_keys(int row, const ws::Params& p) {
    return {0, keys_seen(own(p).map, p.causal, row, p.t_kv)};
  }
  // The tiles a block or a warpgroup walks: up to the last key its last row sees (none: a job with
  // no tile, whose epilogue merges an empty partial, a no-op).
  LAB_HD static ws::TileSpan tile_span(int q_begin, int q_end, const ws::Params& p, int block_kv) {
    if (q_begin >= p.t_q) return {0, 0};  // a warpgroup whose rows are all past T_local
    return {0, lab::ceil_div(visible_keys(lab::imin(q_end, p.t_q) - 1, p).end, block_kv)};
  }
  // Key kv0 + 8j + 2t + (e & 1) of row row_g (e < 2) or row_g + 8 is masked past that row's prefix.
  // A tile within what the warp's first row sees (warp_keys_end) is seen whole by all its rows.
  template <int S_REGS>
  __device__ __forceinline__ static void mask_tile(float (&s)[S_REGS], const ws::Params& p, int kv0, int row_g, int t,
                                                   int /*warp_keys_begin*/, int warp_keys_end) {
    constexpr int block_kv = 2 * S_REGS;
    if (kv0 + block_kv <= warp_keys_end) return;
    const int seen[2] = {visible_keys(row_g, p).end, visible_keys(row_g + 8, p).end};
#pragma unroll
    for (int j = 0; j < block_kv / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (kv0 + 8 * j + 2 * t + (e & 1) >= seen[e >> 1]) s[4 * j + e] = -INFINITY;
  }
  LAB_HD static bool begin_block(const ws::Params&, ws::TileSpan) { return true; }
};

// Section 08's consumer tile with pair_kernel's epilogue (merge_into_running) instead of O's store.
template <class T, int HEAD_DIM, int KV_TILE>
struct RingTile : ws::ConsumerTile<T, HEAD_DIM, RingRules, KV_TILE> {
  __device__ __forceinline__ void finalize(const ws::Params& p, int b, int head, int row_g, int t) {
    const RingParams& a = RingRules::own(p);
    merge_into_running<HEAD_DIM>(this->o_acc, this->m, this->l, p.scale, a.no_rescale_bug != 0, a.run_o, a.run_lse, b,
                                 head, p.h, p.t_q, row_g, t);
  }
};
#endif

// The Hopper partial's TMA maps: Q [B, rows, H, D] in boxes of the block's query rows; K and V
// [B, rows, H_kv, D] in boxes of a K/V tile.
struct PartialMaps {
  CUtensorMap q, k, v;
};

// The Hopper partial's shape: the ws-pingpong block of section 08 at this D.
template <int HEAD_DIM>
struct HopperTiles {
  static constexpr int CONS = ws::pingpong_consumers(HEAD_DIM);  // consumer warpgroups: 3 at D = 64, else 2
  static constexpr int BLOCK_Q = CONS * ws::WG_ROWS;             // 192 or 128 query rows
  static constexpr int BLOCK_KV = ws::BLOCK_KV;                  // 128 keys
  static constexpr int THREADS = (1 + CONS) * ws::WG_THREADS;
  static constexpr int SMEM_BYTES = ws::Tiles<HEAD_DIM>::SMEM_BYTES;
};

// ---------------------------------------------------------------------------------------------
// Scatter and gather: the whole-sequence tensors <-> a rank's shard, row by row through the shard
// map. One thread moves 16 bytes; `row_elems` = heads·D elements of one position.
template <class T>
__global__ void scatter_rows(const T* __restrict__ full,  // [B, T, heads, D]
                             T* __restrict__ shard,       // [B, T_local, heads, D]
                             int t, int t_local, int64_t row_elems, int rank, int ranks, Layout layout, int64_t n16) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= n16) return;
  constexpr int PER16 = 16 / sizeof(T);
  const int64_t e = x * PER16, row = e / row_elems, c = e % row_elems;
  const int b = int(row / t_local), i = int(row % t_local);
  const int gi = shard_row(i, rank, ranks, t, layout);
  if (gi < 0 || gi >= t) return;
  *reinterpret_cast<uint4*>(shard + e) = *reinterpret_cast<const uint4*>(full + (int64_t(b) * t + gi) * row_elems + c);
}

// The running state of a rank (fp32, [B, T_local, H, D] and [B, H, T_local]) -> O [B, T, H, D] in T
// and LSE [B, H, T].
template <class T>
__global__ void gather_rows(const float* __restrict__ run_o, const float* __restrict__ run_lse, T* __restrict__ o,
                            float* __restrict__ lse, int t, int t_local, int h, int d, int rank, int ranks, Layout layout,
                            int64_t n2) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= n2) return;
  const int64_t e = 2 * x, row_elems = int64_t(h) * d, row = e / row_elems, c = e % row_elems;
  const int b = int(row / t_local), i = int(row % t_local);
  const int gi = shard_row(i, rank, ranks, t, layout);
  if (gi < 0 || gi >= t) return;
  const float2 v = *reinterpret_cast<const float2*>(run_o + e);
  *reinterpret_cast<Vec2<T>*>(o + (int64_t(b) * t + gi) * row_elems + c) = from_float2<T>(v.x, v.y);
  if (c % d == 0) {
    const int head = int(c / d);
    lse[(int64_t(b) * h + head) * t + gi] = run_lse[(int64_t(b) * h + head) * t_local + i];
  }
}

__global__ void init_running(float* __restrict__ run_o, float* __restrict__ run_lse, int64_t o_elems, int64_t lse_elems) {
  const int64_t x = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x < o_elems) run_o[x] = 0.f;
  if (x < lse_elems) run_lse[x] = -INFINITY;
}

// ---------------------------------------------------------------------------------------------
// Host side: the ring's options, its validation and its work model.
struct RingOptions {
  int ranks = 4;
  Layout layout = Layout::contiguous;
  std::string transport = "local";
};
RingOptions g_ring;  // this section's own options, read in main() before the harness's

const char* layout_name(Layout l) { return l == Layout::zigzag ? "zigzag" : "contiguous"; }
int layout_unit(const RingOptions& r) { return r.layout == Layout::zigzag ? 2 * r.ranks : r.ranks; }

// The causal work of each rank, in 64x64 tiles, summed over the ring's steps (the kernel's skips),
// for one (sequence, head); and the pairs the host skips. Uses the exercise's map and schedule.
struct WorkModel {
  std::vector<int64_t> tiles;  // [rank]
  int pairs_skipped = 0;
};
WorkModel work_model(const lab::Problem& p, const RingOptions& ro, bool local_bug) {
  WorkModel w;
  w.tiles.assign(size_t(ro.ranks), 0);
  const int tl = p.t_q / ro.ranks;
  for (int r = 0; r < ro.ranks; ++r)
    for (int s = 0; s < ro.ranks; ++s) {
      const int blk = block_at(r, s, ro.ranks);
      if (blk < 0) continue;
      const PairMap m{ro.ranks, p.t_q, ro.layout, r, blk, local_bug};
      if (pair_tile(m, p.causal, 0, tl, 0, tl) == lab::TileVisibility::none) { ++w.pairs_skipped; continue; }
      for (int q0 = 0; q0 < tl; q0 += BLOCK_Q)
        for (int k0 = 0; k0 < tl; k0 += BLOCK_KV)
          w.tiles[size_t(r)] += pair_tile(m, p.causal, q0, lab::imin(q0 + BLOCK_Q, tl), k0, lab::imin(k0 + BLOCK_KV, tl)) !=
                                lab::TileVisibility::none;
    }
  return w;
}

void add_balance(nlohmann::json& metrics, const WorkModel& w) {
  int64_t mx = 0, sum = 0;
  for (int64_t x : w.tiles) { mx = std::max(mx, x); sum += x; }
  const double mean = double(sum) / double(w.tiles.size());
  metrics["tiles_per_rank"] = w.tiles;
  metrics["work_max_over_mean"] = mean > 0 ? double(mx) / mean : 0.0;
  metrics["pairs_skipped"] = w.pairs_skipped;
}

std::string balance_line(const WorkModel& w) {
  int64_t mx = 0, sum = 0;
  std::string list;
  for (int64_t x : w.tiles) { mx = std::max(mx, x); sum += x; list += (list.empty() ? "" : " ") + std::to_string(x); }
  const double mean = double(sum) / double(w.tiles.size());
  char buf[64];
  if (mean > 0) std::snprintf(buf, sizeof buf, " (max/mean %.2f)", double(mx) / mean);
  else std::snprintf(buf, sizeof buf, " (no tiles: the shard map still the stub?)");
  return "tiles per rank " + list + buf;
}

// ---------------------------------------------------------------------------------------------
// The GPU ring. A rank owns its Q shard, two K/V slots (the block in hand and the one arriving),
// its running (O, LSE) and its events; its device is 0 (local) or its own GPU (nccl).
struct DeviceMem {
  void* ptr = nullptr;
  int device = 0;
  DeviceMem() = default;
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  void alloc(int dev, size_t bytes) {
    device = dev;
    CUDA_CHECK(cudaSetDevice(dev));
    CUDA_CHECK(cudaMalloc(&ptr, bytes));
  }
  ~DeviceMem() {
    if (ptr) {
      cudaSetDevice(device);
      cudaFree(ptr);
    }
  }
  template <class U> U* as() const { return static_cast<U*>(ptr); }
};

struct Rank {
  int device = 0;
  DeviceMem q, kv[2], run_o, run_lse;     // on `device`
  PartialMaps maps[2];                    // the Hopper partial's TMA maps: q with slot 0, q with slot 1
  DeviceMem q_stage, kv_stage, o_stage, lse_stage;  // nccl: staging on device 0 (local: unused)
  cudaStream_t compute = nullptr, comm = nullptr;   // local: the harness's stream and one shared comm stream
  std::vector<cudaEvent_t> comp_begin, comp_end, xfer_begin, xfer_end;  // [step]
  cudaEvent_t ready = nullptr, done = nullptr;  // nccl: the rank's inputs arrived; its state is final
};

struct Ring {
  explicit Ring(int n) : ranks(size_t(n)) {}  // (a Rank owns device memory: built in place, never moved)
  lab::Problem p;
  RingOptions ro;
  bool nccl = false, no_rescale_bug = false, local_bug = false;
  bool hopper = false;  // the partial: the Hopper kernel (else pair_kernel)
  int t_local = 0;
  int64_t q_elems = 0, kv_elems = 0, lse_elems = 0;  // per shard (kv: one of K, V)
  std::vector<Rank> ranks;
  cudaStream_t local_comm = nullptr;
  cudaEvent_t fwd_begin = nullptr, fwd_end = nullptr;  // on device 0, the harness's stream
  bool measured = false;
#ifdef LAB_HAVE_NCCL
  ncclComm_t comms[64] = {};  // [rank] (--ranks <= 64)
#endif
  ~Ring() {
    for (Rank& rk : ranks) {
      cudaSetDevice(rk.device);
      for (auto* list : {&rk.comp_begin, &rk.comp_end, &rk.xfer_begin, &rk.xfer_end})
        for (cudaEvent_t e : *list) cudaEventDestroy(e);
      if (rk.ready) cudaEventDestroy(rk.ready);
      if (rk.done) cudaEventDestroy(rk.done);
      if (nccl) {
        cudaStreamDestroy(rk.compute);
        cudaStreamDestroy(rk.comm);
      }
    }
#ifdef LAB_HAVE_NCCL
    for (ncclComm_t c : comms)
      if (c) ncclCommDestroy(c);
#endif
    cudaSetDevice(0);
    if (local_comm) cudaStreamDestroy(local_comm);
    if (fwd_begin) cudaEventDestroy(fwd_begin);
    if (fwd_end) cudaEventDestroy(fwd_end);
  }
};

#ifdef LAB_HAVE_NCCL
#define NCCL_CHECK(expr)                                                                                  \
  do {                                                                                                    \
    const ncclResult_t lab_nccl_ = (expr);                                                                \
    if (lab_nccl_ != ncclSuccess) {                                                                       \
      std::fprintf(stderr, "NCCL error: %s\n  in %s\n  at %s:%d\n", ncclGetErrorString(lab_nccl_), #expr, \
                   __FILE__, __LINE__);                                                                   \
      std::exit(3);                                                                                       \
    }                                                                                                     \
  } while (0)
#endif

inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

PairArgs pair_args(const lab::Problem& p, const void* q, const void* k, const void* v, float* run_o, float* run_lse,
                   int t_local, const PairMap& map, bool no_rescale_bug) {
  PairArgs a;
  a.q = q;
  a.k = k;
  a.v = v;
  a.run_o = run_o;
  a.run_lse = run_lse;
  a.t_local = t_local;
  a.h = p.h;
  a.h_kv = p.h_kv;
  a.map = map;
  a.causal = p.causal;
  a.no_rescale_bug = no_rescale_bug;
  a.scale = p.softmax_scale();
  a.scale_log2 = a.scale * lab::kLog2e;
  return a;
}

template <class T, int HEAD_DIM>
void launch_pair_kernel(const PairArgs& a, int batch, cudaStream_t stream) {
  const dim3 grid(unsigned(lab::ceil_div(a.t_local, BLOCK_Q)), unsigned(batch * a.h));
  pair_kernel<T, HEAD_DIM><<<grid, THREADS, Tiles<HEAD_DIM>::SMEM_BYTES, stream>>>(a);
  CUDA_CHECK_LAST();
}

// The Hopper partial: its parameters for one pair, its maps, its launch.
RingParams ring_params(const lab::Problem& p, int t_local, const PairMap& map, float* run_o, float* run_lse,
                       bool no_rescale_bug) {
  lab::Problem pair = p;
  pair.t_q = pair.t_kv = t_local;
  return RingParams{ws::params_of(pair, nullptr, nullptr), map, run_o, run_lse, no_rescale_bug ? 1 : 0};
}

template <int HEAD_DIM>
PartialMaps partial_maps(const lab::Problem& p, const void* q, const void* k, const void* v, int rows) {
  return {ws::make_map(p, q, p.h, rows, p.b, HopperTiles<HEAD_DIM>::BLOCK_Q),
          ws::make_map(p, k, p.h_kv, rows, p.b, HopperTiles<HEAD_DIM>::BLOCK_KV),
          ws::make_map(p, v, p.h_kv, rows, p.b, HopperTiles<HEAD_DIM>::BLOCK_KV)};
}

#if LAB_HAVE_RING_PROTOCOL
template <class T, int HEAD_DIM>
constexpr auto hopper_partial = ws::ws_kernel<T, HEAD_DIM, true, RingRules, HopperTiles<HEAD_DIM>::CONS, true>;
#endif

template <class T, int HEAD_DIM>
void launch_hopper_partial(const RingParams& a, const PartialMaps& maps, int batch, cudaStream_t stream) {
#if LAB_HAVE_RING_PROTOCOL
  using HT = HopperTiles<HEAD_DIM>;
  const dim3 grid(unsigned(lab::ceil_div(a.t_q, HT::BLOCK_Q)), unsigned(batch * a.h));
  hopper_partial<T, HEAD_DIM><<<grid, HT::THREADS, HT::SMEM_BYTES, stream>>>(maps.q, maps.k, maps.v, a);
  CUDA_CHECK_LAST();
#else
  (void)a, (void)maps, (void)batch, (void)stream;
  lab::cuda_fail(cudaErrorInvalidDeviceFunction, "the Hopper partial needs section 08's protocol", __FILE__, __LINE__);
#endif
}

template <class T, int HEAD_DIM>
void launch_pair(Ring& ring, int r, int step) {
  Rank& rk = ring.ranks[size_t(r)];
  const int blk = block_at(r, step, ring.ro.ranks);
  if (blk < 0) return;  // (a stub's schedule)
  const PairMap map{ring.ro.ranks, ring.p.t_q, ring.ro.layout, r, blk, ring.local_bug};
  // A pair whose keys all come after its queries contributes nothing: nothing is launched.
  if (pair_tile(map, ring.p.causal, 0, ring.t_local, 0, ring.t_local) == lab::TileVisibility::none) return;
  if (ring.hopper) {
    launch_hopper_partial<T, HEAD_DIM>(ring_params(ring.p, ring.t_local, map, rk.run_o.as<float>(), rk.run_lse.as<float>(),
                                                   ring.no_rescale_bug),
                                       rk.maps[step % 2], ring.p.b, rk.compute);
    return;
  }
  const T* kv = static_cast<const T*>(rk.kv[step % 2].ptr);  // K, then V
  launch_pair_kernel<T, HEAD_DIM>(pair_args(ring.p, rk.q.ptr, kv, kv + ring.kv_elems, rk.run_o.as<float>(),
                                            rk.run_lse.as<float>(), ring.t_local, map, ring.no_rescale_bug),
                                  ring.p.b, rk.compute);
}

// The pass of step `step`: every rank sends the block it computed on (slot step % 2) to rank + 1
// and receives the next one into slot (step + 1) % 2, which its compute of step - 1 read: the
// comm stream waits for that compute first.
void pass_blocks(Ring& ring, int step) {
  const int n = ring.ro.ranks;
  const size_t bytes = size_t(2 * ring.kv_elems) * size_t(lab::dtype_bytes(ring.p.dtype));
  const int send = step % 2, recv = (step + 1) % 2;
  if (!ring.nccl) {
    for (int r = 0; r < n; ++r) {
      Rank &from = ring.ranks[size_t(r)], &to = ring.ranks[size_t((r + 1) % n)];
      if (step > 0) CUDA_CHECK(cudaStreamWaitEvent(from.comm, to.comp_end[size_t(step - 1)]));
      CUDA_CHECK(cudaStreamWaitEvent(from.comm, from.comp_begin[size_t(step)]));  // (timing: after the compute starts)
      CUDA_CHECK(cudaEventRecord(to.xfer_begin[size_t(step)], from.comm));
      CUDA_CHECK(cudaMemcpyAsync(to.kv[recv].ptr, from.kv[send].ptr, bytes, cudaMemcpyDeviceToDevice, from.comm));
      CUDA_CHECK(cudaEventRecord(to.xfer_end[size_t(step)], from.comm));
    }
    return;
  }
#ifdef LAB_HAVE_NCCL
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    CUDA_CHECK(cudaSetDevice(rk.device));
    if (step > 0) CUDA_CHECK(cudaStreamWaitEvent(rk.comm, rk.comp_end[size_t(step - 1)]));
    CUDA_CHECK(cudaStreamWaitEvent(rk.comm, rk.comp_begin[size_t(step)]));
    CUDA_CHECK(cudaEventRecord(rk.xfer_begin[size_t(step)], rk.comm));
  }
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    NCCL_CHECK(ncclSend(rk.kv[send].ptr, bytes, ncclUint8, (r + 1) % n, ring.comms[r], rk.comm));
    NCCL_CHECK(ncclRecv(rk.kv[recv].ptr, bytes, ncclUint8, (r - 1 + n) % n, ring.comms[r], rk.comm));
  }
  NCCL_CHECK(ncclGroupEnd());
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    CUDA_CHECK(cudaSetDevice(rk.device));
    CUDA_CHECK(cudaEventRecord(rk.xfer_end[size_t(step)], rk.comm));
  }
  CUDA_CHECK(cudaSetDevice(0));
#endif
}

// One forward: scatter -> N steps of (compute, pass) -> gather, on `stream` (device 0).
template <class T, int HEAD_DIM>
void ring_forward(Ring& ring, const lab::DeviceTensors& io, cudaStream_t stream) {
  const lab::Problem& p = ring.p;
  const int n = ring.ro.ranks, threads = 256;
  constexpr int PER16 = 16 / sizeof(T);
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(ring.fwd_begin, stream));
  // Scatter (device 0): Q, K, V rows of each rank's shard; nccl: staged, then copied to its GPU.
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    void* q_to = ring.nccl ? rk.q_stage.ptr : rk.q.ptr;
    void* kv_to = ring.nccl ? rk.kv_stage.ptr : rk.kv[0].ptr;
    auto scatter = [&](const void* full, void* shard, int heads, int64_t elems) {
      scatter_rows<T><<<blocks_for(elems / PER16, threads), threads, 0, stream>>>(
          static_cast<const T*>(full), static_cast<T*>(shard), p.t_q, ring.t_local, int64_t(heads) * p.d, r, n,
          ring.ro.layout, elems / PER16);
      CUDA_CHECK_LAST();
    };
    scatter(io.q, q_to, p.h, ring.q_elems);
    scatter(io.k, kv_to, p.h_kv, ring.kv_elems);
    scatter(io.v, static_cast<T*>(kv_to) + ring.kv_elems, p.h_kv, ring.kv_elems);
  }
  if (ring.nccl) {
    CUDA_CHECK(cudaEventRecord(ring.ranks[0].ready, stream));  // the staged shards are written
    for (int r = 0; r < n; ++r) {
      Rank& rk = ring.ranks[size_t(r)];
      CUDA_CHECK(cudaSetDevice(rk.device));
      CUDA_CHECK(cudaStreamWaitEvent(rk.compute, ring.ranks[0].ready));
      CUDA_CHECK(cudaMemcpyPeerAsync(rk.q.ptr, rk.device, rk.q_stage.ptr, 0, size_t(ring.q_elems) * sizeof(T), rk.compute));
      CUDA_CHECK(cudaMemcpyPeerAsync(rk.kv[0].ptr, rk.device, rk.kv_stage.ptr, 0, size_t(2 * ring.kv_elems) * sizeof(T),
                                     rk.compute));
    }
  }
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    CUDA_CHECK(cudaSetDevice(rk.device));
    init_running<<<blocks_for(ring.q_elems, threads), threads, 0, rk.compute>>>(rk.run_o.as<float>(), rk.run_lse.as<float>(),
                                                                               ring.q_elems, ring.lse_elems);
    CUDA_CHECK_LAST();
  }
  if (!ring.nccl) CUDA_CHECK(cudaStreamWaitEvent(ring.local_comm, ring.fwd_begin));  // (the comm stream joins the forward)
  // The ring: compute step s while the pass of step s (the block of step s + 1) is in flight.
  for (int s = 0; s < n; ++s) {
    for (int r = 0; r < n; ++r) {
      Rank& rk = ring.ranks[size_t(r)];
      CUDA_CHECK(cudaSetDevice(rk.device));
      if (s > 0) CUDA_CHECK(cudaStreamWaitEvent(rk.compute, rk.xfer_end[size_t(s - 1)]));  // the block has arrived
      CUDA_CHECK(cudaEventRecord(rk.comp_begin[size_t(s)], rk.compute));
      launch_pair<T, HEAD_DIM>(ring, r, s);
      CUDA_CHECK(cudaEventRecord(rk.comp_end[size_t(s)], rk.compute));
    }
    if (s + 1 < n) pass_blocks(ring, s);
  }
  // Gather (device 0): each rank's running state, through the shard map, into O and LSE.
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    const float *o_from = rk.run_o.as<float>(), *lse_from = rk.run_lse.as<float>();
    if (ring.nccl) {
      CUDA_CHECK(cudaSetDevice(rk.device));
      CUDA_CHECK(cudaMemcpyPeerAsync(rk.o_stage.ptr, 0, rk.run_o.ptr, rk.device, size_t(ring.q_elems) * 4, rk.compute));
      CUDA_CHECK(cudaMemcpyPeerAsync(rk.lse_stage.ptr, 0, rk.run_lse.ptr, rk.device, size_t(ring.lse_elems) * 4, rk.compute));
      CUDA_CHECK(cudaEventRecord(rk.done, rk.compute));
      CUDA_CHECK(cudaSetDevice(0));
      CUDA_CHECK(cudaStreamWaitEvent(stream, rk.done));
      o_from = rk.o_stage.as<float>();
      lse_from = rk.lse_stage.as<float>();
    }
    gather_rows<T><<<blocks_for(ring.q_elems / 2, threads), threads, 0, stream>>>(
        o_from, lse_from, static_cast<T*>(io.o), io.lse, p.t_q, ring.t_local, p.h, p.d, r, n, ring.ro.layout,
        ring.q_elems / 2);
    CUDA_CHECK_LAST();
  }
  CUDA_CHECK(cudaEventRecord(ring.fwd_end, stream));
}

// What the events of the last forward measured: per step, the compute of every rank and the
// pass; how much of the pass the compute hid.
std::string measure(Ring& ring, nlohmann::json& metrics, bool print) {
  const int n = ring.ro.ranks;
  auto ms = [](cudaEvent_t a, cudaEvent_t b) {
    float x = 0.f;
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaEventElapsedTime(&x, a, b));
    return double(x);
  };
  std::vector<double> step_compute(size_t(n), 0.0), step_xfer(size_t(n), 0.0);
  std::vector<std::vector<double>> rank_compute(size_t(n), std::vector<double>(size_t(n), 0.0));
  for (int s = 0; s < n; ++s)
    for (int r = 0; r < n; ++r) {
      Rank& rk = ring.ranks[size_t(r)];
      CUDA_CHECK(cudaSetDevice(rk.device));
      const double c = ms(rk.comp_begin[size_t(s)], rk.comp_end[size_t(s)]);
      rank_compute[size_t(r)][size_t(s)] = c;
      // local: ranks run one after another on one GPU, so a step's compute is their sum; nccl:
      // they run at once, so a step takes as long as its slowest rank.
      step_compute[size_t(s)] = ring.nccl ? std::max(step_compute[size_t(s)], c) : step_compute[size_t(s)] + c;
      if (s + 1 < n) {
        const double x = ms(rk.xfer_begin[size_t(s)], rk.xfer_end[size_t(s)]);
        step_xfer[size_t(s)] = ring.nccl ? std::max(step_xfer[size_t(s)], x) : step_xfer[size_t(s)] + x;
      }
    }
  CUDA_CHECK(cudaSetDevice(0));
  double compute = 0, xfer = 0, wall = 0;
  for (int s = 0; s < n; ++s) { compute += step_compute[size_t(s)]; xfer += step_xfer[size_t(s)]; }
  // The ring's span: from rank 0's first compute to the end of the last step (per GPU for nccl: the slowest).
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring.ranks[size_t(r)];
    CUDA_CHECK(cudaSetDevice(rk.device));
    const double span = ms(rk.comp_begin[0], rk.comp_end[size_t(n - 1)]);
    wall = ring.nccl ? std::max(wall, span) : wall;
  }
  CUDA_CHECK(cudaSetDevice(0));
  if (!ring.nccl) wall = ms(ring.ranks[0].comp_begin[0], ring.ranks[size_t(n - 1)].comp_end[size_t(n - 1)]);
  const double exposed = std::max(0.0, wall - compute);
  const double overlap = xfer > 0 ? std::min(1.0, std::max(0.0, 1.0 - exposed / xfer)) : 1.0;
  metrics["ring_ms"] = wall;
  metrics["compute_ms"] = compute;
  metrics["transfer_ms"] = xfer;
  metrics["overlap"] = overlap;
  metrics["step_compute_ms"] = step_compute;
  metrics["step_transfer_ms"] = step_xfer;
  metrics["rank_step_compute_ms"] = rank_compute;
  if (print)
    std::printf("  ring     %.4g ms over %d steps: compute %.4g ms, pass %.4g ms, %.0f%% of the pass hidden\n", wall, n,
                compute, xfer, 100 * overlap);
  return "";
}

// The single-GPU forward the ring is measured against: the same partial kernel over the whole
// sequence as one rank (one launch, no pass), on device 0, median of a few runs.
template <class T, int HEAD_DIM>
double single_gpu_ms(const Ring& ring, const lab::DeviceTensors& io, cudaStream_t stream) {
  const lab::Problem& p = ring.p;
  const int64_t o_elems = p.q_elems(), lse_elems = p.lse_elems();
  DeviceMem run_o, run_lse;
  run_o.alloc(0, size_t(o_elems) * 4);
  run_lse.alloc(0, size_t(lse_elems) * 4);
  const PairMap whole{1, p.t_q, Layout::contiguous, 0, 0, false};
  const PairArgs a = pair_args(p, io.q, io.k, io.v, run_o.as<float>(), run_lse.as<float>(), p.t_q, whole, false);
  const RingParams rp = ring_params(p, p.t_q, whole, run_o.as<float>(), run_lse.as<float>(), false);
  PartialMaps maps{};
  if (ring.hopper) maps = partial_maps<HEAD_DIM>(p, io.q, io.k, io.v, p.t_q);
  cudaEvent_t begin, end;
  CUDA_CHECK(cudaEventCreate(&begin));
  CUDA_CHECK(cudaEventCreate(&end));
  std::vector<double> times;
  for (int it = 0; it < 6; ++it) {  // the first is a warm-up
    init_running<<<blocks_for(o_elems, 256), 256, 0, stream>>>(run_o.as<float>(), run_lse.as<float>(), o_elems, lse_elems);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaEventRecord(begin, stream));
    if (ring.hopper) launch_hopper_partial<T, HEAD_DIM>(rp, maps, p.b, stream);
    else launch_pair_kernel<T, HEAD_DIM>(a, p.b, stream);
    CUDA_CHECK(cudaEventRecord(end, stream));
    CUDA_CHECK(cudaEventSynchronize(end));
    float x = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&x, begin, end));
    if (it > 0) times.push_back(double(x));
  }
  CUDA_CHECK(cudaEventDestroy(begin));
  CUDA_CHECK(cudaEventDestroy(end));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The Hopper partial runs here: an H100/H200, sm_90a code in this binary, and section 08's ring
// protocol written (its file beside this one, its ring_slot() no longer the stub); else `ring`
// says so and runs pair_kernel.
bool hopper_partial_runs(const lab::DeviceInfo& dev, bool quiet) {
#if LAB_HAVE_RING_PROTOCOL
  return ws::hopper_kernel_runs(dev, hopper_partial<__nv_bfloat16, 64>, ring::ring_slot(0, 3).stage >= 0, "12_ring",
                                quiet);
#else
  return ws::hopper_kernel_runs(dev, nullptr, false, "12_ring", quiet);
#endif
}

template <class T, int HEAD_DIM>
lab::GpuRun setup_ring(const lab::RunContext& ctx) {
  auto ring = std::make_shared<Ring>(g_ring.ranks);
  const lab::Problem& p = ctx.problem;
  ring->p = p;
  ring->ro = g_ring;
  ring->nccl = g_ring.transport == "nccl";
  ring->no_rescale_bug = ctx.bug == "no-merge-rescale";
  ring->local_bug = ctx.bug == "local-causal";
  const int n = g_ring.ranks;
  ring->t_local = p.t_q / n;
  ring->q_elems = int64_t(p.b) * ring->t_local * p.h * p.d;
  ring->kv_elems = int64_t(p.b) * ring->t_local * p.h_kv * p.d;
  ring->lse_elems = int64_t(p.b) * p.h * ring->t_local;
  ring->hopper = ctx.variant == "ring" && hopper_partial_runs(ctx.device, ctx.options.quiet);
  constexpr int smem = Tiles<HEAD_DIM>::SMEM_BYTES;
  if (!ring->nccl) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&ring->local_comm, cudaStreamNonBlocking));
  }
#ifdef LAB_HAVE_NCCL
  if (ring->nccl) {
    int devs[64];  // rank r on GPU r
    for (int r = 0; r < n; ++r) devs[r] = r;
    NCCL_CHECK(ncclCommInitAll(ring->comms, n, devs));
  }
#endif
  const size_t tb = sizeof(T);
  for (int r = 0; r < n; ++r) {
    Rank& rk = ring->ranks[size_t(r)];
    rk.device = ring->nccl ? r : 0;
    CUDA_CHECK(cudaSetDevice(rk.device));
    lab::opt_in_shared_memory(pair_kernel<T, HEAD_DIM>, smem);
#if LAB_HAVE_RING_PROTOCOL
    if (ring->hopper)
      lab::opt_in_shared_memory(hopper_partial<T, HEAD_DIM>, HopperTiles<HEAD_DIM>::SMEM_BYTES);
#endif
    rk.q.alloc(rk.device, size_t(ring->q_elems) * tb);
    for (auto& slot : rk.kv) slot.alloc(rk.device, size_t(2 * ring->kv_elems) * tb);
    if (ring->hopper)
      for (int i = 0; i < 2; ++i)  // a slot holds K, then V
        rk.maps[i] = partial_maps<HEAD_DIM>(p, rk.q.ptr, rk.kv[i].ptr, static_cast<T*>(rk.kv[i].ptr) + ring->kv_elems,
                                            ring->t_local);
    rk.run_o.alloc(rk.device, size_t(ring->q_elems) * 4);
    rk.run_lse.alloc(rk.device, size_t(ring->lse_elems) * 4);
    for (auto* list : {&rk.comp_begin, &rk.comp_end, &rk.xfer_begin, &rk.xfer_end}) {
      list->resize(size_t(n));
      for (cudaEvent_t& e : *list) CUDA_CHECK(cudaEventCreate(&e));
    }
    CUDA_CHECK(cudaEventCreateWithFlags(&rk.ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&rk.done, cudaEventDisableTiming));
    if (ring->nccl) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&rk.compute, cudaStreamNonBlocking));
      CUDA_CHECK(cudaStreamCreateWithFlags(&rk.comm, cudaStreamNonBlocking));
      rk.q_stage.alloc(0, size_t(ring->q_elems) * tb);
      rk.kv_stage.alloc(0, size_t(2 * ring->kv_elems) * tb);
      rk.o_stage.alloc(0, size_t(ring->q_elems) * 4);
      rk.lse_stage.alloc(0, size_t(ring->lse_elems) * 4);
    } else {
      rk.comm = ring->local_comm;
    }
  }
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventCreate(&ring->fwd_begin));
  CUDA_CHECK(cudaEventCreate(&ring->fwd_end));

  lab::GpuRun run;
  const lab::DeviceTensors io = ctx.tensors;
  run.forward = [ring, io](cudaStream_t stream) {
    if (!ring->nccl)
      for (Rank& rk : ring->ranks) rk.compute = stream;  // local: every rank computes on the harness's stream
    ring_forward<T, HEAD_DIM>(*ring, io, stream);
  };
  // Device memory beyond Q, K, V, O, LSE: per rank its Q shard, two K/V slots and the fp32 state
  // (nccl: plus the staging on GPU 0). What matters for ring attention is the K/V per rank.
  const int64_t per_rank = ring->q_elems * int64_t(tb) + 4 * ring->kv_elems * int64_t(tb) + ring->q_elems * 4 +
                           ring->lse_elems * 4;
  run.extra_device_bytes = per_rank * n;
  const WorkModel work = work_model(p, g_ring, ring->local_bug);
  add_balance(run.metrics, work);
  const int64_t kv_rank_bytes = 2 * ring->kv_elems * int64_t(tb);
  run.metrics["ranks"] = n;
  run.metrics["layout"] = layout_name(g_ring.layout);
  run.metrics["transport"] = g_ring.transport;
  run.metrics["kv_bytes_per_rank"] = kv_rank_bytes;
  run.metrics["kv_bytes_total"] = kv_rank_bytes * n;
  run.metrics["kernel"] = ring->hopper ? "hopper (wgmma, TMA, warp-specialised)" : "mma (mma.sync, cp.async)";
  run.metrics["block_q"] = ring->hopper ? HopperTiles<HEAD_DIM>::BLOCK_Q : BLOCK_Q;
  run.metrics["block_kv"] = ring->hopper ? HopperTiles<HEAD_DIM>::BLOCK_KV : BLOCK_KV;
  const bool print = !ctx.options.quiet;
  run.after_check_run = [ring, work, kv_rank_bytes, print, io](nlohmann::json& metrics) {
    if (print) {
      std::printf("  ring     %d ranks, %s layout, %s transport: K/V per rank %s (1/%d of %s, + one block in flight)\n",
                  ring->ro.ranks, layout_name(ring->ro.layout), ring->ro.transport.c_str(),
                  lab::format_bytes(double(kv_rank_bytes)).c_str(), ring->ro.ranks,
                  lab::format_bytes(double(kv_rank_bytes * ring->ro.ranks)).c_str());
      std::printf("  work     %s%s\n", balance_line(work).c_str(), ring->p.causal ? "" : " (not causal: all equal)");
    }
    // The events are read from a warm forward (the checked run paid for the first launches), on
    // a stream of its own; it writes the same O again.
    CUDA_CHECK(cudaSetDevice(0));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (int it = 0; it < 2; ++it) {
      if (!ring->nccl)
        for (Rank& rk : ring->ranks) rk.compute = stream;
      ring_forward<T, HEAD_DIM>(*ring, io, stream);
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    measure(*ring, metrics, print);
    const double single = single_gpu_ms<T, HEAD_DIM>(*ring, io, stream);
    CUDA_CHECK(cudaStreamDestroy(stream));
    const double ring_ms = metrics["ring_ms"].get<double>();
    const int n = ring->ro.ranks;
    metrics["single_gpu_ms"] = single;
    if (ring->nccl) {
      // Efficiency: the single-GPU forward's time over N (one rank's share of the work, perfectly
      // split) against the ring's time per rank.
      metrics["scaling_efficiency"] = ring_ms > 0 ? single / n / ring_ms : 0.0;
      if (print)
        std::printf("  scaling  single-GPU forward %.4g ms; ring %.4g ms per rank on %d GPUs: efficiency %.2f\n", single,
                    ring_ms, n, ring_ms > 0 ? single / n / ring_ms : 0.0);
    } else {
      // One GPU runs every rank: the same work as the single-GPU forward, in N² smaller launches,
      // plus the passes. Their ratio is what sharding costs, not a scaling.
      metrics["sharding_efficiency"] = ring_ms > 0 ? single / ring_ms : 0.0;
      if (print)
        std::printf("  note     one GPU: the ranks run one after another (single-GPU forward %.4g ms, the %d ranks' steps "
                    "%.4g ms: %.2f); the scaling table needs several GPUs (--transport nccl)\n",
                    single, n, ring_ms, ring_ms > 0 ? single / ring_ms : 0.0);
    }
    return std::string();
  };
  return run;
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const bool f16 = ctx.problem.dtype == lab::DType::f16;
  if (ctx.problem.d == 64) return f16 ? setup_ring<__half, 64>(ctx) : setup_ring<__nv_bfloat16, 64>(ctx);
  return f16 ? setup_ring<__half, 128>(ctx) : setup_ring<__nv_bfloat16, 128>(ctx);
}

// ---------------------------------------------------------------------------------------------
// Your block_at, asked on the host for every (rank, step) before anything runs (Section::precheck):
// the CPU model reads whichever block it names, so a ring turned the wrong way would pass there and
// fail only between GPUs, where a rank computes on the block it actually received. At step 0 a rank
// holds its own block; at step s, the block rank r - 1 held at step s - 1. The stub (-1 at rank 0,
// step 0) is left to the run, which names the exercise.
std::string ring_schedule_error(const lab::Problem&, const lab::Options&) {
  const int n = g_ring.ranks;
  if (block_at(0, 0, n) < 0) return "";
  for (int step = 0; step < n; ++step)
    for (int r = 0; r < n; ++r) {
      const int got = block_at(r, step, n);
      const int want = step == 0 ? r : (block_at((r + n - 1) % n, step - 1, n) + n) % n;  // (a -1 above is named there)
      if (got != want)
        return "EXERCISE shard-map: block_at(rank=" + std::to_string(r) + ", step=" + std::to_string(step) +
               ", n=" + std::to_string(n) + ") = " + std::to_string(got) + ", want " + std::to_string(want) +
               (step == 0 ? ": at step 0 a rank holds its own block"
                          : ": what rank " + std::to_string((r + n - 1) % n) + " held at step " + std::to_string(step - 1) +
                                " (every step, each rank passes its block to rank + 1)") +
               (got < 0 ? "; C++'s % keeps the sign of a negative number: add n before taking it" : "");
    }
  return "";
}

// Your merge_rows, asked on the host with both states empty before anything runs: no run of this
// program merges two empty states (a row's first step is its own block, which holds its own key,
// so its running state has a key before any partial without one arrives), so the output alone
// would pass a merge that gives NaN there. Ring attention with rows that see no key (T_q > T_kv
// causal, a window, a document mask) does merge them. The stub (NaN everywhere) is left to the
// run, which names the exercise.
std::string empty_merge_error() {
  if (std::isnan(merge_rows(0.f, 0.f).lse)) return "";
  const RowMerge both = merge_rows(-INFINITY, -INFINITY);
  if (!std::isnan(both.w_run) && both.w_part == 0.f && both.lse == -INFINITY) return "";
  return "EXERCISE ring-merge: merge_rows(lse_run=-inf, lse_part=-inf) = {w_run " + lab::format_number("%g", both.w_run) +
         ", w_part " + lab::format_number("%g", both.w_part) + ", lse " + lab::format_number("%g", both.lse) +
         "}, want {w_run 1, w_part 0, lse -inf}: two empty states keep the running state, never exp(-inf - -inf) "
         "(asked before the run: every row's first partial holds its own key, so no run here merges two empty states)";
}

// ---------------------------------------------------------------------------------------------
// CPU model: the same ring on the host (not your kernel). Every rank's Q shard, the block it
// holds at each step (block_at), each pair's partial (float scores, exp, P rounded to the element
// type as the kernel feeds it to the Tensor Cores, the sum in float) and the merge (merge_of) of
// the exercises; the scatter and gather through shard_row. The pass is the schedule itself.
lab::CpuRun run_cpu(const lab::Problem& p, const lab::Options& opt, const lab::HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
  const int n = g_ring.ranks, tl = p.t_q / n, d = p.d;
  const bool local_bug = opt.bug == "local-causal", no_rescale = opt.bug == "no-merge-rescale";
  const float scale = p.softmax_scale();
  // Shards, as the scatter makes them: rank r's rows in local order ([B, T_local, heads, D]).
  auto shard_of = [&](const std::vector<float>& full, int heads, int r) {
    std::vector<float> out(size_t(p.b) * tl * heads * d, 0.f);
    for (int b = 0; b < p.b; ++b)
      for (int i = 0; i < tl; ++i) {
        const int gi = shard_row(i, r, n, p.t_q, g_ring.layout);
        if (gi < 0 || gi >= p.t_q) continue;
        std::memcpy(&out[(size_t(b) * tl + i) * heads * d], &full[(size_t(b) * p.t_q + gi) * heads * d],
                    sizeof(float) * size_t(heads) * d);
      }
    return out;
  };
  std::vector<std::vector<float>> q_sh, k_sh, v_sh;
  for (int r = 0; r < n; ++r) {
    q_sh.push_back(shard_of(in.q, p.h, r));
    k_sh.push_back(shard_of(in.k, p.h_kv, r));
    v_sh.push_back(shard_of(in.v, p.h_kv, r));
  }
  lab::parallel_for(int64_t(n) * p.b * p.h, [&](int64_t job) {
    const int r = int(job / (int64_t(p.b) * p.h)), bh = int(job % (int64_t(p.b) * p.h)), b = bh / p.h, h = bh % p.h;
    const int hk = lab::kv_head_of(h, p.h, p.h_kv);
    std::vector<float> run_o(size_t(tl) * d, 0.f), run_lse(size_t(tl), -INFINITY);
    std::vector<float> s(static_cast<size_t>(tl)), acc(static_cast<size_t>(d));
    for (int step = 0; step < n; ++step) {
      const int blk = block_at(r, step, n);
      if (blk < 0 || blk >= n) continue;
      const PairMap m{n, p.t_q, g_ring.layout, r, blk, local_bug};
      if (pair_tile(m, p.causal, 0, tl, 0, tl) == lab::TileVisibility::none) continue;  // skipped pair
      const std::vector<float>&ks = k_sh[size_t(blk)], &vs = v_sh[size_t(blk)];
      for (int i = 0; i < tl; ++i) {
        const float* qr = &q_sh[size_t(r)][((size_t(b) * tl + i) * p.h + h) * d];
        float mx = -INFINITY;
        for (int j = 0; j < tl; ++j) {
          if (p.causal && m.k_pos(j) > m.q_pos(i)) { s[size_t(j)] = -INFINITY; continue; }
          const float* kr = &ks[((size_t(b) * tl + j) * p.h_kv + hk) * d];
          float dot = 0.f;
          for (int c = 0; c < d; ++c) dot += qr[c] * kr[c];
          s[size_t(j)] = dot;
          mx = std::max(mx, dot);
        }
        float l = 0.f;
        std::fill(acc.begin(), acc.end(), 0.f);
        if (mx != -INFINITY)
          for (int j = 0; j < tl; ++j) {
            if (s[size_t(j)] == -INFINITY) continue;
            const float pj = std::exp((s[size_t(j)] - mx) * scale);
            l += pj;
            const float p16 = lab::round_to(p.dtype, pj);
            const float* vr = &vs[((size_t(b) * tl + j) * p.h_kv + hk) * d];
            for (int c = 0; c < d; ++c) acc[size_t(c)] += p16 * vr[c];
          }
        const float lse_part = l > 0.f ? mx * scale + std::log(l) : -INFINITY;
        const RowMerge w = merge_of(run_lse[size_t(i)], lse_part, no_rescale);
        const float inv_l = l > 0.f ? 1.f / l : 0.f;
        for (int c = 0; c < d; ++c)
          run_o[size_t(i) * d + c] = w.w_run * run_o[size_t(i) * d + c] + w.w_part * acc[size_t(c)] * inv_l;
        run_lse[size_t(i)] = w.lse;
      }
    }
    for (int i = 0; i < tl; ++i) {  // gather
      const int gi = shard_row(i, r, n, p.t_q, g_ring.layout);
      if (gi < 0 || gi >= p.t_q) continue;
      for (int c = 0; c < d; ++c) o[size_t(p.q_index(b, gi, h)) + c] = lab::round_to(p.dtype, run_o[size_t(i) * d + c]);
      lse[size_t(p.lse_index(b, h, gi))] = run_lse[size_t(i)];
    }
  });
  lab::CpuRun run;
  run.extra_host_bytes = 4 * (p.q_elems() + 2 * p.kv_elems());  // the shards: Q, K and V again, in fp32
  const WorkModel work = work_model(p, g_ring, local_bug);
  add_balance(run.metrics, work);
  run.metrics["ranks"] = n;
  run.metrics["layout"] = layout_name(g_ring.layout);
  run.metrics["transport"] = "cpu-model";
  run.metrics["kv_bytes_per_rank"] = 2 * int64_t(p.b) * tl * p.h_kv * d * lab::dtype_bytes(p.dtype);
  // under the CPU model's banner, which the harness prints after the model ran (not under --quiet)
  run.header = "ring: " + std::to_string(n) + " ranks, " + layout_name(g_ring.layout) + " layout, T_local " +
               std::to_string(tl) + "; " + balance_line(work) +
               (g_ring.transport == "nccl" ? " (--transport nccl is a GPU's: the model passes blocks in memory)" : "") +
               "\n";
  if (shard_row(0, 0, 2, 4, Layout::contiguous) < 0 || block_at(0, 0, 2) < 0)  // which exercise, by name
    run.failure = "EXERCISE shard-map is not written yet: shard_row() or block_at() returns -1, so no row is gathered";
  else if (std::isnan(merge_rows(0.f, 0.f).lse))
    run.failure = "EXERCISE ring-merge is not written yet: merge_rows() returns NaN";
  if (std::string(LAB_BUILD_KIND) == "lab")  // your build: one of your exercises runs only on a GPU
    run.gpu_only_rest = "needs a GPU: EXERCISE mma-online-softmax runs in the mma kernel only; the CPU model "
                        "checked your shard-map and ring-merge on this run";
  return run;
}

// ---------------------------------------------------------------------------------------------
// --ranks, --layout and --transport are this section's own options: read here, the rest goes to
// the harness. Returns -1 to go on, or an exit code (after its one line).
int parse_ring_options(int argc, char** argv, std::vector<char*>* rest) {
  std::vector<std::string> given;
  for (int a = 0; a < argc; ++a) {
    std::string arg = argv[a], name, value;
    for (const char* opt : {"--ranks", "--layout", "--transport"}) {
      const std::string o = opt;
      if (arg == o) {  // in the harness's words: a value that is another option is no value
        if (a + 1 >= argc || std::string(argv[a + 1]).rfind("--", 0) == 0) {
          std::fprintf(stderr, "bad input: %s needs a value (see --help)\n", opt);
          return lab::kExitBadInput;
        }
        name = o;
        value = argv[++a];
      } else if (arg.rfind(o + "=", 0) == 0) {
        name = o;
        value = arg.substr(o.size() + 1);
      }
    }
    if (name.empty()) {
      rest->push_back(argv[a]);
      continue;
    }
    if (std::find(given.begin(), given.end(), name) != given.end()) {
      std::fprintf(stderr, "bad input: %s is given more than once\n", name.c_str());
      return lab::kExitBadInput;
    }
    given.push_back(name);
    if (name == "--ranks") {
      char* end = nullptr;
      const long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 1 || v > 64) {
        std::fprintf(stderr, "bad input: --ranks must be an integer in [1, 64] (got '%s')\n", value.c_str());
        return lab::kExitBadInput;
      }
      g_ring.ranks = int(v);
    } else if (name == "--layout") {
      if (value != "contiguous" && value != "zigzag") {
        std::fprintf(stderr, "bad input: --layout must be contiguous or zigzag, not '%s'\n", value.c_str());
        return lab::kExitBadInput;
      }
      g_ring.layout = value == "zigzag" ? Layout::zigzag : Layout::contiguous;
    } else {
      if (value != "local" && value != "nccl") {
        std::fprintf(stderr, "bad input: --transport must be local or nccl, not '%s'\n", value.c_str());
        return lab::kExitBadInput;
      }
      g_ring.transport = value;
    }
  }
  return -1;
}

#ifndef LAB_RING12_NO_MAIN  // (the exercises' unit tests include this file without its main)
int main(int argc, char** argv) {
  std::vector<char*> args;
  if (const int code = parse_ring_options(argc, argv, &args); code >= 0) return code;
  bool cpu = false, help = false;
  for (char* a : args) {
    cpu = cpu || std::string(a) == "--cpu";
    help = help || std::string(a) == "--help" || std::string(a) == "-h";
  }
  if (g_ring.transport == "nccl" && !cpu && !help) {
#ifndef LAB_HAVE_NCCL
    std::fprintf(stderr, "cannot run here: built without NCCL (--transport local runs the ring on one GPU)\n");
    return lab::kExitCannotRun;
#else
    // One process drives one GPU per rank, GPUs 0 .. N-1 (a host of 8 runs N = 2, 4 and 8): --ranks
    // may not exceed the visible GPUs, checked before any NCCL call. NVLink SHARP (multicast) stays
    // off unless the environment asks for it.
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "cannot run here: no CUDA GPU; add --cpu to run the CPU model of 12_ring instead\n");
      return lab::kExitCannotRun;
    }
    if (g_ring.ranks > gpus) {
      std::fprintf(stderr, "bad input: --transport nccl runs one rank per GPU: --ranks %d, but %d GPU%s visible\n",
                   g_ring.ranks, gpus, gpus == 1 ? " is" : "s are");
      return lab::kExitBadInput;
    }
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
#endif
  }
  lab::Section s;
  s.name = "12_ring";
  s.title = "ring attention: Q, K, V sharded along T over ranks, K/V passed around a ring, LSE merge (§12.10.5)";
  s.variants = {"ring", "ring-mma"};
  s.bugs = {"no-merge-rescale", "local-causal"};
  s.dtypes = {lab::DType::f16, lab::DType::bf16};
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = 4096;
  s.default_problem.t_kv = 4096;
  s.default_problem.d = 128;
  s.default_problem.dtype = lab::DType::bf16;
  s.extra_help = {{"--ranks N", "ranks of the ring (default 4); with --transport nccl, GPUs 0 .. N-1"},
                  {"--layout L", "contiguous (default) or zigzag (2N chunks: rank r holds chunks r and 2N-1-r)"},
                  {"--transport X", "local (default: every rank on one GPU, cudaMemcpyAsync passes) or nccl (rank r on GPU r)"}};
  s.workspace_bytes = [](const lab::Problem& p, const std::string&) {
    // Q shards, two K/V slots, the fp32 running state: about Q + 2(K + V) + 2·fp32 O over all ranks.
    return int64_t(p.q_elems()) * (2 + 4) + 4 * p.kv_elems() * 2 + p.lse_elems() * 4;
  };
  s.workspace_what = "shards, K/V slots and running state";
  s.own_options = " --ranks " + std::to_string(g_ring.ranks) + " --layout " + layout_name(g_ring.layout) +
                  " --transport " + g_ring.transport;
  s.validate = [](const lab::Problem& p, const lab::Options&) -> std::string {
    if (p.t_kv != p.t_q)
      return "ring attention shards Q and K/V alike: --t-kv must equal --t (got " + std::to_string(p.t_kv) + " and " +
             std::to_string(p.t_q) + ")";
    const int unit = layout_unit(g_ring);
    if (p.t_q < unit)
      return "--ranks " + std::to_string(g_ring.ranks) + " with the " + layout_name(g_ring.layout) + " layout needs T >= " +
             std::to_string(unit) + " (" + std::to_string(unit) + " chunks of at least one row; got T=" +
             std::to_string(p.t_q) + ")";
    if (p.t_q % unit != 0)
      return "T=" + std::to_string(p.t_q) + " is not a multiple of " + std::to_string(unit) + " (the " +
             layout_name(g_ring.layout) + " layout over " + std::to_string(g_ring.ranks) + " ranks cuts T into " +
             std::to_string(unit) + " equal chunks)";
    return "";
  };
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  s.precheck = [](const lab::Problem& p, const lab::Options& o) {
    const std::string schedule = ring_schedule_error(p, o);
    return schedule.empty() ? empty_merge_error() : schedule;
  };
  return lab::lab_main(int(args.size()), args.data(), s);
}
#endif  // LAB_RING12_NO_MAIN
