// The progress line a slow CPU run prints (SlowRunNotice), and the harness's input making that
// prints it.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "harness/harness.h"
#include "harness/parallel.h"

using namespace lab;
using namespace std::chrono_literals;

static std::string read_all(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buf[256];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  return text;
}

TEST_CASE("SlowRunNotice prints progress for a slow run and nothing for a quick one", "[parallel]") {
  std::FILE* slow = std::tmpfile();
  REQUIRE(slow);
  {
    SlowRunNotice notice(true, "the CPU model", "a smaller shape finishes sooner", 60ms, 60ms, slow);
    parallel_for(20, [](int64_t) { std::this_thread::sleep_for(25ms); });
  }
  const std::string text = read_all(slow);
  std::fclose(slow);
  INFO(text);
  REQUIRE(text.find("  ... the CPU model still running: 0 s (a smaller shape finishes sooner)\n") == 0);
  REQUIRE(text.find("\n  ... the CPU model still running: ", 1) != std::string::npos);  // and again

  std::FILE* quick = std::tmpfile();
  REQUIRE(quick);
  const auto start = std::chrono::steady_clock::now();
  {
    SlowRunNotice notice(true, "the CPU model", "", 2s, 2s, quick);
    parallel_for(20, [](int64_t) {});
  }
  REQUIRE(std::chrono::steady_clock::now() - start < 1s);  // the ticker is woken, not waited out
  REQUIRE(read_all(quick).empty());
  std::fclose(quick);

  std::FILE* quiet = std::tmpfile();  // off (--quiet): nothing however long the run
  REQUIRE(quiet);
  {
    SlowRunNotice notice(false, "the CPU model", "", 10ms, 10ms, quiet);
    std::this_thread::sleep_for(60ms);
  }
  REQUIRE(read_all(quiet).empty());
  std::fclose(quiet);
}

TEST_CASE("Making a long sequence's inputs prints progress and nothing under --quiet", "[parallel]") {
  Options opt;
  opt.problem.h = opt.problem.h_kv = 4;
  opt.problem.t_q = opt.problem.t_kv = 16384;
  opt.problem.d = 128;  // 3 x 8.4 M elements: far longer than the 1 ms the notice waits here
  const HostInputs want = make_inputs(opt.problem, opt.seed, opt.magnitude);
  for (const bool quiet : {false, true}) {
    opt.quiet = quiet;
    std::FILE* out = std::tmpfile();
    REQUIRE(out);
    const HostInputs got = make_run_inputs(opt.problem, opt, 1ms, out);
    const std::string text = read_all(out);
    std::fclose(out);
    INFO(text);
    REQUIRE((got.q == want.q && got.k == want.k && got.v == want.v));
    if (quiet)
      REQUIRE(text.empty());
    else
      REQUIRE(text.find("  ... making the inputs still running: 0 s (Q, K and V: 101 MB in fp32; a smaller shape "
                        "starts sooner)\n") == 0);
  }
}
