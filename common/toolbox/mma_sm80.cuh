// The Ampere-style Tensor Core toolbox shared by sections 04-07: 16-bit element helpers, the
// swizzled shared-memory layout, cp.async, ldmatrix and mma.sync.m16n8k16. These are plumbing,
// written once; the lessons (the online softmax, the loop order, the masks, the GQA mapping, the
// paged address) stay in the section files. Section 08 adds the Hopper path (TMA, wgmma) beside it.
//
// Fragment layouts of mma.m16n8k16 (lane = 4·g + t, g = lane / 4, t = lane % 4), 32-bit registers
// holding two 16-bit elements (.x, the lower column index, in the low half):
//   A 16x16: a0 = (row g, cols 2t, 2t+1)  a1 = (row g+8, same)  a2 = (row g, cols 2t+8, +9)  a3 = (row g+8, same)
//   B 16x8:  b0 = (rows 2t, 2t+1 of col g)  b1 = (rows 2t+8, 2t+9 of col g)
//   C 16x8:  c0, c1 = (row g, cols 2t, 2t+1)  c2, c3 = (row g+8, same cols)   (fp32)
// The C layout of two neighbouring n-blocks is the A layout of one k-step: a score tile S = Q Kᵀ
// becomes the A operand of O = P V in registers, with no trip through shared memory.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "toolbox/attention_math.h"  // fast_exp2

namespace lab::sm80 {

// ---- 16-bit elements: T is __half or __nv_bfloat16; Vec2<T> packs two of them in 32 bits.
template <class T>
using Vec2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

__device__ __forceinline__ float2 to_float2(__half2 x) { return __half22float2(x); }
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 x) { return __bfloat1622float2(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(x);
  else return __float2bfloat16_rn(x);
}
template <class T>
__device__ __forceinline__ Vec2<T> from_float2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) return __floats2half2_rn(lo, hi);
  else return __floats2bfloat162_rn(lo, hi);
}
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {  // lo in the low half
  Vec2<T> v = from_float2<T>(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

using lab::fast_exp2;  // attention_math.h: one MUFU.EX2

// ---- Shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Swizzled tile layout: row r, 16-byte chunk c (elements 8c..8c+7) is stored at chunk
// r·CHUNKS + (c ^ (r % 8)). With rows a multiple of 128 bytes every row starts at bank 0, and the
// 8 rows an ldmatrix phase reads at one logical chunk land on 8 different 16-byte bank groups: no
// conflicts, no padding. Returns a byte offset.
// Moving on by k 16-column steps keeps r % 8 and turns c into c ^ 2k (for even k-step chunks):
// the offset becomes swizzle(r, c) ^ (32·k), one XOR with a constant while 32·k stays in the row.
template <int CHUNKS>
__device__ __forceinline__ uint32_t swizzle(int r, int c) {
  static_assert(CHUNKS % 8 == 0, "rows of a multiple of 128 bytes");
  return uint32_t(r * CHUNKS + (c ^ (r & 7))) * 16u;
}

// ---- cp.async: 16 bytes global -> shared without a register round trip, L2 only (.cg: streamed
// tiles are not reused from L1). valid = false reads nothing and writes 16 zero bytes (the ragged
// end of a tile); callers still pass an in-bounds address.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
// The same copy with an L2 eviction policy (a createpolicy value: l2_evict_first_policy below).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0), "l"(policy) : "memory");
}
// An L2 policy that marks all of a copy's bytes evict_first: for data read once and too large to be
// found in the L2 again, so that it does not push out what would be.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>  // wait until at most N of this thread's committed groups are still in flight
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// A tile of ROWS rows of CHUNKS·8 16-bit elements (row r at gmem + r·row_stride) -> the swizzled
// layout above at shared byte address `dst`, by the THREADS threads of a block: thread tid copies
// chunk tid % CHUNKS of rows tid / CHUNKS + (THREADS / CHUNKS)·n, so its rows differ by multiples
// of 8 and its swizzled chunk is the same in all of them. Rows >= rows_valid are zero-filled
// (their source address is clamped to row 0, never read). ASYNC: with cp.async (the copy proceeds
// while the thread goes on). Otherwise through registers, ld.global then st.shared, which waits
// for the load to arrive (04's ablation mma-no-cp-async).
template <int ROWS, int CHUNKS, int THREADS, bool ASYNC = true, class T>
__device__ __forceinline__ void load_tile_swizzled(uint32_t dst, const T* gmem, int64_t row_stride, int rows_valid) {
  constexpr int ROW_STEP = THREADS / CHUNKS;  // rows one pass of the block covers
  static_assert(THREADS % CHUNKS == 0 && ROWS % ROW_STEP == 0 && ROW_STEP % 8 == 0, "whole passes, rows 8 apart");
  const int row0 = threadIdx.x / CHUNKS, chunk = threadIdx.x % CHUNKS;
  const uint32_t dst0 = dst + swizzle<CHUNKS>(row0, chunk);
#pragma unroll
  for (int n = 0; n < ROWS / ROW_STEP; ++n) {
    const int r = row0 + n * ROW_STEP;
    const bool valid = r < rows_valid;
    const T* src = gmem + (valid ? r * row_stride : 0) + chunk * 8;
    const uint32_t to = dst0 + uint32_t(n * ROW_STEP * CHUNKS * 16);
    if constexpr (ASYNC) {
      cp_async_16(to, src, valid);
    } else {
      const uint4 x = valid ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(to), "r"(x.x), "r"(x.y), "r"(x.z), "r"(x.w)
                   : "memory");
    }
  }
}

// ---- ldmatrix.x4: lanes 8m..8m+7 give the row addresses of 8x8 matrix m; register m of every lane
// receives its piece of matrix m (row lane/4, columns 2·(lane%4), +1; .trans: of the transpose).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// ---- D += A·B, m16n8k16, 16-bit inputs, fp32 accumulators (layouts in the header comment).
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- A warp's fp32 C fragments restaged as whole rows, for atomics that add whole 128-byte lines
// (11's atomic dQ): the word of an [8 rows][32 floats] stage that holds row r, 16-byte chunk k
// (columns 4k .. 4k + 3), word w of the chunk. Shared memory serves a warp's 8-byte accesses a
// half-warp at a time and its 16-byte ones a quarter-warp at a time; within each, no two lanes may
// touch one bank in different words. The fragment stores (lane 4g + t: row g, columns 2t, 2t + 1 of
// each 8, a float2) put rows 0-3 in one half-warp, two chunks of each; the row loads (a float4)
// put one row's 8 chunks in one quarter-warp. Chunk k of row r sits at k ^ 2(r % 4): the four rows
// of a half-warp spread their chunk pairs over all 8 positions, and a row's chunks stay a
// permutation.
__host__ __device__ constexpr int row_stage_word(int r, int k, int w) { return r * 32 + (k ^ (2 * (r & 3))) * 4 + w; }

}  // namespace lab::sm80
