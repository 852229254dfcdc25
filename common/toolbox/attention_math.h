// Index math that the chapter lists as pitfalls, written once and used by the GPU kernels, the
// CPU models and the fp64 reference alike, so what CI tests on the CPU is what the GPU runs.
//
// Conventions (every section):
//   Q, O  [B, T_q,  H,    D]     K, V [B, T_kv, H_kv, D]     LSE [B, H, T_q]   (row-major)
//   Causal masks are aligned to the BOTTOM-RIGHT corner when T_q != T_kv: query row i sits at
//   absolute position i + (T_kv - T_q), as the last T_q tokens of a T_kv-token sequence (the
//   convention of FlashAttention >= 2.1 and of decode with a KV cache). A sliding window of W keeps
//   the W most recent keys of that position, itself included.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define LAB_HD __host__ __device__ __forceinline__
#else
#define LAB_HD inline
#endif

namespace lab {

LAB_HD int imin(int a, int b) { return a < b ? a : b; }
LAB_HD int imax(int a, int b) { return a > b ? a : b; }
LAB_HD int ceil_div(int a, int b) { return (a + b - 1) / b; }
// exp(x) = exp2(x · kLog2e) and log(x) = log2(x) · kLn2: kernels work in base 2 (one MUFU.EX2
// per score) and convert at the edges (the scale on the way in, the LSE on the way out).
constexpr float kLog2e = 1.4426950408889634f;  // log2(e)
constexpr float kLn2 = 0.6931471805599453f;    // ln(2) = 1 / log2(e)

// 2^x as the kernels take it: on the GPU one MUFU.EX2 (ex2.approx.ftz: about 2 ulp, results below
// 2^-126 flushed to 0, 2^-inf = 0). exp2f costs a compare and two multiplies around the same
// MUFU.EX2 to keep those subnormal results, which a probability never needs. On the CPU, exp2f.
LAB_HD float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

// Keys [begin, end) that query row `i` may attend to; begin == end when it sees none.
struct KeyRange {
  int begin;
  int end;
  LAB_HD bool empty() const { return begin >= end; }
  LAB_HD bool contains(int j) const { return j >= begin && j < end; }
};

// window <= 0 means no window. A window implies causal (validated by the harness).
LAB_HD KeyRange visible_keys(int i, int t_q, int t_kv, bool causal, int window) {
  const int pos = i + (t_kv - t_q);  // absolute position of query i (bottom-right aligned)
  int end = causal ? imin(t_kv, pos + 1) : t_kv;
  int begin = window > 0 ? imax(0, pos - window + 1) : 0;
  end = imax(end, 0);
  begin = imin(begin, end);
  return {begin, end};
}

LAB_HD bool key_visible(int i, int j, int t_q, int t_kv, bool causal, int window) {
  return visible_keys(i, t_q, t_kv, causal, window).contains(j);
}

// Keys any row of the query tile [q_begin, q_end) may attend to under a causal mask or none (no
// window). Every row's keys start at 0 and its end grows with i (FlashAttention-2's causal skip), so
// the union is the last row's range: [0, range(q_end - 1).end). Tiles outside it are skipped; tiles
// inside it may still need per-element masking at the diagonal.
LAB_HD KeyRange visible_keys_of_rows(int q_begin, int q_end, int t_q, int t_kv, bool causal) {
  (void)q_begin;  // its row sees a prefix of the last row's keys
  return {0, visible_keys(q_end - 1, t_q, t_kv, causal, 0).end};
}

// How much of the tile [q_begin, q_end) x [k_begin, k_end) attends under a causal mask or none (no
// window): nothing (skip the tile), all of it (no per-element mask needed), or part of it (mask at
// the diagonal). Every row starts at key 0 and its end grows with the row, so the first and last
// rows decide: some pair is visible iff the last row's range meets the tile; every pair is iff the
// first row ends at or after k_end. k_end past T_kv counts as masked (a ragged last tile is partial).
enum class TileVisibility { none, partial, full };

LAB_HD TileVisibility tile_visibility(int q_begin, int q_end, int k_begin, int k_end, int t_q, int t_kv,
                                      bool causal) {
  const KeyRange any = visible_keys_of_rows(q_begin, q_end, t_q, t_kv, causal);
  if (any.empty() || any.end <= k_begin || any.begin >= k_end) return TileVisibility::none;
  const KeyRange first = visible_keys(q_begin, t_q, t_kv, causal, 0);
  const bool all = !first.empty() && first.end >= k_end;
  return all ? TileVisibility::full : TileVisibility::partial;
}

// GQA/MQA: n_heads query heads share n_kv_heads K/V heads in contiguous groups
// (query heads [g*r, (g+1)*r) read K/V head g, r = n_heads / n_kv_heads).
LAB_HD int kv_head_of(int head, int n_heads, int n_kv_heads) {
  return head / (n_heads / n_kv_heads);
}

}  // namespace lab
