#include "harness/problem.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "toolbox/attention_math.h"
#include "harness/parallel.h"
#include "harness/rng.h"

namespace lab {

float Problem::softmax_scale() const { return 1.0f / std::sqrt(float(d)); }

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << b << " H=" << h;
  if (h_kv != h) s << " H_kv=" << h_kv;
  if (t_q == t_kv) s << " T=" << t_q; else s << " T_q=" << t_q << " T_kv=" << t_kv;
  s << " D=" << d << " " << dtype_name(dtype);
  if (causal) s << " causal";
  if (window > 0) s << " window=" << window;
  if (page_size > 0) s << " page=" << page_size;
  return s.str();
}

std::string cpu_model_hint(const Problem& p) {
  const double work = double(p.score_elems()) * p.d;
  return p.describe() + (work < 1e7 ? ": a shape this small takes under a second: a loop that never ends?"
                                    : ": a smaller shape finishes sooner");
}

int64_t visible_pairs(const Problem& p) {
  int64_t pairs = 0;
  for (int bi = 0; bi < p.b; ++bi) {
    const int keys = p.keys_of(bi);
    for (int i = 0; i < p.t_q; ++i) {
      const KeyRange r = visible_keys(i, p.t_q, keys, p.causal, p.window);
      pairs += r.end - r.begin;
    }
  }
  return pairs * p.h;
}

double attention_flops(const Problem& p) {
  if (p.window > 0 || !p.kv_len.empty()) return 4.0 * p.d * double(visible_pairs(p));
  const double full = 4.0 * p.b * p.h * double(p.t_q) * p.t_kv * p.d;
  return p.causal ? full / 2 : full;
}

int64_t fused_hbm_bytes(const Problem& p) {
  const int e = dtype_bytes(p.dtype);
  return (2 * p.q_elems() + 2 * p.kv_elems()) * e + p.lse_elems() * 4;
}

namespace {
// splitmix64 is a counter: element i is drawn from state seed + i·step whatever came before, so
// chunks fill in parallel (a decode cache of 2·10⁹ elements) and give the sequential values.
void fill(std::vector<float>& x, int64_t n, uint64_t seed, float offset, float scale, DType t) {
  constexpr int64_t CHUNK = int64_t(1) << 20;
  x.resize(size_t(n));
  parallel_for((n + CHUNK - 1) / CHUNK, [&](int64_t c) {
    Rng rng{seed + uint64_t(c * CHUNK) * Rng::STEP};
    for (int64_t i = c * CHUNK; i < std::min(n, (c + 1) * CHUNK); ++i)
      x[size_t(i)] = round_to(t, (rng.symmetric() + offset) * scale);
  });
}
}  // namespace

HostInputs make_inputs(const Problem& p, uint64_t seed, float magnitude) {
  HostInputs in;
  fill(in.q, p.q_elems(), seed * 3 + 1, 0.25f, magnitude, p.dtype);
  fill(in.k, p.kv_elems(), seed * 3 + 2, 0.25f, magnitude, p.dtype);
  fill(in.v, p.kv_elems(), seed * 3 + 3, 0.5f, 1.0f, p.dtype);
  return in;
}

std::vector<int> make_kv_lengths(int b, int t_kv, uint64_t seed) {
  Rng rng{seed * 7 + 5};
  std::vector<int> len(static_cast<size_t>(b));
  for (int i = 0; i < b; ++i) len[size_t(i)] = 1 + int((rng.next() >> 33) % uint64_t(t_kv));
  if (b > 0) len[0] = t_kv;  // one full-length sequence, so the capacity is exercised
  return len;
}

}  // namespace lab
