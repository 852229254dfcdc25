#include "harness/backward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "harness/npy.h"
#include "harness/parallel.h"
#include "harness/record.h"
#include "harness/reference.h"
#include "harness/rng.h"
#include "toolbox/attention_math.h"
#include "toolbox/cuda_check.h"

#ifndef LAB_GIT_SHA_DEFAULT
#define LAB_GIT_SHA_DEFAULT "unknown"
#endif

namespace lab {
using json = nlohmann::json;

std::vector<float> make_grad_output(const Problem& p, uint64_t seed) {
  Rng rng{seed * 3 + 11};
  std::vector<float> d_o(size_t(p.q_elems()));
  for (float& x : d_o) x = round_to(p.dtype, rng.symmetric() + 0.1f);
  return d_o;
}

void forward_fp32_host(const Problem& p, const HostInputs& in, std::vector<float>& o, std::vector<float>& lse) {
  o.assign(size_t(p.q_elems()), 0.0f);
  lse.assign(size_t(p.lse_elems()), -INFINITY);
  const float scale = p.softmax_scale();
  parallel_for(int64_t(p.b) * p.h, [&](int64_t bh) {
    const int b = int(bh / p.h), h = int(bh % p.h), hk = kv_head_of(h, p.h, p.h_kv);
    std::vector<float> acc(size_t(p.d));
    for (int i = 0; i < p.t_q; ++i) {
      const KeyRange keys = visible_keys(i, p.t_q, p.t_kv, p.causal, 0);
      const float* q = &in.q[size_t(p.q_index(b, i, h))];
      float m = -INFINITY, l = 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int j = keys.begin; j < keys.end; ++j) {  // the online softmax, one key at a time
        const float* k = &in.k[size_t(p.kv_index(b, j, hk))];
        const float* v = &in.v[size_t(p.kv_index(b, j, hk))];
        float s = 0;
        for (int c = 0; c < p.d; ++c) s += q[c] * k[c];
        s *= scale;
        const float m_new = std::max(m, s), alpha = std::exp(m - m_new), pj = std::exp(s - m_new);
        l = l * alpha + pj;
        for (int c = 0; c < p.d; ++c) acc[size_t(c)] = acc[size_t(c)] * alpha + pj * v[c];
        m = m_new;
      }
      float* out = &o[size_t(p.q_index(b, i, h))];
      for (int c = 0; c < p.d; ++c) out[c] = l > 0 ? round_to(p.dtype, acc[size_t(c)] / l) : 0.0f;
      lse[size_t(p.lse_index(b, h, i))] = l > 0 ? m + std::log(l) : -INFINITY;
    }
  });
}

namespace {

// What the reference gradients of one row take from the forward: the row's LSE and
// D = rowsum(dO ∘ O), in fp64 (the ground truth) and as an unfused same-precision backward has them.
struct RowStats {
  std::vector<double> lse, d;     // fp64, [B, H, T_q]
  std::vector<float> lse_f, d_f;  // same precision: the saved LSE, D summed in float from the saved O
};

// The unfused backward at the element type t rounds where eager attention's autograd does: S and P
// as in the forward, dP = dO Vᵀ and dS = P ∘ (dP − D) rounded to t, every sum in float, each
// gradient rounded to t once.
struct Rounding {
  bool same;
  DType t;
  double r(double x) const { return same ? double(round_to(t, float(x))) : x; }
};

double score(const Problem& p, const Rounding& rd, const float* q, const float* k) {
  if (!rd.same) {
    double dot = 0;
    for (int c = 0; c < p.d; ++c) dot += double(q[c]) * double(k[c]);
    return dot / std::sqrt(double(p.d));
  }
  float dot = 0;
  for (int c = 0; c < p.d; ++c) dot += q[c] * k[c];
  return double(round_to(rd.t, round_to(rd.t, dot) * p.softmax_scale()));
}

double dot_rows(const Problem& p, const Rounding& rd, const float* a, const float* b) {
  if (!rd.same) {
    double dot = 0;
    for (int c = 0; c < p.d; ++c) dot += double(a[c]) * double(b[c]);
    return dot;
  }
  float dot = 0;
  for (int c = 0; c < p.d; ++c) dot += a[c] * b[c];
  return double(round_to(rd.t, dot));
}

// P and dS of the pair (query row i of head h, key j).
void p_and_ds(const Problem& p, const BackwardInputs& in, const RowStats& st, const Rounding& rd, int b, int h, int i,
              int j, double* pij, double* dsij) {
  const int hk = kv_head_of(h, p.h, p.h_kv);
  const float* q = &in.qkv.q[size_t(p.q_index(b, i, h))];
  const float* d_o = &in.d_o[size_t(p.q_index(b, i, h))];
  const float* k = &in.qkv.k[size_t(p.kv_index(b, j, hk))];
  const float* v = &in.qkv.v[size_t(p.kv_index(b, j, hk))];
  const size_t row = size_t(p.lse_index(b, h, i));
  const double s = score(p, rd, q, k);
  const double lse = rd.same ? double(st.lse_f[row]) : st.lse[row];
  const double d = rd.same ? double(st.d_f[row]) : st.d[row];
  const double pr = rd.same ? rd.r(double(std::exp(float(s - lse)))) : std::exp(s - lse);
  const double dp = dot_rows(p, rd, d_o, v);
  *pij = pr;
  *dsij = rd.same ? rd.r(float(pr) * (float(dp) - float(d))) : pr * (dp - d);
}

void dq_row(const Problem& p, const BackwardInputs& in, const RowStats& st, const Rounding& rd, int b, int h, int i,
            double* dq) {
  const int hk = kv_head_of(h, p.h, p.h_kv);
  const KeyRange keys = visible_keys(i, p.t_q, p.t_kv, p.causal, 0);
  std::vector<double> acc(size_t(p.d), 0.0);
  std::vector<float> acc_f(size_t(p.d), 0.0f);
  for (int j = keys.begin; j < keys.end; ++j) {
    double pij, ds;
    p_and_ds(p, in, st, rd, b, h, i, j, &pij, &ds);
    const float* k = &in.qkv.k[size_t(p.kv_index(b, j, hk))];
    for (int c = 0; c < p.d; ++c) {
      if (rd.same) acc_f[size_t(c)] += float(ds) * k[c];
      else acc[size_t(c)] += ds * double(k[c]);
    }
  }
  for (int c = 0; c < p.d; ++c)
    dq[c] = rd.same ? rd.r(acc_f[size_t(c)] * p.softmax_scale()) : acc[size_t(c)] / std::sqrt(double(p.d));
}

void dkdv_row(const Problem& p, const BackwardInputs& in, const RowStats& st, const Rounding& rd, int b, int hk, int j,
              double* dk, double* dv) {
  std::vector<double> ak(size_t(p.d), 0.0), av(size_t(p.d), 0.0);
  std::vector<float> ak_f(size_t(p.d), 0.0f), av_f(size_t(p.d), 0.0f);
  const int group = p.h / p.h_kv;
  for (int h = hk * group; h < (hk + 1) * group; ++h)  // GQA: every query head of the group
    for (int i = 0; i < p.t_q; ++i) {
      if (!key_visible(i, j, p.t_q, p.t_kv, p.causal, 0)) continue;
      double pij, ds;
      p_and_ds(p, in, st, rd, b, h, i, j, &pij, &ds);
      const float* q = &in.qkv.q[size_t(p.q_index(b, i, h))];
      const float* d_o = &in.d_o[size_t(p.q_index(b, i, h))];
      for (int c = 0; c < p.d; ++c) {
        if (rd.same) {
          ak_f[size_t(c)] += float(ds) * q[c];
          av_f[size_t(c)] += float(pij) * d_o[c];
        } else {
          ak[size_t(c)] += ds * double(q[c]);
          av[size_t(c)] += pij * double(d_o[c]);
        }
      }
    }
  for (int c = 0; c < p.d; ++c) {
    dk[c] = rd.same ? rd.r(ak_f[size_t(c)] * p.softmax_scale()) : ak[size_t(c)] / std::sqrt(double(p.d));
    dv[c] = rd.same ? rd.r(av_f[size_t(c)]) : av[size_t(c)];
  }
}

struct KeyRowId {
  int b, hk, j;
};

std::vector<KeyRowId> sample_key_rows(const Problem& p, int budget, uint64_t seed) {
  std::set<std::tuple<int, int, int>> picked;
  const int heads = p.b * p.h_kv, per_head = std::max(4, budget / std::max(1, heads));
  Rng rng{seed * 5 + 3};
  for (int bh = 0; bh < heads; ++bh) {
    std::vector<int> want = {0, p.t_kv - 1};
    for (int edge = 64; edge < p.t_kv && int(want.size()) < per_head / 2; edge *= 2)
      for (int j : {edge - 1, edge, edge + 1}) want.push_back(j);
    while (int(want.size()) < per_head) want.push_back(int(rng.next() % uint64_t(p.t_kv)));
    for (int j : want)
      if (j >= 0 && j < p.t_kv) picked.insert({bh / p.h_kv, bh % p.h_kv, j});
  }
  std::vector<KeyRowId> rows;
  for (auto& [b, hk, j] : picked) rows.push_back({b, hk, j});
  return rows;
}

}  // namespace

BackwardCheck check_gradients(const Problem& p, const BackwardInputs& in, const Gradients& g, CheckMode mode,
                              int sample_rows, uint64_t seed) {
  BackwardCheck r;
  const double atol = default_atol(p.dtype);
  const bool full = mode == CheckMode::full ||
                    (mode == CheckMode::automatic && double(p.b) * p.h * double(p.t_q) * p.t_kv * p.d <= 1e9);
  r.rule = std::string("per gradient: max|g-fp64| <= 2*max|unfused ") + dtype_name(p.dtype) + " backward - fp64| + " +
           format_number("%g", atol) + (full ? " (fp64 forward recomputed)" : " (P from the saved LSE, D from the saved O; sampled rows)");
  r.grads = {{"dQ"}, {"dK"}, {"dV"}};
  const std::vector<float>* outs[3] = {&g.dq, &g.dk, &g.dv};
  for (int n = 0; n < 3; ++n)
    for (float x : *outs[n]) r.grads[size_t(n)].unwritten += is_poison(x);

  if (mode == CheckMode::none) {
    r.skipped = true;
    r.passed = true;
    for (auto& gc : r.grads) {  // each gradient as the whole: what --check none checks, that it is written
      gc.passed = gc.unwritten == 0;
      r.passed = r.passed && gc.passed;
    }
    r.verdict = r.passed ? "not checked (--check none); every gradient element written"
                         : "output not written (poison left in place)";
    return r;
  }

  // The forward's statistics per query row.
  RowStats st;
  const size_t rows_total = size_t(p.lse_elems());
  st.lse.resize(rows_total);
  st.d.resize(rows_total);
  st.lse_f = in.lse;
  st.d_f.resize(rows_total);
  parallel_for(int64_t(p.b) * p.h, [&](int64_t bh) {
    const int b = int(bh / p.h), h = int(bh % p.h);
    for (int i = 0; i < p.t_q; ++i) {
      const float* o = &in.o[size_t(p.q_index(b, i, h))];
      const float* d_o = &in.d_o[size_t(p.q_index(b, i, h))];
      float df = 0;
      double dd = 0;
      for (int c = 0; c < p.d; ++c) {
        df += d_o[c] * o[c];
        dd += double(d_o[c]) * double(o[c]);
      }
      const size_t row = size_t(p.lse_index(b, h, i));
      st.d_f[row] = df;
      st.d[row] = dd;
      st.lse[row] = double(in.lse[row]);
    }
  });
  if (full) {  // the ground truth: the forward again in fp64
    const std::vector<RowId> rows = all_rows(p);
    const RowResults fwd = reference_rows(p, in.qkv, rows, RefKind::fp64);
    parallel_for(int64_t(rows.size()), [&](int64_t n) {
      const RowId id = rows[size_t(n)];
      const float* d_o = &in.d_o[size_t(p.q_index(id.b, id.i, id.h))];
      double dd = 0;
      for (int c = 0; c < p.d; ++c) dd += double(d_o[c]) * fwd.o[size_t(n) * size_t(p.d) + size_t(c)];
      const size_t row = size_t(p.lse_index(id.b, id.h, id.i));
      st.d[row] = dd;
      st.lse[row] = fwd.lse[size_t(n)];
    });
  }

  const std::vector<RowId> q_rows = full ? all_rows(p) : lab::sample_rows(p, sample_rows, seed);
  std::vector<KeyRowId> k_rows;
  if (full) {
    for (int b = 0; b < p.b; ++b)
      for (int hk = 0; hk < p.h_kv; ++hk)
        for (int j = 0; j < p.t_kv; ++j) k_rows.push_back({b, hk, j});
  } else {
    k_rows = sample_key_rows(p, sample_rows, seed);
  }
  const int d = p.d;
  std::vector<double> dq64(q_rows.size() * size_t(d)), dqsp(dq64.size());
  std::vector<double> dk64(k_rows.size() * size_t(d)), dksp(dk64.size()), dv64(dk64.size()), dvsp(dk64.size());
  const Rounding exact{false, p.dtype}, same{true, p.dtype};
  parallel_for(int64_t(q_rows.size()), [&](int64_t n) {
    const RowId id = q_rows[size_t(n)];
    dq_row(p, in, st, exact, id.b, id.h, id.i, &dq64[size_t(n) * size_t(d)]);
    dq_row(p, in, st, same, id.b, id.h, id.i, &dqsp[size_t(n) * size_t(d)]);
  });
  parallel_for(int64_t(k_rows.size()), [&](int64_t n) {
    const KeyRowId id = k_rows[size_t(n)];
    dkdv_row(p, in, st, exact, id.b, id.hk, id.j, &dk64[size_t(n) * size_t(d)], &dv64[size_t(n) * size_t(d)]);
    dkdv_row(p, in, st, same, id.b, id.hk, id.j, &dksp[size_t(n) * size_t(d)], &dvsp[size_t(n) * size_t(d)]);
  });

  // One gradient: got[index(row)] against ref / same, row by row.
  auto grade = [&](GradCheck& gc, const std::vector<float>& got, size_t rows, auto index, auto where,
                   const std::vector<double>& ref, const std::vector<double>& sp) {
    gc.checked = int64_t(rows);
    size_t worst_n = 0;
    int worst_c = 0;
    double worst_err = -1;  // the finite element max_abs_err comes from (the first, on a tie)
    for (size_t n = 0; n < rows; ++n)
      for (int c = 0; c < d; ++c) {
        const double x = got[size_t(index(n)) + size_t(c)], e = ref[n * size_t(d) + size_t(c)];
        gc.same_err = std::max(gc.same_err, std::fabs(sp[n * size_t(d) + size_t(c)] - e));
        if (!std::isfinite(x)) { ++gc.nonfinite; gc.max_abs_err = INFINITY; continue; }
        gc.max_abs_err = std::max(gc.max_abs_err, std::fabs(x - e));
        if (std::fabs(x - e) > worst_err) { worst_err = std::fabs(x - e); worst_n = n; worst_c = c; }
      }
    gc.bound = 2 * gc.same_err + atol;
    auto element = [&](size_t n, int c) {
      const float x = got[size_t(index(n)) + size_t(c)];
      const double e = ref[n * size_t(d) + size_t(c)], err = std::fabs(double(x) - e);
      return gc.name + where(n) + ", d=" + std::to_string(c) + "] = " +
             (is_poison(x) ? std::string("unwritten") : format_number("%.6g", x)) + ", expected " +
             format_number("%.6g", e) + (is_poison(x) || std::isnan(err) ? std::string() : " (error " + format_number("%.3g", err) + ")");
    };
    // The first few elements over the bound; when some are NaN or inf (the verdict then says so),
    // those first, then the others. Then the worst finite one, where the max error comes from,
    // unless it is among them (a wrong mask's first elements are often its smallest errors).
    bool worst_shown = false;
    for (const bool nonfinite_pass : {true, false})
      for (size_t n = 0; n < rows && gc.details.size() < 4; ++n)
        for (int c = 0; c < d && gc.details.size() < 4; ++c) {
          const float x = got[size_t(index(n)) + size_t(c)];
          const double err = std::fabs(double(x) - ref[n * size_t(d) + size_t(c)]);
          const bool nonfinite = !is_poison(x) && !std::isfinite(x);
          if (nonfinite_pass ? !nonfinite : (nonfinite || err <= gc.bound)) continue;
          worst_shown = worst_shown || (n == worst_n && c == worst_c);
          gc.details.push_back(element(n, c));
        }
    if (!gc.details.empty() && !worst_shown && worst_err > gc.bound) gc.details.push_back("worst: " + element(worst_n, worst_c));
    gc.passed = gc.unwritten == 0 && gc.nonfinite == 0 && gc.max_abs_err <= gc.bound;
  };
  auto q_index = [&](size_t n) { const RowId id = q_rows[n]; return p.q_index(id.b, id.i, id.h); };
  auto q_where = [&](size_t n) {
    const RowId id = q_rows[n];
    return "[b=" + std::to_string(id.b) + ", i=" + std::to_string(id.i) + ", h=" + std::to_string(id.h);
  };
  auto k_index = [&](size_t n) { const KeyRowId id = k_rows[n]; return p.kv_index(id.b, id.j, id.hk); };
  auto k_where = [&](size_t n) {
    const KeyRowId id = k_rows[n];
    return "[b=" + std::to_string(id.b) + ", j=" + std::to_string(id.j) + ", h_kv=" + std::to_string(id.hk);
  };
  grade(r.grads[0], g.dq, q_rows.size(), q_index, q_where, dq64, dqsp);
  grade(r.grads[1], g.dk, k_rows.size(), k_index, k_where, dk64, dksp);
  grade(r.grads[2], g.dv, k_rows.size(), k_index, k_where, dv64, dvsp);

  r.passed = true;
  std::ostringstream v;
  for (const auto& gc : r.grads) {
    if (gc.passed) continue;
    if (r.passed) {
      const int64_t total = int64_t((gc.name == "dQ" ? g.dq : gc.name == "dK" ? g.dk : g.dv).size());
      if (gc.unwritten == total) v << "output not written: all " << total << " elements of " << gc.name << " still hold the poison";
      else if (gc.unwritten) v << "output partly not written: " << gc.unwritten << " of " << total << " elements of " << gc.name << " still hold the poison";
      else if (gc.nonfinite) v << gc.nonfinite << " elements of " << gc.name << " are NaN or inf on the rows checked";
      else v << gc.name << " too far from fp64: max error " << format_number("%.3g", gc.max_abs_err) << " > bound " << format_number("%.3g", gc.bound);
    }
    r.passed = false;
  }
  if (!r.passed) {  // every gradient's state: which are right is the clue (dV right: P is, dS is not)
    v << " [";
    for (size_t n = 0; n < r.grads.size(); ++n) {
      const GradCheck& gc = r.grads[n];
      v << (n ? ", " : "") << gc.name << " ";
      if (gc.unwritten) v << "not written";
      else if (gc.nonfinite) v << "NaN/inf";
      else v << format_number("%.3g", gc.max_abs_err) << (gc.passed ? " <= " : " > ") << format_number("%.3g", gc.bound);
      v << (gc.passed ? " ok" : " FAIL");
    }
    v << "]";
  }
  if (r.passed) {
    v << "max error dQ " << format_number("%.3g", r.grads[0].max_abs_err) << " <= " << format_number("%.3g", r.grads[0].bound) << ", dK "
      << format_number("%.3g", r.grads[1].max_abs_err) << " <= " << format_number("%.3g", r.grads[1].bound) << ", dV "
      << format_number("%.3g", r.grads[2].max_abs_err) << " <= " << format_number("%.3g", r.grads[2].bound) << " on " << q_rows.size()
      << " query rows, " << k_rows.size() << " key rows";
  }
  r.verdict = v.str();
  return r;
}

namespace {

json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// The backward's bytes at the fewest: Q, K, V, O, dO, LSE read once, dQ, dK, dV written once.
int64_t backward_hbm_bytes(const Problem& p) {
  const int64_t e = dtype_bytes(p.dtype);
  return (3 * p.q_elems() + 2 * p.kv_elems()) * e + p.lse_elems() * 4 + (p.q_elems() + 2 * p.kv_elems()) * e;
}

}  // namespace

int run_backward_section(int argc, char** argv, const BackwardSection& s) {
  // The options are every section's: parse_options validates against a Section with our shapes.
  Section as_section;
  as_section.name = s.name;
  as_section.title = s.title;
  as_section.variants = s.variants;
  as_section.bugs = s.bugs;
  as_section.head_dims = s.head_dims;
  as_section.dtypes = s.dtypes;
  as_section.default_problem = s.default_problem;
  as_section.validate = s.validate;
  Options opt;
  std::string why;
  const int parsed = parse_options(argc, argv, as_section, &opt, &why);
  if (parsed == -1) return kExitPass;
  if (parsed != kExitPass) {
    std::fprintf(stderr, "bad input: %s\n", why.c_str());
    return kExitBadInput;
  }
  const Problem& p = opt.problem;
  const std::string build = opt.cpu ? "cpu-model" : (s.build.empty() ? "solution" : s.build);
  const int64_t workspace = s.workspace_bytes ? s.workspace_bytes(p, opt.variant) : 0;
  const int64_t io = backward_hbm_bytes(p);

  DeviceInfo dev;
  const bool needs_sm90a =
      std::find(s.sm90a_variants.begin(), s.sm90a_variants.end(), opt.variant) != s.sm90a_variants.end();
  if (const int code = check_resources(s.name, p, opt.cpu, needs_sm90a, "", double(io) * 4 + double(workspace),
                                       double(io) + double(workspace), "workspace", workspace, &dev);
      code != kExitPass)
    return code;

  BackwardInputs in;
  in.qkv = make_run_inputs(p, opt);
  in.d_o = make_grad_output(p, opt.seed);
  Gradients g;
  g.dq.assign(size_t(p.q_elems()), poison_float());
  g.dk.assign(size_t(p.kv_elems()), poison_float());
  g.dv.assign(size_t(p.kv_elems()), poison_float());
  Timing timing;
  json metrics = json::object();
  std::string run_failure;
  int64_t extra_bytes = 0;
  json reproducible = nullptr;  // bitwise equality of two backward runs (GPU only)
  std::string repro_line;

  if (opt.cpu) {
    if (!opt.quiet)
      std::printf("== CPU model of %s: the algorithm in plain C++ around %s exercise code (the kernel runs only "
                  "on a GPU) ==\n",
                  s.name.c_str(), s.build == "lab" ? "your" : "the solution's");
    const SlowRunNotice notice(!opt.quiet, "the CPU model", cpu_model_hint(p));
    forward_fp32_host(p, in.qkv, in.o, in.lse);
    run_failure = s.cpu(p, opt, in, g);
    extra_bytes = workspace;
  } else {
    DeviceBuffer q = upload(in.qkv.q, p.dtype), k = upload(in.qkv.k, p.dtype), v = upload(in.qkv.v, p.dtype);
    DeviceBuffer d_o = upload(in.d_o, p.dtype);
    const size_t qb = size_t(p.q_elems()) * size_t(dtype_bytes(p.dtype)), kb = size_t(p.kv_elems()) * size_t(dtype_bytes(p.dtype));
    DeviceBuffer o(qb), lse(size_t(p.lse_elems()) * 4), dq(qb), dk(kb), dv(kb);
    const BackwardContext ctx{p, opt.variant, opt.bug, dev,
                              BackwardTensors{q.get(), k.get(), v.get(), d_o.get(), o.get(), lse.as<float>(),
                                              dq.get(), dk.get(), dv.get()},
                              opt};
    const BackwardGpuRun run = s.gpu(ctx);
    run_failure = run.failure;
    extra_bytes = run.extra_device_bytes;
    metrics = run.metrics;
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    run.forward(stream);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    in.o = download(o, p.q_elems(), p.dtype);
    in.lse = download(lse, p.lse_elems(), DType::f32);
    auto once = [&](Gradients& out) {
      dq.poison(stream);
      dk.poison(stream);
      dv.poison(stream);
      run.backward(stream);
      CUDA_CHECK_LAST();
      CUDA_CHECK(cudaStreamSynchronize(stream));  // a fault inside a kernel surfaces here
      out.dq = download(dq, p.q_elems(), p.dtype);
      out.dk = download(dk, p.kv_elems(), p.dtype);
      out.dv = download(dv, p.kv_elems(), p.dtype);
    };
    once(g);
    // Run to run: the same inputs again; fp32 atomics may add in another order each time.
    Gradients again;
    once(again);
    auto differing = [](const std::vector<float>& a, const std::vector<float>& b) {
      int64_t n = 0;
      for (size_t i = 0; i < a.size(); ++i) n += float_bits(a[i]) != float_bits(b[i]);
      return n;
    };
    const int64_t dq_diff = differing(g.dq, again.dq), dkv_diff = differing(g.dk, again.dk) + differing(g.dv, again.dv);
    reproducible = dq_diff == 0 && dkv_diff == 0;
    metrics["dq_elements_differing_run_to_run"] = dq_diff;
    metrics["dkdv_elements_differing_run_to_run"] = dkv_diff;
    repro_line = std::string(dq_diff == 0 && dkv_diff == 0 ? "yes" : "no") + ": " + std::to_string(dq_diff) + " of " +
                 std::to_string(g.dq.size()) + " dQ and " + std::to_string(dkv_diff) + " dK/dV elements differ between two runs";
    timing = time_forward(run.backward, opt.warmup, opt.iters, opt.flush_l2, dev, stream, false);
    CUDA_CHECK_LAST();
    CUDA_CHECK(cudaStreamDestroy(stream));
  }
  metrics["bitwise_reproducible"] = reproducible;

  BackwardCheck check = [&] {
    const SlowRunNotice notice(!opt.quiet, "the fp64 reference check", "--check sample checks fewer rows");
    return check_gradients(p, in, g, opt.check, opt.sample_rows, opt.seed);
  }();
  std::vector<std::string> reasons;  // what a quiet failure shows under its verdict
  std::string symptom;  // the gradients' own verdict, under the run's reason
  if (!run_failure.empty()) {  // the run's reason leads (a cause), the gradients' check follows
    if (!check.passed) reasons.push_back(symptom = check.verdict);
    check.verdict = run_failure;
    check.passed = false;
  }
  for (const auto& gc : check.grads)
    if (!gc.details.empty()) reasons.push_back(gc.name + ": " + gc.details.front());

  // Backward FLOPs: 2.5x the forward's (five GEMMs of the forward's two's size: S, dP, dV, dK, dQ).
  const double flops = 2.5 * attention_flops(p);
  const bool timed = timing.iters > 0 && timing.median_ms > 0;
  const double tflops = timed ? flops / (timing.median_ms * 1e-3) / 1e12 : NAN;
  const double gbps = timed ? double(io) / (timing.median_ms * 1e-3) / 1e9 : NAN;
  if (!opt.quiet) {
    std::printf("%s [%s] %s   %s%s\n", s.name.c_str(), opt.variant.c_str(), build.c_str(), p.describe().c_str(),
                opt.bug.empty() ? "" : ("   --bug " + opt.bug).c_str());
    if (!opt.cpu) std::printf("  gpu      %s (sm_%d%d, %d SMs)\n", dev.name.c_str(), dev.cc_major, dev.cc_minor, dev.sms);
    const std::string scope = check_scope(opt.check, check.grads[0].checked, int64_t(p.b) * p.h * p.t_q);
    std::printf("  check    %s%s\n", check.verdict.c_str(), scope.empty() ? "" : (" (" + scope + ")").c_str());
    if (!symptom.empty()) std::printf("           %s\n", symptom.c_str());
    size_t room = 6;  // the first few elements over the bound, of every gradient that failed, each with its worst
    for (const auto& gc : check.grads) {
      for (const auto& d : shown_details(gc.details, std::min(room, gc.details.size())))
        std::printf("           %s\n", d.c_str());
      room -= std::min(room, gc.details.size());
    }
    if (!repro_line.empty()) std::printf("  repeat   bitwise reproducible %s\n", repro_line.c_str());
    if (timed)
      std::printf("  time     %.4g ms median of %d (min %.4g, max %.4g)\n  rate     %.3g TFLOP/s (2.5x forward FLOPs)\n",
                  timing.median_ms, timing.iters, timing.min_ms, timing.max_ms, tflops);
    if (extra_bytes > 0)
      std::printf("  memory   %s workspace beyond the inputs and gradients\n", format_bytes(double(extra_bytes)).c_str());
    else
      std::printf("  memory   no workspace beyond the inputs and gradients\n");
  }
  print_verdict(check.passed, check.verdict, reasons, opt.quiet, s.name, opt.variant, opt.cpu);

  if (!opt.json_path.empty()) {
    const char* sha = std::getenv("LAB_GIT_SHA");
    metrics["tflops"] = finite_or_null(tflops);
    metrics["hbm_gbps"] = finite_or_null(gbps);
    metrics["hbm_bytes_model"] = io;
    metrics["extra_device_bytes"] = extra_bytes;
    metrics["flops_model"] = flops;
    metrics["flops_convention"] = "backward: 2.5x forward FLOPs";
    metrics["pass"] = "backward";  // the timed pass; library baselines also record "forward+backward"
    json grads = json::object();
    for (const auto& gc : check.grads)
      grads[gc.name] = {{"max_abs_err", finite_or_null(gc.max_abs_err)}, {"bound", finite_or_null(gc.bound)},
                        {"passed", gc.passed}, {"unwritten", gc.unwritten}};
    const GradCheck& worst = *std::max_element(check.grads.begin(), check.grads.end(), [](auto& a, auto& b) {
      return a.max_abs_err / std::max(a.bound, 1e-30) < b.max_abs_err / std::max(b.bound, 1e-30);
    });
    json gpu = gpu_json(dev, opt.cpu);
    json problem = {{"b", p.b}, {"h", p.h}, {"h_kv", p.h_kv}, {"t_q", p.t_q}, {"t_kv", p.t_kv}, {"d", p.d},
                    {"dtype", dtype_name(p.dtype)}, {"causal", p.causal}, {"window", nullptr}, {"page_size", nullptr}};
    json record = {{"schema_version", kSchemaVersion}, {"section", s.name}, {"variant", opt.variant},
                   {"build", build}, {"git_sha", sha && *sha ? sha : LAB_GIT_SHA_DEFAULT},
                   {"time_utc", utc_now()}, {"gpu", gpu}, {"problem", problem},
                   {"check", {{"passed", check.passed}, {"max_abs_err", finite_or_null(worst.max_abs_err)},
                              {"rel_l2_err", nullptr}, {"ref_err_bound", finite_or_null(worst.bound)},
                              {"rule", check.rule}, {"rows_checked", check.grads[0].checked + check.grads[1].checked},
                              {"unwritten", check.grads[0].unwritten + check.grads[1].unwritten + check.grads[2].unwritten},
                              {"gradients", grads}, {"verdict", check.verdict}}},
                   {"timing", timing_json(timing, timed)},
                   {"metrics", metrics}, {"command", command_line(argc, argv)}};
    if (!opt.bug.empty()) record["bug"] = opt.bug;
    if (std::string bad = validate_record(record); !bad.empty()) {
      std::fprintf(stderr, "internal error: record fails its schema: %s\n", bad.c_str());
      return kExitFail;
    }
    std::string err;
    if (!append_record(opt.json_path, record, &err)) std::fprintf(stderr, "warning: %s\n", err.c_str());
  }
  if (!opt.dump_dir.empty()) {
    std::filesystem::create_directories(opt.dump_dir);
    const std::vector<int64_t> qs = {p.b, p.t_q, p.h, p.d}, ks = {p.b, p.t_kv, p.h_kv, p.d};
    const std::string& dir = opt.dump_dir;
    bool ok = write_npy(dir + "/q.npy", in.qkv.q, qs) && write_npy(dir + "/k.npy", in.qkv.k, ks) &&
              write_npy(dir + "/v.npy", in.qkv.v, ks) && write_npy(dir + "/o.npy", in.o, qs) &&
              write_npy(dir + "/lse.npy", in.lse, {p.b, p.h, p.t_q}) && write_npy(dir + "/do.npy", in.d_o, qs) &&
              write_npy(dir + "/dq.npy", g.dq, qs) && write_npy(dir + "/dk.npy", g.dk, ks) && write_npy(dir + "/dv.npy", g.dv, ks);
    json meta = {{"section", s.name}, {"variant", opt.variant}, {"softmax_scale", p.softmax_scale()}, {"seed", opt.seed},
                 {"causal", p.causal}, {"layout", "q, o, do, dq [B, T_q, H, D]; k, v, dk, dv [B, T_kv, H_kv, D]; lse [B, H, T_q]"}};
    std::ofstream(dir + "/meta.json") << meta.dump(1) << "\n";
    if (!ok) std::fprintf(stderr, "warning: could not write every .npy file to %s\n", dir.c_str());
  }
  return check.passed ? kExitPass : kExitFail;
}

}  // namespace lab
