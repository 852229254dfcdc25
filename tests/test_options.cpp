// Option parsing and validation: every bad input is refused with a one-line reason before any
// GPU work (the section binaries' exit-2 behaviour is tested end to end in CMakeLists.txt).
#include <catch2/catch.hpp>

#include "harness/harness.h"

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

int parse(std::vector<const char*> args, Options* o, std::string* msg) {
  args.insert(args.begin(), "demo");
  return parse_options(int(args.size()), args.data(), demo(), o, msg);
}
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
      {{"--window", "16"}, "--window needs --causal"},
      {{"--window", "0", "--causal"}, "--window must be >= 1"},
      {{"--page-size", "24"}, "page size 24 is not a positive multiple of 16"},
      {{"--page-size", "16"}, "--page-size is not supported by 99_demo"},
      {{"--window", "8", "--causal"}, "--window is not supported by 99_demo"},
      {{"--page-size", "-16"}, "page size -16 is not a positive multiple of 16"},
      {{"--check", "most"}, "unknown --check mode 'most'"},
      {{"--magnitude", "0"}, "--magnitude must be a positive number"},
      {{"--iters", "-2"}, "--warmup and --iters must be >= 0"},
      {{"--t", "20000000"}, "exceeds the lab's limit"},
      {{"--t", "abc"}, "--t"},
      {{"--frobnicate"}, "frobnicate"},
      {{"--b", "2000000000", "--h", "2000000000", "--t", "1000"}, "beyond any memory"},
      {{"--kv-lens", "some"}, "unknown --kv-lens 'some'"},
      {{"--kv-lens", "random"}, "--kv-lens random is not supported by 99_demo"},
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
