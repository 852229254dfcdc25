// The Hopper (sm_90a) toolbox of section 08, written once and shared with its layout self-tests
// (tests/gpu_wgmma_layout.cu, tests/gpu_fp8_layout.cu): mbarriers, TMA (cp.async.bulk.tensor) with
// tensor maps made on the host, bulk reductions out of shared memory, device-side tensor-map edits
// (paged KV), setmaxnreg, and wgmma (16- and 8-bit operands) with its shared-memory descriptors.
// Plumbing only: the pipeline, the online softmax and the masks stay in the section.
// Build for sm_90a (-gencode=arch=compute_90a,code=sm_90a): wgmma and setmaxnreg exist only there.
//
// Vocabulary (the PTX ISA's):
//   mbarrier     a 64-bit object in shared memory that counts two things per phase: arrivals
//                (threads calling arrive; the count given at init) and transaction bytes (a TMA
//                copy "completes" its bytes on the barrier when they have landed; arrive.expect_tx
//                raises the bytes the phase waits for). A phase completes when both reach zero;
//                the barrier then starts the next phase with the same arrival count. Waiters name
//                the phase they wait for by its parity (phase number & 1): try_wait.parity(p)
//                returns true once the phase of parity p has completed, i.e. while the current
//                phase has the other parity. A freshly initialised barrier is in phase 0, so a wait
//                for parity 1 passes at once ("the phase before 0 has completed").
//   async proxy  TMA and wgmma read/write shared memory through the "async proxy"; ordinary loads
//                and stores use the generic proxy. Between the two, a fence.proxy.async is needed
//                (the mbarrier's complete_tx already orders TMA writes before the waiters' reads).
//   tensor map   a 128-byte descriptor (CUtensorMap) of a global tensor: base address, sizes and
//                strides of up to 5 dimensions, the box (tile) one copy moves, the shared-memory
//                swizzle. Encoded on the host; a kernel takes it as a __grid_constant__ parameter.
//                Elements of a box outside the tensor's sizes are filled with zeros, and still
//                count as transaction bytes: a copy always completes the full box.
#pragma once
#include <cuda.h>          // CUtensorMap and its enums (types only: no -lcuda, see encode_tensor_map)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "toolbox/mma_sm80.cuh"  // 16-bit helpers (Vec2, pack2, from_float2, fast_exp2) and smem_addr

namespace lab::sm90 {
using sm80::smem_addr;

// =============================================================================================
// mbarrier (all addresses are shared-memory addresses, from smem_addr()).

// count = arrivals per phase. One thread initialises; the barrier is then made visible to the
// async proxy (TMA completes bytes on it) and to the other threads (a __syncthreads() after this).
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Generic-proxy writes to shared memory -> visible to the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// One arrival on the current phase.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival, and `bytes` more transaction bytes for the current phase to wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// True once the phase of parity `parity` has completed. (try_wait may suspend the thread for a
// while before it returns false: a loop around it does not spin hot.)
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// Waits for the phase of parity `parity`. A plain loop: a wait that is never satisfied hangs, and
// the lab driver stops the program after the case's time limit.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// =============================================================================================
// TMA: one box of a tensor map -> shared memory at `dst` (1024-byte aligned for the 128-byte
// swizzle), completing its bytes on mbarrier `bar`. Coordinates are element indices, innermost
// dimension first; a box may hang over any edge (that part is zero-filled).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// =============================================================================================
// Bulk copies out of shared memory (no tensor map): `bytes` (a multiple of 16, both addresses
// 16-byte aligned) read from shared memory at `src` and added element-wise into global memory at
// `dst` (reduce: each element's add is atomic, so many blocks may add into the same bytes) or
// written over it (store). They read shared memory through the async proxy: the generic stores
// that filled `src` need a fence_proxy_async_smem() first. The issuing thread tracks them in bulk
// groups of its own: bulk_commit() closes a group; bulk_wait_read<N>() returns once at most N of
// its groups are still reading shared memory (their source may then be overwritten), well before
// the global writes land.
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// =============================================================================================
// Editing a tensor map on the device (paged KV, section 08's `paged` variant). A TMA copy reads
// its map through the tensormap proxy, from global (or param/const) memory, never from shared
// memory, and may cache it. So an edit is: (1) a copy of the map in shared memory (128-byte
// aligned), (2) tensormap.replace of the fields that change, by one thread, (3) the whole warp
// copies it to a global slot with a release fence (tensormap.cp_fenceproxy ... .sync.aligned),
// (4) the thread that will issue the copy acquires the slot (fence.proxy.tensormap::generic
// .acquire), which also drops any stale cached copy of that slot, (5) the copy uses the global slot.
__device__ __forceinline__ void tensormap_replace_address(uint32_t smem_map, const void* address) {
  asm volatile("tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n" ::"r"(smem_map),
               "l"(address)
               : "memory");
}
template <int ORD>  // dimension ORD (0 = innermost) now has `size` elements
__device__ __forceinline__ void tensormap_replace_dim(uint32_t smem_map, uint32_t size) {
  asm volatile("tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], %1, %2;\n" ::"r"(smem_map), "n"(ORD),
               "r"(size)
               : "memory");
}
// Warp-wide (every lane, converged): shared copy -> global slot, then a release fence at GPU scope
// ordering the edit before later tensormap-proxy reads of the slot.
__device__ __forceinline__ void tensormap_publish(void* gmem_map, uint32_t smem_map) {
  asm volatile(
      "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%0], [%1], 128;\n" ::"l"(
          gmem_map),
      "r"(smem_map)
      : "memory");
}
// The acquire side, by the thread that issues the TMA copy through `gmem_map`.
__device__ __forceinline__ void tensormap_acquire(const void* gmem_map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n" ::"l"(gmem_map) : "memory");
}
// A map in global memory that the host wrote (cudaMemcpy before the launch) is acquired once, at
// system scope, by the thread that copies through it (the CUDA guide's rule for such maps).
__device__ __forceinline__ void tensormap_acquire_host_written(const void* gmem_map) {
  asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" ::"l"(gmem_map) : "memory");
}

// =============================================================================================
// Named barriers (bar.sync / bar.arrive with an id other than 0, which __syncthreads uses): a
// barrier `id` completes when `threads` threads (a multiple of 32; every thread of a warp takes
// part) have reached it, by sync (arrive and wait) or arrive (no wait). One warpgroup syncing and
// another arriving on the same id, both naming 256 threads, makes the first wait for the second:
// the ping-pong schedule of section 08 orders its consumer warpgroups so.
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives without waiting. One instruction, no branch: the ping-pong turn hands on with it between
// a wgmma's issue and its wait, where a branch would make ptxas wait at the branch.
__device__ __forceinline__ void named_bar_arrive(uint32_t id, uint32_t threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// =============================================================================================
// setmaxnreg: a warpgroup gives registers back (dec) or takes them (inc). Every warp of the
// warpgroup executes it. It is honoured only when the kernel has a register cap at entry
// (__launch_bounds__(threads, 1)) and the roles are the branches of one if/else; otherwise ptxas
// ignores it and says so (warning C7508).
template <uint32_t REGS>
__device__ __forceinline__ void regs_release() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <uint32_t REGS>
__device__ __forceinline__ void regs_claim() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// =============================================================================================
// wgmma: D (64 x N, fp32, in registers) += A (64 x 16) · B (16 x N), issued by one warpgroup (4
// consecutive warps, the first a multiple of 4). B always comes from shared memory through a
// descriptor; A from shared memory (the "SS" form) or from registers ("RS").
//
// Accumulator layout (the PTX ISA's figure for .m64nNk16 D; CUTLASS's CLayout_64xN): thread
// lane = 4g + t of warp w (0..3) of the warpgroup holds, in d[4j + e] for n-block j = 0..N/8-1,
//     e = 0, 1: row 16w + g,     columns 8j + 2t, 8j + 2t + 1
//     e = 2, 3: row 16w + g + 8, columns 8j + 2t, 8j + 2t + 1
// i.e. mma.sync's m16n8 C fragment, one per n-block, warp w owning rows 16w..16w+15.
// A from registers (16-bit), 4 registers of 2 elements (low half = lower column):
//     a0: row 16w + g, cols 2t, 2t+1   a1: row 16w + g + 8, same   a2: row 16w + g, cols 2t+8, +9   a3: row +8, same
// So n-blocks 2k and 2k+1 of a 64 x N accumulator, rounded to 16 bits and paired, are exactly the
// A registers of k-step k of the next product (P = softmax(S) feeds O += P V without shared memory).
//
// Ordering rules: wgmma.fence before the first wgmma that reads registers written since the last
// one (the accumulators, or A from registers); commit_group closes a batch; wait_group<N> waits
// until at most N batches are in flight. The compiler does not know the accumulators change
// asynchronously: fence_accumulators() after the wait makes every later read come after it.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int N>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// ---- Shared-memory matrix descriptors (64 bits): start address >> 4 in bits 0-13, leading
// byte offset (LBO) >> 4 in bits 16-29, stride byte offset (SBO) >> 4 in bits 32-45, base offset
// 0 in bits 49-51 (every atom here starts 1024-byte aligned), layout 1 = 128-byte swizzle in bits
// 62-63. The 128-byte swizzle is TMA's CU_TENSOR_MAP_SWIZZLE_128B: in each 8-row x 128-byte atom
// (1024 bytes, aligned), the 16-byte chunk c of row r sits at chunk c ^ r. The hardware applies the
// XOR to the address bits it computes, so a descriptor may start anywhere inside an atom row
// (start + 32 bytes = 16 columns further along a K-major row).
//
// K-major (the reduction dimension K is contiguous: Q and K for S = Q Kᵀ, rows of 64 elements =
// 128 bytes): the operand is 8-row groups of 128-byte rows; SBO = bytes from one 8-row group to
// the next along M/N (1024 when rows are packed); LBO is unused (K = 16 fits in one row).
// The 8-bit kernel's rows are D bytes (64 or 128), so its swizzle width is a parameter: SW = 128
// (layout type 1) or 64 (type 2) bytes per row, SBO = 8 rows of SW bytes.
template <int SW>
__device__ __forceinline__ uint64_t desc_k_major(uint32_t start) {
  static_assert(SW == 128 || SW == 64, "128- or 64-byte swizzle");
  constexpr uint64_t kSbo = 8 * SW, kLbo = 16, kLayout = SW == 128 ? 1 : 2;
  return uint64_t((start >> 4) & 0x3FFF) | (((kLbo >> 4) & 0x3FFF) << 16) | (((kSbo >> 4) & 0x3FFF) << 32) |
         (kLayout << 62);
}
__device__ __forceinline__ uint64_t desc_k_major_sw128(uint32_t start) { return desc_k_major<128>(start); }
// MN-major (the N dimension is contiguous: V [keys][D] as the B of O = P V, where K = keys and
// N = D; transposed: imm-trans-b = 1): each atom is 8 rows of K x 64 contiguous N-elements; SBO =
// bytes from one 8-row group to the next along K (1024); LBO = bytes from one 64-column atom to
// the next along N (for a tile stored as 64-column boxes, the size of one box).
__device__ __forceinline__ uint64_t desc_mn_major_sw128(uint32_t start, uint32_t lbo_bytes) {
  constexpr uint64_t kSbo = 1024;
  return uint64_t((start >> 4) & 0x3FFF) | ((uint64_t(lbo_bytes >> 4) & 0x3FFF) << 16) |
         (((kSbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}
// A descriptor moved `bytes` further into shared memory: only the start field changes, and it holds
// the address >> 4 in its low bits, so the move is one 64-bit add. Build a tile's descriptor once
// and advance it per k-step: rebuilding it from a per-thread address costs ~9 instructions per
// wgmma (shifts, masks and the register-to-uniform moves the wgmma operand needs) on the issue
// path. Exact while the address stays below 256 KB (14 bits of 16-byte units), which every block's
// shared memory (at most 227 KB) does.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); }
// v as lane 0 has it, which the compiler then knows is one value for the whole warp. A warpgroup
// index made so keeps the descriptors built from it in uniform registers, where a wgmma reads them:
// no register-to-uniform moves (R2UR) on the issue path. (Call it from all 32 lanes.)
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }

// Operand lists of the asm statements below (written once): "{%0, ..., %N-1}" and N "+f" operands.
#define LAB_R0_31                                                                                              \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LAB_R32_63                                                                                             \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, " \
  "%53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LAB_R64_87                                                                                             \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, " \
  "%85, %86, %87"
#define LAB_ACC32_LIST "{" LAB_R0_31 "}"
#define LAB_ACC64_LIST "{" LAB_R0_31 ", " LAB_R32_63 "}"
#define LAB_ACC88_LIST "{" LAB_R0_31 ", " LAB_R32_63 ", " LAB_R64_87 "}"
#define LAB_ACC8(d, i)                                                                                            \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define LAB_ACC32_OPS(d) LAB_ACC8(d, 0), LAB_ACC8(d, 8), LAB_ACC8(d, 16), LAB_ACC8(d, 24)
#define LAB_ACC64_OPS(d) LAB_ACC32_OPS(d), LAB_ACC8(d, 32), LAB_ACC8(d, 40), LAB_ACC8(d, 48), LAB_ACC8(d, 56)
#define LAB_ACC88_OPS(d) LAB_ACC64_OPS(d), LAB_ACC8(d, 64), LAB_ACC8(d, 72), LAB_ACC8(d, 80)

// SS, both operands K-major from shared memory: D (64 x N) = A·B (+ D when accumulate).
// N = 176: section 08's 176-key K/V tile (any multiple of 8 up to 256 is legal; these three are written out).
template <class T, int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  static_assert(N == 64 || N == 128 || N == 176, "instantiated for N = 64, 128 and 176");
  constexpr bool kF16 = std::is_same_v<T, __half>;
  const uint32_t scale_d = accumulate ? 1u : 0u;
#define LAB_WGMMA_SS(NN, TY, LIST, OPS, IA, IB, IS)                                                     \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                                      \
               "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32." TY "." TY " " LIST ", %" #IA ", %" #IB \
               ", p, 1, 1, 0, 0;\n}\n"                                                                \
               : OPS(d)                                                                               \
               : "l"(a_desc), "l"(b_desc), "r"(scale_d))
  if constexpr (N == 176) {
    if constexpr (kF16) LAB_WGMMA_SS(176, "f16", LAB_ACC88_LIST, LAB_ACC88_OPS, 88, 89, 90);
    else LAB_WGMMA_SS(176, "bf16", LAB_ACC88_LIST, LAB_ACC88_OPS, 88, 89, 90);
  } else if constexpr (N == 128) {
    if constexpr (kF16) LAB_WGMMA_SS(128, "f16", LAB_ACC64_LIST, LAB_ACC64_OPS, 64, 65, 66);
    else LAB_WGMMA_SS(128, "bf16", LAB_ACC64_LIST, LAB_ACC64_OPS, 64, 65, 66);
  } else {
    if constexpr (kF16) LAB_WGMMA_SS(64, "f16", LAB_ACC32_LIST, LAB_ACC32_OPS, 32, 33, 34);
    else LAB_WGMMA_SS(64, "bf16", LAB_ACC32_LIST, LAB_ACC32_OPS, 32, 33, 34);
  }
#undef LAB_WGMMA_SS
}

// RS: A (64 x 16) from registers (the layout above), B from shared memory, MN-major (imm-trans-b
// = 1: V stored [keys][D]); always accumulates: D (64 x N) += A·B.
template <class T, int N>
__device__ __forceinline__ void wgmma_rs_mn(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc) {
  static_assert(N == 64 || N == 128, "instantiated for N = 64 and 128");
  constexpr bool kF16 = std::is_same_v<T, __half>;
#define LAB_WGMMA_RS(NN, TY, LIST, OPS, A0, A1, A2, A3, IB, IS)                                             \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #IS ", 0;\n"                                          \
               "wgmma.mma_async.sync.aligned.m64n" #NN "k16.f32." TY "." TY " " LIST ", {%" #A0 ", %" #A1 \
               ", %" #A2 ", %" #A3 "}, %" #IB ", p, 1, 1, 1;\n}\n"                                      \
               : OPS(d)                                                                                   \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1u))
  if constexpr (N == 128) {
    if constexpr (kF16) LAB_WGMMA_RS(128, "f16", LAB_ACC64_LIST, LAB_ACC64_OPS, 64, 65, 66, 67, 68, 69);
    else LAB_WGMMA_RS(128, "bf16", LAB_ACC64_LIST, LAB_ACC64_OPS, 64, 65, 66, 67, 68, 69);
  } else {
    if constexpr (kF16) LAB_WGMMA_RS(64, "f16", LAB_ACC32_LIST, LAB_ACC32_OPS, 32, 33, 34, 35, 36, 37);
    else LAB_WGMMA_RS(64, "bf16", LAB_ACC32_LIST, LAB_ACC32_OPS, 32, 33, 34, 35, 36, 37);
  }
#undef LAB_WGMMA_RS
}
// 8-bit (e4m3) operands: k = 32 per wgmma, and no transpose flags exist for 8-bit types, so both
// operands are K-major (O = P V takes V transposed, Vᵀ [D][keys]).
// S (64 x 128, fp32) = A·B (+ S when accumulate): A and B e4m3 by descriptor.
__device__ __forceinline__ void wgmma_ss_e4m3_n128(float (&d)[64], uint64_t a_desc, uint64_t b_desc, bool accumulate) {
  const uint32_t scale_d = accumulate ? 1u : 0u;
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " LAB_ACC64_LIST ", %64, %65, p, 1, 1;\n}\n"
      : LAB_ACC64_OPS(d)
      : "l"(a_desc), "l"(b_desc), "r"(scale_d));
}
// D (64 x N, fp32) = A·B (+ D when accumulate): A (64 x 32 e4m3) from registers, 4 registers of 4
// bytes (a0: row g, k = 4t..4t+3; a1: row g + 8, same k; a2, a3: k + 16), B e4m3 K-major by descriptor.
template <int N>
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b_desc,
                                              bool accumulate) {
  static_assert(N == 64 || N == 128, "instantiated for N = 64 and 128");
  const uint32_t scale_d = accumulate ? 1u : 0u;
  if constexpr (N == 128)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " LAB_ACC64_LIST ", {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : LAB_ACC64_OPS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
  else
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " LAB_ACC32_LIST ", {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : LAB_ACC32_OPS(d)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d));
}
#undef LAB_ACC8
#undef LAB_ACC32_OPS
#undef LAB_ACC64_OPS
#undef LAB_ACC88_OPS
#undef LAB_ACC32_LIST
#undef LAB_ACC64_LIST
#undef LAB_ACC88_LIST
#undef LAB_R0_31
#undef LAB_R32_63
#undef LAB_R64_87

// =============================================================================================
// Host: tensor maps. cuTensorMapEncodeTiled is a driver API function; it is reached through the
// runtime's entry-point query, so nothing links libcuda directly. Returns "" or the reason.
//   dims[i], box[i]: sizes in elements, innermost first; strides[i]: bytes between consecutive
//   indices of dimension i + 1 (multiples of 16). 128-byte swizzle: box[0] · element bytes must be
//   <= 128 and the shared-memory destination 1024-byte aligned. Out-of-bounds elements read as 0.
//   swizzle: the 128-byte one unless asked (section 08's fp8 tiles at D = 64 have rows of 64 bytes).
inline std::string encode_tensor_map(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* address,
                                     const uint64_t* dims, const uint64_t* strides, const uint32_t* box,
                                     CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (!encode) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                                             &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn)
      return std::string("cannot find cuTensorMapEncodeTiled in the driver (") + cudaGetErrorString(err) + ")";
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  cuuint64_t d[5], s[4];
  cuuint32_t b[5], e[5];
  for (int i = 0; i < rank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
    e[i] = 1;
    if (i + 1 < rank) s[i] = strides[i];
  }
  const CUresult r = encode(map, type, cuuint32_t(rank), const_cast<void*>(address), d, s, b, e,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return "cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r));
  return "";
}

}  // namespace lab::sm90
