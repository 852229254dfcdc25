// gpu_fp8_layout: checks the layout assumptions of section 08's fp8 kernel (common/hopper/ws_fp8.cuh)
// on small exact values, one product at a time, so that a wrong fp8 result can be traced to one:
//   F1  S = Q Kᵀ by wgmma m64n128k32 e4m3, both operands K-major from TMA boxes with a swizzle as
//       wide as a row (D = 128: 128 bytes; D = 64: 64 bytes), k-steps 32 bytes apart
//   F2  O = P Vᵀᵀ by wgmma m64n{D}k32 with P packed from the S accumulator by pack_p (no shuffle)
//       and Vᵀ [D][128 keys] holding key vt_key_at(k) at position k of every group of 16, into a
//       fresh accumulator (first k-step with scale-d = 0: the NaNs it starts with must not show)
// Values are small dyadic numbers: every product and sum is exact in fp32 (the check allows for the
// fp8 tensor core's shorter accumulator).
// Usage: gpu_fp8_layout. Exit 0 all ok, 1 a check failed, 77 not a Hopper GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "harness/fp8.h"
#include "hopper/ws_fp8.cuh"

using namespace lab::ws;

namespace {
constexpr int M = 64, N = 128;           // S is 64 x 128 (query rows x keys)
constexpr float P_SCALE = 1.f / 16.f;    // P = e4m3(S / 16)
constexpr long long kTimeoutCycles = 2000000000LL;

template <int D>
__global__ void __launch_bounds__(128, 1)
fp8_layout_kernel(const __grid_constant__ CUtensorMap q_map,   // (D, 64) e4m3
                  const __grid_constant__ CUtensorMap k_map,   // (D, 128)
                  const __grid_constant__ CUtensorMap vt_map,  // (128, D)
                  float* s_out, float* o_out, int* timeouts) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __trap();
#else
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = lab::sm80::smem_addr(smem_raw), base = (raw + 1023u) & ~1023u;
  const uint32_t q_s = base, k_s = q_s + M * D, vt_s = k_s + N * D, bar = vt_s + D * N;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  if (tid == 0) {
    mbar_init(bar, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    mbar_arrive_expect_tx(bar, M * D + 2 * N * D);
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {0, 0}], [%2];\n"
                 ::"r"(q_s), "l"(&q_map), "r"(bar) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {0, 0}], [%2];\n"
                 ::"r"(k_s), "l"(&k_map), "r"(bar) : "memory");
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {0, 0}], [%2];\n"
                 ::"r"(vt_s), "l"(&vt_map), "r"(bar) : "memory");
  }
  const long long start = clock64();
  bool landed = true;
  while (!mbar_try_wait(bar, 0))
    if (clock64() - start > kTimeoutCycles) {
      landed = false;
      break;
    }
  if (__syncthreads_or(!landed)) {
    if (tid == 0) atomicAdd(timeouts, 1);
    return;
  }
  float s[N / 2];
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk)
    wgmma_ss_e4m3_n128(s, desc_k_major<D>(q_s + uint32_t(kk * 32)), desc_k_major<D>(k_s + uint32_t(kk * 32)), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(s);
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) s_out[(16 * warp + g + 8 * (e >> 1)) * N + 8 * j + 2 * t + (e & 1)] = s[4 * j + e];
  for (float& x : s) x *= P_SCALE;
  uint32_t p_frag[N / 32][4];
  fp8::pack_p(s, p_frag);
  float o[D / 2];
  for (float& x : o) x = NAN;  // the kernel's fresh P V accumulator: the first k-step must not read it
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < N / 32; ++kk)
    wgmma_rs_e4m3<D>(o, p_frag[kk], desc_k_major<128>(vt_s + uint32_t(kk * 32)), kk > 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(o);
  for (int j = 0; j < D / 8; ++j)
    for (int e = 0; e < 4; ++e) o_out[(16 * warp + g + 8 * (e >> 1)) * D + 8 * j + 2 * t + (e & 1)] = o[4 * j + e];
#endif
}

CUtensorMap map2d(const void* base, int inner, int rows) {
  CUtensorMap map;
  const uint64_t dims[2] = {uint64_t(inner), uint64_t(rows)}, strides[1] = {uint64_t(inner)};
  const uint32_t box[2] = {uint32_t(inner), uint32_t(rows)};
  const std::string err = encode_tensor_map(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, base, dims, strides, box,
                                            inner == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B);
  if (!err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    std::exit(1);
  }
  return map;
}

int first_wrong(const char* what, const char* assumption, const std::vector<float>& got, const std::vector<float>& want,
                int cols) {
  // fp8 wgmma accumulates with fewer bits than fp32 (the products are exact): a tolerance of 2^-10
  // of the matrix's scale, far below what a misplaced element changes.
  float scale = 1.f;
  for (float w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= scale / 1024)) {
      std::printf("FAIL %-44s (%s): [%zu][%zu] = %g, expected %g\n", what, assumption, i / cols, i % cols, got[i], want[i]);
      return 1;
    }
  std::printf("ok   %s\n", what);
  return 0;
}

template <int D>
int run() {
  // Q [64][D], K [128][D] in {-2, -1, -0.5, 0, 0.5, 1, 2}; V [128 keys][D] in {-1, -0.5, 0, 0.5, 1}.
  const float qk_vals[7] = {-2.f, -1.f, -0.5f, 0.f, 0.5f, 1.f, 2.f}, v_vals[5] = {-1.f, -0.5f, 0.f, 0.5f, 1.f};
  std::vector<float> q(M * D), k(N * D), v(N * D);
  uint32_t state = 12345u + D;
  auto next = [&] { state = state * 1664525u + 1013904223u; return state >> 8; };
  for (auto& x : q) x = qk_vals[next() % 7];
  for (auto& x : k) x = qk_vals[next() % 7];
  for (auto& x : v) x = v_vals[next() % 5];
  std::vector<uint8_t> q8(q.size()), k8(k.size()), vt8(size_t(D) * N);
  for (size_t i = 0; i < q.size(); ++i) q8[i] = lab::float_to_e4m3_bits(q[i]);
  for (size_t i = 0; i < k.size(); ++i) k8[i] = lab::float_to_e4m3_bits(k[i]);
  for (int d = 0; d < D; ++d)
    for (int pos = 0; pos < N; ++pos)
      vt8[size_t(d) * N + pos] = lab::float_to_e4m3_bits(v[size_t((pos & ~15) + fp8::vt_key_at(pos & 15)) * D + d]);
  std::vector<float> s(M * N, 0.f), o(M * D, 0.f);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      for (int c = 0; c < D; ++c) s[i * N + j] += q[i * D + c] * k[j * D + c];
      const float p = lab::round_to_e4m3(s[i * N + j] * P_SCALE);
      for (int c = 0; c < D; ++c) o[i * D + c] += p * v[j * D + c];
    }
  uint8_t *dq, *dk, *dvt;
  float *ds, *dout;
  int* dto;
  CUDA_CHECK(cudaMalloc(&dq, q8.size()));
  CUDA_CHECK(cudaMalloc(&dk, k8.size()));
  CUDA_CHECK(cudaMalloc(&dvt, vt8.size()));
  CUDA_CHECK(cudaMalloc(&ds, s.size() * 4));
  CUDA_CHECK(cudaMalloc(&dout, o.size() * 4));
  CUDA_CHECK(cudaMalloc(&dto, 4));
  CUDA_CHECK(cudaMemcpy(dq, q8.data(), q8.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dk, k8.data(), k8.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(dvt, vt8.data(), vt8.size(), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dto, 0, 4));
  const CUtensorMap qm = map2d(dq, D, M), km = map2d(dk, D, N), vm = map2d(dvt, N, D);
  const int smem = 1024 + M * D + 2 * N * D + 64;
  CUDA_CHECK(cudaFuncSetAttribute(fp8_layout_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  fp8_layout_kernel<D><<<1, 128, smem>>>(qm, km, vm, ds, dout, dto);
  CUDA_CHECK_LAST();
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got_s(s.size()), got_o(o.size());
  int timeouts = 0;
  CUDA_CHECK(cudaMemcpy(got_s.data(), ds, s.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_o.data(), dout, o.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&timeouts, dto, 4, cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dvt), static_cast<void*>(ds),
                  static_cast<void*>(dout), static_cast<void*>(dto)})
    CUDA_CHECK(cudaFree(p));
  if (timeouts) {
    std::printf("FAIL D=%d: a TMA copy never completed\n", D);
    return 1;
  }
  char what_s[64], what_o[64];
  std::snprintf(what_s, sizeof what_s, "D=%d: S = Q Kt (e4m3 SS, %d-byte swizzle)", D, D);
  std::snprintf(what_o, sizeof what_o, "D=%d: O = pack_p(S/16) V (e4m3 RS, Vt key order)", D);
  return first_wrong(what_s, "F1 K-major descriptors", got_s, s, N) + first_wrong(what_o, "F2 P fragment, vt_key_at", got_o, o, D);
}
}  // namespace

int main() {
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
    std::printf("cannot run here: no CUDA GPU\n");
    return 77;
  }
  if (prop.major != 9 || prop.minor != 0) {
    std::printf("cannot run here: needs a Hopper GPU (sm_90a); this is %s\n", prop.name);
    return 77;
  }
  const int bad = run<128>() + run<64>();
  std::printf(bad ? "FAIL: %d fp8 layout assumption(s) do not hold\n" : "PASS: every fp8 layout assumption holds\n", bad);
  return bad ? 1 : 0;
}
