// The Hopper FlashAttention forward of section 08 (warp specialisation, TMA, an mbarrier ring,
// wgmma), written once so that section 07 can run its own lesson on it. Build for sm_90a. What
// each part does, and why, is told in solutions/08_tma_skeleton.cu and ch12/08_tma_skeleton.md.
// This file is the given skeleton; the kernel asks a policy type H (a struct of static functions)
// for what the sections write:
//
//   the protocol (section 08's exercises, written in section 08's file, nowhere else):
//       H::ring_slot(n, stages) -> RingSlot, H::produce(..., job) (the job's Q, then the producer loop),
//       H::consumer_wait(full_bar, slot), H::consumer_release(empty_bar).
//   the rules (which keys a row sees, which K/V tiles a job and a warpgroup walk, the mask of
//       one S tile, and begin_block: a job may count its tiles, or stop). StandardRules below is
//       08's: causal + window visibility, tiles from 0 to the diagonal (no window skip: skipping
//       the tiles before a window is section 07's lesson, in section 07's rules).
//   H::KernelParams: the kernel's parameter struct, Params or a struct derived from it that
//       carries a section's own fields (07: its --bug switch and its tile counter).
//   H::Tile<T, HEAD_DIM, KV_TILE> (optional): the consumers' tile, a ConsumerTile with a step of
//       its own (12: the epilogue merges into a running state instead of writing O); without
//       it, ConsumerTile.
//
// The kernel is ws_kernel<T, HEAD_DIM, OVERLAP, H, CONS, PINGPONG, KV_TILE, PERSISTENT>: CONS
// consumer warpgroups (1, 2, or 3 at D = 64), PINGPONG for FlashAttention-3's schedule across them,
// KV_TILE keys per K/V tile (128; FlashAttention-3's 176 at D = 128 as section 08's --kv-tile 176),
// and PERSISTENT for a block per SM running one job (a Q tile's work) after another (ws-persistent).
#pragma once
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "lab.cuh"
#include "toolbox/mma_sm80.cuh"  // 16-bit helpers: pack2, from_float2, fast_exp2
#include "toolbox/sm90.cuh"      // mbarrier, TMA, tensor-map edits, setmaxnreg, wgmma and its descriptors

namespace lab::ws {
using namespace lab::sm80;
using namespace lab::sm90;

constexpr int WG_THREADS = 128;                          // a warpgroup: 4 warps
constexpr int CONSUMERS = 2;                             // consumer warpgroups (ws_kernel's CONS: 1, 2; 3 at D = 64)
constexpr int THREADS = (1 + CONSUMERS) * WG_THREADS;    // 384: producer warpgroup + consumers
constexpr int WG_ROWS = 64;                              // query rows per consumer: the M of wgmma
// The ping-pong schedule's consumer warpgroups per block, measured fastest at each D: 3 at D = 64
// (a 192-row block: the K/V tile is half the bytes, so more rows share each fill), else 2.
constexpr int pingpong_consumers(int d) { return d == 64 ? 3 : 2; }
constexpr int BLOCK_Q = CONSUMERS * WG_ROWS;             // 128 query rows per block
constexpr int BLOCK_KV = 128;                            // keys per K/V tile (KV_TILE's default): the N of S = Q Kᵀ
// FlashAttention-3's K/V tile at D = 128 for problems no mask cuts (neither causal nor windowed),
// 176 keys (section 08: ws-pingpong --kv-tile 176; measured no faster than 128 on the H200, so
// not the default). A tile's fixed costs (its barrier waits, the turn of
// the ping-pong, the row max and sum across a quad, the O rescale) are paid once per 176 keys
// instead of 128, and a row walks 27 % fewer tiles. It is 2 slots of K and V (44 KB each) beside
// Q's 32 KB, and S (88) + P (44) + O (64) registers per consumer thread while a PV overlaps the
// softmax: the consumers take 240 registers (RegBudget). Under a causal mask the tile that holds
// the diagonal is partly wasted, and a wider tile wastes more of it: FlashAttention-3 keeps 128
// there, and so does section 07's window.
constexpr int WIDE_BLOCK_KV = 176;
constexpr int BOX_COLS = 64;                             // columns per TMA box: 128 bytes, one swizzle atom
constexpr int ROW_BYTES = BOX_COLS * 2;                  // 128
constexpr uint32_t PRODUCER_REGS = 40;                   // setmaxnreg.dec: TMA issue needs few
constexpr uint32_t CONSUMER_REGS = 232;                  // setmaxnreg.inc: S (64) + O (<= 64) + P (32) fp32/16-bit regs
static_assert(PRODUCER_REGS * WG_THREADS + CONSUMER_REGS * WG_THREADS * CONSUMERS <= 65536,
              "the three warpgroups' registers fit in the SM's 64K");
static_assert(PRODUCER_REGS % 8 == 0 && CONSUMER_REGS % 8 == 0, "setmaxnreg takes multiples of 8");
// The budget per consumer count and K/V tile. __launch_bounds__((1 + CONS)·128, 1) caps every
// thread at entry (168 registers for 384 threads, 128 for 512); setmaxnreg then moves registers
// from the producer to the consumers, within the same 64K. Three consumers (BLOCK_Q = 192, D = 64):
// 32 + 3 x 160 warpgroup-registers per thread = 4 x 128, the whole file; 160 holds S (64) + O (32)
// + P (32). 176-key tiles (2 consumers, D = 128): S (88) + P (44) + O (64) = 196 before addresses
// and the softmax's temporaries, so FlashAttention-3's split: 24 for the producer, 240 each for the
// consumers (24 + 2 x 240 = 3 x 168, the same file).
template <int CONS, int KV_TILE = BLOCK_KV>
struct RegBudget {
  static constexpr bool wide = KV_TILE > BLOCK_KV;
  static_assert(!wide || CONS <= 2, "a wider K/V tile leaves no registers for a third consumer warpgroup");
  static constexpr uint32_t producer = CONS == 3 ? 32 : wide ? 24 : PRODUCER_REGS;
  static constexpr uint32_t consumer = CONS == 3 ? 160 : wide ? 240 : CONSUMER_REGS;
  static_assert(producer * WG_THREADS + consumer * WG_THREADS * CONS <= 65536, "the warpgroups' registers fit in 64K");
  static_assert(producer % 8 == 0 && consumer % 8 == 0, "setmaxnreg takes multiples of 8");
};

constexpr int SMEM_LIMIT = 227 * 1024;  // dynamic shared memory one block may have on sm_90

// The end of a block's shared memory: its mbarriers and the job queue's two slots (BarrierArea).
constexpr int BAR_BYTES = 256;

// The tiles of one instantiation: D = HEAD_DIM, KV_TILE keys per K/V tile (its BLOCK_KV).
template <int HEAD_DIM, int KV_TILE = BLOCK_KV>
struct Tiles {
  static constexpr int BLOCK_KV = KV_TILE;                      // keys per K/V tile: the N of S = Q Kᵀ
  static constexpr int COL_BOXES = HEAD_DIM / BOX_COLS;         // 64-column boxes per row of a tile
  // Q's slot: the rows of up to 2 consumer warpgroups (128), or of 3 at D = 64 (192: section 08's
  // ws-pingpong block there, which fits beside 4 K/V stages; at D = 128 it would not).
  static constexpr int Q_SLOT_ROWS = HEAD_DIM == 64 ? 3 * WG_ROWS : 2 * WG_ROWS;
  static constexpr int MAX_CONSUMERS = Q_SLOT_ROWS / WG_ROWS;
  static constexpr int Q_BOX_BYTES = Q_SLOT_ROWS * ROW_BYTES;   // 16 KB (24 KB at D = 64)
  static constexpr int KV_BOX_BYTES = BLOCK_KV * ROW_BYTES;     // 16 KB (22 KB for 176 keys)
  static constexpr int Q_BYTES = COL_BOXES * Q_BOX_BYTES;       // Q's slot (q_full waits for CONS·64 rows of it)
  static constexpr int KV_TILE_BYTES = COL_BOXES * KV_BOX_BYTES;  // what k_full / v_full wait for
  // K/V slots in the ring: as many as fit beside Q, the barriers and the alignment slack, at most 4
  // (4 at D = 64, 3 at D = 128; 2 with 176-key tiles at D = 128).
  static constexpr int STAGES_FIT = (SMEM_LIMIT - Q_BYTES - BAR_BYTES - 1024) / (2 * KV_TILE_BYTES);
  static constexpr int STAGES = STAGES_FIT < 4 ? STAGES_FIT : 4;
  // Shared memory, from a 1024-byte aligned base (the 128-byte swizzle repeats every 1024 bytes):
  //   Q [COL_BOXES][Q_SLOT_ROWS][64] | K [STAGES][COL_BOXES][BLOCK_KV][64] | V (same) | barriers
  static constexpr int OFF_K = Q_BYTES;
  static constexpr int OFF_V = OFF_K + STAGES * KV_TILE_BYTES;
  static constexpr int OFF_BAR = OFF_V + STAGES * KV_TILE_BYTES;
  static constexpr int SMEM_BYTES = OFF_BAR + BAR_BYTES + 1024;  // + slack to align the base
  static constexpr int D_STEPS = HEAD_DIM / 16;                 // k-steps of S = Q Kᵀ
  static constexpr int KV_STEPS = BLOCK_KV / 16;                // k-steps of O = P V
  static constexpr int S_REGS = BLOCK_KV / 2;                   // fp32 S accumulator per thread (64 x BLOCK_KV / 128)
  static constexpr int O_REGS = HEAD_DIM / 2;                   // fp32 O accumulator per thread
  static_assert(Q_BOX_BYTES % 1024 == 0 && KV_BOX_BYTES % 1024 == 0, "every box starts on a swizzle atom");
  static_assert(BLOCK_KV % 16 == 0 && BLOCK_KV <= 256, "k-steps of 16 keys for P V; a TMA box and a wgmma N of <= 256");
  static_assert(STAGES >= 2 && SMEM_BYTES <= SMEM_LIMIT, "a ring of two slots at least, and one block per SM");
};
static_assert(Tiles<64>::STAGES == 4 && Tiles<128>::STAGES == 3 && Tiles<128, WIDE_BLOCK_KV>::STAGES == 2,
              "the rings the handout describes");
static_assert(Tiles<128, WIDE_BLOCK_KV>::SMEM_BYTES == 32768 + 2 * 2 * 45056 + BAR_BYTES + 1024, "Q 32 KB + 2 x (K + V) 44 KB");
static_assert(BLOCK_Q <= 256, "a TMA box has at most 256 rows");

// ---------------------------------------------------------------------------------------------
// The ring's interface: fill n of the K/V ring (the block's n-th K/V tile) goes to a slot and
// completes one phase of that slot's barriers; a wait names that phase by its parity. Which slot
// and which parity is section 08's exercise (H::ring_slot).
struct RingSlot {
  int stage;        // which K/V slot (and which k_full / v_full / empty barrier)
  uint32_t parity;  // parity of the barrier phase that fill n completes (k_full, v_full) or frees (empty)
};

// The K/V tiles [first, end) a block or a warpgroup walks (the rules' tile_span). end < first
// marks a span not computed yet (section 07's stub): the block does nothing.
struct TileSpan {
  int first, end;
  LAB_HD int count() const { return end - first; }
  LAB_HD bool has(int tile) const { return tile >= first && tile < end; }
};

// ---------------------------------------------------------------------------------------------
struct Params {
  void* o;     // [B, T_q, H, D]
  float* lse;  // [B, H, T_q]
  int t_q, t_kv, h, h_kv;
  bool causal;
  int window;        // sliding window W, 0: none
  float scale;       // 1/sqrt(D)
  float scale_log2;  // scale · log2(e): exp(scale·x) = exp2(scale_log2·x)
  // Section 08's paged variants (the maps are then over one page: (D, H_kv, page_size)).
  const int* block_table;  // [B, table_stride]: logical block -> physical block
  int table_stride, page_size, box_rows;  // box_rows = gcd(page_size, BLOCK_KV)
  const uint8_t* k_pool;   // [num_blocks, page_size, H_kv, D]
  const uint8_t* v_pool;
  int64_t page_bytes;      // page_size · H_kv · D · 2
  const CUtensorMap* page_maps;  // [pool blocks][K, V]: each page's own map, made by edit_page_maps
  // Variant paged-pool (the K/V maps are then over the whole pool: (D, H_kv, page_size, blocks)).
  int pool_blocks;               // a block coordinate past the pool: the box reads as zeros
  int page_shift;                // log2(page_size) when it is a power of two, else -1 (both paged variants)
  const CUtensorMap* last_page_maps;  // [B][K, V]: the sequence's last page, its valid rows only
  // The persistent kernel (section 08's ws-persistent): its jobs, Q tiles per (sequence, head), and
  // the job counter (JobQueue: zeroed once, back at 0 after every launch).
  int jobs, q_tiles;
  unsigned* job_counter;
  // The job order (job_at): Q tiles longest first across a section of this many (sequence, head)s
  // whose K and V fit in L2 together; 0 or 1: a (sequence, head) after another.
  int section_heads;
  int seq_heads;  // B·H: the (sequence, head)s, each q_tiles jobs
};

// The barriers and the job queue at the end of a kernel's shared memory (BAR_BYTES from `at`):
//   q_full, q_empty | job_full[2], job_empty[2] | k_full[STAGES], v_full[STAGES],
//   {k_empty, v_empty}[STAGES] | job[2]
// q_full / q_empty: Q's slot, loaded once per job (a persistent block reloads it for its next job
// once every consumer warpgroup is done with it). job_*: the persistent kernel's queue (JobQueue).
template <int STAGES>
struct BarrierArea {
  static constexpr int BARRIERS = 6 + 4 * STAGES;
  static_assert(8 * BARRIERS + 2 * 4 <= BAR_BYTES, "the barriers and the job slots fit their bytes");
  uint32_t at;    // shared-memory address of the area (8-byte aligned)
  int* job_slot;  // the job queue's two slots, as a generic pointer
  // The area at byte `offset` of the block's shared memory (address `base`, generic pointer `generic`).
  __device__ BarrierArea(uint32_t base, uint8_t* generic, int offset)
      : at(base + uint32_t(offset)), job_slot(reinterpret_cast<int*>(generic + offset + 8 * BARRIERS)) {}
  __device__ uint32_t q_full() const { return at; }
  __device__ uint32_t q_empty() const { return at + 8; }
  __device__ uint32_t job_full(int i) const { return at + 16 + 8 * i; }
  __device__ uint32_t job_empty(int i) const { return at + 32 + 8 * i; }
  __device__ uint32_t k_full(int stage) const { return at + 48 + 8 * stage; }
  __device__ uint32_t v_full(int stage) const { return at + 48 + 8 * (STAGES + stage); }
  __device__ uint32_t k_empty(int stage) const { return at + 48 + 8 * (2 * STAGES + 2 * stage); }
  __device__ uint32_t v_empty(int stage) const { return at + 48 + 8 * (2 * STAGES + 2 * stage + 1); }
  // Thread 0, before the block's __syncthreads: a copy (or the producer's expect_tx) completes a
  // full barrier; each consumer warpgroup releases a slot or Q once; every consumer thread reads a
  // job slot, then arrives on its empty barrier.
  __device__ void init(int consumers) const {
    mbar_init(q_full(), 1);
    mbar_init(q_empty(), consumers);
    for (int i = 0; i < 2; ++i) {
      mbar_init(job_full(i), 1);
      mbar_init(job_empty(i), consumers * WG_THREADS);
    }
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(k_full(s), 1);
      mbar_init(v_full(s), 1);
      mbar_init(k_empty(s), consumers);
      mbar_init(v_empty(s), consumers);
    }
    fence_barrier_init();
  }
};

// Shared-memory addresses of one block's buffers and barriers.
template <int HEAD_DIM, int KV_TILE = BLOCK_KV>
struct Smem : BarrierArea<Tiles<HEAD_DIM, KV_TILE>::STAGES> {
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  uint32_t base;     // shared-memory address, 1024-byte aligned
  __device__ Smem(uint32_t base_, uint8_t* generic)
      : BarrierArea<TL::STAGES>(base_, generic, TL::OFF_BAR), base(base_) {}
  __device__ uint32_t q() const { return base; }
  __device__ uint32_t k(int stage) const { return base + TL::OFF_K + stage * TL::KV_TILE_BYTES; }
  __device__ uint32_t v(int stage) const { return base + TL::OFF_V + stage * TL::KV_TILE_BYTES; }
};

// ---------------------------------------------------------------------------------------------
// A job: one Q tile (the block's CONS·64 rows) of one (sequence, head), and the K/V tiles its rows
// see. A block runs one job (grid = the jobs), or, persistent, a job after another from the
// JobQueue: its ring and Q's slot then run on across jobs, so a job also says where it starts in
// them. Jobs are numbered in the order of the plain grid (x fastest), and job_place says which
// (sequence, head) and Q tile each number is: a (sequence, head) after another, its Q tiles from
// the first; under causal or a window, Q tile by Q tile across a section of (sequence, head)s,
// the longest first.
struct Job {
  int b, head, kv_head, q0;
  int first_tile, n_tiles;  // the K/V tiles [first_tile, first_tile + n_tiles)
  int fill0;                // the ring fill of its first K/V tile (the fills of the block's earlier jobs come first)
  int q_load;               // Q loads of the block's earlier jobs: this job's Q is phase q_load of q_full
  bool run;                 // false: the rules' begin_block stopped it (section 07's stub): nothing done, nothing written
};

// Where job `index` falls: its (sequence, head) bh = b·H + h and its Q tile. The jobs go a
// section of S (sequence, head)s at a time (S = p.section_heads; the last section may be smaller),
// and inside a section Q tile by Q tile, the S heads' tile q before their tile q + 1: the blocks
// running at once share the section's K and V in L2, and under causal (the Q tiles longest first)
// the short jobs of every head of the section come last, where they fill the last wave's gaps. A
// head-major order (S = 1, the order of equal jobs) would start full-length jobs of the last heads
// in the last wave.
struct JobPlace {
  int bh, q_tile;
};
LAB_HD JobPlace job_place(int index, int q_tiles, int heads, int section_heads, bool causal) {
  const int s = section_heads > 1 ? section_heads : 1, per_section = s * q_tiles;
  const int section = index / per_section, first_bh = section * s;
  const int width = heads - first_bh < s ? heads - first_bh : s;  // the last section's heads
  const int r = index - section * per_section, q = r / width;
  return {first_bh + r % width, causal ? q_tiles - 1 - q : q};
}

// Job `index` of the problem (BLOCK_Q rows a Q tile, q_tiles Q tiles a (sequence, head)), after
// the block's job `prev` (no_job() before the first: no fill, no Q load).
template <class H, class KP>
LAB_HD Job job_at(const KP& p, int index, int q_tiles, int block_q, int block_kv, const Job& prev) {
  Job j;
  const JobPlace at = job_place(index, q_tiles, p.seq_heads, p.section_heads, p.causal);
  const int bh = at.bh, q_tile = at.q_tile;
  j.b = bh / p.h;
  j.head = bh % p.h;
  j.kv_head = lab::kv_head_of(j.head, p.h, p.h_kv);
  j.q0 = q_tile * block_q;
  const TileSpan span = H::tile_span(j.q0, j.q0 + block_q, p, block_kv);
  j.first_tile = span.first;
  j.n_tiles = span.count();
  j.run = H::begin_block(p, span);  // (section 07: counts its tiles; its stub's span stops here)
  if (!j.run) j.n_tiles = 0;
  j.fill0 = prev.fill0 + prev.n_tiles;
  j.q_load = prev.q_load + (prev.n_tiles > 0 ? 1 : 0);
  return j;
}
LAB_HD constexpr Job no_job() { return Job{0, 0, 0, 0, 0, 0, 0, 0, false}; }

// The persistent kernel's job queue: the producer warp takes the next job index from a global
// counter (atomicInc: the block that is free first takes the next job, so causal Q tiles, longest
// first, balance across SMs as the hardware's block scheduler balances a plain grid) and passes it
// to the consumer warpgroups through two shared slots, a ring of two like the K/V ring: entry k
// (k = 1, 2, ...: entry 0 is blockIdx.x) in slot (k - 1) % 2, its barriers' phase (k - 1) / 2.
// An index >= p.jobs ends the block. The counter hands out gridDim.x + 0, 1, 2, ...: each block
// fetches once at its start and once after each job it gets, so a launch makes exactly p.jobs
// fetches (gridDim.x of them end a block), and atomicInc's wrap at p.jobs - 1 leaves the counter at
// 0 for the next launch: it is zeroed once, when it is allocated, not before every launch.
struct JobQueue {
  // The counter's wrap (atomicInc's limit: old >= limit ? 0 : old + 1) and the index a fetch of
  // counter value `old` hands out, written once for the kernel and the CPU model (check_jobs).
  LAB_HD static unsigned counter_limit(int jobs) { return unsigned(jobs - 1); }
  LAB_HD static int index_of(int grid, unsigned old) { return grid + int(old); }
  __device__ static int fetch(const Params& p) {
    return index_of(int(gridDim.x), atomicInc(p.job_counter, counter_limit(p.jobs)));
  }
  __device__ static RingSlot slot_of(int k) { return {(k - 1) & 1, uint32_t((k - 1) >> 1) & 1u}; }
  template <class A>
  __device__ static void publish(const A& bars, int k, int index) {  // lane 0 of the producer warp
    const RingSlot s = slot_of(k);
    mbar_wait(bars.job_empty(s.stage), s.parity ^ 1u);  // entry k - 2 has been read by every consumer thread
    bars.job_slot[s.stage] = index;
    mbar_arrive(bars.job_full(s.stage));  // release: the store above is visible to whoever waits on it
  }
  template <class A>
  __device__ static int take(const A& bars, int k) {  // every consumer thread
    const RingSlot s = slot_of(k);
    mbar_wait(bars.job_full(s.stage), s.parity);
    const int index = bars.job_slot[s.stage];  // after the wait (its asm is a compiler barrier too)
    mbar_arrive(bars.job_empty(s.stage));
    return index;
  }
};

// ---------------------------------------------------------------------------------------------
// The rules of section 08: the keys a row sees are lab::visible_keys (causal, and a window if the
// problem has one); the tiles walked are 0 up to the one holding the last row's last key (the
// causal stop); a tile is masked per element where it reaches past what the warp's first row sees
// or starts before its last row's window. The window's tiles are walked and masked, not skipped:
// the skip is section 07's. Rules serve any tile width: tile_span is told the kernel's BLOCK_KV,
// and mask_tile reads it off the S registers it is given (a thread holds BLOCK_KV / 2 of them).
struct StandardRules {
  using KernelParams = Params;
  LAB_HD static lab::KeyRange visible_keys(int row, const Params& p) {
    return lab::visible_keys(row, p.t_q, p.t_kv, p.causal, p.window);
  }
  LAB_HD static TileSpan tile_span(int q_begin, int q_end, const Params& p, int block_kv) {
    if (q_begin >= p.t_q) return {0, 0};  // a warpgroup whose rows are all past T_q
    const int keys_end = visible_keys(lab::imin(q_end, p.t_q) - 1, p).end;
    return {0, lab::ceil_div(keys_end, block_kv)};
  }
  // Key kv0 + 8j + 2t + (e & 1) of row row_g (e < 2) or row_g + 8 is invisible outside that
  // row's visible_keys(). Only tiles reaching past warp_keys_end (what the warp's first row sees)
  // or starting before warp_keys_begin (where its last row's window starts) need it.
  template <int S_REGS>
  __device__ __forceinline__ static void mask_tile(float (&s)[S_REGS], const Params& p, int kv0, int row_g, int t,
                                                   int warp_keys_begin, int warp_keys_end) {
    constexpr int block_kv = 2 * S_REGS;
    if (kv0 + block_kv <= warp_keys_end && kv0 >= warp_keys_begin) return;
    const lab::KeyRange keys[2] = {visible_keys(row_g, p), visible_keys(row_g + 8, p)};
#pragma unroll
    for (int j = 0; j < block_kv / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (!keys[e >> 1].contains(kv0 + 8 * j + 2 * t + (e & 1))) s[4 * j + e] = -INFINITY;
  }
  LAB_HD static bool begin_block(const Params&, TileSpan) { return true; }
};

// ---------------------------------------------------------------------------------------------
// Q, once, on its own barrier (phase 0 is its only one): lane 0 of the producer warp. CONS consumer
// warpgroups: boxes of CONS·64 rows (the map's box), each at the start of its Q_SLOT_ROWS-row slot.
template <int HEAD_DIM, int CONS = CONSUMERS, int KV_TILE>
__device__ __forceinline__ void load_q(const CUtensorMap& q_map, const Smem<HEAD_DIM, KV_TILE>& sm, int b, int head,
                                       int q0) {
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  mbar_arrive_expect_tx(sm.q_full(), TL::COL_BOXES * CONS * WG_ROWS * ROW_BYTES);  // the boxes' bytes
#pragma unroll
  for (int c = 0; c < TL::COL_BOXES; ++c) tma_load_4d(sm.q() + c * TL::Q_BOX_BYTES, &q_map, c * BOX_COLS, head, q0, b, sm.q_full());
}

// One K or V tile (fill `tile`) of the contiguous cache, through the 4-D map (D, H_kv, T_kv, B),
// box (64, 1, KV_TILE, 1): one box per 64 columns, rows past T_kv zero-filled. Lane 0 issues.
template <int HEAD_DIM, int KV_TILE>
__device__ __forceinline__ void load_kv_tile_contiguous(const CUtensorMap& map, uint32_t dst, int tile, int b,
                                                        int kv_head, uint32_t bar) {
  using TL = Tiles<HEAD_DIM, KV_TILE>;
#pragma unroll
  for (int c = 0; c < TL::COL_BOXES; ++c)
    tma_load_4d(dst + c * TL::KV_BOX_BYTES, &map, c * BOX_COLS, kv_head, tile * TL::BLOCK_KV, b, bar);
}

// ---------------------------------------------------------------------------------------------
// Consumer side: one warpgroup, 64 query rows, every K/V tile of the block in ring order.
// Thread lane = 4g + t of warp w (of the warpgroup) owns rows r0 = 16w + g and r0 + 8 of the
// warpgroup's 64; in the accumulators S[4j + e] and O[4j + e] (n-block j of 8 columns) it holds
// columns 8j + 2t + (e & 1) of row r0 (e < 2) or r0 + 8 (e >= 2). See common/toolbox/sm90.cuh.

// Online softmax of a thread's rows row_g (r = 0) and row_g + 8 (r = 1) over one S tile, as in 04
// (the 4 lanes of a quad hold a row's columns between them): new max m, alpha = exp2((m_old -
// m_new)·scale_log2), S -> P = exp2(S·scale_log2 - m_new·scale_log2 + P_LOG2) in place, l = l·alpha +
// sum(P). P_LOG2 = 0, or the fp8 kernel's 8 (P scaled by 2^8, exactly, inside the exp2's FFMA).
// The row max and the row sum are CHAINS = 2 partial results per row, combined at the end: one running
// max (or sum) would be a chain of BLOCK_KV / 4 dependent instructions per row, and with one warp
// per scheduler in its softmax (the other warpgroup waits on its GEMMs) nothing hides their latency.
// SLACK_LOG2 > 0: the running max m moves only when a tile's max passes it by more than SLACK_LOG2
// (log2 units). A P may then reach 2^SLACK_LOG2, far inside fp16's and bf16's range, and on most
// tiles every row of a warp keeps alpha = 1 exactly, so the warp skips O's rescale
// (ConsumerTile::rescale_o). LSE = m·scale + log(l) holds for any m the sums were taken against.
template <int P_LOG2 = 0, int SLACK_LOG2 = 0, int S_REGS>
__device__ __forceinline__ void online_softmax_rows(float (&s)[S_REGS], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                                    float scale_log2) {
  constexpr int NB = S_REGS / 4;  // 8-key n-blocks: the thread holds keys 2t, 2t + 1 of each, per row
  constexpr int CHAINS = 2;
  static_assert(NB >= CHAINS, "a chain per n-block at least");
  float part[2][CHAINS];
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float x = fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]);
      part[r][j % CHAINS] = j < CHAINS ? x : fmaxf(part[r][j % CHAINS], x);
    }
  float max_scaled[2], bias[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = fmaxf(part[r][0], part[r][1]);
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    if constexpr (SLACK_LOG2 == 0) {
      const float m_new = fmaxf(m[r], tile_max);
      max_scaled[r] = m_new == -INFINITY ? 0.f : m_new * scale_log2;  // no key yet: never -inf - -inf
      alpha[r] = fast_exp2(fmaf(m[r], scale_log2, -max_scaled[r]));
      m[r] = m_new;
    } else {
      const float m_old = m[r];
      const bool moves = (tile_max - m_old) * scale_log2 > float(SLACK_LOG2);  // m_old = -inf: any key moves it
      if (moves) m[r] = tile_max;
      max_scaled[r] = m[r] == -INFINITY ? 0.f : m[r] * scale_log2;
      alpha[r] = moves ? fast_exp2(fmaf(m_old, scale_log2, -max_scaled[r])) : 1.f;
    }
    bias[r] = P_LOG2 == 0 ? -max_scaled[r] : float(P_LOG2) - max_scaled[r];
  }
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[4 * j + e] = fast_exp2(fmaf(s[4 * j + e], scale_log2, bias[e / 2]));
      const float x = s[4 * j + e];
      const int r = e / 2, c = (2 * j + e % 2) % CHAINS;
      part[r][c] = 2 * j + e % 2 < CHAINS ? x : part[r][c] + x;
    }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + (part[r][0] + part[r][1]);
}

// A consumer thread's epilogue for its rows row_g and row_g + 8: O = o_acc · out_factor / l in the
// output type T, LSE = m · lse_scale + log(l) - lse_shift (l summed across the quad first). Rows
// past T_q are not written. The 16-bit tile passes (1, softmax scale, 0); the fp8 tile its V
// descale, its descaled softmax scale and 8 ln 2.
template <class T, int HEAD_DIM, int O_REGS>
__device__ __forceinline__ void store_o_lse(const float (&o_acc)[O_REGS], const float (&m)[2], const float (&l)[2],
                                            const Params& p, int b, int head, int row_g, int t, float out_factor,
                                            float lse_scale, float lse_shift) {
  T* o = static_cast<T*>(p.o);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float row_sum = l[r];
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
    const int i = row_g + 8 * r;
    if (i >= p.t_q) continue;
    const float out_scale = row_sum > 0.f ? out_factor / row_sum : 0.f;
    T* o_row = o + ((int64_t(b) * p.t_q + i) * p.h + head) * HEAD_DIM;
#pragma unroll
    for (int j = 0; j < O_REGS / 4; ++j)
      *reinterpret_cast<Vec2<T>*>(o_row + 8 * j + 2 * t) =
          from_float2<T>(o_acc[4 * j + 2 * r] * out_scale, o_acc[4 * j + 2 * r + 1] * out_scale);
    if (t == 0)
      p.lse[(int64_t(b) * p.h + head) * p.t_q + i] =
          row_sum > 0.f ? m[r] * lse_scale + logf(row_sum) - lse_shift : -INFINITY;
  }
}

// consumer_overlapped below walks any tile type with these members (the fp8 kernel's is
// ws_fp8.cuh's fp8::ConsumerTile): Rules, BLOCK_KV, STAGES, q_rows, begin, issue_s, issue_pv,
// fence_pv_operands, mask_all, online_softmax, rescale_o, pack_p, finalize.
template <class T, int HEAD_DIM, class H, int KV_TILE>
struct ConsumerTile {
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  using Rules = H;
  static constexpr int BLOCK_KV = TL::BLOCK_KV;
  static constexpr int STAGES = TL::STAGES;
  float s[TL::S_REGS];               // S = Q Kᵀ for 64 rows x BLOCK_KV keys, then P = exp2(...) in fp32
  uint32_t p_frag[TL::KV_STEPS][4];  // P, 16-bit, as the A registers of O += P V
  float o_acc[TL::O_REGS];           // unnormalised O
  float m[2], l[2];                  // running max (raw scores Q·K) and this thread's part of the row sums
  float alpha[2];                    // the rescale factor of the last tile, per row

  // This warpgroup's 64 rows of Q: the first row of its part of every 64-column box of the slot.
  __device__ __forceinline__ static uint32_t q_rows(uint32_t q_slot, int wg) {
    return q_slot + uint32_t(wg * WG_ROWS * ROW_BYTES);
  }
  __device__ __forceinline__ void begin(const Params&, int /*b*/, int /*head*/) {
#pragma unroll
    for (int i = 0; i < TL::O_REGS; ++i) o_acc[i] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
  // S = Q K_tileᵀ: D/16 wgmmas of m64n{BLOCK_KV}k16, both operands K-major in shared memory. The
  // descriptors walk 16 columns (32 bytes) along a box row, then move to the next 64-column box.
  __device__ __forceinline__ void issue_s(uint32_t q_rows, uint32_t k_slot) {
    const uint64_t a0 = desc_k_major_sw128(q_rows), b0 = desc_k_major_sw128(k_slot);
#pragma unroll
    for (int kk = 0; kk < TL::D_STEPS; ++kk) {
      const uint32_t col = uint32_t((kk % 4) * 32);
      const uint64_t a = desc_advance(a0, (kk / 4) * TL::Q_BOX_BYTES + col);
      const uint64_t b = desc_advance(b0, (kk / 4) * TL::KV_BOX_BYTES + col);
      wgmma_ss<T, BLOCK_KV>(s, a, b, kk > 0);
    }
  }
  // O += P V: BLOCK_KV/16 wgmmas of m64n{D}k16, P from registers, V MN-major: 16 keys (two 8-row
  // groups, SBO = 1024) per k-step, the D columns in 64-column boxes (LBO = one box).
  __device__ __forceinline__ void issue_pv(uint32_t v_slot) {
    const uint64_t v0 = desc_mn_major_sw128(v_slot, TL::KV_BOX_BYTES);
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk)
      wgmma_rs_mn<T, HEAD_DIM>(o_acc, p_frag[kk], desc_advance(v0, uint32_t(kk * 16 * ROW_BYTES)));
  }
  // Mask (the diagonal tile, the ragged end of K/V, a window's start): the section's rule
  // (Rules::mask_tile; StandardRules below is 08's).
  __device__ __forceinline__ void mask(const Params& p, int kv0, int row_g, int warp_keys_begin, int warp_keys_end,
                                       int t) {
    H::mask_tile(s, p, kv0, row_g, t, warp_keys_begin, warp_keys_end);
  }
  __device__ __forceinline__ void mask_all(const Params& p, int kv0, int row_g, int t) {
    H::mask_tile(s, p, kv0, row_g, t, INT_MAX, INT_MIN);  // no key range is whole: every element tested
  }
  // What O += P V writes and reads from registers, fenced after its wait (wgmma_wait).
  __device__ __forceinline__ void fence_pv_operands() {
    fence_accumulators(o_acc);
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) fence_registers(p_frag[kk]);
  }
  // The tile's online softmax (online_softmax_rows). The O rescale by alpha is rescale_o(),
  // separate: the overlapped variant may only do it once the previous O += P V has completed.
  // At D = 128 with a slack of 8 (online_softmax_rows): fewer rescales of O's 64 registers a
  // thread. At D = 64 the rescale is half as long and the slack's test costs more than it saves.
  static constexpr int MAX_SLACK_LOG2 = HEAD_DIM == 128 ? 8 : 0;
  __device__ __forceinline__ void online_softmax(const Params& p) {
    online_softmax_rows<0, MAX_SLACK_LOG2>(s, m, l, alpha, p.scale_log2);
  }
  __device__ __forceinline__ void rescale_o() {
    if constexpr (MAX_SLACK_LOG2 > 0)
      if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;  // no row of the warp moved its max
#pragma unroll
    for (int j = 0; j < TL::O_REGS / 4; ++j) {
      o_acc[4 * j + 0] *= alpha[0];
      o_acc[4 * j + 1] *= alpha[0];
      o_acc[4 * j + 2] *= alpha[1];
      o_acc[4 * j + 3] *= alpha[1];
    }
  }
  // P as the A registers of k-step kk (keys 16kk .. 16kk + 15) = n-blocks 2kk and 2kk + 1 of S.
  __device__ __forceinline__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < TL::KV_STEPS; ++kk) {
      p_frag[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
      p_frag[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
      p_frag[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
      p_frag[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }
  // Finalize (04's): O = o_acc / l, LSE = m·scale + log(l).
  __device__ __forceinline__ void finalize(const Params& p, int b, int head, int row_g, int t) {
    store_o_lse<T, HEAD_DIM>(o_acc, m, l, p, b, head, row_g, t, 1.f, p.scale, 0.f);
  }
};

// The tile the consumers run: H::Tile where the rules name one, else ConsumerTile.
template <class H, class T, int HEAD_DIM, int KV_TILE, class = void>
struct TileOf {
  using type = ConsumerTile<T, HEAD_DIM, H, KV_TILE>;
};
template <class H, class T, int HEAD_DIM, int KV_TILE>
struct TileOf<H, T, HEAD_DIM, KV_TILE, std::void_t<typename H::template Tile<T, HEAD_DIM, KV_TILE>>> {
  using type = typename H::template Tile<T, HEAD_DIM, KV_TILE>;
};

// The plain loop (variant ws), one tile at a time: wait K, S, release K, softmax, wait V, O += P V,
// release V.
template <class T, int HEAD_DIM, class H, int KV_TILE>
__device__ __forceinline__ void consumer(int wg, const Params& p, const Smem<HEAD_DIM, KV_TILE>& sm, const Job& job) {
  const int b = job.b, head = job.head, q0 = job.q0, first_tile = job.first_tile, n_tiles = job.n_tiles;
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  constexpr int STAGES = TL::STAGES;
  const int tid = threadIdx.x % WG_THREADS, warp = tid / 32, lane = tid % 32;
  const int t = lane % 4;
  const int wg_q0 = q0 + wg * WG_ROWS;            // this warpgroup's first query row
  const int row_g = wg_q0 + 16 * warp + lane / 4;  // this thread's rows: row_g and row_g + 8
  // The tiles this warpgroup needs are a part of the block's (its rows see no further under causal,
  // and with a window its rows' windows may start later); on the others it only waits and releases.
  const TileSpan wg_span = H::tile_span(wg_q0, wg_q0 + WG_ROWS, p, TL::BLOCK_KV);
  const int warp_keys_end = H::visible_keys(wg_q0 + 16 * warp, p).end;
  const int warp_last_row = lab::imin(wg_q0 + 16 * warp + 15, p.t_q - 1);
  const int warp_keys_begin = H::visible_keys(warp_last_row, p).begin;
  using Tile = typename TileOf<H, T, HEAD_DIM, KV_TILE>::type;
  const uint32_t q_rows = Tile::q_rows(sm.q(), wg);  // this warpgroup's 64 rows of Q

  Tile c;
  c.begin(p, b, head);

  if (n_tiles > 0) mbar_wait(sm.q_full(), uint32_t(job.q_load) & 1u);  // Q has landed (a plain block: phase 0, its only one)

  for (int n = 0; n < n_tiles; ++n) {
    const RingSlot slot = H::ring_slot(job.fill0 + n, STAGES);
    const int tile = first_tile + n;
    const bool active = wg_span.has(tile);
    H::consumer_wait(sm.k_full(slot.stage), slot);
    if (active) {
      wgmma_fence();
      c.issue_s(q_rows, sm.k(slot.stage));
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(c.s);
    }
    H::consumer_release(sm.k_empty(slot.stage));  // S has read K: the producer may load the next K there
    if (active) {
      c.mask(p, tile * TL::BLOCK_KV, row_g, warp_keys_begin, warp_keys_end, t);
      c.online_softmax(p);
      c.rescale_o();
      c.pack_p();
    }
    H::consumer_wait(sm.v_full(slot.stage), slot);
    if (active) {
      wgmma_fence();  // o_acc was rescaled and p_frag written since the last wgmma
      c.issue_pv(sm.v(slot.stage));
      wgmma_commit();
      wgmma_wait<0>();  // the slot is read: it may be released
      fence_accumulators(c.o_acc);
    }
    H::consumer_release(sm.v_empty(slot.stage));
  }
  if (n_tiles > 0) H::consumer_release(sm.q_empty());  // Q's slot is free for the block's next job
  c.finalize(p, b, head, row_g, t);
}

// ---------------------------------------------------------------------------------------------
// FlashAttention-3's intra-warpgroup overlap (variants ws-overlap and ws-pingpong; section 07's
// Hopper window): S for tile n is issued before O += P V of tile n - 1, and the softmax of tile n
// runs while that PV is still on the tensor core.
//   prologue: S(a), softmax(a)
//   n > a:    wait PV(n-2), release V(n-2) and K(n-1), O *= alpha(n-1), pack P(n-1) |
//             wait K(n), V(n-1) | issue S(n), PV(n-1) | wait S(n) only | softmax(n)
//   epilogue: wait PV(e-2), release V(e-2) and K(e-1), O *= alpha(e-1), PV(e-1), release V(e-1)
// The same operations on O in the same order as the plain loop (bit-identical results). K and V
// go back apart (k_empty, v_empty): a fill's K a step before its V, so a ring of two slots (the
// 176-key tile) still has a step of slack. The releases sit at the top of the next step on
// purpose: an mbarrier arrive right after the softmax gets scheduled early by ptxas, and drags
// the wait for PV(n-1) up with it, before the exponentials: the overlap would be lost (checked
// in the SASS: DEPBAR.LE gsb0 0x1, then the 64 MUFU.EX2, then DEPBAR.LE gsb0 0x0).
// No branch may sit between the issue of a wgmma and its wait (ptxas would then wait at the
// branch: no overlap), so masked and unmasked tiles run in loops of their own: a masked head
// (a window's first tiles), the plain tiles every row of the warpgroup sees whole, a masked tail
// (the causal diagonal, the ragged end of K/V).
// Fill n of the ring is K/V tile first_tile + n. The warpgroup computes on fills [a, e), its rows'
// span inside the block's; on the others (a window starts later for its rows, the diagonal stops
// earlier) it only waits and releases.
// Turns: the GEMM issues of each step sit between turns.take() and turns.pass(): no-ops for
// ws-overlap, FlashAttention-3's ping-pong order for ws-pingpong (PingPongTurns below). A
// warpgroup takes one turn per fill and one for the last PV: n_tiles + 1, empty ones included.
struct NoTurns {
  __device__ __forceinline__ explicit NoTurns(int) {}
  __device__ __forceinline__ void take() const {}
  __device__ __forceinline__ void pass() const {}
  __device__ __forceinline__ void close() const {}
};
// Tile: the warpgroup's state and the steps of one K/V tile (ConsumerTile above, or the fp8
// kernel's); KP: the kernel's parameters; SM: its shared memory (Smem, or fp8::Smem).
template <class Tile, class KP, class SM, class Turns>
__device__ __forceinline__ void consumer_overlapped(int wg, const KP& p, const SM& sm, const Job& job, Turns& turns) {
  using H = typename Tile::Rules;
  constexpr int BLOCK_KV = Tile::BLOCK_KV;
  constexpr int STAGES = Tile::STAGES;
  const int b = job.b, head = job.head, q0 = job.q0, first_tile = job.first_tile, n_tiles = job.n_tiles;
  const int tid = threadIdx.x % WG_THREADS, warp = tid / 32, lane = tid % 32;
  const int t = lane % 4;
  const int wg_q0 = q0 + wg * WG_ROWS;
  const int row_g = wg_q0 + 16 * warp + lane / 4;
  const uint32_t q_rows = Tile::q_rows(sm.q(), wg);

  // The fills computed on, [a, e) (clamped to the block's: a rule that strays reads wrong, but
  // never leaves a barrier waiting), and the plain ones among them, [p0, p1): tiles that start at
  // or after the last row's first key and end at or before the first row's last key.
  const TileSpan wg_span = H::tile_span(wg_q0, wg_q0 + WG_ROWS, p, BLOCK_KV);
  const int a = wg_span.count() > 0 ? lab::imin(lab::imax(wg_span.first - first_tile, 0), n_tiles) : 0;
  const int e = wg_span.count() > 0 ? lab::imin(lab::imax(wg_span.end - first_tile, a), n_tiles) : 0;
  const int whole_begin = lab::imax(H::visible_keys(lab::imin(wg_q0 + WG_ROWS - 1, p.t_q - 1), p).begin, 0);
  const int whole_end = H::visible_keys(wg_q0, p).end;
  const int p0 = lab::imin(lab::imax(lab::ceil_div(whole_begin, BLOCK_KV) - first_tile, a), e);
  const int p1 = lab::imin(lab::imax(whole_end / BLOCK_KV - first_tile, p0), e);

  auto fill_slot = [&](int n) { return H::ring_slot(job.fill0 + n, STAGES); };  // the job's fill n in the block's ring

  Tile c;
  c.begin(p, b, head);
  if (n_tiles > 0) mbar_wait(sm.q_full(), uint32_t(job.q_load) & 1u);

  auto pass_over = [&](int n) {  // a fill only the other warpgroups need: wait, an empty turn, release
    const RingSlot slot = fill_slot(n);
    H::consumer_wait(sm.k_full(slot.stage), slot);
    H::consumer_wait(sm.v_full(slot.stage), slot);
    turns.take();
    turns.pass();
    H::consumer_release(sm.k_empty(slot.stage));
    H::consumer_release(sm.v_empty(slot.stage));
  };
  // step(n): finish PV(n-2) (wait, release V(n-2) and K(n-1), rescale by alpha(n-1)), pack P(n-1),
  // issue S(n) and PV(n-1), wait for S(n) only, softmax(n) while PV(n-1) runs.
  auto step = [&](int n, auto masked) {
    const RingSlot prev = fill_slot(n - 1), cur = fill_slot(n);
    wgmma_wait<0>();  // PV(n-2) is done
    c.fence_pv_operands();
    if (n - 2 >= a) H::consumer_release(sm.v_empty(fill_slot(n - 2).stage));
    H::consumer_release(sm.k_empty(prev.stage));  // S(n-1) is done too
    c.rescale_o();  // by alpha(n-1) (fp8: PV(n-2) folded into O first)
    c.pack_p();     // P(n-1)
    H::consumer_wait(sm.k_full(cur.stage), cur);
    H::consumer_wait(sm.v_full(prev.stage), prev);
    turns.take();
    wgmma_fence();
    c.issue_s(q_rows, sm.k(cur.stage));
    wgmma_commit();
    c.issue_pv(sm.v(prev.stage));
    wgmma_commit();
    turns.pass();     // (ping-pong) the next warpgroup issues while this one exponentiates
    wgmma_wait<1>();  // S(n) is done (the older group); PV(n-1) may still run
    fence_accumulators(c.s);
    if constexpr (decltype(masked)::value) c.mask_all(p, (first_tile + n) * BLOCK_KV, row_g, t);
    c.online_softmax(p);
  };

  for (int n = 0; n < a; ++n) pass_over(n);
  if (a < e) {
    const RingSlot first = fill_slot(a);
    H::consumer_wait(sm.k_full(first.stage), first);
    turns.take();  // S(a)
    wgmma_fence();
    c.issue_s(q_rows, sm.k(first.stage));
    wgmma_commit();
    turns.pass();
    wgmma_wait<0>();
    fence_accumulators(c.s);
    if (a < p0 || a >= p1) c.mask_all(p, (first_tile + a) * BLOCK_KV, row_g, t);
    c.online_softmax(p);  // O is still 0: its rescale is harmless
    int n = a + 1;
    for (; n < p0; ++n) step(n, std::true_type{});
    for (; n < p1; ++n) step(n, std::false_type{});
    for (; n < e; ++n) step(n, std::true_type{});
    wgmma_wait<0>();
    c.fence_pv_operands();
    H::consumer_release(sm.k_empty(fill_slot(e - 1).stage));
    if (e - 2 >= a) H::consumer_release(sm.v_empty(fill_slot(e - 2).stage));
    H::consumer_release(sm.q_empty());  // S(e-1) is done: Q's slot is free for the block's next job
    c.rescale_o();
    const RingSlot last = fill_slot(e - 1);
    c.pack_p();
    H::consumer_wait(sm.v_full(last.stage), last);
    turns.take();  // the last PV
    wgmma_fence();
    c.issue_pv(sm.v(last.stage));
    wgmma_commit();
    turns.pass();
    wgmma_wait<0>();
    c.fence_pv_operands();
    H::consumer_release(sm.v_empty(last.stage));
  }
  for (int n = e; n < n_tiles; ++n) pass_over(n);
  if (a == e) {  // no fill computed on: the turn of the missing last PV, empty (a job with no tiles: its one turn)
    if (n_tiles > 0) H::consumer_release(sm.q_empty());
    turns.take();
    turns.pass();
  }
  c.finalize(p, b, head, row_g, t);
}

// ---------------------------------------------------------------------------------------------
// FlashAttention-3's ping-pong schedule, on top of the intra-warpgroup overlap above. The CONS
// consumer warpgroups take turns at the tensor core: warpgroup w issues its GEMMs of a step (S(n)
// and O += P(n-1) V) only in its turn, then hands the turn to warpgroup w + 1 (mod CONS) and runs
// its softmax while the others' GEMMs occupy the tensor core. Without the order, the warpgroups
// drift into step with each other: all issue, then all exponentiate, and the tensor core idles
// during the exponentials. With it, one warpgroup's softmax hides under another's GEMMs.
//
// The turn is a named barrier per warpgroup (ids TURN_BAR0 + w; 0 is __syncthreads'), counted
// for 2 warpgroups (256 threads): warpgroup w syncs on its own (waits for its turn), and the
// previous warpgroup arrives on it (bar.arrive does not wait) when its turn ends.
//   - Warpgroup CONS - 1 arrives once on warpgroup 0's barrier before any turn: warpgroup 0 starts.
//   - Every warpgroup takes exactly n_tiles + 1 turns per job (consumer_overlapped: a turn per
//     fill, empty where it has nothing to compute, and one for the last PV; a job with no tile
//     takes its one empty turn), so the turn goes round from one job into the next without a
//     stop; after the block's last job warpgroup 0 takes back (close) the turn warpgroup
//     CONS - 1 handed on: every sync has its arrival, and no arrival is left over.
//   - Turns go round strictly: warpgroup w's arrival for its turn k + 1 cannot come before the
//     turn has gone round once more, so a barrier never holds two arrivals of the same warpgroup.
//   - No deadlock with the ring: a warpgroup waits for its tiles before it takes its turn (so a
//     late copy holds no one else's turn), and the releases of V(n - 2) and K(n - 1) (at the top
//     of step n) need only turns the others have already handed on.
constexpr uint32_t TURN_BAR0 = 1;                  // named barriers 1 .. CONS: whose turn
constexpr uint32_t TURN_THREADS = 2 * WG_THREADS;  // the syncing warpgroup + the arriving one

template <int CONS>
struct PingPongTurns {
  static_assert(CONS >= 2, "ping-pong needs two consumer warpgroups at least");
  uint32_t mine, next;
  bool first_wg;
  __device__ __forceinline__ explicit PingPongTurns(int wg)
      : mine(TURN_BAR0 + uint32_t(wg)), next(TURN_BAR0 + uint32_t((wg + 1) % CONS)), first_wg(wg == 0) {
    if (wg == CONS - 1) named_bar_arrive(TURN_BAR0, TURN_THREADS);  // warpgroup 0 goes first
  }
  __device__ __forceinline__ void take() const { named_bar_sync(mine, TURN_THREADS); }
  // bar.arrive, no branch: it sits between GEMM issues and their waits.
  __device__ __forceinline__ void pass() const { named_bar_arrive(next, TURN_THREADS); }
  // After the block's last job: warpgroup 0 takes back the turn the last warpgroup handed on.
  __device__ __forceinline__ void close() const {
    if (first_wg) take();
  }
};

// ---------------------------------------------------------------------------------------------
// One block: CONS·64 query rows (128 with the default 2 consumer warpgroups) of one (sequence,
// head), (1 + CONS)·128 threads. grid = (ceil(T_q / (CONS·64)), B·H). CONS = 1 is the starved
// configuration of the handout: one warpgroup computes per SM, and the shared memory and the
// producer are the same as for two.
// PINGPONG: the consumers run consumer_overlapped in PingPongTurns (OVERLAP is then
// implied). CONS = 3 (D = 64 only: Q_SLOT_ROWS) is the 192-row block of that schedule at D = 64.
// KV_TILE: keys per K/V tile (BLOCK_KV = 128; WIDE_BLOCK_KV = 176 with 2 consumers at D = 128): the
// ring's slots, the N of S = Q Kᵀ, the k-steps of O += P V and the register budget follow it.
// PERSISTENT (with PINGPONG): grid = (one block per SM), and a block runs job after job from the
// JobQueue (p.jobs of them, p.q_tiles Q tiles per (sequence, head)). Between two jobs nothing
// stops: the producer loads the next job's Q as soon as the consumers are done with the last S of
// this one and its K/V tiles as slots free up, the turn goes on round, and a warpgroup's epilogue
// (O and LSE to memory) runs while the other still computes; a plain grid pays, per block, the
// launch, the barriers' set-up, and the wait for Q and the first K/V tile with the tensor core idle.
template <class T, int HEAD_DIM, bool OVERLAP, class H, int CONS = CONSUMERS, bool PINGPONG = false,
          int KV_TILE = BLOCK_KV, bool PERSISTENT = false>
__global__ void __launch_bounds__((1 + CONS) * WG_THREADS, 1)
ws_kernel(const __grid_constant__ CUtensorMap q_map,  // (D, H, T_q, B), box (64, 1, CONS·64, 1)
          const __grid_constant__ CUtensorMap k_map,  // ws: (D, H_kv, T_kv, B), box (64, 1, KV_TILE, 1); paged: a page;
                                                       // paged-pool: (D, H_kv, page, blocks)
          const __grid_constant__ CUtensorMap v_map,
          const typename H::KernelParams p) {  // Params, or a section's struct derived from it
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();  // compiled for another GPU (a section built for sm_80 too): the host never launches this
#else
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  using Budget = RegBudget<CONS, KV_TILE>;
  static_assert(CONS >= 1 && CONS <= TL::MAX_CONSUMERS, "Q's shared memory holds the consumers' rows");
  static_assert(!PERSISTENT || PINGPONG, "the persistent kernel runs the ping-pong schedule");
  constexpr int ROWS = CONS * WG_ROWS;  // the block's query rows: a job's Q tile
  if (H::ring_slot(0, TL::STAGES).stage < 0) return;  // the ring-slot stub: no work, nothing written

  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
  const Smem<HEAD_DIM, KV_TILE> sm{base, smem_raw + (base - raw)};
  if (threadIdx.x == 0) sm.init(CONS);
  __syncthreads();  // the barriers are initialised before any thread waits on or arrives at them

  // The block's jobs: the plain grid's one (x: its Q tile, y: its (sequence, head)), or the queue's.
  const int q_tiles = PERSISTENT ? p.q_tiles : int(gridDim.x);
  const int first = PERSISTENT ? int(blockIdx.x) : int(blockIdx.y * gridDim.x + blockIdx.x);
  const int jobs = PERSISTENT ? p.jobs : first + 1;

  // The roles: one if/else on the warpgroup, each branch starting with its register budget.
  if (threadIdx.x / WG_THREADS == 0) {
    regs_release<Budget::producer>();
    if (threadIdx.x / 32 == 0) {
      const int lane = threadIdx.x % 32;
      // The index after the next, fetched a job ahead so that the atomic's latency stays off the path.
      int next = PERSISTENT && lane == 0 ? JobQueue::fetch(p) : jobs;
      Job job = no_job();
      for (int k = 0, index = first; index < jobs; ++k) {
        job = job_at<H>(p, index, q_tiles, ROWS, TL::BLOCK_KV, job);
        if (job.run) H::template produce<HEAD_DIM, CONS>(q_map, k_map, v_map, p, sm, job);
        if constexpr (PERSISTENT) {
          if (lane == 0) JobQueue::publish(sm, k + 1, next);
          index = __shfl_sync(0xffffffffu, next, 0);
          if (lane == 0 && index < jobs) next = JobQueue::fetch(p);
        } else {
          index = jobs;
        }
      }
    }
  } else {
    regs_claim<Budget::consumer>();
    const int wg = warp_uniform(int(threadIdx.x / WG_THREADS) - 1);
    using Tile = typename TileOf<H, T, HEAD_DIM, KV_TILE>::type;
    std::conditional_t<PINGPONG, PingPongTurns<CONS>, NoTurns> turns{wg};
    Job job = no_job();
    for (int k = 0, index = first; index < jobs; ++k) {
      job = job_at<H>(p, index, q_tiles, ROWS, TL::BLOCK_KV, job);
      if (job.run) {
        if constexpr (OVERLAP || PINGPONG) consumer_overlapped<Tile>(wg, p, sm, job, turns);
        else consumer<T, HEAD_DIM, H>(wg, p, sm, job);
      }
      index = PERSISTENT ? JobQueue::take(sm, k + 1) : jobs;
    }
    turns.close();
  }
#endif
}

// Whether a section that runs this kernel with its own rules (07's window, 12's ring) can use it
// here: a compute capability 9.0 GPU, sm_90a code for `kernel` in this binary, and section 08's
// ring protocol written (protocol_written: its ring_slot() no longer the stub; kernel = nullptr
// when 08's file is not there to build it). If the protocol is all that is missing, says so on one
// line (unless quiet): the section then runs its mma kernel.
template <class Kernel>
inline bool hopper_kernel_runs(const lab::DeviceInfo& dev, Kernel kernel, bool protocol_written, const char* section,
                               bool quiet) {
  if (dev.cc_major != 9 || dev.cc_minor != 0) return false;
  if constexpr (!std::is_same_v<Kernel, std::nullptr_t>) {
    cudaFuncAttributes attr{};
    CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
    if (attr.binaryVersion != 90) return false;
  }
  if (protocol_written) return true;
  if (!quiet)
    std::printf("%s: the Hopper kernel needs section 08's ring protocol (write it in 08_tma_skeleton.cu first); "
                "running the mma kernel\n", section);
  return false;
}

// The (sequence, head)s of a section of the job order (job_place): as many as have their K and V
// in 32 MB of L2 together (of the H200's 50 MB: the rest for Q, O and other traffic), a power of
// two, times the query heads that share a K/V head. One (sequence, head)'s K and V are
// T_kv · D · 2 · 2 bytes: 2 MB at T_kv = 4096, D = 128, so sections of 16.
inline int section_heads_of(const lab::Problem& pr) {
  if (!pr.causal && pr.window <= 0) return 1;  // equal jobs: no last wave to even out, and few heads' K/V in flight
  constexpr int64_t L2_BUDGET = int64_t(32) << 20;
  const int64_t kv_bytes = int64_t(pr.t_kv) * pr.d * 2 * 2;
  int heads = 1;
  while (2 * heads * kv_bytes <= L2_BUDGET) heads *= 2;
  return heads * (pr.h / pr.h_kv);
}

// The fields of Params every variant sets, from the problem; the paged fields stay 0.
inline Params params_of(const lab::Problem& pr, void* o, float* lse) {
  Params p{};
  p.o = o;
  p.lse = lse;
  p.t_q = pr.t_q;
  p.t_kv = pr.t_kv;
  p.h = pr.h;
  p.h_kv = pr.h_kv;
  p.causal = pr.causal;
  p.window = pr.window;
  p.scale = pr.softmax_scale();
  p.scale_log2 = p.scale * lab::kLog2e;
  p.seq_heads = pr.b * pr.h;
  p.section_heads = section_heads_of(pr);
  return p;
}

// A tensor map over a [.., rows, heads, D] 16-bit tensor: dims (D, heads, rows[, batch]).
inline CUtensorMap make_map(const lab::Problem& pr, const void* base, int heads, int rows, int batch, int box_rows) {
  CUtensorMap map;
  const int64_t d = pr.d, eb = 2;
  const uint64_t dims[4] = {uint64_t(d), uint64_t(heads), uint64_t(rows), uint64_t(batch)};
  const uint64_t strides[3] = {uint64_t(d * eb), uint64_t(heads * d * eb), uint64_t(int64_t(rows) * heads * d * eb)};
  const uint32_t box[4] = {uint32_t(BOX_COLS), 1u, uint32_t(box_rows), 1u};
  const CUtensorMapDataType type =
      pr.dtype == lab::DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const std::string err = encode_tensor_map(&map, type, batch > 0 ? 4 : 3, base, dims, strides, box);
  if (!err.empty()) lab::cuda_fail(cudaErrorInvalidValue, err.c_str(), __FILE__, __LINE__);  // the CUDA-error exit
  return map;
}

}  // namespace lab::ws
