// The attention problem every section solves, its inputs on the host, and the models of its
// cost. One convention everywhere (see attention_math.h for layouts and mask alignment).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/dtype.h"

namespace lab {

struct Problem {
  int b = 1;          // batch (sequences)
  int h = 8;          // query heads
  int h_kv = 8;       // K/V heads (GQA when < h)
  int t_q = 1024;     // query rows per sequence
  int t_kv = 1024;    // keys per sequence (the KV cache capacity, T_max, for decode)
  int d = 64;         // head dimension
  DType dtype = DType::f32;
  bool causal = false;
  int window = 0;     // sliding window W (0 = none); implies causal
  int page_size = 0;  // paged KV block size (0 = contiguous)
  std::vector<int> kv_len;  // per-sequence valid keys (decode); empty = t_kv for every sequence

  float softmax_scale() const;
  int keys_of(int batch) const { return kv_len.empty() ? t_kv : kv_len[batch]; }
  int64_t q_elems() const { return int64_t(b) * t_q * h * d; }
  int64_t kv_elems() const { return int64_t(b) * t_kv * h_kv * d; }
  int64_t lse_elems() const { return int64_t(b) * h * t_q; }
  int64_t score_elems() const { return int64_t(b) * h * t_q * t_kv; }  // one S (or P) matrix
  // Index helpers for the row-major layouts: Q/O [B, T_q, H, D], K/V [B, T_kv, H_kv, D].
  int64_t q_index(int bi, int i, int hi) const { return ((int64_t(bi) * t_q + i) * h + hi) * d; }
  int64_t kv_index(int bi, int j, int hk) const { return ((int64_t(bi) * t_kv + j) * h_kv + hk) * d; }
  int64_t lse_index(int bi, int hi, int i) const { return (int64_t(bi) * h + hi) * t_q + i; }
  std::string describe() const;  // "B=1 H=8 T=1024 D=64 fp32 causal"
};

// The CPU model's "still running" advice (first said after 5 s), the shape first: a smaller shape
// finishes sooner, but one under a second's work on any section's model (B*H*T_q*T_kv*D under 1e7;
// 04's, the slowest, does 3e7 a second on a laptop core) has a loop that does not end.
std::string cpu_model_hint(const Problem& p);

// Number of (query, key) pairs that attend: exact, for any mask.
int64_t visible_pairs(const Problem& p);
// Forward FLOPs, the one convention of the lab: 4*B*H*T_q*T_kv*D (two GEMMs, 2 FLOPs a MAC),
// halved for causal; with a window, 4*D per visible pair.
double attention_flops(const Problem& p);
// The fewest HBM bytes a fused kernel moves: Q, K, V read once, O written once, LSE (fp32) written.
int64_t fused_hbm_bytes(const Problem& p);

// Inputs on the host, float values exactly representable in p.dtype (the GPU gets the same bits).
struct HostInputs {
  std::vector<float> q, k, v;
};
// Seeded, non-zero-mean inputs (all-equal or zero-mean inputs hide indexing errors): uniform in
// [-1, 1) plus an offset (Q, K: +0.25, V: +0.5), Q and K multiplied by `magnitude`. The same seed
// gives the same inputs on every machine.
HostInputs make_inputs(const Problem& p, uint64_t seed, float magnitude);

// Per-sequence key counts for decode-style problems: a spread of lengths in [1, t_kv], seeded.
std::vector<int> make_kv_lengths(int b, int t_kv, uint64_t seed);

}  // namespace lab
