// The harness of the backward section: what run_section (harness.h) is to a forward, for the
// gradients dQ, dK, dV of attention. A backward section describes itself (a BackwardSection) and
// run_backward_section does the rest, with the options, exit codes and record of every section:
//
//   parse + validate options (harness.h's parse_options: exit 2 on bad input, nothing launched)
//   -> seeded Q, K, V (make_inputs) and dO (its own seeded stream)
//   -> the forward's O and LSE: an fp32 forward (on the GPU for a GPU run, on the host for --cpu),
//      O rounded to the element type as a forward kernel would store it, LSE in fp32
//   -> poisoned dQ, dK, dV -> one checked backward -> one more, compared bit by bit (is the run
//      reproducible?) -> timed runs -> summary, --json record, --dump .npy files.
//
// The check holds each gradient to FlashAttention's rule, as the forward's O: its largest error
// against fp64 gradients at most twice that of an unfused backward at the same precision, plus an
// absolute term. The fp64 gradients (full mode) recompute the forward in fp64 (P, and D from the
// fp64 O); in sample mode (large shapes) they take P from the forward's saved LSE and D from its
// saved O, on a sample of query rows (dQ) and key rows (dK, dV).
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/harness.h"

namespace lab {

// Everything a backward reads, on the host, as float values exact in the problem's dtype.
struct BackwardInputs {
  HostInputs qkv;           // Q [B, T_q, H, D], K, V [B, T_kv, H_kv, D]
  std::vector<float> o;     // [B, T_q, H, D], the forward's output (rounded to the dtype)
  std::vector<float> lse;   // [B, H, T_q], natural log, fp32; -inf for a row that sees no key
  std::vector<float> d_o;   // [B, T_q, H, D], the upstream gradient dL/dO
};

// The gradients, as float values (poison where a kernel left an element unwritten).
struct Gradients {
  std::vector<float> dq, dk, dv;  // shapes of Q, K, V
};

struct BackwardTensors {  // device pointers, element type of the problem except lse
  const void *q, *k, *v, *d_o;
  void* o;     // written by BackwardGpuRun::forward, read by the backward
  float* lse;  // likewise
  void *dq, *dk, *dv;
};

struct BackwardContext {
  const Problem& problem;
  const std::string& variant;
  const std::string& bug;
  const DeviceInfo& device;
  BackwardTensors tensors;
  const Options& options;
};

struct BackwardGpuRun {
  // The fp32 forward that makes O and LSE from Q, K, V (run once, not timed, not checked).
  std::function<void(cudaStream_t)> forward;
  std::function<void(cudaStream_t)> backward;  // one full backward; captures its own workspace
  int64_t extra_device_bytes = 0;
  nlohmann::json metrics = nlohmann::json::object();
  // "" or why the run is wrong whatever its gradients say (a section's host-side check of its
  // exercises): leads the verdict, as the CPU model's return does.
  std::string failure;
};

struct BackwardSection {
  std::string name, title, build;
  std::vector<std::string> variants, bugs;
  std::vector<std::string> sm90a_variants;  // variants that need a Hopper GPU (exit 77 elsewhere)
  std::vector<int> head_dims = {64, 128};
  std::vector<DType> dtypes = {DType::f16, DType::bf16};
  Problem default_problem;
  std::function<std::string(const Problem&, const Options&)> validate;
  std::function<int64_t(const Problem&, const std::string& variant)> workspace_bytes;
  std::function<BackwardGpuRun(const BackwardContext&)> gpu;
  // The CPU model: fills g (which arrives poisoned); returns "" or why the run is wrong.
  std::function<std::string(const Problem&, const Options&, const BackwardInputs&, Gradients& g)> cpu;
};

int run_backward_section(int argc, char** argv, const BackwardSection& section);

// ---- pieces exposed for the unit tests

// The fp32 forward of the host (the CPU model's O and LSE): one row at a time, O rounded to p.dtype.
void forward_fp32_host(const Problem& p, const HostInputs& in, std::vector<float>& o, std::vector<float>& lse);
// dO: uniform in [-1, 1) plus 0.1 (non-zero mean), rounded to p.dtype; its own seeded stream.
std::vector<float> make_grad_output(const Problem& p, uint64_t seed);

struct GradCheck {
  std::string name;  // "dQ", "dK", "dV"
  double max_abs_err = 0, same_err = 0, bound = 0;
  int64_t unwritten = 0, nonfinite = 0, checked = 0;
  bool passed = false;
  std::vector<std::string> details;  // the first few elements over the bound, then "worst: " the largest error
};
struct BackwardCheck {
  bool passed = false, skipped = false;
  std::string rule, verdict;
  std::vector<GradCheck> grads;  // dQ, dK, dV
};
// full = every row; otherwise a sample of about sample_rows query rows and as many key rows.
// none: only that every element was written.
BackwardCheck check_gradients(const Problem& p, const BackwardInputs& in, const Gradients& g, CheckMode mode,
                              int sample_rows, uint64_t seed);

}  // namespace lab
