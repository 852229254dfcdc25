// The ground truth of every section: attention in fp64 on the CPU, one query row at a time, with
// causal (bottom-right aligned), sliding-window, GQA and per-sequence key counts. It also gives
// the "same-precision unfused" result the tolerance rule compares against (compare.h).
#pragma once
#include <cstdint>
#include <vector>

#include "harness/problem.h"

namespace lab {

struct RowId {
  int b, h, i;  // sequence, query head, query row
};

enum class RefKind {
  fp64,            // exact up to fp64 rounding: the ground truth
  same_precision,  // what an unfused implementation at p.dtype gets: S, P and O rounded to the
                   // element type, float accumulation (eager PyTorch's path)
  fp8_e4m3,        // the same at fp8: Q, K, V quantised to e4m3 as the fp8 variants do (fp8.h:
                   // per (sequence, K/V head), amax / 448) and dequantised, then fp32 math
                   // (S, P, O unrounded), O rounded to p.dtype, the kernel's output type
};

// O rows [rows.size(), D] and LSE [rows.size()] (natural log; -inf for a row that sees no key,
// whose O row is 0).
struct RowResults {
  std::vector<double> o;
  std::vector<double> lse;
};

RowResults reference_rows(const Problem& p, const HostInputs& in, const std::vector<RowId>& rows,
                          RefKind kind);

std::vector<RowId> all_rows(const Problem& p);
// About `budget` rows spread over every (b, h), always including each head's first and last rows
// and the rows on either side of 64-row tile boundaries, the rest drawn from a seeded generator.
std::vector<RowId> sample_rows(const Problem& p, int budget, uint64_t seed);

}  // namespace lab
