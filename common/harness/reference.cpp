#include "harness/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "toolbox/attention_math.h"
#include "harness/fp8.h"
#include "harness/parallel.h"

namespace lab {
namespace {

void row_fp64(const Problem& p, const HostInputs& in, RowId r, double* o, double* lse) {
  const int keys = p.keys_of(r.b);
  const KeyRange range = visible_keys(r.i, p.t_q, keys, p.causal, p.window);
  const int hk = kv_head_of(r.h, p.h, p.h_kv);
  const float* q = &in.q[size_t(p.q_index(r.b, r.i, r.h))];
  std::fill(o, o + p.d, 0.0);
  if (range.empty()) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const double scale = 1.0 / std::sqrt(double(p.d));
  std::vector<double> s(size_t(range.end - range.begin));
  double m = -std::numeric_limits<double>::infinity();
  for (int j = range.begin; j < range.end; ++j) {
    const float* k = &in.k[size_t(p.kv_index(r.b, j, hk))];
    double dot = 0;
    for (int c = 0; c < p.d; ++c) dot += double(q[c]) * double(k[c]);
    s[size_t(j - range.begin)] = dot * scale;
    m = std::max(m, dot * scale);
  }
  double l = 0;
  for (int j = range.begin; j < range.end; ++j) {
    const double pj = std::exp(s[size_t(j - range.begin)] - m);
    l += pj;
    const float* v = &in.v[size_t(p.kv_index(r.b, j, hk))];
    for (int c = 0; c < p.d; ++c) o[c] += pj * double(v[c]);
  }
  for (int c = 0; c < p.d; ++c) o[c] /= l;
  *lse = m + std::log(l);
}

// Unfused at the element type: S = round(round(Q K^T) * scale); P = round(softmax(S)) computed in
// float; O = round(P V) with float accumulation. Matches eager attention's rounding points.
// `t` rounds S and P, `out` rounds O (both p.dtype, except for the fp8 reference: fp32 math, and
// P rounded to e4m3 as an fp8 P V product takes it, scaled by 2^8 so that its largest value is 256;
// the row sum stays fp32).
void row_same_precision(const Problem& p, const HostInputs& in, RowId r, double* o, double* lse, DType t,
                        DType out, bool p_e4m3 = false) {
  const int keys = p.keys_of(r.b);
  const KeyRange range = visible_keys(r.i, p.t_q, keys, p.causal, p.window);
  const int hk = kv_head_of(r.h, p.h, p.h_kv);
  const float* q = &in.q[size_t(p.q_index(r.b, r.i, r.h))];
  std::fill(o, o + p.d, 0.0);
  if (range.empty()) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const float scale = p.softmax_scale();
  std::vector<float> s(size_t(range.end - range.begin));
  float m = -INFINITY;
  for (int j = range.begin; j < range.end; ++j) {
    const float* k = &in.k[size_t(p.kv_index(r.b, j, hk))];
    float dot = 0;
    for (int c = 0; c < p.d; ++c) dot += q[c] * k[c];
    const float sj = round_to(t, round_to(t, dot) * scale);
    s[size_t(j - range.begin)] = sj;
    m = std::max(m, sj);
  }
  float l = 0;
  for (float& sj : s) {
    sj = std::exp(sj - m);
    l += sj;
  }
  std::vector<float> acc(size_t(p.d), 0.0f);
  for (int j = range.begin; j < range.end; ++j) {
    const float sj = s[size_t(j - range.begin)];
    const float pj = p_e4m3 ? round_to_e4m3(sj * 256.f) / (256.f * l) : round_to(t, sj / l);
    const float* v = &in.v[size_t(p.kv_index(r.b, j, hk))];
    for (int c = 0; c < p.d; ++c) acc[size_t(c)] += pj * v[c];
  }
  for (int c = 0; c < p.d; ++c) o[c] = round_to(out, acc[size_t(c)]);
  *lse = double(m) + std::log(double(l));
}

}  // namespace

RowResults reference_rows(const Problem& p, const HostInputs& in, const std::vector<RowId>& rows,
                          RefKind kind) {
  RowResults out;
  out.o.resize(rows.size() * size_t(p.d));
  out.lse.resize(rows.size());
  HostInputs fp8;  // fp8_e4m3: the whole inputs quantised (the scales see every row), dequantised
  if (kind == RefKind::fp8_e4m3) fp8 = dequantise(p, quantise_e4m3(p, in));
  parallel_for(int64_t(rows.size()), [&](int64_t n) {
    double* o = &out.o[size_t(n) * size_t(p.d)];
    if (kind == RefKind::fp64) row_fp64(p, in, rows[size_t(n)], o, &out.lse[size_t(n)]);
    else if (kind == RefKind::same_precision)
      row_same_precision(p, in, rows[size_t(n)], o, &out.lse[size_t(n)], p.dtype, p.dtype);
    else row_same_precision(p, fp8, rows[size_t(n)], o, &out.lse[size_t(n)], DType::f32, p.dtype, true);
  });
  return out;
}

std::vector<RowId> all_rows(const Problem& p) {
  std::vector<RowId> rows;
  rows.reserve(size_t(p.b) * p.h * p.t_q);
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < p.h; ++h)
      for (int i = 0; i < p.t_q; ++i) rows.push_back({b, h, i});
  return rows;
}

std::vector<RowId> sample_rows(const Problem& p, int budget, uint64_t seed) {
  std::set<std::tuple<int, int, int>> picked;
  const int heads = p.b * p.h;
  const int per_head = std::max(4, budget / std::max(1, heads));
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 77;
  auto next = [&] {
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return state;
  };
  for (int bh = 0; bh < heads; ++bh) {
    const int b = bh / p.h, h = bh % p.h;
    std::vector<int> want = {0, p.t_q - 1};
    for (int edge = 64; edge < p.t_q && int(want.size()) < per_head / 2; edge *= 2)
      for (int i : {edge - 1, edge, edge + 1}) want.push_back(i);
    while (int(want.size()) < per_head) want.push_back(int(next() % uint64_t(p.t_q)));
    for (int i : want)
      if (i >= 0 && i < p.t_q) picked.insert({b, h, i});
  }
  std::vector<RowId> rows;
  for (auto& [b, h, i] : picked) rows.push_back({b, h, i});
  return rows;
}

}  // namespace lab
