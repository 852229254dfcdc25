#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

namespace lab {

bool parse_check_mode(const std::string& s, CheckMode* out) {
  if (s == "auto") { *out = CheckMode::automatic; return true; }
  if (s == "full") { *out = CheckMode::full; return true; }
  if (s == "sample") { *out = CheckMode::sample; return true; }
  if (s == "none") { *out = CheckMode::none; return true; }
  return false;
}

const char* check_mode_name(CheckMode m) {
  switch (m) {
    case CheckMode::automatic: return "auto";
    case CheckMode::full: return "full";
    case CheckMode::sample: return "sample";
    case CheckMode::none: return "none";
  }
  return "?";
}

double default_atol(DType t) { return t == DType::f32 ? 1e-5 : 1e-4; }

std::string check_scope(CheckMode m, int64_t rows_checked, int64_t rows_total) {
  if (m == CheckMode::none) return "";
  if (rows_checked >= rows_total) return "checked every row";
  return "checked " + std::to_string(rows_checked) + " of " + std::to_string(rows_total) +
         " rows, a sample; --check full checks every row";
}

std::vector<RowId> rows_to_check(const Problem& p, CheckMode mode, int sample_budget, uint64_t seed) {
  if (mode == CheckMode::none) return {};
  const double ref_macs = double(p.b) * p.h * double(p.t_q) * p.t_kv * p.d;
  const bool full = mode == CheckMode::full || (mode == CheckMode::automatic && ref_macs <= 4e9);
  return full ? all_rows(p) : sample_rows(p, sample_budget, seed);
}

std::vector<std::string> shown_details(const std::vector<std::string>& details, size_t n) {
  std::vector<std::string> shown(details.begin(), details.begin() + std::min(n, details.size()));
  for (size_t i = n; n > 0 && i < details.size(); ++i)
    if (details[i].rfind("worst: ", 0) == 0) shown.back() = details[i];
  return shown;
}

std::string format_number(const char* f, double a) {
  if (std::isnan(a)) return "NaN";  // printf writes "nan" or "-nan" by the sign bit, which means nothing here
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

namespace {
// The signed LSE error (out - fp64) of one (b, h)'s rows that see a key.
struct HeadOffset {
  int64_t rows = 0;
  double sum = 0, lo = INFINITY, hi = -INFINITY;
  double mean() const { return rows ? sum / double(rows) : 0; }
};

// With O right, an LSE off by one constant per head on every row of it (each row's error over the
// bound, of one sign, spread no more than rounding gives) moved every score of those rows by one
// amount, or scaled every sum l by one factor: softmax cancels it, the LSE keeps it. Said with the
// constants; "" when the errors are not so. reference.py's lse_offset says the same.
constexpr size_t kLseOffsetShown = 3;  // heads named with their constant
constexpr const char* LSE_OFFSET =
    ": every score of such a row moved by one amount, or its sum l scaled by one factor, which softmax cancels and "
    "the LSE keeps: look for a term constant along the row added to the scores (a position bias such as ALiBi's "
    "slope·(kv_idx - pos) written with q_idx for pos, the query's key position q_idx + T_kv - T_q: off by "
    "slope·(T_kv - T_q)), or for a factor of P that l keeps and the LSE does not take back (P scaled by 2^k for "
    "fp8: k·ln 2)";

std::string lse_offset(const std::map<std::pair<int, int>, HeadOffset>& heads, double bound, bool name_b) {
  std::vector<std::pair<std::pair<int, int>, HeadOffset>> off;
  for (const auto& x : heads)
    if (std::max(std::fabs(x.second.lo), std::fabs(x.second.hi)) > bound) off.push_back(x);
  if (off.empty()) return "";
  double lo = INFINITY, hi = -INFINITY, size = 0;
  for (const auto& x : off) {  // two rows at least: one row alone is constant by itself
    const HeadOffset& e = x.second;
    if (e.rows < 2 || !(e.lo > bound || e.hi < -bound) || e.hi - e.lo > 2 * bound + 0.01 * std::fabs(e.mean()))
      return "";
    lo = std::min(lo, e.mean());
    hi = std::max(hi, e.mean());
    size = std::max(size, std::fabs(e.mean()));
  }
  const double spread = 2 * bound + 0.01 * size;
  std::ostringstream s;
  s << "; O within its bound, and ";
  if (off.size() == heads.size() && hi - lo <= spread) {  // one constant everywhere
    double c = 0;
    for (const auto& x : off) c += x.second.mean();
    c /= double(off.size());
    constexpr double kLn2 = 0.6931471805599453;
    const double k = std::nearbyint(c / kLn2);
    s << "the LSE is off by the same amount, " << format_number("%+.3g", c);
    if (k != 0 && std::fabs(k) <= 32 && std::fabs(c - k * kLn2) <= spread) s << " = " << int(k) << "·ln 2";
    s << ", on every row checked";
  } else {
    s << "the LSE is off by one constant per head, the same on every row of it (";
    for (size_t n = 0; n < off.size() && n < kLseOffsetShown; ++n)
      s << (n ? ", " : "") << (name_b ? "b=" + std::to_string(off[n].first.first) + " " : std::string())
        << "h=" << off[n].first.second << ": " << format_number("%+.3g", off[n].second.mean());
    s << (off.size() > kLseOffsetShown ? ", …)" : ")");
  }
  s << LSE_OFFSET;
  return s.str();
}
}  // namespace

CheckResult check_rows(const Problem& p, const HostInputs& in, const std::vector<RowId>& rows,
                       const std::vector<float>& out_o, const std::vector<float>& out_lse, RefKind same_kind) {
  CheckResult r;
  const double atol = default_atol(p.dtype);
  std::ostringstream rule;
  if (same_kind == RefKind::fp8_e4m3)
    rule << "max|out-fp64| <= 2*max|unfused fp32 on e4m3-quantised inputs, P in e4m3 - fp64| + " << atol;
  else
    rule << "max|out-fp64| <= 2*max|unfused " << dtype_name(p.dtype) << " - fp64| + " << atol;
  r.rule = rule.str();

  for (float x : out_o) r.o_unwritten += is_poison(x);
  for (float x : out_lse) r.lse_unwritten += is_poison(x);
  if (rows.empty()) {
    r.skipped = true;
    r.passed = r.o_unwritten == 0 && r.lse_unwritten == 0;
    r.verdict = r.passed ? "not checked (--check none); every output element written"
                         : "output not written (poison left in place)";
    return r;
  }

  const RowResults exact = reference_rows(p, in, rows, RefKind::fp64);
  const RowResults same = reference_rows(p, in, rows, same_kind);
  r.rows_checked = int64_t(rows.size());

  double same_err = 0, same_lse_err = 0, diff2 = 0, ref2 = 0;
  int64_t lse_nan = 0, o_zero = 0;  // o_zero: elements exactly 0 (a stub that never adds leaves O so)
  int64_t o_nan_keyless = 0;         // of r.o_nan, those on rows that see no key (O must be 0 there)
  int64_t lse_sized = 0, lse_base2 = 0;  // rows whose LSE is far from 0; of them, those log2(e) times it
  // Rows whose LSE is a NaN that is not the poison (computed: -inf - -inf where empty states merge);
  // of them, those that see no key; the first of them, for the verdict.
  int64_t lse_nan_computed = 0, lse_nan_keyless = 0;
  size_t lse_nan_first = 0;
  std::map<std::pair<int, int>, HeadOffset> lse_heads;  // per (b, h) with a row that sees a key
  constexpr double kLog2e = 1.4426950408889634;
  const int d = p.d;
  auto worst = [](double a, double b) { return std::isnan(b) ? INFINITY : std::max(a, b); };
  size_t worst_n = 0;
  int worst_c = 0;
  double worst_err = -1;  // the element max_abs_err comes from (the first, on a tie; NaN counts as inf)
  for (size_t n = 0; n < rows.size(); ++n) {
    const RowId id = rows[n];
    const float* o = &out_o[size_t(p.q_index(id.b, id.i, id.h))];
    for (int c = 0; c < d; ++c) {
      const double ref = exact.o[n * size_t(d) + size_t(c)];
      const double err = std::fabs(double(o[c]) - ref);
      same_err = std::max(same_err, std::fabs(same.o[n * size_t(d) + size_t(c)] - ref));
      if (!std::isfinite(o[c])) {
        ++r.o_nan;
        o_nan_keyless += std::isinf(exact.lse[n]);
      }
      o_zero += o[c] == 0.f;
      r.max_abs_err = worst(r.max_abs_err, err);
      if (worst(0, err) > worst_err) { worst_err = worst(0, err); worst_n = n; worst_c = c; }
      if (std::isfinite(o[c])) diff2 += err * err;
      ref2 += ref * ref;
    }
    if (!out_lse.empty()) {
      const double ref = exact.lse[n];
      const float got = out_lse[size_t(p.lse_index(id.b, id.h, id.i))];
      if (std::isnan(got) && !is_poison(got)) {
        if (lse_nan_computed++ == 0) lse_nan_first = n;
        lse_nan_keyless += std::isinf(ref);
      }
      if (std::isinf(ref)) {  // a row that sees no key: LSE must be -inf too
        if (!(std::isinf(got) && got < 0)) { r.lse_max_abs_err = INFINITY; ++lse_nan; }
        continue;
      }
      same_lse_err = std::max(same_lse_err, std::fabs(same.lse[n] - ref));
      if (!std::isfinite(got)) ++lse_nan;
      // an LSE left in base 2 ((m + log2 l) without the ln 2) is log2(e) times the natural one
      if (std::fabs(ref) > 0.5) {
        ++lse_sized;
        lse_base2 += std::fabs(double(got) - ref * kLog2e) <= 1e-3 * std::fabs(ref * kLog2e);
      }
      r.lse_max_abs_err = worst(r.lse_max_abs_err, std::fabs(double(got) - ref));
      HeadOffset& e = lse_heads[{id.b, id.h}];  // the signed error of the head's rows, for a constant offset
      const double signed_err = double(got) - ref;
      ++e.rows;
      e.sum += signed_err;
      e.lo = std::min(e.lo, signed_err);
      e.hi = std::max(e.hi, signed_err);
    }
  }
  r.rel_l2_err = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (r.o_nan) r.rel_l2_err = INFINITY;
  r.ref_err_bound = 2 * same_err + atol;
  r.lse_err_bound = 2 * same_lse_err + atol;

  // The first few elements over the bound, by coordinate, with what was expected; then the worst
  // one, where the max error of the verdict comes from, unless it is among them (the first few of
  // an off-by-one are often the small errors at the start of a row, far from the worst).
  constexpr size_t kShownO = 6;
  auto element = [&](size_t n, int c) {
    const RowId id = rows[n];
    const float got = out_o[size_t(p.q_index(id.b, id.i, id.h)) + size_t(c)];
    const double ref = exact.o[n * size_t(d) + size_t(c)];
    const double err = std::fabs(double(got) - ref);
    const bool unwritten = is_poison(got);  // no error to speak of where nothing (or NaN) was stored
    std::ostringstream s;
    s << "O[b=" << id.b << ", i=" << id.i << ", h=" << id.h << ", d=" << c << "] = "
      << (unwritten ? std::string("unwritten") : format_number("%.6g", got)) << ", expected " << format_number("%.6g", ref)
      << (unwritten || std::isnan(err) ? std::string() : " (error " + format_number("%.3g", err) + ")");
    return s.str();
  };
  bool worst_shown = false;
  for (size_t n = 0; n < rows.size() && r.details.size() < kShownO; ++n) {
    for (int c = 0; c < d && r.details.size() < kShownO; ++c) {
      const double err = std::fabs(double(out_o[size_t(p.q_index(rows[n].b, rows[n].i, rows[n].h)) + size_t(c)]) -
                                   exact.o[n * size_t(d) + size_t(c)]);
      if (err <= r.ref_err_bound) continue;
      worst_shown = worst_shown || (n == worst_n && c == worst_c);
      r.details.push_back(element(n, c));
    }
  }
  if (!r.details.empty() && !worst_shown) {
    if (r.details.size() == kShownO) r.details.pop_back();
    r.details.push_back("worst: " + element(worst_n, worst_c));
  }

  const bool o_ok = r.o_unwritten == 0 && r.o_nan == 0 && r.max_abs_err <= r.ref_err_bound;
  const bool lse_ok = out_lse.empty() ||
                      (r.lse_unwritten == 0 && lse_nan == 0 && r.lse_max_abs_err <= r.lse_err_bound);
  auto lse_name = [](const RowId& id) {
    return "LSE[b=" + std::to_string(id.b) + ", h=" + std::to_string(id.h) + ", i=" + std::to_string(id.i) + "]";
  };
  // The first few LSE rows over their bound, after O's elements (a row's max and sum are wrong).
  for (size_t n = 0, shown = 0; !lse_ok && r.lse_unwritten == 0 && n < rows.size() && shown < 3; ++n) {
    const RowId id = rows[n];
    const double ref = exact.lse[n];
    const float got = out_lse[size_t(p.lse_index(id.b, id.h, id.i))];
    const bool bad = std::isinf(ref) ? !(std::isinf(got) && got < 0) : !(std::fabs(double(got) - ref) <= r.lse_err_bound);
    if (!bad) continue;
    r.details.push_back(lse_name(id) + " = " + format_number("%.6g", got) + ", expected " + format_number("%.6g", ref) +
                        (std::isinf(ref) ? " (the row sees no key)"
                         : std::isnan(got) ? " (a NaN computed, not the poison)"
                                           : " (error " + format_number("%.3g", std::fabs(double(got) - ref)) + ")"));
    ++shown;
  }
  // With only the LSE wrong, O (an average of V's rows) hides what the LSE shows: a row that sums a
  // key too many or too few (its mask or a key's address), an LSE formula in the wrong units (where
  // the section has the student write it), or scores off by a little (a 16-bit dot product).
  static constexpr const char* LSE_ONLY =
      "; O within its bound (O is an average, which hides what the LSE shows): look at the row's keys, one too "
      "many or too few (a mask, a window bound, a key's address), at how the LSE is made of the row's max "
      "and sum where that is your code (the natural log: m + ln l, or m·ln 2 + ln l with the max in base 2), "
      "then at the scores";
  // With O wrong, whether LSE is right says where to look: a right LSE means the row's max and sum
  // are, and the fault is in how O is accumulated or divided.
  // A NaN LSE that is not the poison was computed: said as such, with its rows.
  const std::string lse_too = out_lse.empty() ? ""
                              : r.lse_unwritten ? "; LSE not written either (" + std::to_string(r.lse_unwritten) + " of " +
                                                      std::to_string(out_lse.size()) + " elements still hold the poison)"
                              : lse_ok ? "; LSE within its bound (each row's max and sum are right)"
                              : lse_nan_computed ? "; LSE NaN as well on " + std::to_string(lse_nan_computed) + " rows (first: " +
                                                       lse_name(rows[lse_nan_first]) + "; a NaN computed, not the poison)"
                                                 : "; LSE too far as well (max error " + format_number("%.3g", r.lse_max_abs_err) + ")";
  r.passed = o_ok && lse_ok;
  const int64_t o_total = int64_t(out_o.size()), o_checked = int64_t(rows.size()) * d;
  std::ostringstream v;
  if (r.o_unwritten == o_total) {
    v << "output not written: all " << o_total << " elements of O still hold the poison (nothing stored O: an "
      << "exercise still the stub, or a store that is never reached?)";
  } else if (r.o_unwritten) {
    v << "output partly not written: " << r.o_unwritten << " of " << o_total
      << " elements of O still hold the poison";
  } else if (r.o_nan == o_checked && !out_lse.empty() && !r.lse_unwritten && lse_ok) {
    // Right max and sum rule out the stub and an overflow: what is left is O's own making.
    v << "all " << o_checked << " elements of O are NaN or inf on the rows checked: every row's max and sum are right "
      << "(LSE within its bound), so look at how O is made from P and V: a key outside the row's mask must give "
      << "P = 0, not NaN (and 0 * NaN is NaN too)";
  } else if (r.o_nan == o_checked) {  // the look of an exercise left as its stub (or of a NaN everywhere)
    v << "all " << o_checked << " elements of O are NaN or inf on the rows checked: nothing finite came out "
      << "(an exercise still the stub, a value it never writes, or a NaN or overflow that reached every row)"
      << lse_too;
  } else if (r.o_nan && o_nan_keyless == r.o_nan) {  // 1/l with l = 0 (T_q > T_kv causal, a window)
    v << r.o_nan << " elements of O are NaN or inf, all on rows that see no key: such a row's sum l is 0, so its O "
      << "must be 0 and its LSE -inf, never a division by l" << lse_too;
  } else if (r.o_nan) {
    v << r.o_nan << " elements of O are NaN or inf on the rows checked (a reference value is finite)" << lse_too;
  } else if (!o_ok && o_zero == o_checked) {
    v << "O too far from fp64: every one of the " << o_checked << " elements checked is 0 "
      << "(nothing was accumulated: an exercise still the stub, or one that skips every key?)";
  } else if (!o_ok) {
    v << "O too far from fp64: max error " << format_number("%.3g", r.max_abs_err) << " > bound "
      << format_number("%.3g", r.ref_err_bound) << " (" << r.rule << ")" << lse_too;
  } else if (!lse_ok) {
    if (r.lse_unwritten) v << "LSE not written: " << r.lse_unwritten << " of " << out_lse.size() << " elements still hold the poison";
    else if (lse_nan_computed && lse_nan_keyless == lse_nan_computed)  // the -inf of a row with no key, gone NaN
      v << "LSE is NaN on " << lse_nan_computed << " rows, all rows that see no key (first: " << lse_name(rows[lse_nan_first])
        << "), with O within its bound: a NaN computed, not the poison left in place; such a row's LSE must be -inf: "
        << "look for -inf - -inf (or exp of it) where its empty states merge (every split or warp of the row saw no key)";
    else if (lse_nan_computed)  // an empty state's -inf met another in a merge
      v << "LSE is NaN on " << lse_nan_computed << " of " << rows.size() << " rows checked (first: "
        << lse_name(rows[lse_nan_first]) << "), with O within its bound: a NaN computed, not the poison left in place; "
        << "look for -inf - -inf (or exp of it) where a state that saw no key (LSE -inf: an empty split, a warp with "
        << "no key) is merged";
    else {
      const std::string offset =
          lse_nan == 0 ? lse_offset(lse_heads, r.lse_err_bound, p.b > 1) : std::string();
      v << "LSE too far from fp64: max error " << format_number("%.3g", r.lse_max_abs_err) << " > bound "
        << format_number("%.3g", r.lse_err_bound)
        << (lse_sized > 0 && lse_base2 == lse_sized
                ? "; O within its bound, and every LSE is log2(e) = 1.4427 times the expected one: a log in base 2 "
                  "(m + log2 l) where the output holds the natural log (times ln 2)"
            : !offset.empty() ? offset.c_str()
                              : LSE_ONLY);
    }
  } else {
    v << "max error " << format_number("%.3g", r.max_abs_err) << " <= bound " << format_number("%.3g", r.ref_err_bound);
  }
  r.verdict = v.str();
  return r;
}

}  // namespace lab
