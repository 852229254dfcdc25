// Option parsing and validation: every bad input is refused with a one-line reason before any
// GPU work (the section binaries' exit-2 behaviour is tested end to end in CMakeLists.txt).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "harness/harness.h"
#include "harness/record.h"
#include "harness/reference.h"

using namespace lab;

namespace {
Section demo() {
  Section s;
  s.name = "99_demo";
  s.title = "demo";
  s.variants = {"a", "b"};
  s.bugs = {"oops"};
  s.dtypes = {DType::f32, DType::f16};
  return s;
}

// A section with every optional option: paged, windowed, split, ragged.
Section full() {
  Section s = demo();
  s.name = "98_full";
  s.paged = s.supports_window = s.has_splits = s.supports_ragged_kv = true;
  s.variants_of_option = {{"--page-size", {"b"}}};
  return s;
}

int parse(std::vector<const char*> args, Options* o, std::string* msg, const Section& s = demo()) {
  args.insert(args.begin(), "demo");
  return parse_options(int(args.size()), args.data(), s, o, msg);
}

// A fresh folder under the system's temporary folder, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() / ("lab_options_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};
}  // namespace

TEST_CASE("options: defaults and derived values", "[options]") {
  Options o;
  std::string msg;
  REQUIRE(parse({"--t", "100", "--h", "8", "--h-kv", "2", "--causal", "--dtype", "fp16"}, &o, &msg) == kExitPass);
  CHECK(o.problem.t_q == 100);
  CHECK(o.problem.t_kv == 100);  // T_kv defaults to T
  CHECK(o.problem.h_kv == 2);
  CHECK(o.problem.causal);
  CHECK(o.problem.dtype == DType::f16);
  CHECK(o.variant == "a");  // the first variant is the default
  REQUIRE(parse({"--h", "4"}, &o, &msg) == kExitPass);
  CHECK(o.problem.h_kv == 4);  // H_kv defaults to H
}

TEST_CASE("options: each bad input is refused with its reason", "[options]") {
  const std::vector<std::pair<std::vector<const char*>, std::string>> bad = {
      {{"--t", "0"}, "T must be >= 1"},
      {{"--t-kv", "0"}, "T_kv must be >= 1"},
      {{"--b", "-1"}, "B must be >= 1"},
      {{"--d", "96"}, "D=96 is not supported by 99_demo (supported: 64, 128)"},
      {{"--h", "3", "--h-kv", "2"}, "H=3 is not a multiple of H_kv=2"},
      {{"--h", "2", "--h-kv", "4"}, "H=2 is not a multiple of H_kv=4"},
      {{"--dtype", "bf16"}, "dtype bf16 is not supported by 99_demo"},
      {{"--dtype", "fp8"}, "unknown dtype 'fp8'"},
      {{"--variant", "c"}, "unknown variant 'c' for 99_demo (variants: a, b)"},
      {{"--bug", "nope"}, "unknown bug 'nope' for 99_demo (bugs: oops)"},
      // Options the section does not have: refused the same way whatever their value, 0 included.
      {{"--window", "16"}, "--window is not supported by 99_demo"},
      {{"--window", "0", "--causal"}, "--window is not supported by 99_demo"},
      {{"--page-size", "24"}, "--page-size is not supported by 99_demo"},
      {{"--page-size", "16"}, "--page-size is not supported by 99_demo"},
      {{"--page-size", "0"}, "--page-size is not supported by 99_demo"},
      {{"--splits", "0"}, "--splits is not supported by 99_demo"},
      {{"--splits", "4"}, "--splits is not supported by 99_demo"},
      {{"--kv-lens", "full"}, "--kv-lens is not supported by 99_demo"},
      {{"--kv-lens", "random"}, "--kv-lens is not supported by 99_demo"},
      // The launch limit, the same for every section.
      {{"--h", "65536", "--h-kv", "1"}, "B*H must be <= 65535"},
      {{"--b", "300", "--h", "256"}, "B*H must be <= 65535"},
      {{"--check", "most"}, "unknown --check mode 'most'"},
      {{"--magnitude", "0"}, "--magnitude must be a positive number"},
      {{"--iters", "-2"}, "--warmup and --iters must be >= 0"},
      {{"--t", "20000000"}, "T=20000000 exceeds the lab's limit"},
      {{"--t-kv", "2147483647"}, "T_kv=2147483647 exceeds the lab's limit"},
      {{"--seed", "-1"}, "--seed must be >= 0 (got -1)"},
      {{"--t", "abc"}, "--t: 'abc' is not a value it takes"},
      // A whole number its option cannot hold is out of range, with the limit; a 64-bit one too
      // (CLI11 would clamp it), and an option hidden from --help is still named.
      {{"--t", "99999999999"}, "--t: 99999999999 is out of range (at most 2147483647)"},
      {{"--t=2147483648"}, "--t: 2147483648 is out of range (at most 2147483647)"},
      {{"--b", "-99999999999"}, "--b: -99999999999 is out of range (at least -2147483648)"},
      {{"--seed", "99999999999999999999"}, "--seed: 99999999999999999999 is out of range (0 to 9223372036854775807)"},
      {{"--splits", "99999999999"}, "--splits: 99999999999 is out of range (at most 2147483647)"},
      {{"--splits", "x"}, "--splits: 'x' is not a value it takes"},
      {{"--t", "5", "--t", "6"}, "--t is given more than once"},
      // A value option followed by another option, or by nothing: named, never taken as the value
      // (CLI11 would read T = '--cpu', or a --json file named --cpu).
      {{"--t", "--cpu"}, "--t needs a value (see --help)"},
      {{"--json", "--cpu"}, "--json needs a value (see --help)"},
      {{"--variant", "--causal"}, "--variant needs a value (see --help)"},
      {{"--causal", "--seed"}, "--seed needs a value (see --help)"},
      {{"--frobnicate"}, "unknown option --frobnicate (see --help)"},
      {{"--varaint", "a"}, "unknown option --varaint (did you mean --variant? see --help)"},
      {{"--causl"}, "unknown option --causl (did you mean --causal? see --help)"},
      {{"--windw", "16"}, "unknown option --windw (see --help)"},  // not the demo's: no --window to mean
      {{"--frobnicate", "3"}, "unknown option --frobnicate"},
      {{"-t", "64"}, "unexpected arguments: -t 64 (options take two dashes: --t)"},
      {{"64"}, "unexpected argument: 64 (see --help)"},
      {{"--b", "2000000000", "--h", "2000000000", "--t", "1000"}, "beyond any memory"},
  };
  for (const auto& [args, expected] : bad) {
    Options o;
    std::string msg;
    INFO(expected);
    CHECK(parse(args, &o, &msg) == kExitBadInput);
    CHECK(msg.find(expected) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);  // one line
  }
}

TEST_CASE("options: a section's options are checked by value where it has them", "[options]") {
  const std::vector<std::pair<std::vector<const char*>, std::string>> bad = {
      {{"--window", "16"}, "--window needs --causal"},
      {{"--window", "0", "--causal"}, "--window must be >= 1"},
      {{"--variant", "b", "--page-size", "24"}, "page size 24 is not a positive multiple of 16"},
      {{"--variant", "b", "--page-size", "0"}, "page size 0 is not a positive multiple of 16"},
      {{"--variant", "b", "--page-size", "-16"}, "page size -16 is not a positive multiple of 16"},
      {{"--page-size", "16"}, "--page-size applies to --variant b of 98_full, not to a"},
      {{"--page-size", "0"}, "--page-size applies to --variant b of 98_full, not to a"},
      {{"--splits", "-1"}, "--splits must be >= 0"},
      {{"--kv-lens", "some"}, "unknown --kv-lens 'some'"},
      {{"--h", "65536", "--h-kv", "1"}, "B*H must be <= 65535"},
  };
  for (const auto& [args, expected] : bad) {
    Options o;
    std::string msg;
    INFO(expected);
    CHECK(parse(args, &o, &msg, full()) == kExitBadInput);
    CHECK(msg.find(expected) != std::string::npos);
  }
  Options o;
  std::string msg;
  CHECK(parse({"--variant", "b", "--page-size", "32", "--splits", "3", "--causal", "--window", "5"}, &o, &msg, full()) == kExitPass);
  CHECK(o.given_option("--page-size"));
  CHECK(!o.given_option("--kv-lens"));
}

TEST_CASE("options: --help states each section's real defaults", "[options]") {
  Section s = demo();
  s.default_problem.h = 32;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = 1;
  s.default_problem.t_kv = 4096;
  s.extra_help = {{"--simulate", "a serving simulation instead of one forward"}};
  const char* argv[] = {"demo", "--help"};
  Options o;
  std::string msg;
  std::ostringstream captured;
  std::streambuf* saved = std::cout.rdbuf(captured.rdbuf());
  const int code = parse_options(2, argv, s, &o, &msg);
  std::cout.rdbuf(saved);
  CHECK(code == -1);
  const std::string help = captured.str();
  CHECK(help.find("default 8 (H when --h is given)") != std::string::npos);
  CHECK(help.find("default 4096 (T when --t is given)") != std::string::npos);
  CHECK(help.find("--simulate") != std::string::npos);
  CHECK(help.find("--page-size") == std::string::npos);  // not this section's
  CHECK(help.find("--splits") == std::string::npos);
  CHECK(help.find("Element type: fp32, fp16\n") != std::string::npos);  // the section's types alone (no bf16)
  const char* after_value[] = {"demo", "--t", "--help"};  // --help anywhere prints the help
  captured.str("");
  saved = std::cout.rdbuf(captured.rdbuf());
  const int code2 = parse_options(3, after_value, s, &o, &msg);
  std::cout.rdbuf(saved);
  CHECK(code2 == -1);
  CHECK(captured.str().find("--simulate") != std::string::npos);
  const char* argv2[] = {"demo"};  // and the defaults are the ones used
  REQUIRE(parse_options(1, argv2, s, &o, &msg) == kExitPass);
  CHECK((o.problem.h_kv == 8 && o.problem.t_kv == 4096));
}

TEST_CASE("options: --json and --dump paths are checked before anything runs", "[options]") {
  TempDir tmp;
  std::ofstream(tmp / "notes.txt") << "my notes, not records\n";
  std::ofstream(tmp / "records.json") << "[]\n";
  std::ofstream(tmp / "a_file") << "x";
  const std::string missing_dir = tmp / "no/such/dir/x.json", dir = tmp.path.string(), notes = tmp / "notes.txt",
                    recs = tmp / "records.json", new_json = tmp / "new.json", a_file = tmp / "a_file",
                    dump_missing_parent = tmp / "no/such/dump", dump_new = tmp / "dump";
  const std::vector<std::pair<std::vector<const char*>, std::string>> bad = {
      {{"--json", missing_dir.c_str()}, "does not exist"},
      {{"--json", dir.c_str()}, "is a folder, not a file"},
      {{"--json", notes.c_str()}, "holds something other than a JSON list of records"},
      {{"--json", "/proc/nope.json"}, "kernel file system"},
      {{"--json", "/etc"}, "is a folder, not a file"},
      {{"--dump", a_file.c_str()}, "is a file, not a folder"},
      {{"--dump", dump_missing_parent.c_str()}, "does not exist"},
      {{"--dump", "/proc/nope"}, "kernel file system"},
      {{"--json", ""}, "--json: an empty path"},  // `--json "$OUT"` with OUT unset
      {{"--dump", ""}, "--dump: an empty path"},
  };
  for (const auto& [args, expected] : bad) {
    Options o;
    std::string msg;
    INFO(expected);
    CHECK(parse(args, &o, &msg) == kExitBadInput);
    CHECK(msg.find(expected) != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);
  }
  std::ifstream in(notes);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(kept == "my notes, not records\n");  // refused, untouched
  for (const std::string& ok : {recs, new_json}) {
    Options o;
    std::string msg;
    CHECK(parse({"--json", ok.c_str()}, &o, &msg) == kExitPass);
  }
  Options o;
  std::string msg;
  CHECK(parse({"--dump", dump_new.c_str()}, &o, &msg) == kExitPass);
  CHECK(parse({"--dump", dir.c_str()}, &o, &msg) == kExitPass);
}

TEST_CASE("options: ragged sequence lengths where a section supports them", "[options]") {
  Section s = demo();
  s.supports_ragged_kv = true;
  const char* argv[] = {"demo", "--b", "5", "--t", "1", "--t-kv", "300", "--kv-lens", "random"};
  Options o;
  std::string msg;
  REQUIRE(parse_options(9, argv, s, &o, &msg) == kExitPass);
  REQUIRE(o.problem.kv_len.size() == 5);
  CHECK(o.problem.kv_len[0] == 300);  // one full-length sequence
  for (int len : o.problem.kv_len) CHECK((len >= 1 && len <= 300));
}

TEST_CASE("options: a section's own validation runs last", "[options]") {
  Section s = demo();
  s.validate = [](const Problem& p, const Options&) { return p.t_q > 10 ? std::string("too long for demo") : ""; };
  const char* argv[] = {"demo", "--t", "11"};
  Options o;
  std::string msg;
  CHECK(parse_options(3, argv, s, &o, &msg) == kExitBadInput);
  CHECK(msg == "too long for demo");
}

TEST_CASE("FLOP and byte models follow the one convention", "[options]") {
  Problem p;
  p.b = 2; p.h = 4; p.h_kv = 4; p.t_q = 128; p.t_kv = 256; p.d = 64;
  CHECK(attention_flops(p) == Approx(4.0 * 2 * 4 * 128 * 256 * 64));
  p.causal = true;
  CHECK(attention_flops(p) == Approx(2.0 * 2 * 4 * 128 * 256 * 64));
  p.window = 16;  // exact count of visible pairs
  CHECK(attention_flops(p) == Approx(4.0 * 64 * 2 * 4 * 128 * 16));
  p.window = 0;
  CHECK(fused_hbm_bytes(p) == (2 * 2 * 128 * 4 * 64 + 2 * 2 * 256 * 4 * 64) * 4 + 2 * 4 * 128 * 4);
}

// A CPU model that runs only part of the student's code (07, 12: the mma kernel's softmax is
// GPU-only) says so: a right output ends "not checked here" (exit 77), never PASS; a wrong one fails.
TEST_CASE("harness: a CPU model's GPU-only rest is not checked, and never a pass", "[options]") {
  for (const bool right : {true, false}) {
    Section s = demo();
    s.cpu = [right](const Problem& p, const Options&, const HostInputs& in, std::vector<float>& o,
                    std::vector<float>& lse) {
      const std::vector<RowId> rows = all_rows(p);
      const RowResults ref = reference_rows(p, in, rows, RefKind::fp64);
      for (size_t r = 0; r < rows.size(); ++r) {
        for (int x = 0; x < p.d; ++x)
          o[size_t(p.q_index(rows[r].b, rows[r].i, rows[r].h) + x)] = right ? float(ref.o[r * size_t(p.d) + x]) : 0.f;
        lse[size_t(p.lse_index(rows[r].b, rows[r].h, rows[r].i))] = float(ref.lse[r]);
      }
      CpuRun run;
      run.gpu_only_rest = "needs a GPU: the demo's other half";
      return run;
    };
    std::vector<std::string> args = {"demo", "--cpu", "--t", "5", "--h", "1", "--quiet"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    std::cout.flush();
    CHECK(run_section(int(argv.size()), argv.data(), s) == (right ? kExitCannotRun : kExitFail));
  }
}
