// The tolerance rule must pass a correct fp32 output computed another way, and fail every
// plausible wrong one: zeros, a transpose, rows shifted by one, a single NaN, unwritten output.
#include <catch2/catch.hpp>
#include <cmath>

#include "toolbox/attention_math.h"
#include "harness/compare.h"

using namespace lab;

namespace {
Problem shape(int t, int d, bool causal) {
  Problem p;
  p.b = 1; p.h = 2; p.h_kv = 2; p.t_q = t; p.t_kv = t; p.d = d; p.causal = causal;
  return p;
}

// A correct fp32 attention with a different summation order: FlashAttention-style online
// softmax over 16-key tiles. Fills O and LSE.
void online_softmax_fp32(const Problem& p, const HostInputs& in, std::vector<float>& o, std::vector<float>& lse) {
  o.assign(size_t(p.q_elems()), 0.f);
  lse.assign(size_t(p.lse_elems()), 0.f);
  for (int h = 0; h < p.h; ++h)
    for (int i = 0; i < p.t_q; ++i) {
      const KeyRange r = visible_keys(i, p.t_q, p.t_kv, p.causal, 0);
      float m = -INFINITY, l = 0;
      std::vector<float> acc(size_t(p.d), 0.f);
      for (int j0 = r.begin; j0 < r.end; j0 += 16) {
        const int j1 = std::min(j0 + 16, r.end);
        std::vector<float> s;
        float m_tile = -INFINITY;
        for (int j = j0; j < j1; ++j) {
          float dot = 0;
          for (int c = 0; c < p.d; ++c) dot += in.q[size_t(p.q_index(0, i, h) + c)] * in.k[size_t(p.kv_index(0, j, h) + c)];
          s.push_back(dot * p.softmax_scale());
          m_tile = std::max(m_tile, s.back());
        }
        const float m_new = std::max(m, m_tile), rescale = std::exp(m - m_new);
        l *= rescale;
        for (auto& a : acc) a *= rescale;
        for (int j = j0; j < j1; ++j) {
          const float pj = std::exp(s[size_t(j - j0)] - m_new);
          l += pj;
          for (int c = 0; c < p.d; ++c) acc[size_t(c)] += pj * in.v[size_t(p.kv_index(0, j, h) + c)];
        }
        m = m_new;
      }
      for (int c = 0; c < p.d; ++c) o[size_t(p.q_index(0, i, h) + c)] = acc[size_t(c)] / l;
      lse[size_t(p.lse_index(0, h, i))] = m + std::log(l);
    }
}

struct Fixture {
  Problem p = shape(64, 64, true);
  HostInputs in = make_inputs(p, 11, 1.0f);
  std::vector<float> o, lse;
  std::vector<RowId> rows = all_rows(p);
  Fixture() { online_softmax_fp32(p, in, o, lse); }
  CheckResult check() const { return check_rows(p, in, rows, o, lse); }
};
}  // namespace

TEST_CASE("compare passes a correct fp32 output computed in another order", "[compare]") {
  Fixture f;
  const CheckResult r = f.check();
  INFO(r.verdict);
  CHECK(r.passed);
  CHECK(r.max_abs_err <= r.ref_err_bound);
  CHECK(r.rows_checked == 128);
}

TEST_CASE("compare fails an all-zero output", "[compare]") {
  Fixture f;
  std::fill(f.o.begin(), f.o.end(), 0.f);
  const CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.find("too far from fp64") != std::string::npos);
  CHECK(r.verdict.find("every one of the 8192 elements checked is 0") != std::string::npos);
  CHECK_FALSE(r.details.empty());
}

TEST_CASE("compare says when every element checked is NaN, and counts them when some are", "[compare]") {
  Fixture f;
  std::fill(f.o.begin(), f.o.end(), std::nanf(""));
  CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.find("all 8192 elements of O are NaN or inf") != std::string::npos);
  Fixture g;
  g.o[5] = INFINITY;
  r = g.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.find("1 elements of O are NaN or inf") == 0);
}

TEST_CASE("compare names NaN rows that see no key (O = acc / l with l = 0)", "[compare]") {
  Problem p = shape(64, 64, true);
  p.t_q = 80;  // causal, T_q > T_kv: rows 0..15 see no key
  const HostInputs in = make_inputs(p, 11, 1.0f);
  std::vector<float> o, lse;
  online_softmax_fp32(p, in, o, lse);  // divides by l = 0 there: NaN, and LSE -inf (right)
  CheckResult r = check_rows(p, in, all_rows(p), o, lse);
  CHECK_FALSE(r.passed);
  INFO(r.verdict);
  CHECK(r.verdict.find("2048 elements of O are NaN or inf, all on rows that see no key") == 0);
  o[size_t(p.q_index(0, 40, 1))] = std::nanf("");  // one more on a row that sees keys: the plain count
  r = check_rows(p, in, all_rows(p), o, lse);
  INFO(r.verdict);
  CHECK(r.verdict.find("2049 elements of O are NaN or inf on the rows checked") == 0);
}

TEST_CASE("compare names an LSE that is a computed NaN, with its rows, never as unwritten", "[compare]") {
  Fixture f;  // O right; two rows' LSE NaN, as -inf - -inf leaves it where an empty split's -inf is merged
  f.lse[size_t(f.p.lse_index(0, 1, 5))] = -std::nanf("");
  f.lse[size_t(f.p.lse_index(0, 1, 9))] = std::nanf("");
  CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  INFO(r.verdict);
  CHECK(r.verdict.rfind("LSE is NaN on 2 of 128 rows checked (first: LSE[b=0, h=1, i=5]), with O within its bound: "
                        "a NaN computed, not the poison left in place; look for -inf - -inf",
                        0) == 0);
  CHECK(r.verdict.find("an empty split") != std::string::npos);
  REQUIRE_FALSE(r.details.empty());
  INFO(r.details.front());
  CHECK(r.details.front().rfind("LSE[b=0, h=1, i=5] = NaN, expected ", 0) == 0);
  CHECK(r.details.front().find("(a NaN computed, not the poison)") != std::string::npos);
  Fixture g;  // the poison in the same place: never written
  g.lse[size_t(g.p.lse_index(0, 1, 5))] = poison_float();
  r = g.check();
  CHECK(r.verdict.rfind("LSE not written: 1 of 128 elements", 0) == 0);
  Fixture h;  // a NaN in O with another payload than the poison's (x86's -inf - -inf) was computed too
  h.o[7] = bits_float(0xFFC00000u);
  r = h.check();
  CHECK(r.o_unwritten == 0);
  CHECK(r.verdict.rfind("1 elements of O are NaN or inf on the rows checked", 0) == 0);
}

TEST_CASE("compare names a NaN LSE on rows that see no key, whose LSE must be -inf", "[compare]") {
  Problem p = shape(64, 64, true);
  p.t_q = 80;  // causal, T_q > T_kv: rows 0..15 of each head see no key
  const HostInputs in = make_inputs(p, 11, 1.0f);
  std::vector<float> o, lse;
  online_softmax_fp32(p, in, o, lse);
  for (int h = 0; h < p.h; ++h)
    for (int i = 0; i < 16; ++i) {
      std::fill_n(&o[size_t(p.q_index(0, i, h))], p.d, 0.f);  // O right there ...
      lse[size_t(p.lse_index(0, h, i))] = std::nanf("");      // ... its LSE not: every state empty, merged
    }
  CheckResult r = check_rows(p, in, all_rows(p), o, lse);
  CHECK_FALSE(r.passed);
  INFO(r.verdict);
  CHECK(r.verdict.rfind("LSE is NaN on 32 rows, all rows that see no key (first: LSE[b=0, h=0, i=0]), with O within "
                        "its bound: a NaN computed, not the poison left in place; such a row's LSE must be -inf",
                        0) == 0);
  for (int h = 0; h < p.h; ++h)  // O NaN there as well: O's verdict leads, and names the LSE's NaN
    for (int i = 0; i < 16; ++i) std::fill_n(&o[size_t(p.q_index(0, i, h))], p.d, std::nanf(""));
  r = check_rows(p, in, all_rows(p), o, lse);
  INFO(r.verdict);
  CHECK(r.verdict.rfind("2048 elements of O are NaN or inf, all on rows that see no key", 0) == 0);
  CHECK(r.verdict.find("; LSE NaN as well on 32 rows (first: LSE[b=0, h=0, i=0]; a NaN computed, not the poison)") !=
        std::string::npos);
}

TEST_CASE("compare keeps a partly zero output a plain distance verdict", "[compare]") {
  Fixture f;
  std::fill(f.o.begin(), f.o.begin() + 64, 0.f);  // one row zeroed
  const CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.find("O too far from fp64: max error") == 0);
}

TEST_CASE("compare fails a transposed output (T and D swapped within a head)", "[compare]") {
  Fixture f;  // T = D = 64, so the transpose has the right size
  std::vector<float> t = f.o;
  for (int h = 0; h < f.p.h; ++h)
    for (int i = 0; i < 64; ++i)
      for (int c = 0; c < 64; ++c) t[size_t(f.p.q_index(0, i, h) + c)] = f.o[size_t(f.p.q_index(0, c, h) + i)];
  f.o = t;
  CHECK_FALSE(f.check().passed);
}

TEST_CASE("compare fails an output off by one row", "[compare]") {
  Fixture f;
  std::vector<float> shifted = f.o;
  for (int h = 0; h < f.p.h; ++h)
    for (int i = 0; i + 1 < 64; ++i)
      for (int c = 0; c < 64; ++c) shifted[size_t(f.p.q_index(0, i, h) + c)] = f.o[size_t(f.p.q_index(0, i + 1, h) + c)];
  f.o = shifted;
  const CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.details.front().find("O[b=0, i=0, h=0") != std::string::npos);  // names the coordinates
}

TEST_CASE("compare fails a single NaN", "[compare]") {
  Fixture f;
  f.o[777] = NAN;
  const CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.o_nan == 1);
  CHECK(r.verdict.find("NaN") != std::string::npos);
}

TEST_CASE("compare spells a NaN one way, whatever its sign bit", "[compare]") {
  Fixture f;
  f.o[3] = -std::nanf("");  // printf would say "-nan" here and "nan" for the positive one
  const CheckResult r = f.check();
  REQUIRE_FALSE(r.details.empty());
  INFO(r.details.front());
  CHECK(r.details.front().find("] = NaN, expected ") != std::string::npos);
  CHECK(r.details.front().find("error") == std::string::npos);  // a NaN has no distance to give
}

TEST_CASE("the check line says what it covered: every row, or a sample and how to check all", "[compare]") {
  CHECK(check_scope(CheckMode::automatic, 128, 128) == "checked every row");
  CHECK(check_scope(CheckMode::sample, 8, 8192) == "checked 8 of 8192 rows, a sample; --check full checks every row");
  CHECK(check_scope(CheckMode::none, 0, 8192).empty());
}

TEST_CASE("compare reports unwritten output (poison) distinctly", "[compare]") {
  Fixture f;
  std::fill(f.o.begin(), f.o.end(), poison_float());
  CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.rfind("output not written", 0) == 0);
  REQUIRE_FALSE(r.details.empty());
  CHECK(r.details.front().find("unwritten, expected ") != std::string::npos);
  CHECK(r.details.front().find("error") == std::string::npos);  // nothing stored: no error to give
  Fixture g;
  g.o[5] = poison_float();
  r = g.check();
  CHECK_FALSE(r.passed);
  CHECK(r.o_unwritten == 1);
  CHECK(r.verdict.find("partly not written") != std::string::npos);
}

TEST_CASE("compare checks the LSE too", "[compare]") {
  Fixture f;
  f.lse[3] += 0.01f;
  const CheckResult lse_only = f.check();
  CHECK_FALSE(lse_only.passed);
  INFO(lse_only.verdict);  // O right, LSE wrong: the verdict says O is right, so the LSE's inputs are looked at
  CHECK(lse_only.verdict.find("LSE too far from fp64") != std::string::npos);
  CHECK(lse_only.verdict.find("O within its bound") != std::string::npos);
  CHECK(lse_only.verdict.find("look at the row's keys, one too many or too few") != std::string::npos);
  CHECK(lse_only.verdict.find("every LSE is log2(e)") == std::string::npos);
  Fixture base2;  // the LSE left in base 2: said so, not "look at the scores"
  for (float& x : base2.lse) x = float(x * 1.4426950408889634);
  const CheckResult b2 = base2.check();
  CHECK_FALSE(b2.passed);
  INFO(b2.verdict);
  CHECK(b2.verdict.find("every LSE is log2(e) = 1.4427 times the expected one") != std::string::npos);
  Fixture g;
  std::fill(g.lse.begin(), g.lse.end(), poison_float());
  const CheckResult r = g.check();
  CHECK_FALSE(r.passed);
  CHECK(r.verdict.find("LSE not written") != std::string::npos);
}

TEST_CASE("compare names an LSE off by one constant per head on every row, with O right", "[compare]") {
  Fixture f;  // each head's scores moved by one amount (ALiBi's slope·(T_kv - T_q), pos written as q_idx)
  for (int i = 0; i < f.p.t_q; ++i) {
    f.lse[size_t(f.p.lse_index(0, 0, i))] += 0.75f;
    f.lse[size_t(f.p.lse_index(0, 1, i))] += 0.25f;
  }
  CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  INFO(r.verdict);
  CHECK(r.verdict.rfind("LSE too far from fp64: max error 0.75 > bound ", 0) == 0);
  CHECK(r.verdict.find("; O within its bound, and the LSE is off by one constant per head, the same on every row of "
                       "it (h=0: +0.75, h=1: +0.25): every score of such a row moved by one amount, or its sum l "
                       "scaled by one factor, which softmax cancels and the LSE keeps: look for a term constant along "
                       "the row added to the scores (a position bias such as ALiBi's slope·(kv_idx - pos) written "
                       "with q_idx for pos, the query's key position q_idx + T_kv - T_q") != std::string::npos);
  CHECK(r.verdict.find("one too many or too few") == std::string::npos);

  Fixture g;  // every sum l scaled by 2^8 (fp8's P·2^8 kept in l): one constant on every row of every head
  for (float& x : g.lse) x += float(8 * std::log(2.0));
  r = g.check();
  INFO(r.verdict);
  CHECK(r.verdict.find("; O within its bound, and the LSE is off by the same amount, +5.55 = 8·ln 2, on every row "
                       "checked: every score of such a row moved by one amount") != std::string::npos);
  Fixture c;  // a constant on one head alone: named as that head's
  for (int i = 0; i < c.p.t_q; ++i) c.lse[size_t(c.p.lse_index(0, 1, i))] -= 0.5f;
  r = c.check();
  INFO(r.verdict);
  CHECK(r.verdict.find("the LSE is off by one constant per head, the same on every row of it (h=1: -0.5)") !=
        std::string::npos);

  // Not one constant along the rows: the row's keys first, as before. Two values on one head, two
  // signs, and an error on some rows only.
  Fixture two, sign, some;
  for (int i = 0; i < two.p.t_q; ++i) {
    two.lse[size_t(two.p.lse_index(0, 0, i))] += i % 2 ? 0.75f : 0.5f;
    sign.lse[size_t(sign.p.lse_index(0, 0, i))] += i % 2 ? 0.75f : -0.75f;
    if (i % 3 == 0) some.lse[size_t(some.p.lse_index(0, 0, i))] += 0.75f;
  }
  for (const Fixture* x : {&two, &sign, &some}) {
    r = x->check();
    INFO(r.verdict);
    CHECK_FALSE(r.passed);
    CHECK(r.verdict.find("one too many or too few") != std::string::npos);
    CHECK(r.verdict.find("constant") == std::string::npos);
  }
  // One row per head (decode): one row is constant by itself, which says nothing.
  Problem p = shape(64, 64, false);
  p.t_q = 1;
  const HostInputs in = make_inputs(p, 11, 1.0f);
  std::vector<float> o, lse;
  online_softmax_fp32(p, in, o, lse);
  for (float& x : lse) x += 0.75f;
  r = check_rows(p, in, all_rows(p), o, lse);
  INFO(r.verdict);
  CHECK(r.verdict.find("one too many or too few") != std::string::npos);
}

TEST_CASE("compare on sampled rows still sees unwritten elements anywhere", "[compare]") {
  Fixture f;
  f.o[size_t(f.p.q_index(0, 40, 1) + 3)] = poison_float();  // a row the sample may skip
  const CheckResult r = check_rows(f.p, f.in, sample_rows(f.p, 8, 1), f.o, f.lse);
  CHECK_FALSE(r.passed);
  CHECK(r.o_unwritten == 1);
}

TEST_CASE("the bound scales with the precision: fp16 output with fp32 error passes", "[compare]") {
  Problem p = shape(64, 64, false);
  p.dtype = DType::f16;
  const HostInputs in = make_inputs(p, 5, 1.0f);
  std::vector<float> o, lse;
  online_softmax_fp32(p, in, o, lse);
  for (float& x : o) x = round_to(DType::f16, x);  // as a kernel storing fp16 would
  const CheckResult r = check_rows(p, in, all_rows(p), o, lse);
  INFO(r.verdict);
  CHECK(r.passed);
  CHECK(r.ref_err_bound > 1e-4);  // looser than fp32's, because fp16 unfused is less exact
}

TEST_CASE("compare lists the worst element after the first few, unless it is among them", "[compare]") {
  Fixture f;
  for (int c = 0; c < 10; ++c) f.o[size_t(f.p.q_index(0, 0, 0) + c)] += 0.01f;  // small errors come first
  f.o[size_t(f.p.q_index(0, 40, 1) + 7)] += 0.5f;                               // the max error, far behind
  CheckResult r = f.check();
  CHECK_FALSE(r.passed);
  INFO(r.verdict);
  REQUIRE(r.details.size() == 6);  // no more lines than before: five of the first, then the worst
  CHECK(r.details[0].rfind("O[b=0, i=0, h=0, d=0] = ", 0) == 0);
  CHECK(r.details[4].rfind("O[b=0, i=0, h=0, d=4] = ", 0) == 0);
  CHECK(r.details[5].rfind("worst: O[b=0, i=40, h=1, d=7] = ", 0) == 0);
  CHECK(r.details[5].find("(error 0.5)") != std::string::npos);

  Fixture g;  // the worst is the first bad element: listed once, no "worst:" line
  g.o[size_t(g.p.q_index(0, 3, 0) + 2)] += 0.5f;
  g.o[size_t(g.p.q_index(0, 9, 0) + 2)] += 0.01f;
  r = g.check();
  REQUIRE(r.details.size() == 2);
  CHECK(r.details[0].rfind("O[b=0, i=3, h=0, d=2] = ", 0) == 0);
  CHECK(r.details[1].rfind("O[b=0, i=9, h=0, d=2] = ", 0) == 0);

  Fixture n;  // a NaN is worse than any number: past the first few, it is the worst line
  for (int c = 0; c < 10; ++c) n.o[size_t(n.p.q_index(0, 1, 0) + c)] += 0.5f;
  n.o[size_t(n.p.q_index(0, 60, 1) + 5)] = NAN;
  r = n.check();
  REQUIRE(r.details.size() == 6);
  INFO(r.details[5]);
  CHECK(r.details[5].rfind("worst: O[b=0, i=60, h=1, d=5] = NaN, expected ", 0) == 0);
}

TEST_CASE("compare's all-NaN verdict with a right LSE points at how O is made, not at a stub", "[compare]") {
  Fixture f;  // LSE right: every row's max and sum are; O alone went NaN (a P never written, 0 * NaN)
  std::fill(f.o.begin(), f.o.end(), std::nanf(""));
  CheckResult r = f.check();
  INFO(r.verdict);
  CHECK(r.verdict.rfind("all 8192 elements of O are NaN or inf on the rows checked: every row's max and sum are right "
                        "(LSE within its bound), so look at how O is made from P and V: a key outside the row's mask "
                        "must give P = 0",
                        0) == 0);
  CHECK(r.verdict.find("stub") == std::string::npos);
  Fixture g;  // LSE unwritten as well: the look of a stub, said as before
  std::fill(g.o.begin(), g.o.end(), std::nanf(""));
  std::fill(g.lse.begin(), g.lse.end(), poison_float());
  r = g.check();
  CHECK(r.verdict.find("nothing finite came out (an exercise still the stub") != std::string::npos);
  Fixture h;  // LSE wrong too: not O's making alone
  std::fill(h.o.begin(), h.o.end(), std::nanf(""));
  for (float& x : h.lse) x += 1.f;
  r = h.check();
  CHECK(r.verdict.find("nothing finite came out") != std::string::npos);
  CHECK(r.verdict.find("LSE too far as well") != std::string::npos);
}

TEST_CASE("compare's short report keeps the worst element's line in place of the last it shows", "[compare]") {
  const std::vector<std::string> d = {"O[a]", "O[b]", "O[c]", "O[d]", "worst: O[z]", "LSE[x]"};
  CHECK(shown_details(d, 3) == std::vector<std::string>{"O[a]", "O[b]", "worst: O[z]"});
  CHECK(shown_details(d, 6) == d);
  const std::vector<std::string> no_worst = {"O[a]", "O[b]", "O[c]", "O[d]"};
  CHECK(shown_details(no_worst, 3) == std::vector<std::string>{"O[a]", "O[b]", "O[c]"});
  CHECK(shown_details({"O[a]"}, 3) == std::vector<std::string>{"O[a]"});
}
