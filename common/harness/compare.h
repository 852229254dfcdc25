// The self-check. The tolerance rule is FlashAttention's: on the rows checked, the kernel's
// largest error against fp64 must be at most twice the largest error of an unfused
// implementation at the same precision (reference.h, RefKind::same_precision), plus a small
// absolute term. A kernel is held to what its precision allows, no looser and no tighter.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/problem.h"
#include "harness/reference.h"

namespace lab {

enum class CheckMode { automatic, full, sample, none };
bool parse_check_mode(const std::string& s, CheckMode* out);
const char* check_mode_name(CheckMode m);
// What a check covered, said after its verdict: "checked every row", or the sample and how to check all
// ("" under --check none, whose verdict says so). The mode's name alone ("auto") says neither.
std::string check_scope(CheckMode m, int64_t rows_checked, int64_t rows_total);
// A number for a verdict, printf-formatted by f ("%.3g"); NaN is "NaN" whatever its sign bit.
std::string format_number(const char* f, double a);

struct CheckResult {
  bool passed = false;
  bool skipped = false;       // --check none
  double max_abs_err = 0;     // kernel vs fp64, on O
  double rel_l2_err = 0;      // ||out - ref|| / ||ref||, on O
  double ref_err_bound = 0;   // 2 * same-precision error + atol
  double lse_max_abs_err = 0;
  double lse_err_bound = 0;
  int64_t rows_checked = 0;
  int64_t o_unwritten = 0;    // elements still holding the poison (whole O)
  int64_t lse_unwritten = 0;  // elements still holding the poison (whole LSE)
  int64_t o_nan = 0;          // NaN or inf where the reference is finite, on the rows checked
  std::string rule;           // the rule applied, for the record
  std::string verdict;        // one line: why it passed or failed
  std::vector<std::string> details;  // the first few bad elements, for a human
};

double default_atol(DType t);

// At most n of a check's detail lines, for a short report (a --quiet failure): the first ones, the
// last of them replaced by the worst element's line when that lies further down (it is the line the
// verdict's max error comes from).
std::vector<std::string> shown_details(const std::vector<std::string>& details, size_t n);

// out_o: the whole O [B, T_q, H, D] as float (poison preserved); out_lse: the whole LSE
// [B, H, T_q], or empty when the section does not produce one. `same` is the unfused reference
// whose error sets the bound: same_precision (the element type), or fp8_e4m3 for a kernel that
// quantises its inputs to fp8 (the bound is then 2x the error of fp32 attention on the same
// quantised inputs: what fp8 storage alone costs, plus atol).
CheckResult check_rows(const Problem& p, const HostInputs& in, const std::vector<RowId>& rows,
                       const std::vector<float>& out_o, const std::vector<float>& out_lse,
                       RefKind same = RefKind::same_precision);

// Picks the rows for a mode: full (every row), sample (about `sample_rows` rows), automatic
// (full when the fp64 reference is cheap, else sample).
std::vector<RowId> rows_to_check(const Problem& p, CheckMode mode, int sample_budget, uint64_t seed);

}  // namespace lab
