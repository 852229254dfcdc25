// The harness every section program hands itself to. A section describes itself (a Section:
// its name, the shapes it supports, its variants and --bug names, its GPU launcher and its CPU
// model); run_section() does the rest, the same way for every section:
//
//   parse + validate options (bad input: exit 2, one line, nothing launched)
//   -> --cpu: run the CPU model        -> else: find a GPU (none / wrong arch: exit 77)
//   -> check the problem fits in memory (else exit 2) -> seeded inputs -> poison outputs
//   -> one checked run against the fp64 reference (fail: exit 1) -> timed runs
//   -> summary, --json record, --dump .npy files.
#pragma once
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/device.h"
#include "harness/problem.h"

namespace CLI {
class App;
}

namespace lab {

// Exit codes: one meaning everywhere.
constexpr int kExitPass = 0, kExitFail = 1, kExitBadInput = 2, kExitCannotRun = 77;

struct Options {
  Problem problem;
  std::string variant;  // "" = the section's first
  std::string bug;      // "" = none
  uint64_t seed = 1234;
  int splits = 0;          // split-KV sections: 0 = chosen from the shape and SM count, N = force N
  int consumers = 0;       // warp-specialised sections: consumer warpgroups per block (0 = the section's default)
  int kv_tile = 0;         // warp-specialised sections: keys per K/V tile (0 = the variant's default for the problem)
  bool ragged_kv = false;  // per-sequence key counts kv_len[b] in [1, T_kv] (decode); see make_kv_lengths
  float magnitude = 1.0f;  // Q and K are multiplied by this (large values stress overflow)
  int warmup = 3, iters = 10;
  bool flush_l2 = false;
  bool cpu = false;
  CheckMode check = CheckMode::automatic;
  int sample_rows = 1024;
  int smem_limit_kb = 0;   // 0: this GPU's shared memory per block; N: behave as on a GPU that allows N KB
  std::string json_path, dump_dir;
  bool quiet = false;
  std::vector<std::string> given;  // the long options given on the command line, "--page-size", ...
  bool given_option(const std::string& name) const {
    for (const auto& g : given)
      if (g == name) return true;
    return false;
  }
};

// Device pointers of one problem, in its element type (float, __half or __nv_bfloat16).
struct DeviceTensors {
  const void* q;  // [B, T_q, H, D]
  const void* k;  // [B, T_kv, H_kv, D]
  const void* v;  // [B, T_kv, H_kv, D]
  void* o;        // [B, T_q, H, D]
  float* lse;     // [B, H, T_q] (natural log)
  const int* kv_len;  // [B] or nullptr when every sequence has t_kv keys
};

struct RunContext {
  const Problem& problem;
  const std::string& variant;
  const std::string& bug;
  const DeviceInfo& device;
  DeviceTensors tensors;
  const HostInputs& host;  // the same inputs on the host (e.g. to build a paged KV pool)
  const Options& options;
};

// What a section's GPU setup returns: the forward pass to check and time, and what it reports.
struct GpuRun {
  std::function<void(cudaStream_t)> forward;  // one full forward; captures its own workspace
  // The forward only enqueues work on its stream, so it is also timed replayed from a CUDA graph
  // and the faster kept (lab::time_forward): set by the µs-scale decode steps (05, 06), whose
  // PyTorch baselines are timed the same way.
  bool graph_replay = false;
  // The forward keeps state on the device from one launch to the next (08's ws-persistent: a job
  // counter that each launch must leave at 0). Its timed runs must then leave the very O that was
  // checked, which is compared after timing, as it is after graph replay.
  bool carries_state = false;
  int64_t extra_device_bytes = 0;             // workspace beyond Q, K, V, O, LSE
  int64_t hbm_bytes_model = -1;               // -1: fused_hbm_bytes(problem)
  nlohmann::json metrics = nlohmann::json::object();  // section-specific extras
  // Optional. Called once after the checked run, its stream synchronised: adds what the run
  // measured on the device to `metrics` and returns "" or why the run is wrong in a way its output
  // cannot show (07: the kernel visited other K/V tiles than its skip predicate allows). A reason
  // fails the self-check (exit 1) and is printed with it.
  std::function<std::string(nlohmann::json& metrics)> after_check_run;
};

// What a section's CPU model returns (it writes O and LSE, which arrive poisoned).
struct CpuRun {
  int64_t extra_host_bytes = 0;
  int64_t hbm_bytes_model = -1;  // -1: fused_hbm_bytes(problem); else the section's model, as its GpuRun's
  nlohmann::json metrics = nlohmann::json::object();
  std::string failure;  // as GpuRun::after_check_run's reason: "" or why the run is wrong
  // "" or why the rest of the student's code cannot be checked on the host, found during the run
  // (08: ring_slot() passed, the mbarrier protocol is GPU-only): the harness prints "not checked
  // here: <why>" and exits 77, never PASS. What is known before the run is Section::gpu_only.
  std::string not_checked;
  // "" or the part of the student's code that only a GPU runs, when the CPU model runs the rest
  // (07, 12: the mma kernel's online softmax). The output is checked: a failure fails; a pass
  // prints "not checked here: <this>" and exits 77, never PASS, and writes no record.
  std::string gpu_only_rest;
  // Lines the model reports about what it built (06: its pool), printed under the CPU banner:
  // the model runs before the banner is known to be due, so it returns them rather than print.
  std::string header;
};

struct Section {
  std::string name;     // file stem, "01_naive"
  std::string title;    // one line for --help and the summary
  std::string build;    // "solution" or "lab": set by lab_main from the build (LAB_BUILD_KIND)
  std::vector<std::string> variants;  // the first is the default
  std::vector<std::string> bugs;      // accepted --bug names
  std::vector<int> head_dims = {64, 128};
  std::vector<DType> dtypes = {DType::f32};
  bool needs_sm90a = false;
  // Variants that quantise Q, K, V to fp8 (e4m3) as harness/fp8.h does: their check's bound comes
  // from the fp8 reference (RefKind::fp8_e4m3), not from the element type's.
  std::vector<std::string> fp8_variants;
  bool writes_lse = true;
  bool supports_window = false;     // the kernels honour a sliding window (--window)
  bool paged = false;               // the section reads a paged KV cache (--page-size applies)
  bool has_splits = false;          // the section splits the K/V range (--splits applies)
  std::vector<int> consumer_counts;  // warp-specialised sections: the --consumers values the kernel supports
  std::string consumer_default;      // --help's "default ..." of --consumers when it is not the last count
  std::vector<int> kv_tiles;         // warp-specialised sections: the --kv-tile values the kernel supports
  std::string kv_tile_default;       // --help's "default ..." of --kv-tile
  bool supports_ragged_kv = false;  // the kernels honour kv_len[b] (DeviceTensors::kv_len)
  bool ragged_kv_default = false;   // decode sections: sequences of different lengths unless --kv-lens full
  // An option that applies to some variants only: {"--page-size", {"paged", "paged-pool"}}. Given
  // with another variant, it is refused (exit 2) whatever its value.
  std::vector<std::pair<std::string, std::vector<std::string>>> variants_of_option;
  // The launch limit every kernel shares: B*H (sequence, head) pairs in one grid dimension. 0: none.
  int64_t max_b_times_h = 65535;
  // Modes a section parses itself before run_section (06: --simulate), shown at the end of --help:
  // {"--simulate", "what it does"}.
  std::vector<std::pair<std::string, std::string>> extra_help;
  // Those options as the section parsed them (12: " --ranks 4 --layout zigzag"), appended to the
  // record's command so that it reruns the very run.
  std::string own_options;
  Problem default_problem;
  // Section-specific validation: "" if fine, else the one-line reason (exit 2).
  std::function<std::string(const Problem&, const Options&)> validate;
  // Workspace bytes the variant needs beyond the inputs and outputs (device, or host for --cpu),
  // and what it is, for the "does not fit" message. nullptr: none.
  std::function<int64_t(const Problem&, const std::string& variant)> workspace_bytes;
  std::string workspace_what = "workspace";
  // Where variants add different things (08: a paged pool, or fp8 copies): what each one's is.
  std::map<std::string, std::string> workspace_what_of_variant;
  // Optional. The student's host-callable exercise code asked before anything runs, where a wrong
  // answer would make the run itself unsafe (05's GQA mapping: a head past H is written past the end
  // of O, an illegal address on a GPU and a corrupted heap on the CPU). "" or why it is wrong: then
  // neither the kernel nor the CPU model runs, and the reason is the check's verdict (exit 1).
  std::function<std::string(const Problem&, const Options&)> precheck;
  std::function<GpuRun(const RunContext&)> gpu;
  std::function<CpuRun(const Problem&, const Options&, const HostInputs&, std::vector<float>& o,
                       std::vector<float>& lse)> cpu;
  // "" when the CPU model can check these options, else why only a GPU can (a launch pitfall, an
  // exercise that lives on mma fragments). Under --cpu the run prints "not checked here: needs a
  // GPU: <why>" and exits 77, never PASS; without a GPU, "cannot run here" names it instead of
  // suggesting --cpu. nullptr: the CPU model checks every run.
  std::function<std::string(const Options&)> gpu_only;
};

int run_section(int argc, char** argv, const Section& section);

// Parses and validates argv against a section. Returns kExitPass with `out` filled, kExitBadInput
// with `message` the one-line reason, or -1 for --help (already printed). Exposed for the tests.
int parse_options(int argc, const char* const* argv, const Section& section, Options* out,
                  std::string* message);

// Parses argv into `app` and says a bad command line in one sentence, as every program does: an
// unknown option, one dash, a value option given twice, followed by another option or by nothing,
// a value it cannot take. Returns kExitPass, kExitBadInput with `message` set, or -1 for --help
// (anywhere on the line; already printed). parse_options uses it; so do modes a section parses
// itself (06's --simulate).
int parse_command_line(CLI::App& app, int argc, const char* const* argv, std::string* message);

// --seed, read signed (a "-1" is refused, not wrapped to 2^64 - 1; one past 64 bits is refused, not
// clamped), for parse_options and the modes a section parses itself; after parsing, seed_problem
// says a negative one in the words of a bad-input line ("" when it is fine).
void add_seed_option(CLI::App& app, int64_t& seed, const std::string& help);
std::string seed_problem(int64_t seed);

std::string format_bytes(double bytes);  // "17.2 GB"

// The line every program ends with ("FAIL: 01_naive kernels (CPU model)"); under --quiet a failure
// prints the check's reason and its first details above it (the run's own reason first, e.g. "the
// tile span is wrong"; the worst element's line among them, shown_details), so that a quiet run, as
// scripts/lab check makes them, still says why.
void print_verdict(bool passed, const std::string& reason, const std::vector<std::string>& details, bool quiet,
                   const std::string& name, const std::string& variant, bool cpu);

// What a program checks before it makes its inputs: under --cpu, that the CPU model can check the
// run (`gpu_only` empty, see Section::gpu_only) and that its `host_bytes` fit in this machine's
// memory; else that there is a GPU (Hopper where `needs_sm90a`) with `device_bytes` free, `dev`
// filled. Returns kExitPass, or, after printing its one line, the exit code (kExitBadInput for a
// problem too large, kExitCannotRun for no suitable GPU or a GPU-only run under --cpu).
int check_resources(const std::string& section, const Problem& p, bool cpu, bool needs_sm90a,
                    const std::string& gpu_only, double host_bytes, double device_bytes,
                    const std::string& workspace_what, int64_t workspace, DeviceInfo* dev);

// The run's seeded inputs (make_inputs), with a progress line (SlowRunNotice, after `first`, on `out`)
// while they are drawn: a long sequence's Q, K and V take tens of seconds on a laptop's cores, before
// the run has printed anything else.
HostInputs make_run_inputs(const Problem& p, const Options& opt,
                           std::chrono::milliseconds first = std::chrono::seconds(5), std::FILE* out = stderr);

}  // namespace lab
