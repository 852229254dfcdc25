// 08 Hopper: TMA, an mbarrier ring, warp specialisation and wgmma (§12.9.2, §12.10.1, §12.12).
//
// What this step adds over 04 (mma.sync, cp.async issued by every thread, one __syncthreads per
// tile): the Hopper forward pass of FlashAttention-3's design, on an H100/H200 only (sm_90a).
//   - Warp specialisation. A block is three warpgroups (384 threads). Warpgroup 0 is the
//     PRODUCER: one of its warps issues every copy and does nothing else; it gives most of its
//     registers back (setmaxnreg.dec to 40). Warpgroups 1 and 2 are CONSUMERS: each owns 64 query
//     rows (BLOCK_Q = 128 per block) and takes the registers (setmaxnreg.inc to 232) that its
//     fp32 accumulators need. Loads and math overlap because different warps do them, not because
//     one thread interleaves them.
//   - TMA (cp.async.bulk.tensor). One instruction copies a whole box (64 columns x 128 rows) of a
//     tensor described by a tensor map made on the host, into shared memory in the 128-byte
//     swizzled layout wgmma reads, zero-filling whatever hangs over the end of T (ragged tiles
//     need no special load path: the scores of those keys are masked).
//   - An mbarrier ring of STAGES K/V slots (3 at D = 128, 4 at D = 64). Per slot: k_full and
//     v_full (the producer arrives once with the bytes to expect; the copy completes them), and
//     k_empty and v_empty (each consumer warpgroup arrives once when it is done with the slot's K,
//     or its V: count 2). K and V are given back apart, as FlashAttention-3's two pipelines do:
//     S reads a tile's K a step before P V reads its V. Q has its own barrier, q_full, used
//     once. Waits name the phase they wait for by its parity, which flips every time the slot
//     index wraps around the ring (ring_slot()).
//   - wgmma (warpgroup MMA, m64nNk16): S = Q Kᵀ with both operands read from shared memory
//     through descriptors (m64n128k16: 64 rows x 128 keys per instruction, 16 columns of D), then
//     O += P V with P from registers (the S accumulator, exponentiated and rounded to 16 bits, is
//     exactly the A-register layout) and V from shared memory, MN-major ("transposed").
//   - The online softmax, the causal mask (bottom-right aligned) and the deferred 1/l are 04's,
//     on the wgmma accumulator layout (warp w of a warpgroup holds rows 16w + g and 16w + g + 8).
//     Causal: K/V tiles past the diagonal are never loaded; the heaviest Q tiles launch first.
// `ws --window W` (with --causal): the window's mask on this kernel; its tiles are walked from 0
// and masked, not skipped (skipping them is section 07's lesson, on this same kernel).
// Variant `ws-overlap`: `ws` plus FlashAttention-3's intra-warpgroup overlap: each consumer issues
// S for tile n before O += P V of tile n - 1, and runs the softmax of tile n while that PV is on
// the tensor core (same arithmetic, same results; one more S in flight per thread).
// --consumers 1 (ws, ws-overlap): one consumer warpgroup per block instead of two (64 query rows,
// 256 threads, the same ring): the producer/consumer ratio of §12.11's pitfall, measured.
// Variant `ws-pingpong`: `ws-overlap` plus FlashAttention-3's ping-pong (inter-warpgroup) schedule:
// the consumer warpgroups take turns at the tensor core, ordered by named barriers (bar.sync on
// one's own, bar.arrive on the next one's), so that one warpgroup's softmax runs while another's
// GEMMs occupy the tensor core (common/hopper/ws_forward.cuh, PingPongTurns). The tile per D:
// at D = 128, 128 query rows (2 consumers) and 128 keys per K/V tile; --kv-tile 176 runs
// FlashAttention-3's 128 x 176 for problems no mask cuts (each tile's fixed costs spread over more
// keys; 2 ring slots, setmaxnreg 24/240 for S (88) + P (44) + O (64)), measured no faster here. At
// D = 64 a GEMM is half as long for the same softmax, so the block takes 3 consumer warpgroups
// (BLOCK_Q = 192, setmaxnreg 32/160): three softmaxes share the time of the GEMMs; its keys stay
// 128 (S and P of more keys do not fit in 160 registers beside O). --consumers 2 or 3 (D = 64,
// ws-overlap and ws-pingpong) (and `ws`) chooses the block, --kv-tile the K/V tile, for the ablation.
// Variant `ws-persistent`: `ws-pingpong` in a persistent kernel: one block per SM, each running
// job after job (a job: one Q tile of one (sequence, head)) from a queue fed by a global atomic
// counter, in the plain grid's order (causal: longest Q tile first within a head). The ring, Q's
// slot (released for the next job's Q once the last S has read it) and the ping-pong's turn run on
// from one job into the next, so no SM waits for a block to end and the next to start.
// Variant `paged`: the same kernel (the plain `ws` loop) reading K/V from a paged cache (06's pool
// [blocks, page, H_kv, D], shuffled block tables, NaN in every slot no sequence owns) through TMA.
// A box may not cross a page, and a tensor map has one base address, so every page gets its own
// map: a small kernel before the attention kernel (edit_page_maps, a warp per page) copies the
// template map to shared memory, rewrites its global address (and its row count, so the last
// page's tail is zero-filled, not NaN) with tensormap.replace, and publishes it to the page's slot
// in global memory (tensormap.cp_fenceproxy, a release fence at GPU scope); in the attention kernel,
// each box of a fill has its own lane of the producer warp, which acquires that page's map
// (fence.proxy.tensormap::generic.acquire) a few fills ahead and issues that box's copy, so the
// fences of a fill wait together. Page sizes: any multiple of 16 (a box is gcd(page, 128) rows);
// --page-size defaults to 64 here.
// Variant `fp8` (FlashAttention-3's fp8 forward; the kernel is common/hopper/ws_fp8.cuh): Q, K, V
// quantised to e4m3 by a pass of its own (timed apart: metrics quantise_ms), one scale per
// (sequence, K/V head) and tensor (amax / 448), V written transposed; S and P V on fp8 wgmma (twice
// bf16's rate), descaled in the softmax and the epilogue; each tile's P V is added to O in fp32
// registers, not in the fp8 tensor core's shorter accumulator; the same ring, run by your protocol. Its
// check has its own bound: 2x the error of unfused fp32 attention on the same quantised inputs with P in e4m3.
// Variant `paged-pool`: the same pool with no edit on the device. One 4-D map covers the whole pool,
// (D, H_kv, page_size, blocks), so the physical block is simply the box's 4th coordinate, read from
// the block table; only the box that holds a sequence's last key goes through a second map, made on
// the host per sequence over its last page with the page's valid rows, so the rows past the end
// read as zeros (the pool holds NaN there). Per page this costs a table read instead of an edit and
// two fences. With T_q < T_kv it is chunked prefill (§12.10.6): a chunk of new queries against
// the paged prefix of its sequence, bottom-right aligned.
// Exercise (ch12/08_tma_skeleton.md): the ring's slot and phase (EXERCISE ring-slot), the
// producer loop (producer-loop: wait for a free slot, expect the bytes, issue the copies), and the
// consumers' wait and release (consumer-wait, consumer-release). The TMA, wgmma and tensor-map
// wrappers (common/toolbox/sm90.cuh), the descriptors and the softmax are given.
// Where the code is: the kernel skeleton (ws_kernel: tiles, shared memory, barriers, roles, the
// consumers' S, softmax, PV and epilogue) is common/hopper/ws_forward.cuh; it asks this file for
// the protocol (namespace ring, below). Section 07 includes that part of this file to run its
// window on the same kernel, so its Hopper variants run on the protocol you write here.
// Run: scripts/lab run 08 -- --t 4096 --causal                    (your stub; needs a Hopper GPU)
//      build/bin/08_tma_skeleton --t 4096 --d 128 --h 16 --b 4 --dtype bf16   (the solution)
//      build/bin/08_tma_skeleton --variant paged --page-size 128 --t 4096 --causal
//      build/bin/08_tma_skeleton --consumers 1 --t 4096 --d 128 --h 16 --b 4   (one consumer warpgroup)
//      build/bin/08_tma_skeleton --variant ws-pingpong --b 4 --h 16 --t 4096 --d 128   (ping-pong)
//      build/bin/08_tma_skeleton --variant ws-pingpong --b 4 --h 16 --t 4096 --d 128 --kv-tile 176
//      build/bin/08_tma_skeleton --variant ws-pingpong --b 2 --h 32 --t 8192 --d 64   (ping-pong, 192-row block)
//      build/bin/08_tma_skeleton --variant ws-persistent --b 4 --h 16 --t 4096 --d 128 (persistent)
//      build/bin/08_tma_skeleton --variant fp8 --t 4096 --d 128 --h 16 --b 4     (e4m3 operands)
//      build/bin/gpu_wgmma_layout                               (the layout self-test)
#include <algorithm>
#include <array>
#include <numeric>
#include <type_traits>
#include <vector>

#include "decode/block_allocator.h"
#include "decode/kv_cache.h"
#include "harness/fp8.h"
#include "lab.cuh"
#include "hopper/ws_forward.cuh"  // this section's kernel, minus the exercises below (and sm90.cuh's wrappers)
#include "hopper/ws_fp8.cuh"      // its fp8 twin (variant fp8), run by the same protocol

// =============================================================================================
// Section 08's ring protocol (the exercises) and the producer's loaders. Section 07 compiles this
// part of the file too (it defines LAB_RING_PROTOCOL_ONLY and includes it) to run its sliding
// window on this kernel: 07's Hopper variants run on the protocol you write here.
namespace ring {
using namespace lab::ws;  // the tiles (BLOCK_Q = BLOCK_KV = 128, 2 consumer warpgroups; or 176 keys), Params, Smem, RingSlot

constexpr int MAX_BOXES = BLOCK_KV / 16;  // paged: boxes per tile at page 16
static_assert(2 * MAX_BOXES <= 32, "paged: a lane of the producer warp per box of K and of V");

// ---------------------------------------------------------------------------------------------
// The ring. K/V tiles are loaded in order n = 0, 1, 2, ... ("fill n") into STAGES slots; every
// use of a slot is one phase of its barriers, and a wait names a phase by its parity (RingSlot).
LAB_HD RingSlot ring_slot(int n, int stages) {
  // BEGIN EXERCISE ring-slot: the slot of fill n and the parity of its barrier phase.
  //   Fills take the slots in turn, and each use of a slot is one phase of its barriers: which
  //   slot is fill n's, and which parity names the phase it completes? (Draw the ring of
  //   ch12/figures/08_ring_timeline.png for STAGES = 3 and fills 0..6.)
  //   Until this returns a stage >= 0, the kernel and the CPU model skip all their work and write
  //   nothing (so the stub fails cleanly instead of waiting forever on a barrier).
  //   Stuck? ch12/hints/08_tma_skeleton.md.
  // STUB: (void)n; (void)stages;
  // STUB: return {-1, 0u};
  return {n % stages, uint32_t(n / stages) & 1u};
  // END EXERCISE
}

// Where the producer's K/V copies read from: the variants.
enum class KvSource {
  contiguous,  // ws, ws-overlap: one 4-D map over the cache [B, T_kv, H_kv, D]
  page_maps,   // paged: one map per page, edited on the device (tensormap.replace), as the chapter says
              //        (by edit_page_maps, once per page and forward; the attention kernel acquires)
  pool_map,    // paged-pool: one 4-D map over the pool, the physical block as a coordinate
};

// Paged (both variants): where key `key` of a sequence lives, its logical page and its row in that
// page; and the physical block of logical page `logical` of sequence b, from its block table.
// A page size that is a power of two (the usual one) takes a shift, not a division: this runs on
// the producer's path from a freed slot to its next copies, once per box and fill, and an integer
// division there is ~20 instructions the copies wait for: one more division per box makes the
// paged variants measurably slower than `ws`.
struct PagePos {
  int logical, row;
};
__device__ __forceinline__ PagePos page_pos(const Params& p, int key) {
  const int logical = p.page_shift >= 0 ? key >> p.page_shift : key / p.page_size;
  return {logical, key - logical * p.page_size};
}
__device__ __forceinline__ int physical_block(const Params& p, int b, int logical) {
  return p.block_table[int64_t(b) * p.table_stride + logical];
}

// Paged, producer side: the lanes of the producer warp share the boxes of a fill, lane
// which·boxes + j owning box j of K (which = 0) or V (1): it reads that box's table entry,
// acquires that page's map and issues that box's copy. An acquire is a fence the issuing thread
// waits for, and it must be the thread that copies; lanes fence in parallel, so a fill costs one
// fence's latency instead of one per box and tensor (4 at page 64, 16 at page 16).
LAB_HD int box_owner(int which, int j, int boxes) { return which * boxes + j; }

// Acquire this lane's page map of fill `fill`, ahead of its copy: done right after fill
// fill - STAGES has been issued, while the ring is full, it is off the path from a freed slot to
// that slot's next copies. (No map changes during the kernel, so an early acquire stays valid.)
__device__ __forceinline__ void acquire_page_map(const Params& p, int fill, int b) {
  const int lane = threadIdx.x % 32, boxes = BLOCK_KV / p.box_rows;
  if (lane >= 2 * boxes) return;
  const int which = lane / boxes, key0 = fill * BLOCK_KV + (lane % boxes) * p.box_rows;
  if (key0 >= p.t_kv) return;  // past the last key: load_kv_tile uses the template map
  const int physical = physical_block(p, b, page_pos(p, key0).logical);
  tensormap_acquire(&p.page_maps[2 * physical + which]);
}

// Producer side: issue the copies of one K or V tile (fill `tile`) into a slot, completing on
// `bar`. Called by the whole producer warp; lane 0 issues (`paged`: a lane per box). (Given: the
// exercise is the loop.)
//   ws:    the 4-D map (D, H_kv, T_kv, B): one box per 64 columns, rows past T_kv zero-filled.
//   paged: box j of K or V from lane box_owner(which, j), through the page's own map (edit_page_maps
//          made it; that lane acquired it STAGES fills ago); boxes past the last key use the
//          template with a row beyond its page (all zeros). After V, each lane acquires its map
//          of fill tile + STAGES.
//   paged-pool: per box, the pool map at (column, kv_head, row in page, physical block); the box
//          holding the last key through the sequence's last-page map; boxes past the last key at
//          block coordinate pool_blocks, outside the pool (all zeros).
template <int HEAD_DIM, KvSource KV, int KV_TILE>
__device__ __forceinline__ void load_kv_tile(const CUtensorMap& map, const Params& p, const Smem<HEAD_DIM, KV_TILE>& sm,
                                             int which, int stage, int tile, int b, int kv_head, uint32_t bar) {
  using TL = Tiles<HEAD_DIM, KV_TILE>;
  static_assert(KV == KvSource::contiguous || KV_TILE == BLOCK_KV, "the paged variants read 128-key tiles");
  const bool leader = threadIdx.x % 32 == 0;
  const uint32_t dst = which == 0 ? sm.k(stage) : sm.v(stage);
  if constexpr (KV == KvSource::contiguous) {
    if (leader) load_kv_tile_contiguous<HEAD_DIM, KV_TILE>(map, dst, tile, b, kv_head, bar);
  } else if constexpr (KV == KvSource::pool_map) {
    const int rows = p.box_rows, boxes = BLOCK_KV / rows;
    if (leader)
      for (int j = 0; j < boxes; ++j) {
        const int key0 = tile * BLOCK_KV + j * rows;
        const uint32_t box_dst = dst + uint32_t(j * rows * ROW_BYTES);
        const PagePos pos = page_pos(p, key0);
        const int row = pos.row;
        if (key0 + rows > p.t_kv && key0 < p.t_kv) {  // the box of the last key: its page's map
          // The host wrote this map: acquire it once, here, where it is first used: a block whose
          // tiles never reach a box the end cuts (T_kv a multiple of the box) never fences at all,
          // and the others fence with their earlier tiles already in flight, not before their first.
          const CUtensorMap* last_page = p.last_page_maps + 2 * b + which;
          tensormap_acquire_host_written(last_page);
#pragma unroll
          for (int c = 0; c < TL::COL_BOXES; ++c)
            tma_load_3d(box_dst + c * TL::KV_BOX_BYTES, last_page, c * BOX_COLS, kv_head, row, bar);
        } else {
          const int block =
              key0 < p.t_kv ? physical_block(p, b, pos.logical) : p.pool_blocks;
#pragma unroll
          for (int c = 0; c < TL::COL_BOXES; ++c)
            tma_load_4d(box_dst + c * TL::KV_BOX_BYTES, &map, c * BOX_COLS, kv_head, row, block, bar);
        }
      }
  } else {
    const int rows = p.box_rows, boxes = BLOCK_KV / rows;
    const int j = threadIdx.x % 32 - box_owner(which, 0, boxes);  // this lane's box of the tile, if any
    __syncwarp();  // no lane copies into the slot before lane 0 has waited for it to be free
    if (j >= 0 && j < boxes) {
      const int key0 = tile * BLOCK_KV + j * rows;
      const uint32_t box_dst = dst + uint32_t(j * rows * ROW_BYTES);
      const bool past_end = key0 >= p.t_kv;
      const PagePos pos = page_pos(p, key0);
      const CUtensorMap* box_map =  // the page's map (this lane acquired it STAGES fills ago), or the template
          past_end ? &map : &p.page_maps[2 * physical_block(p, b, pos.logical) + which];
      const int row = past_end ? p.page_size : pos.row;
#pragma unroll
      for (int c = 0; c < TL::COL_BOXES; ++c)
        tma_load_3d(box_dst + c * TL::KV_BOX_BYTES, box_map, c * BOX_COLS, kv_head, row, bar);
    }
    if (which == 1) acquire_page_map(p, tile + TL::STAGES, b);  // after V: fill `tile` is all issued
  }
}

// fp8: K8 [B, T_kv, H_kv, D] and Vᵀ8 [B, H_kv, D, T_pad], one box per tile each (ws_fp8.cuh). Lane 0 issues.
template <int HEAD_DIM, KvSource KV>
__device__ __forceinline__ void load_kv_tile(const CUtensorMap& map, const Params&, const fp8::Smem<HEAD_DIM>& sm,
                                             int which, int stage, int tile, int b, int kv_head, uint32_t bar) {
  if (threadIdx.x % 32 == 0) fp8::load_kv_tile<HEAD_DIM>(map, sm, which, stage, tile, b, kv_head, bar);
}

// The producer warp. SM is the kernel's shared memory (Smem, or fp8::Smem for the fp8 kernel):
// the tiles and slots differ, the protocol is the same.
// The job (ws_forward.cuh's Job): its Q tile, its K/V tiles first_tile .. + n_tiles, and fill0,
// the ring fill of its first tile (0 for a block that runs one job; the persistent kernel's next
// job goes on where the last one's fills stopped).
template <int HEAD_DIM, KvSource KV, int CONS, class SM = Smem<HEAD_DIM>>
__device__ __forceinline__ void producer(const CUtensorMap& q_map, const CUtensorMap& k_map, const CUtensorMap& v_map,
                                         const Params& p, const SM& sm, const Job& job) {
  using TL = typename SM::TL;
  constexpr int STAGES = TL::STAGES;
  const int lane = threadIdx.x % 32;
  const bool leader = lane == 0;
  const int b = job.b, kv_head = job.kv_head, first_tile = job.first_tile, n_tiles = job.n_tiles;
  if (n_tiles == 0) return;  // no key visible to any row: the consumers write O = 0, LSE = -inf
  if constexpr (KV == KvSource::page_maps)  // the page maps of the first fills (later ones: as fills are issued)
    for (int fill = first_tile; fill < first_tile + lab::imin(n_tiles, TL::STAGES); ++fill) acquire_page_map(p, fill, b);
  // Q: on its own barrier, phase q_load (a block's first job: 0). A later job's Q overwrites the
  // last one's: first every consumer warpgroup has released it (q_empty, the phase before).
  if (leader) {
    if (job.q_load > 0) mbar_wait(sm.q_empty(), uint32_t(job.q_load - 1) & 1u);
    load_q<HEAD_DIM, CONS>(q_map, sm, b, job.head, job.q0);
  }
  // BEGIN EXERCISE producer-loop: fill the ring with the job's n_tiles K/V tiles, in order (its tile n is K/V tile first_tile + n).
  //   For each fill, K and then V: wait until the consumers have given that half of its slot back
  //   (FA3's producer_acquire: mbar_wait on the slot's k_empty, then v_empty: which phase?), tell
  //   its full barrier (k_full, v_full) how many bytes are coming (mbar_arrive_expect_tx: the
  //   whole tile, TMA zero-fills rows past T_kv) and issue the copies (load_kv_tile: the whole
  //   warp calls it; lane 0, `leader`, does the barrier work). K first: the consumers start
  //   S = Q Kᵀ while V is in flight.
  //   A fresh barrier reports the phase before its first as complete: every slot starts free.
  //   The job's tile n is the block's fill job.fill0 + n: that fill names the slot and the phase.
  //   Stuck? ch12/hints/08_tma_skeleton.md has the four steps.
  // STUB: (void)leader; (void)k_map; (void)v_map; (void)kv_head; (void)STAGES; (void)first_tile;
  for (int n = 0; n < n_tiles; ++n) {
    const RingSlot slot = ring_slot(job.fill0 + n, STAGES);
    if (leader) {
      mbar_wait(sm.k_empty(slot.stage), slot.parity ^ 1u);
      mbar_arrive_expect_tx(sm.k_full(slot.stage), TL::KV_TILE_BYTES);
    }
    load_kv_tile<HEAD_DIM, KV>(k_map, p, sm, 0, slot.stage, first_tile + n, b, kv_head, sm.k_full(slot.stage));
    if (leader) {
      mbar_wait(sm.v_empty(slot.stage), slot.parity ^ 1u);
      mbar_arrive_expect_tx(sm.v_full(slot.stage), TL::KV_TILE_BYTES);
    }
    load_kv_tile<HEAD_DIM, KV>(v_map, p, sm, 1, slot.stage, first_tile + n, b, kv_head, sm.v_full(slot.stage));
  }
  // END EXERCISE
}

// consumer_wait: every thread of the warpgroup waits until fill `slot` has landed on `full_bar`
// (k_full or v_full of its stage).
__device__ __forceinline__ void consumer_wait(uint32_t full_bar, RingSlot slot) {
  // BEGIN EXERCISE consumer-wait: wait for the phase of `full_bar` that this fill completes.
  //   Every thread of the warpgroup waits (each one's wgmma reads the tile). A warpgroup with
  //   nothing to compute on a tile still waits: its release must be for THAT fill, not run ahead.
  // STUB: (void)full_bar; (void)slot;
  mbar_wait(full_bar, slot.parity);
  // END EXERCISE
}

// consumer_release: the warpgroup is done with a slot's K or V (its wgmmas reading it have
// completed): `empty_bar` is that slot's k_empty or v_empty, or q_empty once the warpgroup's last S
// has read Q (all three count CONS arrivals a phase, one per consumer warpgroup).
__device__ __forceinline__ void consumer_release(uint32_t empty_bar) {
  // BEGIN EXERCISE consumer-release: give the slot's K (or V) back to the producer.
  //   The empty barriers were initialised to count warpgroups (CONS arrivals per phase), not
  //   threads: who arrives? Call sites make sure the wgmmas reading the slot have completed
  //   (wgmma_wait) first: the producer overwrites it next.
  // STUB: (void)empty_bar;
  if (threadIdx.x % WG_THREADS == 0) mbar_arrive(empty_bar);
  // END EXERCISE
}

// The protocol as the kernel asks for it (common/hopper/ws_forward.cuh: H::ring_slot, H::produce,
// H::consumer_wait, H::consumer_release), for a source of K/V.
template <KvSource KV>
struct Protocol {
  LAB_HD static RingSlot ring_slot(int n, int stages) { return ring::ring_slot(n, stages); }
  template <int HEAD_DIM, int CONS, class SM>
  __device__ __forceinline__ static void produce(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                                 const CUtensorMap& v_map, const Params& p, const SM& sm, const Job& job) {
    producer<HEAD_DIM, KV, CONS>(q_map, k_map, v_map, p, sm, job);
  }
  __device__ __forceinline__ static void consumer_wait(uint32_t full_bar, RingSlot slot) { ring::consumer_wait(full_bar, slot); }
  __device__ __forceinline__ static void consumer_release(uint32_t empty_bar) { ring::consumer_release(empty_bar); }
};
}  // namespace ring

#ifndef LAB_RING_PROTOCOL_ONLY  // the rest of section 08: the page-map kernel, the host side, the CPU model
using namespace lab::ws;
using namespace ring;

constexpr int DEFAULT_PAGE = 64;  // --variant paged without --page-size

// ---------------------------------------------------------------------------------------------
// Paged: a tensor map per page, made on the device. A box may not cross a page and a map has one
// base address, so every page gets its own map: the template (over one page, (D, H_kv, page))
// with its global address set to the page and its row count to the page's valid rows (the last
// page's tail then reads as zeros, not as the pool's NaN). One warp per (sequence, logical page)
// edits a shared copy (tensormap.replace, lane 0) and publishes it to page_maps[physical] with a
// release fence at GPU scope (tensormap.cp_fenceproxy, the whole warp). The attention kernel,
// launched after it, acquires a page's map before its first copy through it.
//
// Why a kernel of its own, once per page: editing in the attention kernel's producer would make
// every block redo every page it reads, per head and per query tile, with a release fence each
// time, and the producer becomes the bottleneck (about half of `ws`'s speed at page 64). A serving
// engine would make a page's map when the allocator hands the page out; here it is part of every
// forward, and timed with it.
__global__ void __launch_bounds__(32) edit_page_maps(const __grid_constant__ CUtensorMap k_template,
                                                     const __grid_constant__ CUtensorMap v_template, const Params p) {
  __shared__ alignas(128) CUtensorMap edit[2];  // K, V
  const int logical = blockIdx.x, b = blockIdx.y, lane = threadIdx.x;
  if (logical * p.page_size >= p.t_kv) return;  // a table slot past the sequence's end
  const int physical = physical_block(p, b, logical);
  const uint32_t valid = uint32_t(lab::imin(p.page_size, p.t_kv - logical * p.page_size));
  const uint64_t* src = reinterpret_cast<const uint64_t*>(lane < 16 ? &k_template : &v_template);
  reinterpret_cast<uint64_t*>(&edit[lane / 16])[lane % 16] = src[lane % 16];  // 16 lanes x 8 bytes per map
  __syncwarp();  // the copies are complete before lane 0 edits them
  if (lane == 0)
    for (int which = 0; which < 2; ++which) {
      const uint8_t* pool = which == 0 ? p.k_pool : p.v_pool;
      tensormap_replace_address(smem_addr(&edit[which]), pool + int64_t(physical) * p.page_bytes);
      tensormap_replace_dim<2>(smem_addr(&edit[which]), valid);
    }
  __syncwarp();  // the edits are complete before the warp copies the maps out
  tensormap_publish(const_cast<CUtensorMap*>(&p.page_maps[2 * physical]), smem_addr(&edit[0]));
  tensormap_publish(const_cast<CUtensorMap*>(&p.page_maps[2 * physical + 1]), smem_addr(&edit[1]));
}

// The kernel runs this section's protocol (above) with 08's rules (StandardRules: causal, and a
// window's mask when the problem has one).
template <KvSource KV>
struct Hooks : StandardRules, Protocol<KV> {};
// The fp8 kernel: the same protocol and rules, its own parameters (the descale factors).
struct Fp8Hooks : Hooks<KvSource::contiguous> {
  using KernelParams = fp8::Params;
};

// ---------------------------------------------------------------------------------------------
// Host side.
// The block's consumer warpgroups: --consumers, else the variant's tile for this D (ws-pingpong at
// D = 64: 3, a 192-row block; everything else: 2).
bool pingpong_schedule(const std::string& variant) { return variant == "ws-pingpong" || variant == "ws-persistent"; }
int default_consumers(const std::string& variant, const lab::Problem& pr) {
  return pingpong_schedule(variant) ? pingpong_consumers(pr.d) : CONSUMERS;
}
int consumers_of(const lab::Options& o, const lab::Problem& pr) {
  return o.consumers > 0 ? o.consumers : default_consumers(o.variant, pr);
}
// Keys per K/V tile: --kv-tile, else 128. FlashAttention-3's 176-key tile (ws-pingpong at D = 128,
// --kv-tile 176) is timed beside it in the section's pingpong-ablation sweep.
int kv_tile_of(const lab::Options& o) { return o.kv_tile > 0 ? o.kv_tile : BLOCK_KV; }
// The ring and the register budget of the instantiation that runs (for the record).
struct RingInfo {
  int stages, smem_bytes, producer_regs, consumer_regs;
};
template <int HEAD_DIM, int CONS, int KV_TILE>
RingInfo ring_info_of() {
  return {Tiles<HEAD_DIM, KV_TILE>::STAGES, Tiles<HEAD_DIM, KV_TILE>::SMEM_BYTES, int(RegBudget<CONS, KV_TILE>::producer),
          int(RegBudget<CONS, KV_TILE>::consumer)};
}
RingInfo ring_info(int d, int consumers, int kv_tile) {
  if (kv_tile == WIDE_BLOCK_KV) return ring_info_of<128, CONSUMERS, WIDE_BLOCK_KV>();
  if (consumers == 3) return ring_info_of<64, 3, BLOCK_KV>();
  return d == 64 ? ring_info_of<64, CONSUMERS, BLOCK_KV>() : ring_info_of<128, CONSUMERS, BLOCK_KV>();
}
// The ring of the kernel a run launches: keys per K/V tile and slots. The fp8 kernel has its own
// tiles (fp8::Tiles: half the bytes a slot, so more slots), the others ring_info's.
struct RunRing {
  int block_kv, stages;
};
RunRing run_ring(const lab::Problem& pr, const lab::Options& opt) {
  if (opt.variant == "fp8") return {BLOCK_KV, pr.d == 64 ? fp8::Tiles<64>::STAGES : fp8::Tiles<128>::STAGES};
  const int block_kv = kv_tile_of(opt);
  return {block_kv, ring_info(pr.d, consumers_of(opt, pr), block_kv).stages};
}
int page_size_of(const lab::Problem& pr) { return pr.page_size > 0 ? pr.page_size : DEFAULT_PAGE; }
int box_rows_of(int page_size) { return std::gcd(page_size, BLOCK_KV); }
// The paged cache of the problem: every sequence T_kv keys, from a pool shuffled with `seed`
// (06's allocator: its rule sizes the pool, spare blocks included).
lab::PagedCache paged_cache_of(const lab::Problem& pr, uint64_t seed) {
  return lab::build_paged_cache(std::vector<int>(size_t(pr.b), pr.t_kv), pr.t_kv, page_size_of(pr), seed);
}

// The variants' device buffers. Paged: the pool (06's construction: the harness's contiguous K/V
// copied block by block into a shuffled pool whose every other slot holds NaN), the block tables
// and the maps. ws-persistent: the job counter.
struct PagedBuffers {
  lab::DeviceBuffer k_pool, v_pool, tables, page_maps, last_page_maps, job_counter;
};

template <class T, int HEAD_DIM, KvSource KV, bool OVERLAP, int CONS, bool PINGPONG, int KV_TILE, bool PERSISTENT>
void launch(const CUtensorMap& q_map, const CUtensorMap& k_map, const CUtensorMap& v_map, const Params& p, dim3 grid,
            cudaStream_t st) {
  if constexpr (KV == KvSource::page_maps) {  // every page's maps first (k_map, v_map: the templates)
    edit_page_maps<<<dim3(unsigned(lab::ceil_div(p.t_kv, p.page_size)), grid.y / unsigned(p.h)), 32, 0, st>>>(k_map, v_map, p);
    CUDA_CHECK_LAST();
  }
  ws_kernel<T, HEAD_DIM, OVERLAP, Hooks<KV>, CONS, PINGPONG, KV_TILE, PERSISTENT>
      <<<grid, (1 + CONS) * WG_THREADS, Tiles<HEAD_DIM, KV_TILE>::SMEM_BYTES, st>>>(q_map, k_map, v_map, p);
  CUDA_CHECK_LAST();
}

template <class T, int HEAD_DIM, KvSource KV, bool OVERLAP, int CONS = CONSUMERS, bool PINGPONG = false,
          int KV_TILE = BLOCK_KV, bool PERSISTENT = false>
std::function<void(cudaStream_t)> make_forward(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                               const CUtensorMap& v_map, const Params& p, dim3 grid,
                                               std::shared_ptr<PagedBuffers> keep) {
  lab::opt_in_shared_memory(ws_kernel<T, HEAD_DIM, OVERLAP, Hooks<KV>, CONS, PINGPONG, KV_TILE, PERSISTENT>,
                            Tiles<HEAD_DIM, KV_TILE>::SMEM_BYTES);
  return [=](cudaStream_t st) {
    launch<T, HEAD_DIM, KV, OVERLAP, CONS, PINGPONG, KV_TILE, PERSISTENT>(q_map, k_map, v_map, p, grid, st);
    (void)keep;  // the pool, the tables, the map workspace and the job counter live as long as the forward
  };
}

template <class T, int HEAD_DIM>
std::function<void(cudaStream_t)> pick(const std::string& variant, int consumers, int kv_tile, const CUtensorMap& q_map,
                                       const CUtensorMap& k_map, const CUtensorMap& v_map, const Params& p, dim3 grid,
                                       std::shared_ptr<PagedBuffers> keep) {
  if (consumers == 1)  // --consumers 1 (ws and ws-overlap): one consumer warpgroup per block
    return variant == "ws-overlap" ? make_forward<T, HEAD_DIM, KvSource::contiguous, true, 1>(q_map, k_map, v_map, p, grid, keep)
                                   : make_forward<T, HEAD_DIM, KvSource::contiguous, false, 1>(q_map, k_map, v_map, p, grid, keep);
  if constexpr (HEAD_DIM == 64)  // --consumers 3: the 192-row block (Q's slot holds it only at D = 64)
    if (consumers == 3)
      return variant == "ws-persistent"
                 ? make_forward<T, HEAD_DIM, KvSource::contiguous, true, 3, true, BLOCK_KV, true>(q_map, k_map, v_map, p, grid, keep)
             : variant == "ws-pingpong"  ? make_forward<T, HEAD_DIM, KvSource::contiguous, true, 3, true>(q_map, k_map, v_map, p, grid, keep)
             : variant == "ws-overlap" ? make_forward<T, HEAD_DIM, KvSource::contiguous, true, 3>(q_map, k_map, v_map, p, grid, keep)
                                       : make_forward<T, HEAD_DIM, KvSource::contiguous, false, 3>(q_map, k_map, v_map, p, grid, keep);
  if constexpr (HEAD_DIM == 128)  // --kv-tile 176 (ws-pingpong at D = 128)
    if (kv_tile == WIDE_BLOCK_KV)
      return make_forward<T, HEAD_DIM, KvSource::contiguous, true, CONSUMERS, true, WIDE_BLOCK_KV>(q_map, k_map, v_map, p,
                                                                                                   grid, keep);
  if (variant == "ws-persistent")
    return make_forward<T, HEAD_DIM, KvSource::contiguous, true, CONSUMERS, true, BLOCK_KV, true>(q_map, k_map, v_map, p,
                                                                                                 grid, keep);
  if (variant == "ws-pingpong")
    return make_forward<T, HEAD_DIM, KvSource::contiguous, true, CONSUMERS, true>(q_map, k_map, v_map, p, grid, keep);
  if (variant == "paged") return make_forward<T, HEAD_DIM, KvSource::page_maps, false>(q_map, k_map, v_map, p, grid, keep);
  if (variant == "paged-pool")
    return make_forward<T, HEAD_DIM, KvSource::pool_map, false>(q_map, k_map, v_map, p, grid, keep);
  if (variant == "ws-overlap")
    return make_forward<T, HEAD_DIM, KvSource::contiguous, true>(q_map, k_map, v_map, p, grid, keep);
  return make_forward<T, HEAD_DIM, KvSource::contiguous, false>(q_map, k_map, v_map, p, grid, keep);
}

// ---------------------------------------------------------------------------------------------
// Variant fp8 (common/hopper/ws_fp8.cuh). The quantise pass turns the harness's 16-bit Q, K, V into
// Q8, K8 [.., D] and Vᵀ8 [B, H_kv, D, T_pad] e4m3 and writes the scales [3][B·H_kv] (q, k, v); it
// runs once before the forward, which is the attention kernel alone, and is timed on its own.
struct Fp8Buffers {
  lab::DeviceBuffer q8, k8, vt8, amax, scales;
};
int fp8_t_pad(const lab::Problem& pr) { return lab::ceil_div(pr.t_kv, 16) * 16; }  // Vᵀ rows: 16-byte multiples

template <class T>
void quantise_fp8(const lab::Problem& pr, const lab::DeviceTensors& in, const Fp8Buffers& f, cudaStream_t st) {
  const int groups = pr.b * pr.h_kv, t_pad = fp8_t_pad(pr);
  const int64_t most_rows = std::max(int64_t(pr.t_q) * (pr.h / pr.h_kv), int64_t(pr.t_kv));
  const int chunks = int(std::clamp<int64_t>(most_rows * pr.d / 8 / (256 * 8), 1, std::max(1, 4096 / groups)));
  CUDA_CHECK(cudaMemsetAsync(f.amax.get(), 0, f.amax.bytes(), st));
  fp8::amax_kernel<T><<<dim3(unsigned(chunks), unsigned(groups), 3), 256, 0, st>>>(
      static_cast<const T*>(in.q), static_cast<const T*>(in.k), static_cast<const T*>(in.v), f.amax.as<uint32_t>(),
      pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.d);
  CUDA_CHECK_LAST();
  fp8::scales_kernel<<<1, 256, 0, st>>>(f.amax.as<uint32_t>(), f.scales.as<float>(), 3 * groups);
  CUDA_CHECK_LAST();
  const float* scales = f.scales.as<float>();
  auto blocks = [](int64_t elems) { return unsigned(std::clamp<int64_t>(elems / 8 / 256, 1, 132 * 16)); };
  fp8::quantise_kernel<T><<<blocks(pr.q_elems()), 256, 0, st>>>(static_cast<const T*>(in.q), f.q8.as<uint8_t>(), scales,
                                                                pr.b, pr.t_q, pr.h, pr.h / pr.h_kv, pr.h_kv, pr.d);
  CUDA_CHECK_LAST();
  fp8::quantise_kernel<T><<<blocks(pr.kv_elems()), 256, 0, st>>>(static_cast<const T*>(in.k), f.k8.as<uint8_t>(),
                                                                 scales + groups, pr.b, pr.t_kv, pr.h_kv, 1, pr.h_kv, pr.d);
  CUDA_CHECK_LAST();
  const dim3 slabs(unsigned(lab::ceil_div(t_pad, 64)), unsigned(groups));
  if (pr.d == 64)
    fp8::transpose_v_kernel<T, 64><<<slabs, 256, 0, st>>>(static_cast<const T*>(in.v), f.vt8.as<uint8_t>(),
                                                         scales + 2 * groups, pr.t_kv, t_pad, pr.h_kv);
  else
    fp8::transpose_v_kernel<T, 128><<<slabs, 256, 0, st>>>(static_cast<const T*>(in.v), f.vt8.as<uint8_t>(),
                                                          scales + 2 * groups, pr.t_kv, t_pad, pr.h_kv);
  CUDA_CHECK_LAST();
}

// A tensor map over an e4m3 tensor: dims (innermost first) and their byte strides; rows of 64 bytes
// take the 64-byte swizzle (the fp8 kernel's descriptors match: ws_fp8.cuh, Tiles::SWIZZLE).
CUtensorMap make_fp8_map(const void* base, std::array<uint64_t, 4> dims, std::array<uint32_t, 4> box) {
  CUtensorMap map;
  const uint64_t strides[3] = {dims[0], dims[0] * dims[1], dims[0] * dims[1] * dims[2]};
  const CUtensorMapSwizzle swizzle = box[0] == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
  const std::string err =
      encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, base, dims.data(), strides, box.data(), swizzle);
  if (!err.empty()) lab::cuda_fail(cudaErrorInvalidValue, err.c_str(), __FILE__, __LINE__);
  return map;
}

// O_IN_TC: --bug o-in-tensor-core (O summed in the fp8 wgmma's accumulator: ws_fp8.cuh, ConsumerTile).
template <class T, int HEAD_DIM, bool O_IN_TC = false>
std::function<void(cudaStream_t)> make_fp8_forward(const CUtensorMap& q_map, const CUtensorMap& k_map,
                                                   const CUtensorMap& vt_map, const fp8::Params& p, dim3 grid,
                                                   std::shared_ptr<Fp8Buffers> keep) {
  constexpr int smem = fp8::Tiles<HEAD_DIM>::SMEM_BYTES;
  const auto kernel = fp8::ws_fp8_kernel<T, HEAD_DIM, Fp8Hooks, O_IN_TC>;
  lab::opt_in_shared_memory(kernel, smem);
  return [=](cudaStream_t st) {
    kernel<<<grid, THREADS, smem, st>>>(q_map, k_map, vt_map, p);
    CUDA_CHECK_LAST();
    (void)keep;  // Q8, K8, Vᵀ8 and the scales live as long as the forward
  };
}

lab::GpuRun setup_fp8(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const int groups = pr.b * pr.h_kv, t_pad = fp8_t_pad(pr);
  auto f = std::make_shared<Fp8Buffers>();
  f->q8 = lab::DeviceBuffer(size_t(pr.q_elems()));
  f->k8 = lab::DeviceBuffer(size_t(pr.kv_elems()));
  f->vt8 = lab::DeviceBuffer(size_t(int64_t(groups) * pr.d * t_pad));
  f->amax = lab::DeviceBuffer(size_t(3 * groups) * 4);
  f->scales = lab::DeviceBuffer(size_t(3 * groups) * 4);
  const bool f16 = pr.dtype == lab::DType::f16;
  const std::function<void(cudaStream_t)> quantise = [pr, in = ctx.tensors, f, f16](cudaStream_t st) {
    if (f16) quantise_fp8<__half>(pr, in, *f, st);
    else quantise_fp8<__nv_bfloat16>(pr, in, *f, st);
  };
  lab::GpuRun run;
  cudaStream_t st;
  CUDA_CHECK(cudaStreamCreate(&st));
  quantise(st);  // the inputs of every forward
  CUDA_CHECK(cudaStreamSynchronize(st));
  const lab::Options& opt = ctx.options;
  if (opt.iters > 0) {
    const lab::Timing t = lab::time_forward(quantise, opt.warmup, opt.iters, opt.flush_l2, ctx.device, st);
    run.metrics["quantise_ms"] = t.median_ms;
    if (!opt.quiet)
      std::printf("08_tma_skeleton: fp8 quantise pass (amax, scales, Q8, K8, V^T8): %.4g ms median of %d, "
                  "not part of the forward's time\n", t.median_ms, t.iters);
  }
  CUDA_CHECK(cudaStreamDestroy(st));

  fp8::Params p{};
  static_cast<Params&>(p) = params_of(pr, ctx.tensors.o, ctx.tensors.lse);
  p.scales = f->scales.as<float>();
  p.groups = groups;
  p.forget_k_descale = ctx.bug == "forget-descale";
  const uint32_t d = uint32_t(pr.d);
  const CUtensorMap q_map = make_fp8_map(f->q8.get(), {d, uint64_t(pr.h), uint64_t(pr.t_q), uint64_t(pr.b)}, {d, 1, BLOCK_Q, 1});
  const CUtensorMap k_map =
      make_fp8_map(f->k8.get(), {d, uint64_t(pr.h_kv), uint64_t(pr.t_kv), uint64_t(pr.b)}, {d, 1, BLOCK_KV, 1});
  const CUtensorMap vt_map =
      make_fp8_map(f->vt8.get(), {uint64_t(t_pad), d, uint64_t(pr.h_kv), uint64_t(pr.b)}, {BLOCK_KV, d, 1, 1});
  const dim3 grid(unsigned(lab::ceil_div(pr.t_q, BLOCK_Q)), unsigned(pr.b * pr.h));
  auto forward = [&](auto t) -> std::function<void(cudaStream_t)> {
    using T = decltype(t);
    const bool o_in_tc = ctx.bug == "o-in-tensor-core";
    if (pr.d == 64)
      return o_in_tc ? make_fp8_forward<T, 64, true>(q_map, k_map, vt_map, p, grid, f)
                     : make_fp8_forward<T, 64>(q_map, k_map, vt_map, p, grid, f);
    return o_in_tc ? make_fp8_forward<T, 128, true>(q_map, k_map, vt_map, p, grid, f)
                   : make_fp8_forward<T, 128>(q_map, k_map, vt_map, p, grid, f);
  };
  run.forward = f16 ? forward(__half{}) : forward(__nv_bfloat16{});
  // HBM traffic of the forward: Q8, K8, Vᵀ8 read once (1 byte each), O (16-bit) and LSE written.
  run.hbm_bytes_model = pr.q_elems() + 2 * pr.kv_elems() + 2 * pr.q_elems() + 4 * pr.lse_elems();
  run.extra_device_bytes = int64_t(f->q8.bytes() + f->k8.bytes() + f->vt8.bytes() + f->amax.bytes() + f->scales.bytes());
  // The quantise pass reads Q, K, V twice (amax, then the conversion) and writes them in 1 byte.
  run.metrics["quantise_bytes_model"] = 2 * 2 * (pr.q_elems() + 2 * pr.kv_elems()) + pr.q_elems() + 2 * pr.kv_elems();
  run.metrics["scale_granularity"] = "per (sequence, K/V head), amax / 448";
  run.metrics["p_factor"] = 256;
  run.metrics["block_q"] = BLOCK_Q;
  run.metrics["section_heads"] = p.section_heads;
  run.metrics["block_kv"] = BLOCK_KV;
  run.metrics["stages"] = run_ring(pr, ctx.options).stages;
  run.metrics["smem_bytes"] = pr.d == 64 ? fp8::Tiles<64>::SMEM_BYTES : fp8::Tiles<128>::SMEM_BYTES;
  return run;
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  if (ctx.variant == "fp8") return setup_fp8(ctx);
  const lab::Problem& pr = ctx.problem;
  const bool paged = ctx.variant == "paged" || ctx.variant == "paged-pool";
  Params p = params_of(pr, ctx.tensors.o, ctx.tensors.lse);
  const int consumers = consumers_of(ctx.options, pr), block_q = consumers * WG_ROWS;
  const int kv_tile = kv_tile_of(ctx.options);  // keys per K/V tile: the box rows of the K/V maps
  const RingInfo ring = ring_info(pr.d, consumers, kv_tile);
  dim3 grid(unsigned(lab::ceil_div(pr.t_q, block_q)), unsigned(pr.b * pr.h));
  const CUtensorMap q_map = make_map(pr, ctx.tensors.q, pr.h, pr.t_q, pr.b, block_q);
  CUtensorMap k_map, v_map;
  auto keep = std::make_shared<PagedBuffers>();
  lab::GpuRun run;
  if (!paged) {
    k_map = make_map(pr, ctx.tensors.k, pr.h_kv, pr.t_kv, pr.b, kv_tile);
    v_map = make_map(pr, ctx.tensors.v, pr.h_kv, pr.t_kv, pr.b, kv_tile);
  } else {
    const int page = page_size_of(pr), rows = box_rows_of(page);
    const lab::PagedCache cache = paged_cache_of(pr, ctx.options.seed);  // its tables were checked by validate
    const int64_t row_bytes = int64_t(pr.h_kv) * pr.d * 2, pool_bytes = int64_t(cache.num_blocks) * page * row_bytes;
    keep->k_pool = lab::DeviceBuffer(size_t(pool_bytes));
    keep->v_pool = lab::DeviceBuffer(size_t(pool_bytes));
    keep->tables = lab::DeviceBuffer(cache.tables.size() * sizeof(int));
    keep->k_pool.poison();  // every slot no sequence owns stays NaN (0xFFFF: NaN in fp16 and bf16)
    keep->v_pool.poison();
    CUDA_CHECK(cudaMemcpy(keep->tables.get(), cache.tables.data(), keep->tables.bytes(), cudaMemcpyHostToDevice));
    lab::copy_to_paged_pool(cache, ctx.tensors.k, keep->k_pool.get(), pr.t_kv, row_bytes);
    lab::copy_to_paged_pool(cache, ctx.tensors.v, keep->v_pool.get(), pr.t_kv, row_bytes);
    p.block_table = keep->tables.as<int>();
    p.table_stride = cache.table_stride;
    p.page_size = page;
    p.page_shift = (page & (page - 1)) == 0 ? __builtin_ctz(unsigned(page)) : -1;
    p.box_rows = rows;
    p.k_pool = keep->k_pool.as<uint8_t>();
    p.v_pool = keep->v_pool.as<uint8_t>();
    p.page_bytes = int64_t(page) * row_bytes;
    int64_t map_bytes = 0;
    if (ctx.variant == "paged") {
      // Template maps over one page (D, H_kv, page), box (64, 1, rows): edit_page_maps sets the
      // address and the row count per page; used as they are only for boxes past the last key (zeros).
      k_map = make_map(pr, keep->k_pool.get(), pr.h_kv, page, 0, rows);
      v_map = make_map(pr, keep->v_pool.get(), pr.h_kv, page, 0, rows);
      map_bytes = int64_t(cache.num_blocks) * 2 * int64_t(sizeof(CUtensorMap));
      keep->page_maps = lab::DeviceBuffer(size_t(map_bytes));  // [pool blocks][K, V]
      p.page_maps = keep->page_maps.as<CUtensorMap>();
      run.metrics["map_edits_per_forward"] = 2 * pr.b * lab::ceil_div(pr.t_kv, page);
    } else {
      // One map over the whole pool (D, H_kv, page, blocks), and per sequence the maps of its last
      // page with only its valid rows (K and V): the rows past the sequence's end read as zeros.
      k_map = make_map(pr, keep->k_pool.get(), pr.h_kv, page, cache.num_blocks, rows);
      v_map = make_map(pr, keep->v_pool.get(), pr.h_kv, page, cache.num_blocks, rows);
      // Every sequence has T_kv keys here: the same last logical page and valid rows, its own block.
      const int logical = (pr.t_kv - 1) / page, valid = pr.t_kv - logical * page;
      std::vector<CUtensorMap> last_page(size_t(2 * pr.b));
      for (int b = 0; b < pr.b; ++b) {
        const int64_t offset = int64_t(cache.tables[size_t(b) * cache.table_stride + logical]) * p.page_bytes;
        last_page[size_t(2 * b)] = make_map(pr, p.k_pool + offset, pr.h_kv, valid, 0, rows);
        last_page[size_t(2 * b + 1)] = make_map(pr, p.v_pool + offset, pr.h_kv, valid, 0, rows);
      }
      map_bytes = int64_t(last_page.size() * sizeof(CUtensorMap));
      keep->last_page_maps = lab::DeviceBuffer(size_t(map_bytes));
      CUDA_CHECK(cudaMemcpy(keep->last_page_maps.get(), last_page.data(), size_t(map_bytes), cudaMemcpyHostToDevice));
      p.last_page_maps = keep->last_page_maps.as<CUtensorMap>();
      p.pool_blocks = cache.num_blocks;
      run.metrics["map_edits_per_forward"] = 0;
    }
    run.extra_device_bytes = 2 * pool_bytes + int64_t(keep->tables.bytes()) + map_bytes;
    run.metrics["page_size"] = page;
    run.metrics["box_rows"] = rows;
    run.metrics["pool_blocks"] = cache.num_blocks;
    if (!ctx.options.quiet)
      std::printf("08_tma_skeleton: paged K/V, page size %d (TMA boxes of %d rows), a pool of %d blocks\n", page, rows,
                  cache.num_blocks);
  }
  if (ctx.variant == "ws-persistent") {  // a block per SM (one fits), each running jobs from the queue
    int sms = 0, device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    p.q_tiles = int(grid.x);
    p.jobs = int(grid.x * grid.y);
    keep->job_counter = lab::DeviceBuffer(sizeof(unsigned));
    p.job_counter = keep->job_counter.as<unsigned>();
    CUDA_CHECK(cudaMemset(p.job_counter, 0, sizeof(unsigned)));  // once: every launch leaves it at 0 (JobQueue)
    grid = dim3(unsigned(std::min(p.jobs, sms)));
    run.metrics["jobs"] = p.jobs;
    run.carries_state = true;  // the counter: a launch that left it off 0 would skip jobs in the timed runs
  }
  const bool f16 = pr.dtype == lab::DType::f16;
  if (pr.d == 64)
    run.forward = f16 ? pick<__half, 64>(ctx.variant, consumers, kv_tile, q_map, k_map, v_map, p, grid, keep)
                      : pick<__nv_bfloat16, 64>(ctx.variant, consumers, kv_tile, q_map, k_map, v_map, p, grid, keep);
  else
    run.forward = f16 ? pick<__half, 128>(ctx.variant, consumers, kv_tile, q_map, k_map, v_map, p, grid, keep)
                      : pick<__nv_bfloat16, 128>(ctx.variant, consumers, kv_tile, q_map, k_map, v_map, p, grid, keep);
  run.metrics["block_q"] = block_q;
  run.metrics["section_heads"] = p.section_heads;  // the job order's sections (job_place)
  run.metrics["consumers"] = consumers;
  run.metrics["consumers_default"] = default_consumers(ctx.variant, pr);  // the tables name a block other than this
  run.metrics["threads"] = (1 + consumers) * WG_THREADS;
  run.metrics["block_kv"] = kv_tile;
  run.metrics["block_kv_default"] = BLOCK_KV;  // as consumers_default, for the tables
  run.metrics["kv_tiles_per_row"] = lab::ceil_div(pr.t_kv, kv_tile);
  run.metrics["stages"] = ring.stages;
  run.metrics["smem_bytes"] = ring.smem_bytes;
  run.metrics["producer_regs"] = ring.producer_regs;
  run.metrics["consumer_regs"] = ring.consumer_regs;
  run.metrics["pingpong"] = pingpong_schedule(ctx.variant) ? 1 : 0;
  run.metrics["persistent"] = ctx.variant == "ws-persistent" ? 1 : 0;
  run.metrics["grid_blocks"] = int(grid.x * grid.y);
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: the kernel's loop per block, in plain C++. A block's K/V tiles (of the kernel's width:
// 128 keys, or --kv-tile's) pass through a ring of
// STAGES host buffers at the slots ring_slot() gives (rows past T_kv zero, as TMA fills them; the
// paged variant reads them through a NaN-filled pool and block tables); each of the 2 consumer
// "warpgroups" runs the online softmax (base 2, scale_log2 folded in) on its 64 rows; P is rounded
// to the element type before O += P V, as the kernel feeds it to wgmma.
//
// Before that (ring_error, the section's precheck), check_ring() replays the barrier protocol the
// kernel builds on ring_slot(): for every fill it asks whether the producer's waits on k_empty and
// v_empty (parity ^ 1) and the consumers' wait on k_full and v_full (parity) would pass or block,
// exactly as mbarrier.try_wait.parity answers, at the moments that matter. A wrong slot or parity
// is reported by the waits it breaks.
bool wait_passes(int phases_completed, uint32_t parity) { return uint32_t(phases_completed & 1) != parity; }

std::string check_ring(int stages, int fills) {
  std::vector<int> uses(size_t(stages), 0);  // fills of each slot so far = phases its barriers completed
  for (int n = 0; n < fills; ++n) {
    const RingSlot sl = ring_slot(n, stages);
    const std::string at = "ring_slot(" + std::to_string(n) + ", " + std::to_string(stages) + ") = {stage " +
                           std::to_string(sl.stage) + ", parity " + std::to_string(sl.parity) + "}";
    if (sl.stage < 0 || sl.stage >= stages) return at + ": the stage must be in [0, " + std::to_string(stages) + ")";
    if (sl.parity > 1) return at + ": a parity is 0 or 1";
    if (sl.stage != n % stages)  // the kernel's fills take the slots in turn
      return at + ": fills take the slots in turn, so fill " + std::to_string(n) + " goes to slot " +
             std::to_string(n % stages);
    const int u = uses[size_t(sl.stage)];
    // Fill n is the slot's use u: u phases of its barriers have completed when it is issued. The
    // producer's wait (parity ^ 1) must pass now, the consumers' (parity) only once fill n lands.
    // A parity is one bit, so at u completed phases exactly one of the two passes: a wrong parity
    // breaks both waits at once, and the message names both. On a GPU the consumers then read the
    // slot before its tile lands (a wrong O), and their release unblocks the producer: the run need
    // not hang.
    if (!wait_passes(u, sl.parity ^ 1u) || wait_passes(u, sl.parity) || !wait_passes(u + 1, sl.parity))
      return at + ": fill " + std::to_string(n) + " is slot " + std::to_string(sl.stage) + "'s use " +
             std::to_string(u) + ", a phase of parity " + std::to_string(u & 1) +
             ": the consumers' wait on k_full / v_full (parity " + std::to_string(sl.parity) +
             ") would pass before the tile lands, so they would read the slot's old contents, and the producer's " +
             "wait on k_empty / v_empty (parity " + std::to_string(sl.parity ^ 1u) +
             ") would block although the slot is free";
    uses[size_t(sl.stage)] = u + 1;
  }
  return "";
}

// ws-persistent: a block's ring and Q's slot run on from one job into the next, by the job's
// fill0 and q_load (job_at). check_jobs() replays that bookkeeping for blocks that run every
// third job of the problem (the queue hands jobs out in order; which block gets which does not
// change the rule): each job's first fill follows the block's last one, and Q's two barriers pass
// and block where they must (the consumers never read a Q that has not landed, the producer never
// loads the next one before both warpgroups have released the last), as check_ring does for K/V.
std::string check_jobs(const lab::Problem& pr, int consumers, int block_kv, int stages) {
  const Params p = params_of(pr, nullptr, nullptr);
  const int rows = consumers * WG_ROWS, q_tiles = lab::ceil_div(pr.t_q, rows);
  const int jobs = q_tiles * pr.b * pr.h, stride = 3;
  std::vector<int> done(size_t(jobs), 0);  // per (sequence, head, Q tile): the job order covers each once
  for (int first = 0; first < std::min(stride, jobs); ++first) {
    Job job = no_job();
    int fills = 0, loads = 0;  // the block's fills and Q loads so far (q_full's phases; q_empty's once released)
    for (int index = first; index < jobs; index += stride) {
      job = job_at<StandardRules>(p, index, q_tiles, rows, block_kv, job);
      const std::string which = "job " + std::to_string(index) + " (sequence " + std::to_string(job.b) + ", head " +
                                std::to_string(job.head) + ", rows from " + std::to_string(job.q0) + ")";
      if (job.b < 0 || job.b >= pr.b || job.q0 < 0 || job.q0 >= pr.t_q) return which + " is outside the problem";
      if (done[size_t((job.b * pr.h + job.head) * q_tiles + job.q0 / rows)]++ > 0) return which + " is an earlier index's too";
      const std::string at = "job " + std::to_string(index) + " of a block (fill0 " + std::to_string(job.fill0) +
                             ", q_load " + std::to_string(job.q_load) + ")";
      if (job.fill0 != fills) return at + ": its first fill must be the block's next, fill " + std::to_string(fills);
      if (job.n_tiles > 0) {
        if (job.q_load != loads) return at + ": the block has loaded Q " + std::to_string(loads) + " times before it";
        const uint32_t full = uint32_t(job.q_load) & 1u;
        if (wait_passes(loads, full))
          return at + ": the consumers' wait on q_full would pass before its Q lands: they would read the last job's Q";
        if (!wait_passes(loads + 1, full)) return at + ": the consumers' wait on q_full would never pass: a hang";
        if (job.q_load > 0) {
          const uint32_t empty = uint32_t(job.q_load - 1) & 1u;
          if (wait_passes(loads - 1, empty))
            return at + ": the producer's wait on q_empty would pass before the last job's Q is released: it would overwrite it";
          if (!wait_passes(loads, empty)) return at + ": the producer's wait on q_empty would never pass: a hang";
        }
        ++loads;
      }
      fills += job.n_tiles;
    }
    if (std::string bad = check_ring(stages, fills); !bad.empty()) return "the ring over a block's jobs: " + bad;
  }
  // The queue's counter (JobQueue): blocks fetch in a seeded random order, each once at its start
  // and again after every job index it gets, with atomicInc's wrap at JobQueue::counter_limit.
  // Every index from gridDim.x on must be handed out once, and the counter must be back at 0 when
  // the last block ends, where the next launch (the timed runs) starts.
  for (int grid : {1, 7, std::min(jobs, 132)}) {
    if (grid > jobs) continue;
    unsigned counter = 0, seed = 12345u;
    std::vector<int> handed(size_t(jobs), 0);
    std::vector<int> fetches_due(size_t(grid), 1);  // a block's pending fetch: its first
    for (int live = grid; live > 0;) {
      seed = seed * 1664525u + 1013904223u;
      int blk = int((seed >> 8) % unsigned(grid));
      while (fetches_due[size_t(blk)] == 0) blk = (blk + 1) % grid;
      const unsigned old = counter;
      counter = old >= JobQueue::counter_limit(jobs) ? 0u : old + 1u;  // atomicInc
      const int index = JobQueue::index_of(grid, old);
      if (index < jobs) ++handed[size_t(index)];  // the block runs it, then fetches again
      else fetches_due[size_t(blk)] = 0, --live;  // past the last job: the block ends
    }
    for (int index = grid; index < jobs; ++index)
      if (handed[size_t(index)] != 1)
        return "the job queue over " + std::to_string(grid) + " blocks handed job " + std::to_string(index) + " out " +
               std::to_string(handed[size_t(index)]) + " times";
    if (counter != 0)
      return "the job queue over " + std::to_string(grid) + " blocks left its counter at " + std::to_string(counter) +
             ", not 0: the next launch would not start at its first job";
  }
  return "";
}

// The fp8 kernel's arithmetic per row: Q, K, V quantised as the quantise pass does (harness/fp8.h,
// the device's rule), S = Q8·K8 in fp32 over the warpgroup's tiles, the online softmax descaled by
// q_scale·k_scale with P·2^8 rounded to e4m3 for P V and kept in fp32 for l, each tile's P V summed
// on its own and folded in as O = O·α + PV (the kernel's fp32 promotion), O = acc·v_scale / l.
void run_cpu_fp8(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in, std::vector<float>& o,
                 std::vector<float>& lse) {
  const lab::Fp8Inputs f = lab::quantise_e4m3(pr, in);
  const Params rules = params_of(pr, nullptr, nullptr);
  const int d = pr.d;
  lab::parallel_for(int64_t(pr.b) * pr.h * pr.t_q, [&](int64_t row) {
    const int i = int(row % pr.t_q), bh = int(row / pr.t_q), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv), g = b * pr.h_kv + hk;
    const float k_scale = opt.bug == "forget-descale" ? 1.f : f.k_scale[size_t(g)];
    const float scale_log2 = rules.scale_log2 * f.q_scale[size_t(g)] * k_scale;
    const int wg_q0 = i / WG_ROWS * WG_ROWS;
    const TileSpan span = StandardRules::tile_span(wg_q0, wg_q0 + WG_ROWS, rules, BLOCK_KV);  // the warpgroup's tiles
    const lab::KeyRange keys = StandardRules::visible_keys(i, rules);
    const float* q = &f.q8[size_t(pr.q_index(b, i, h))];
    float m = -INFINITY, l = 0.f, s[BLOCK_KV];
    std::vector<float> acc(size_t(d), 0.f), pv(acc.size());
    for (int tile = span.first; tile < span.end; ++tile) {
      float tile_max = -INFINITY;
      for (int c = 0; c < BLOCK_KV; ++c) {
        const int j = tile * BLOCK_KV + c;
        float dot = 0.f;
        if (j < pr.t_kv)
          for (int x = 0; x < d; ++x) dot += q[x] * f.k8[size_t(pr.kv_index(b, j, hk) + x)];
        s[c] = keys.contains(j) ? dot : -INFINITY;
        tile_max = std::max(tile_max, s[c]);
      }
      const float m_new = std::max(m, tile_max);
      const float max_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
      const float alpha = std::exp2(std::fma(m, scale_log2, -max_scaled));
      m = m_new;
      float sum = 0.f;
      std::fill(pv.begin(), pv.end(), 0.f);  // the tile's fresh P V accumulator
      for (int c = 0; c < BLOCK_KV; ++c) {
        const float pc = std::exp2(std::fma(s[c], scale_log2, fp8::P_LOG2_FACTOR - max_scaled));
        sum += pc;
        const float p8 = lab::round_to_e4m3(pc);  // P enters the fp8 wgmma as e4m3
        if (p8 != 0.f)
          for (int x = 0; x < d; ++x) pv[size_t(x)] += p8 * f.v8[size_t(pr.kv_index(b, tile * BLOCK_KV + c, hk) + x)];
      }
      l = l * alpha + sum;
      for (int x = 0; x < d; ++x) acc[size_t(x)] = std::fma(acc[size_t(x)], alpha, pv[size_t(x)]);
    }
    const float out_scale = l > 0.f ? f.v_scale[size_t(g)] / l : 0.f;
    for (int x = 0; x < d; ++x) o[size_t(pr.q_index(b, i, h) + x)] = lab::round_to(pr.dtype, acc[size_t(x)] * out_scale);
    lse[size_t(pr.lse_index(b, h, i))] =
        l > 0.f ? m * (pr.softmax_scale() * f.q_scale[size_t(g)] * k_scale) + std::log(l) - fp8::P_LOG2_FACTOR * lab::kLn2
                : -INFINITY;
  });
}

// What a variant's GPU run holds on top of Q, K, V and O: the fp8 copies, or the paged pool and
// its maps. The CPU model reports these too (not its own fp32 copies of the pool): the memory line
// is the lesson, with or without a GPU.
int64_t workspace_bytes(const lab::Problem& p, const std::string& variant) {
  if (variant == "fp8")  // Q8, K8, Vᵀ8 (1 byte an element) and the amax and scales
    return p.q_elems() + p.kv_elems() + int64_t(p.b) * p.h_kv * p.d * fp8_t_pad(p) + 24 * int64_t(p.b) * p.h_kv;
  if (variant != "paged" && variant != "paged-pool") return 0;
  const int page = page_size_of(p);
  const int64_t pool_blocks = paged_cache_of(p, 0).num_blocks;  // the allocator's rule: used + spare blocks
  const int64_t pool = 2 * pool_blocks * page * p.h_kv * p.d * 2;  // K and V, 16-bit
  const int64_t maps = int64_t(sizeof(CUtensorMap)) *
                       (variant == "paged" ? 2 * pool_blocks     // a K and a V map per pool block
                                           : 2 * int64_t(p.b));  // paged-pool: each sequence's last-page maps
  return pool + maps;
}

// The CPU model's first step (Section::precheck, so a wrong ring is the whole verdict, not followed
// by an O the model never wrote): ring_slot() written, then check_ring (and check_jobs for
// ws-persistent) on the slots this run's ring would take. On a GPU the run goes ahead: a wrong
// protocol shows itself there as what it does, a hang or a stale read.
std::string ring_error(const lab::Problem& pr, const lab::Options& opt) {
  if (!opt.cpu) return "";
  const auto [block_kv, stages] = run_ring(pr, opt);
  if (ring_slot(0, stages).stage < 0) return "ring_slot() is not written yet: the kernel and this model skip every tile";
  if (std::string bad = check_ring(stages, std::max(lab::ceil_div(pr.t_kv, block_kv), 4 * stages)); !bad.empty())
    return bad;
  if (opt.variant == "ws-persistent") return check_jobs(pr, consumers_of(opt, pr), block_kv, stages);
  return "";
}

lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
  lab::CpuRun run;
  const RunRing ring = run_ring(pr, opt);  // keys per K/V tile and slots, as the kernel's
  const int block_kv = ring.block_kv, stages = ring.stages;
  if (std::string(LAB_BUILD_KIND) == "lab") {  // your build: the rest of the protocol is yours, and GPU-only
    run.not_checked =
        "needs a GPU: ring_slot() passed its host check, but the producer loop, consumer_wait and "
        "consumer_release run only on a Hopper GPU (mbarriers, TMA)";
    return run;
  }
  if (opt.bug == "o-in-tensor-core") {  // the bug is the tensor core's short accumulator, which a CPU has not
    run.not_checked = "needs a GPU: --bug o-in-tensor-core is the fp8 tensor core's shorter accumulator, "
                      "which this fp32 model does not have";
    return run;
  }
  if (opt.variant == "fp8") {
    run_cpu_fp8(pr, opt, in, o, lse);
    run.extra_host_bytes = workspace_bytes(pr, opt.variant);  // the GPU run's fp8 copies
    return run;
  }
  const bool paged = opt.variant == "paged" || opt.variant == "paged-pool";  // the same pool, read alike
  const int d = pr.d;
  const float scale_log2 = pr.softmax_scale() * lab::kLog2e;
  const int64_t row_elems = int64_t(pr.h_kv) * d;
  // Where K/V row (b, j, kv_head) comes from: the contiguous cache, or the paged pool.
  lab::PagedCache cache;
  std::vector<float> k_pool, v_pool;
  if (paged) {
    const int page = page_size_of(pr);
    cache = paged_cache_of(pr, opt.seed);
    k_pool = lab::paged_pool(cache, in.k, pr.t_kv, row_elems);
    v_pool = lab::paged_pool(cache, in.v, pr.t_kv, row_elems);
    run.metrics["page_size"] = page;
    if (!opt.quiet) std::printf("08_tma_skeleton (CPU model): paged K/V, page size %d, a pool of %d blocks\n", page, cache.num_blocks);
    run.extra_host_bytes = workspace_bytes(pr, opt.variant);  // the GPU run's pool and maps
  }
  auto kv_row = [&](const std::vector<float>& contiguous, const std::vector<float>& pool, int b, int j, int hk) {
    if (!paged) return &contiguous[size_t(pr.kv_index(b, j, hk))];
    const int64_t slot = int64_t(cache.tables[size_t(b) * cache.table_stride + j / cache.page_size]) * cache.page_size +
                         j % cache.page_size;  // the block table's walk, as the producer's loaders do it
    return &pool[size_t(slot * row_elems + int64_t(hk) * d)];
  };

  const int block_q = consumers_of(opt, pr) * WG_ROWS;  // the kernel's block: its consumer warpgroups' rows
  const int q_tiles = lab::ceil_div(pr.t_q, block_q);
  const Params rules = params_of(pr, nullptr, nullptr);  // what StandardRules reads: the shape, causal, window
  lab::parallel_for(int64_t(pr.b) * pr.h * q_tiles, [&](int64_t block) {
    const int q_tile = int(block % q_tiles), bh = int(block / q_tiles), b = bh / pr.h, h = bh % pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const int q0 = q_tile * block_q;
    const TileSpan span = StandardRules::tile_span(q0, q0 + block_q, rules, block_kv);  // the kernel's rules
    const int n_tiles = span.count();
    std::vector<float> ring_k(size_t(stages) * block_kv * d), ring_v(ring_k.size());
    std::vector<float> m(size_t(block_q), -INFINITY), l(size_t(block_q), 0.f), acc(size_t(block_q) * d, 0.f);
    std::vector<float> s(static_cast<size_t>(block_kv));  // one row of S
    for (int n = 0; n < n_tiles; ++n) {
      const int stage = ring_slot(n, stages).stage, tile = span.first + n, kv0 = tile * block_kv;
      float* k_slot = &ring_k[size_t(stage) * block_kv * d];
      float* v_slot = &ring_v[size_t(stage) * block_kv * d];
      for (int r = 0; r < block_kv; ++r) {  // the producer's copy: zeros past T_kv
        const int j = kv0 + r;
        if (j < pr.t_kv) {
          std::copy_n(kv_row(in.k, k_pool, b, j, hk), d, k_slot + r * d);
          std::copy_n(kv_row(in.v, v_pool, b, j, hk), d, v_slot + r * d);
        } else {
          std::fill_n(k_slot + r * d, d, 0.f);
          std::fill_n(v_slot + r * d, d, 0.f);
        }
      }
      for (int rr = 0; rr < block_q; ++rr) {  // the consumer warpgroups' rows
        const int i = q0 + rr;
        if (i >= pr.t_q) break;
        const int wg_q0 = q0 + (rr / WG_ROWS) * WG_ROWS;
        if (!StandardRules::tile_span(wg_q0, wg_q0 + WG_ROWS, rules, block_kv).has(tile)) continue;  // not active
        const lab::KeyRange row_keys = StandardRules::visible_keys(i, rules);
        const float* qr = &in.q[size_t(pr.q_index(b, i, h))];
        float tile_max = -INFINITY;
        for (int c = 0; c < block_kv; ++c) {  // S = q·k (float), masked
          float dot = 0.f;
          for (int x = 0; x < d; ++x) dot += qr[x] * k_slot[c * d + x];
          s[size_t(c)] = row_keys.contains(kv0 + c) ? dot : -INFINITY;
          tile_max = std::max(tile_max, s[size_t(c)]);
        }
        const float m_new = std::max(m[size_t(rr)], tile_max);
        const float max_scaled = m_new == -INFINITY ? 0.f : m_new * scale_log2;
        const float alpha = std::exp2(m[size_t(rr)] * scale_log2 - max_scaled);
        m[size_t(rr)] = m_new;
        l[size_t(rr)] *= alpha;
        float* a = &acc[size_t(rr) * d];
        for (int x = 0; x < d; ++x) a[x] *= alpha;
        for (int c = 0; c < block_kv; ++c) {
          const float pc = std::exp2(s[size_t(c)] * scale_log2 - max_scaled);
          l[size_t(rr)] += pc;
          const float p16 = lab::round_to(pr.dtype, pc);  // P enters wgmma as a 16-bit value
          if (p16 != 0.f)
            for (int x = 0; x < d; ++x) a[x] += p16 * v_slot[c * d + x];
        }
      }
    }
    for (int rr = 0; rr < block_q && q0 + rr < pr.t_q; ++rr) {  // finalize
      const int i = q0 + rr;
      const float inv_l = l[size_t(rr)] > 0.f ? 1.f / l[size_t(rr)] : 0.f;
      float* orow = &o[size_t(pr.q_index(b, i, h))];
      for (int x = 0; x < d; ++x) orow[x] = lab::round_to(pr.dtype, acc[size_t(rr) * d + x] * inv_l);
      lse[size_t(pr.lse_index(b, h, i))] =
          l[size_t(rr)] > 0.f ? m[size_t(rr)] * pr.softmax_scale() + std::log(l[size_t(rr)]) : -INFINITY;
    }
  });
  run.metrics["stages"] = stages;
  run.metrics["block_kv"] = block_kv;
  return run;
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "08_tma_skeleton";
  s.title = "Hopper: TMA, mbarrier ring, warp-specialised producer/consumer warpgroups, wgmma (§12.9.2, §12.12)";
  s.variants = {"ws", "paged", "ws-overlap", "paged-pool", "ws-pingpong", "ws-persistent", "fp8"};
  s.fp8_variants = {"fp8"};  // its check: 2x the error of unfused attention on the same e4m3 inputs, P in e4m3
  // fp8: S descaled by q_scale only (k_scale forgotten); O summed in the fp8 tensor core's
  // accumulator over every tile (no promotion: caught on long rows, GPU only).
  s.bugs = {"forget-descale", "o-in-tensor-core"};
  s.precheck = ring_error;
  s.dtypes = {lab::DType::bf16, lab::DType::f16};
  s.needs_sm90a = true;
  s.paged = true;  // --page-size applies (to --variant paged and paged-pool)
  s.consumer_counts = {1, 2, 3};  // --consumers: consumer warpgroups per block (ws, ws-overlap, ws-pingpong, ws-persistent)
  s.consumer_default = "2; 3 for ws-pingpong and ws-persistent at D = 64";
  s.kv_tiles = {BLOCK_KV, WIDE_BLOCK_KV};  // --kv-tile: keys per K/V tile (ws-pingpong)
  s.kv_tile_default = "128; 176 is FlashAttention-3's tile at D = 128, for the ablation";
  s.variants_of_option = {{"--kv-tile", {"ws-pingpong"}}};
  s.supports_window = true;  // --window, with every variant but the paged ones (masked; the skip is 07's)
  s.default_problem.dtype = lab::DType::bf16;
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 2048;
  s.default_problem.d = 128;
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid dimension per head)";
    const bool paged = o.variant == "paged" || o.variant == "paged-pool";
    if (p.window > 0 && paged)
      return "--window applies to --variant ws, ws-overlap, ws-pingpong, ws-persistent and fp8 (the paged variants read whole sequences)";
    if (o.consumers == 1 && (paged || o.variant == "fp8"))
      return "--consumers 1 applies to --variant ws and ws-overlap";
    if (o.consumers == 1 && pingpong_schedule(o.variant))
      return "--consumers 1 with --variant " + o.variant + ": ping-pong needs two consumer warpgroups at least";
    if (o.consumers == 3 && (p.d != 64 || paged || o.variant == "fp8"))
      return "--consumers 3 applies to --variant ws, ws-overlap, ws-pingpong and ws-persistent at --d 64 (Q's shared memory holds 192 rows only there)";
    if (o.kv_tile == WIDE_BLOCK_KV && p.d != 128)
      return "--kv-tile 176 applies at --d 128 (at D = 64 ws-pingpong's 192-row block has no registers for it)";
    if (o.bug == "forget-descale" && o.variant != "fp8")
      return "--bug forget-descale applies to --variant fp8 (the only variant with descale factors)";
    if (o.bug == "o-in-tensor-core" && o.variant != "fp8")
      return "--bug o-in-tensor-core applies to --variant fp8 (the only variant whose tensor core sums with fewer bits than fp32)";
    if (!paged && p.page_size != 0)
      return "--page-size applies to --variant paged and paged-pool (" + o.variant + " reads the contiguous K/V cache)";
    if (paged) return lab::check_block_tables(paged_cache_of(p, o.seed));  // before anything is launched
    return "";
  };
  s.workspace_bytes = workspace_bytes;
  s.workspace_what = "paged pool and page maps";
  s.workspace_what_of_variant = {{"fp8", "fp8 copies of Q, K and V (V transposed) and their scales"}};
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
#endif  // LAB_RING_PROTOCOL_ONLY
