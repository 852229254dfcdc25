// The fp64 reference is the ground truth of every section, so it is checked against values
// worked out by hand and against an independent brute-force attention.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/reference.h"

using namespace lab;

namespace {
Problem tiny(int b, int h, int h_kv, int t_q, int t_kv, int d, bool causal = false, int window = 0) {
  Problem p;
  p.b = b; p.h = h; p.h_kv = h_kv; p.t_q = t_q; p.t_kv = t_kv; p.d = d; p.causal = causal; p.window = window;
  return p;
}

// Dense attention with an explicit mask matrix, GQA by explicit group search. Shares no code
// with reference.cpp.
void brute(const Problem& p, const HostInputs& in, int b, int h, int i, std::vector<double>& o, double& lse) {
  int hk = -1;
  const int group = p.h / p.h_kv;
  for (int g = 0; g < p.h_kv; ++g)
    if (h >= g * group && h < (g + 1) * group) hk = g;
  const int keys = p.keys_of(b);
  std::vector<double> w(size_t(keys), 0.0);
  double total = 0, m = -INFINITY;
  std::vector<double> s(size_t(keys), -INFINITY);
  for (int j = 0; j < keys; ++j) {
    const int pos = i + keys - p.t_q;
    const bool ok = (!p.causal || j <= pos) && (p.window == 0 || j > pos - p.window);
    if (!ok) continue;
    double dot = 0;
    for (int c = 0; c < p.d; ++c) dot += double(in.q[size_t(p.q_index(b, i, h) + c)]) * in.k[size_t(p.kv_index(b, j, hk) + c)];
    s[size_t(j)] = dot / std::sqrt(double(p.d));
    m = std::max(m, s[size_t(j)]);
  }
  for (int j = 0; j < keys; ++j) total += w[size_t(j)] = std::isinf(s[size_t(j)]) ? 0 : std::exp(s[size_t(j)] - m);
  o.assign(size_t(p.d), 0.0);
  for (int j = 0; j < keys; ++j)
    for (int c = 0; c < p.d; ++c) o[size_t(c)] += w[size_t(j)] / (total > 0 ? total : 1) * in.v[size_t(p.kv_index(b, j, hk) + c)];
  lse = total > 0 ? m + std::log(total) : -INFINITY;
}
}  // namespace

TEST_CASE("reference: one key gives O = V and LSE = the score", "[reference]") {
  Problem p = tiny(1, 1, 1, 1, 1, 2);
  HostInputs in{{0.5f, 2.0f}, {1.0f, -1.0f}, {3.0f, 4.0f}};
  const RowResults r = reference_rows(p, in, all_rows(p), RefKind::fp64);
  CHECK(r.o[0] == Approx(3.0));
  CHECK(r.o[1] == Approx(4.0));
  CHECK(r.lse[0] == Approx((0.5 - 2.0) / std::sqrt(2.0)));
}

TEST_CASE("reference: two keys, worked by hand", "[reference]") {
  // q = (1, 0); k0 = (1, 0), k1 = (0, 1); scale 1/sqrt(2): s = (0.7071, 0)
  Problem p = tiny(1, 1, 1, 1, 2, 2);
  HostInputs in{{1, 0}, {1, 0, 0, 1}, {10, 0, 0, 10}};
  const RowResults r = reference_rows(p, in, all_rows(p), RefKind::fp64);
  const double e = std::exp(1 / std::sqrt(2.0));
  CHECK(r.o[0] == Approx(10 * e / (e + 1)));
  CHECK(r.o[1] == Approx(10 / (e + 1)));
  CHECK(r.lse[0] == Approx(std::log(e + 1)));
}

TEST_CASE("reference: causal with T_q != T_kv is bottom-right aligned", "[reference]") {
  // T_q = 1, T_kv = 3, causal: the single query is the last token and sees all three keys.
  Problem p = tiny(1, 1, 1, 1, 3, 1, true);
  HostInputs in{{0}, {0, 0, 0}, {1, 2, 6}};  // equal scores: O = mean(V)
  CHECK(reference_rows(p, in, all_rows(p), RefKind::fp64).o[0] == Approx(3.0));
  // T_q = 3, T_kv = 1: rows 0 and 1 see nothing (O = 0, LSE = -inf), row 2 sees key 0.
  Problem p2 = tiny(1, 1, 1, 3, 1, 1, true);
  HostInputs in2{{0, 0, 0}, {0}, {5}};
  const RowResults r = reference_rows(p2, in2, all_rows(p2), RefKind::fp64);
  CHECK(r.o[0] == 0.0);
  CHECK(std::isinf(r.lse[0]));
  CHECK(r.lse[0] < 0);
  CHECK(r.o[2] == Approx(5.0));
}

TEST_CASE("reference matches brute force: causal, T_q != T_kv, window, GQA, kv_len", "[reference]") {
  struct Case { Problem p; const char* what; };
  std::vector<Case> cases = {
      {tiny(2, 4, 2, 9, 13, 8, true), "GQA causal T_q < T_kv"},
      {tiny(1, 3, 1, 13, 6, 4, true), "MQA causal T_q > T_kv"},
      {tiny(1, 2, 2, 20, 20, 4, true, 5), "window 5"},
      {tiny(1, 2, 2, 7, 30, 4, true, 3), "window 3, T_q < T_kv"},
      {tiny(2, 2, 2, 5, 5, 16, false), "plain"},
  };
  Problem dec = tiny(3, 4, 2, 1, 40, 8, true);
  dec.kv_len = {40, 1, 17};
  cases.push_back({dec, "decode with per-sequence lengths"});
  for (auto& c : cases) {
    INFO(c.what);
    const HostInputs in = make_inputs(c.p, 7, 1.0f);
    const auto rows = all_rows(c.p);
    const RowResults r = reference_rows(c.p, in, rows, RefKind::fp64);
    for (size_t n = 0; n < rows.size(); ++n) {
      std::vector<double> o;
      double lse;
      brute(c.p, in, rows[n].b, rows[n].h, rows[n].i, o, lse);
      for (int d = 0; d < c.p.d; ++d) REQUIRE(r.o[n * size_t(c.p.d) + size_t(d)] == Approx(o[size_t(d)]).margin(1e-12));
      if (std::isinf(lse)) REQUIRE(std::isinf(r.lse[n]));
      else REQUIRE(r.lse[n] == Approx(lse));
    }
  }
}

TEST_CASE("same-precision reference: close to fp64 in fp32, further in fp16/bf16", "[reference]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    Problem p = tiny(1, 2, 2, 64, 200, 64, true);
    p.dtype = t;
    const HostInputs in = make_inputs(p, 3, 1.0f);
    const auto rows = all_rows(p);
    const RowResults exact = reference_rows(p, in, rows, RefKind::fp64);
    const RowResults same = reference_rows(p, in, rows, RefKind::same_precision);
    double err = 0;
    for (size_t n = 0; n < exact.o.size(); ++n) err = std::max(err, std::fabs(exact.o[n] - same.o[n]));
    INFO(dtype_name(t) << " error " << err);
    if (t == DType::f32) CHECK(err < 1e-5);
    else CHECK((err > 1e-5 && err < 5e-2));  // rounding to 16 bits is visible but bounded
  }
}

TEST_CASE("inputs are seeded, non-zero mean and representable in the dtype", "[reference]") {
  Problem p = tiny(1, 2, 2, 100, 100, 64);
  p.dtype = DType::bf16;
  const HostInputs a = make_inputs(p, 42, 1.0f), b = make_inputs(p, 42, 1.0f), c = make_inputs(p, 43, 1.0f);
  CHECK(a.q == b.q);
  CHECK(a.q != c.q);
  double mean = 0;
  for (float x : a.v) mean += x;
  mean /= double(a.v.size());
  CHECK(mean == Approx(0.5).margin(0.05));
  for (float x : a.k) REQUIRE(round_to(DType::bf16, x) == x);
}

TEST_CASE("sampled rows include first, last and tile-edge rows of every head", "[reference]") {
  Problem p = tiny(2, 3, 3, 1000, 1000, 64);
  const auto rows = sample_rows(p, 200, 1);
  auto has = [&](int b, int h, int i) {
    for (auto r : rows) if (r.b == b && r.h == h && r.i == i) return true;
    return false;
  };
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h) {
      CHECK(has(b, h, 0));
      CHECK(has(b, h, 999));
      CHECK(has(b, h, 63));
      CHECK(has(b, h, 64));
      CHECK(has(b, h, 65));
    }
  CHECK(rows.size() <= 6 * 40);
}
