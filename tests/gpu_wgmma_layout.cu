// gpu_wgmma_layout: checks, one at a time and on small known integers, every layout assumption
// section 08 (solutions/08_tma_skeleton.cu) makes about TMA, wgmma and tensor-map edits, so that a
// wrong result there can be traced to one assumption in one GPU call. Each check prints "ok" or
// the first wrong element with the assumption it tests (A1..A7, as listed in ch12/08_tma_skeleton.md).
//   A1  accumulator layout of wgmma m64nNk16: d[4j+e] = row 16w+g+8(e>>1), col 8j+2t+(e&1)
//   A2  K-major 128B-swizzled operand (TMA box 64 cols x R rows): SBO = 1024, start += 32 B per
//       16-column k-step inside a box, next box for columns 64..127
//   A3  A from registers: a0 = (g, 2t..), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   A4  MN-major 128B-swizzled B (imm-trans-b = 1): SBO = 1024 (8 K-rows), LBO = one 64-column box,
//       start += 16 rows · 128 B per k-step
//   A5  the S accumulator, packed pairwise, is the A operand of the next product (C -> A)
//   A6  TMA zero-fills a box that hangs over the end of a dimension, and one that lies entirely
//       outside it, and completes the full box bytes either way (no hang)
//   A7  a tensor map edited on the device (tensormap.replace address + one dim, cp_fenceproxy to a
//       global slot, acquire fence) is the one the next TMA copy uses
// Usage: gpu_wgmma_layout [--verbose]. Exit 0 all ok, 1 a check failed, 77 not a Hopper GPU.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "toolbox/cuda_check.h"
#include "harness/dtype.h"
#include "toolbox/sm90.cuh"

using namespace lab::sm90;
using lab::sm80::pack2;

namespace {

constexpr int M = 64, KD = 128, NK = 128, NV = 128;  // A [M][KD], B [NK][KD] (K-major), V [NK keys][NV] (MN-major)
constexpr int BOX = 64;                               // columns per TMA box (128 bytes)
constexpr int A_BOX = M * 128, B_BOX = NK * 128, V_BOX = NK * 128;
constexpr int SMALL_BOX = 16 * 128;  // a 16-row, 64-column box
constexpr int SMEM = 1024 + 2 * A_BOX + 2 * B_BOX + 2 * V_BOX + 3 * SMALL_BOX + 64;
constexpr long long kTimeoutCycles = 2000000000LL;  // ~1 s at 1.9 GHz: a wait this long is a hang

struct Out {
  float s[M * NK];       // test ss: S = A Bᵀ, placed by the A1 layout
  float o_reg[M * NV];   // test rs: O = Pm V, Pm put in registers by the A3 layout
  float o64[M * 64];     // test rs with N = 64 (one box: LBO unused)
  float o_chain[M * NV]; // test chain: O = pack(S) V
  float oob[2][16 * 64]; // test oob: [0] rows 96..111 of a 100-row tensor, [1] rows 200..215
  float edit[16 * 64];   // test edit: rows 0..15 through an edited map (second buffer, 10 rows)
  int timeouts;          // waits that gave up
};

__device__ bool wait_bounded(uint32_t bar, uint32_t parity, int* timeouts) {
  const long long start = clock64();
  while (!mbar_try_wait(bar, parity))
    if (clock64() - start > kTimeoutCycles) {
      atomicAdd(timeouts, 1);
      return false;
    }
  return true;
}

template <class T>
__device__ float to_f(T x) { return lab::sm80::to_float(x); }

// One warpgroup (128 threads). Maps: a [KD, M] box (64, M); b [KD, NK] box (64, NK); v [NV, NK]
// box (64, NK); small [64, 100] box (64, 16); edit_tpl: like `small`, edited to point at `second`.
template <class T>
__global__ void __launch_bounds__(128, 1)
layout_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap small_map,
              const __grid_constant__ CUtensorMap edit_tpl, const T* pm /* [M][NK] */, const void* second,
              CUtensorMap* slot, Out* out) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_addr(smem_raw);
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t a_s = base, b_s = a_s + 2 * A_BOX, v_s = b_s + 2 * B_BOX, small_s = v_s + 2 * V_BOX;
  const uint32_t bar = small_s + 3 * SMALL_BOX;  // 3 barriers, 8 bytes each
  uint8_t* smem_gen = smem_raw + (base - raw);
  __shared__ alignas(128) CUtensorMap map_copy;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;

  if (tid == 0) {
    for (int i = 0; i < 3; ++i) mbar_init(bar + 8 * i, 1);
    fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    mbar_arrive_expect_tx(bar, 2 * A_BOX + 2 * B_BOX + 2 * V_BOX);
    for (int c = 0; c < 2; ++c) {
      tma_load_3d(a_s + c * A_BOX, &a_map, c * BOX, 0, 0, bar);  // dims (KD, M, 1): 3-D like the kernel's rows
      tma_load_3d(b_s + c * B_BOX, &b_map, c * BOX, 0, 0, bar);
      tma_load_3d(v_s + c * V_BOX, &v_map, c * BOX, 0, 0, bar);
    }
    // A6: rows 96..111 of a 100-row tensor (4 rows in, 12 out), and rows 200..215 (all out).
    mbar_arrive_expect_tx(bar + 8, 2 * SMALL_BOX);
    tma_load_3d(small_s, &small_map, 0, 96, 0, bar + 8);
    tma_load_3d(small_s + SMALL_BOX, &small_map, 0, 200, 0, bar + 8);
  }
  // A7: edit a copy of `edit_tpl` to address `second` with 10 rows, publish it, load 16 rows.
  if (warp == 0) {
    if (lane < 16) reinterpret_cast<uint64_t*>(&map_copy)[lane] = reinterpret_cast<const uint64_t*>(&edit_tpl)[lane];
    __syncwarp();
    if (lane == 0) {
      tensormap_replace_address(smem_addr(&map_copy), second);
      tensormap_replace_dim<1>(smem_addr(&map_copy), 10u);
    }
    __syncwarp();
    tensormap_publish(slot, smem_addr(&map_copy));
    if (lane == 0) {
      tensormap_acquire(slot);
      mbar_arrive_expect_tx(bar + 16, SMALL_BOX);
      tma_load_3d(small_s + 2 * SMALL_BOX, slot, 0, 0, 0, bar + 16);
    }
  }
  const bool ok0 = wait_bounded(bar, 0, &out->timeouts);
  const bool ok1 = wait_bounded(bar + 8, 0, &out->timeouts);
  const bool ok2 = wait_bounded(bar + 16, 0, &out->timeouts);
  if (__syncthreads_or(!(ok0 && ok1 && ok2))) return;  // a copy never completed: nothing to check

  auto swz = [&](uint32_t box_base, int r, int col) -> const T* {  // element (r, col) of a 64-col box
    const uint32_t off = uint32_t(r * 128 + ((((col * 2) / 16) ^ (r & 7)) * 16) + (col * 2) % 16);
    return reinterpret_cast<const T*>(smem_gen + (box_base - base) + off);
  };
  // A6 and A7 readback (generic loads of TMA-written data: ordered by the mbarrier waits).
  for (int idx = tid; idx < 16 * 64; idx += 128) {
    const int r = idx / 64, c = idx % 64;
    out->oob[0][idx] = to_f(*swz(small_s, r, c));
    out->oob[1][idx] = to_f(*swz(small_s + SMALL_BOX, r, c));
    out->edit[idx] = to_f(*swz(small_s + 2 * SMALL_BOX, r, c));
  }

  // ---- test ss (A1, A2): S = A Bᵀ, 8 k-steps over two 64-column boxes
  float s[NK / 2];
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < KD / 16; ++kk) {
    const uint32_t a_addr = a_s + (kk / 4) * A_BOX + (kk % 4) * 32;
    const uint32_t b_addr = b_s + (kk / 4) * B_BOX + (kk % 4) * 32;
    wgmma_ss<T, NK>(s, desc_k_major_sw128(a_addr), desc_k_major_sw128(b_addr), kk > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(s);
  for (int j = 0; j < NK / 8; ++j)
    for (int e = 0; e < 4; ++e)
      out->s[(16 * warp + g + 8 * (e >> 1)) * NK + 8 * j + 2 * t + (e & 1)] = s[4 * j + e];

  // ---- test rs (A3, A4): O = Pm V, Pm from global into registers by the claimed A layout
  auto pm2 = [&](int r, int c) { return *reinterpret_cast<const uint32_t*>(&pm[r * NK + c]); };
  float o[NV / 2], o64[32];
  for (int i = 0; i < NV / 2; ++i) o[i] = 0.f;
  for (int i = 0; i < 32; ++i) o64[i] = 0.f;
  const int r0 = 16 * warp + g;
  uint32_t pa[NK / 16][4];
  for (int kk = 0; kk < NK / 16; ++kk) {
    pa[kk][0] = pm2(r0, 16 * kk + 2 * t);
    pa[kk][1] = pm2(r0 + 8, 16 * kk + 2 * t);
    pa[kk][2] = pm2(r0, 16 * kk + 2 * t + 8);
    pa[kk][3] = pm2(r0 + 8, 16 * kk + 2 * t + 8);
  }
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < NK / 16; ++kk) {
    wgmma_rs_mn<T, NV>(o, pa[kk], desc_mn_major_sw128(v_s + kk * 16 * 128, V_BOX));
    wgmma_rs_mn<T, 64>(o64, pa[kk], desc_mn_major_sw128(v_s + kk * 16 * 128, V_BOX));
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(o);
  fence_accumulators(o64);
  for (int j = 0; j < NV / 8; ++j)
    for (int e = 0; e < 4; ++e) out->o_reg[(r0 + 8 * (e >> 1)) * NV + 8 * j + 2 * t + (e & 1)] = o[4 * j + e];
  for (int j = 0; j < 8; ++j)
    for (int e = 0; e < 4; ++e) out->o64[(r0 + 8 * (e >> 1)) * 64 + 8 * j + 2 * t + (e & 1)] = o64[4 * j + e];

  // ---- test chain (A5): P = pack(S) as the kernel does, O = P V
  uint32_t p[NK / 16][4];
#pragma unroll
  for (int kk = 0; kk < NK / 16; ++kk) {
    p[kk][0] = pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
    p[kk][1] = pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
    p[kk][2] = pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
    p[kk][3] = pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
  }
  for (int i = 0; i < NV / 2; ++i) o[i] = 0.f;
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < NK / 16; ++kk) wgmma_rs_mn<T, NV>(o, p[kk], desc_mn_major_sw128(v_s + kk * 16 * 128, V_BOX));
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulators(o);
  for (int j = 0; j < NV / 8; ++j)
    for (int e = 0; e < 4; ++e) out->o_chain[(r0 + 8 * (e >> 1)) * NV + 8 * j + 2 * t + (e & 1)] = o[4 * j + e];
}

// Small integers, exactly representable in fp16 and bf16, all products and sums exact in fp32.
float val(int i, int j, int salt) { return float(((i * 7 + j * 3 + salt * 5) % 3) - 1); }

template <class T>
std::vector<uint16_t> bits_of(const std::vector<float>& x, lab::DType t) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    b[i] = t == lab::DType::f16 ? lab::float_to_half_bits(x[i]) : lab::float_to_bf16_bits(x[i]);
  return b;
}

template <class T>
void* upload(const std::vector<float>& x, lab::DType t) {
  const std::vector<uint16_t> b = bits_of<T>(x, t);
  void* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, b.size() * 2));
  CUDA_CHECK(cudaMemcpy(d, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

// Row-major [rows][cols] 16-bit tensor as a 3-D map (cols, rows, 1), box (64, box_rows, 1).
CUtensorMap map2d(const void* p, CUtensorMapDataType ty, int cols, int rows, int box_rows) {
  CUtensorMap m;
  const uint64_t dims[3] = {uint64_t(cols), uint64_t(rows), 1};
  const uint64_t strides[2] = {uint64_t(cols) * 2, uint64_t(cols) * rows * 2};
  const uint32_t box[3] = {64, uint32_t(box_rows), 1};
  const std::string err = encode_tensor_map(&m, ty, 3, p, dims, strides, box);
  if (!err.empty()) {
    std::fprintf(stderr, "tensor map: %s\n", err.c_str());
    std::exit(1);
  }
  return m;
}

int report(const char* what, const char* assumption, const float* got, const std::vector<float>& want, int rows,
           int cols) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float g = got[r * cols + c], w = want[size_t(r * cols + c)];
      if (!(g == w)) {
        std::printf("  FAIL %-34s first wrong element (row %d, col %d): got %g, expected %g   -> %s\n", what, r, c,
                    double(g), double(w), assumption);
        return 1;
      }
    }
  std::printf("  ok   %-34s (%s)\n", what, assumption);
  return 0;
}

template <class T>
int run(lab::DType t) {
  const CUtensorMapDataType ty = t == lab::DType::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  std::vector<float> a(M * KD), b(NK * KD), v(NK * NV), pm(M * NK), small(100 * 64), second(10 * 64);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < KD; ++k) a[size_t(i * KD + k)] = val(i, k, 1);
  for (int n = 0; n < NK; ++n)
    for (int k = 0; k < KD; ++k) b[size_t(n * KD + k)] = val(n, k, 2);
  for (int k = 0; k < NK; ++k)
    for (int n = 0; n < NV; ++n) v[size_t(k * NV + n)] = val(k, n, 3);
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < NK; ++k) pm[size_t(i * NK + k)] = val(i, k, 4);
  for (size_t i = 0; i < small.size(); ++i) small[i] = float(1 + int(i % 50));
  for (size_t i = 0; i < second.size(); ++i) second[i] = -float(1 + int(i % 60));
  void *a_d = upload<T>(a, t), *b_d = upload<T>(b, t), *v_d = upload<T>(v, t), *pm_d = upload<T>(pm, t);
  void *small_d = upload<T>(small, t), *second_d = upload<T>(second, t);
  const CUtensorMap a_map = map2d(a_d, ty, KD, M, M), b_map = map2d(b_d, ty, KD, NK, NK), v_map = map2d(v_d, ty, NV, NK, NK);
  const CUtensorMap small_map = map2d(small_d, ty, 64, 100, 16);
  Out* out = nullptr;
  CUtensorMap* slot = nullptr;
  CUDA_CHECK(cudaMalloc(&out, sizeof(Out)));
  CUDA_CHECK(cudaMemset(out, 0xFF, sizeof(Out)));
  CUDA_CHECK(cudaMemset(&out->timeouts, 0, sizeof(int)));
  CUDA_CHECK(cudaMalloc(&slot, sizeof(CUtensorMap)));
  CUDA_CHECK(cudaFuncSetAttribute(layout_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
  layout_kernel<T><<<1, 128, SMEM>>>(a_map, b_map, v_map, small_map, small_map, static_cast<const T*>(pm_d), second_d,
                                      slot, out);
  CUDA_CHECK_LAST();
  CUDA_CHECK(cudaDeviceSynchronize());
  Out h;
  CUDA_CHECK(cudaMemcpy(&h, out, sizeof(Out), cudaMemcpyDeviceToHost));

  // Expected values on the host.
  std::vector<float> s(M * NK), o(M * NV), o64(M * 64), chain(M * NV), oob0(16 * 64), oob1(16 * 64, 0.f), edit(16 * 64);
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < NK; ++n) {
      float acc = 0;
      for (int k = 0; k < KD; ++k) acc += a[size_t(i * KD + k)] * b[size_t(n * KD + k)];
      s[size_t(i * NK + n)] = acc;
    }
  for (int i = 0; i < M; ++i)
    for (int n = 0; n < NV; ++n) {
      float acc = 0, acc2 = 0;
      for (int k = 0; k < NK; ++k) {
        acc += pm[size_t(i * NK + k)] * v[size_t(k * NV + n)];
        acc2 += lab::round_to(t, s[size_t(i * NK + k)]) * v[size_t(k * NV + n)];
      }
      o[size_t(i * NV + n)] = acc;
      chain[size_t(i * NV + n)] = acc2;
      if (n < 64) o64[size_t(i * 64 + n)] = acc;
    }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 64; ++c) {
      oob0[size_t(r * 64 + c)] = 96 + r < 100 ? small[size_t((96 + r) * 64 + c)] : 0.f;
      edit[size_t(r * 64 + c)] = r < 10 ? second[size_t(r * 64 + c)] : 0.f;
    }
  std::printf("%s:\n", lab::dtype_name(t));
  int bad = 0;
  if (h.timeouts) {
    std::printf("  FAIL %d mbarrier waits timed out (a TMA copy never completed its bytes)  -> A6 or A7\n", h.timeouts);
    bad++;
  }
  bad += report("S = A Bt (SS, K-major A and B)", "A1 accumulator layout, A2 K-major descriptor", h.s, s, M, NK);
  bad += report("O = P V, P in registers, N = 128", "A3 A-register layout, A4 MN-major B (LBO = box)", h.o_reg, o, M, NV);
  bad += report("O = P V, N = 64", "A3, A4 with one 64-column atom", h.o64, o64, M, 64);
  bad += report("O = pack(S) V", "A5 accumulator -> A registers", h.o_chain, chain, M, NV);
  bad += report("TMA box over the edge (rows 96..111 of 100)", "A6 partial zero fill", h.oob[0], oob0, 16, 64);
  bad += report("TMA box fully outside (rows 200..215)", "A6 full zero fill, full bytes", h.oob[1], oob1, 16, 64);
  bad += report("TMA through a device-edited map", "A7 tensormap.replace + fences", h.edit, edit, 16, 64);
  for (void* p : {a_d, b_d, v_d, pm_d, small_d, second_d}) CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFree(out));
  CUDA_CHECK(cudaFree(slot));
  return bad;
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("cannot run here: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (!(prop.major == 9 && prop.minor == 0)) {
    std::printf("cannot run here: needs a Hopper GPU (sm_90a); this is %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    return 77;
  }
  const int bad = run<__nv_bfloat16>(lab::DType::bf16) + run<__half>(lab::DType::f16);
  std::printf(bad ? "FAIL: %d layout checks failed\n" : "PASS: every layout assumption holds\n", bad);
  return bad ? 1 : 0;
}
