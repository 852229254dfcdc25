// A plain fp32 attention forward on the GPU, for a backward section's inputs: it makes the O and
// LSE the backward reads (the forward a training step ran before), from 16-bit Q, K, V. Not a
// lesson and not timed: one thread per query row, online softmax over K/V tiles staged in shared
// memory as float, every sum in fp32, O rounded to T once. Same algorithm as the host's
// forward_fp32_host (harness/backward.h), which the CPU model uses.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "toolbox/attention_math.h"
#include "toolbox/cuda_check.h"

namespace lab::fwd32 {

constexpr int ROWS = 64;  // query rows (threads) per block
constexpr int KEYS = 32;  // keys per shared-memory tile

__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
template <class T> __device__ __forceinline__ T store(float x);
template <> __device__ __forceinline__ __half store<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 store<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

template <class T, int D>
__global__ void __launch_bounds__(ROWS) forward_kernel(const T* __restrict__ q,  // [B, T_q, H, D]
                                                      const T* __restrict__ k,  // [B, T_kv, H_kv, D]
                                                      const T* __restrict__ v,  // [B, T_kv, H_kv, D]
                                                      T* __restrict__ o,        // [B, T_q, H, D]
                                                      float* __restrict__ lse,  // [B, H, T_q]
                                                      int t_q, int t_kv, int h, int h_kv, bool causal, float scale) {
  __shared__ float k_smem[KEYS][D], v_smem[KEYS][D];
  const int bh = blockIdx.y, b = bh / h, head = bh % h, hk = lab::kv_head_of(head, h, h_kv);
  const int q0 = blockIdx.x * ROWS, i = q0 + threadIdx.x;
  const lab::KeyRange rows_keys = lab::visible_keys_of_rows(q0, lab::imin(q0 + ROWS, t_q), t_q, t_kv, causal);
  const lab::KeyRange keys = lab::visible_keys(lab::imin(i, t_q - 1), t_q, t_kv, causal, 0);
  float qr[D], acc[D];
  const T* q_row = q + ((int64_t(b) * t_q + lab::imin(i, t_q - 1)) * h + head) * D;
#pragma unroll
  for (int c = 0; c < D; ++c) { qr[c] = load(q_row + c) * scale; acc[c] = 0.f; }
  float m = -INFINITY, l = 0.f;
  for (int j0 = rows_keys.begin; j0 < rows_keys.end; j0 += KEYS) {
    __syncthreads();  // every thread is done with the previous tile
    for (int x = threadIdx.x; x < KEYS * D; x += ROWS) {
      const int jj = x / D, c = x % D, j = j0 + jj;
      const int64_t at = ((int64_t(b) * t_kv + lab::imin(j, t_kv - 1)) * h_kv + hk) * D + c;
      k_smem[jj][c] = j < t_kv ? load(k + at) : 0.f;
      v_smem[jj][c] = j < t_kv ? load(v + at) : 0.f;
    }
    __syncthreads();  // the tile is in shared memory
    for (int jj = 0; jj < KEYS; ++jj) {
      if (!keys.contains(j0 + jj)) continue;
      float s = 0.f;
#pragma unroll
      for (int c = 0; c < D; ++c) s += qr[c] * k_smem[jj][c];
      const float m_new = fmaxf(m, s), alpha = expf(m - m_new), p = expf(s - m_new);
      l = l * alpha + p;
#pragma unroll
      for (int c = 0; c < D; ++c) acc[c] = acc[c] * alpha + p * v_smem[jj][c];
      m = m_new;
    }
  }
  if (i >= t_q) return;
  T* o_row = o + ((int64_t(b) * t_q + i) * h + head) * D;
#pragma unroll
  for (int c = 0; c < D; ++c) o_row[c] = store<T>(l > 0.f ? acc[c] / l : 0.f);
  lse[(int64_t(b) * h + head) * t_q + i] = l > 0.f ? m + logf(l) : -INFINITY;
}

template <class T>
void forward(const void* q, const void* k, const void* v, void* o, float* lse, int b, int h, int h_kv, int t_q,
             int t_kv, int d, bool causal, cudaStream_t stream) {
  const dim3 grid(lab::ceil_div(t_q, ROWS), b * h);
  const float scale = 1.0f / sqrtf(float(d));
  auto args = [&](auto kernel) {
    kernel<<<grid, ROWS, 0, stream>>>(static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v),
                                      static_cast<T*>(o), lse, t_q, t_kv, h, h_kv, causal, scale);
  };
  if (d == 64) args(forward_kernel<T, 64>);
  else args(forward_kernel<T, 128>);
  CUDA_CHECK_LAST();
}

}  // namespace lab::fwd32
