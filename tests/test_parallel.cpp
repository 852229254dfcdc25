// The progress line a slow CPU run prints (SlowRunNotice), the harness's input making that
// prints it, and the barrier a CPU model's team meets at.
#include <catch2/catch.hpp>
#include <atomic>
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

TEST_CASE("the CPU model's advice: a smaller shape, unless the shape is already small", "[parallel]") {
  lab::Problem p;  // B=1 H=8 T=1024 D=64: 5.4e8, seconds of work (18 s on 04's model)
  CHECK(lab::cpu_model_hint(p) == "B=1 H=8 T=1024 D=64 fp32: a smaller shape finishes sooner");
  p.t_q = p.t_kv = 128;  // 8.4e6
  CHECK(lab::cpu_model_hint(p) == "B=1 H=8 T=128 D=64 fp32: a shape this small takes under a second: a loop that never ends?");
  p.t_q = 1;  // a decode row
  CHECK(lab::cpu_model_hint(p).find(": a loop that never ends?") != std::string::npos);
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

// A team's barrier (01's CPU model reduces through one): a member that never arrives is found out
// at once, once everyone else has returned; a member that is only slow is waited for.
TEST_CASE("A team's barrier that one member calls once more fails at once, not after a time limit", "[parallel]") {
  Barrier barrier(4);
  std::atomic<int> failed{0};
  const auto start = std::chrono::steady_clock::now();
  run_team(4, [&](int member) {
    for (int call = 0; call < (member == 0 ? 2 : 1); ++call) failed += !barrier.arrive_and_wait();
  });
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(failed == 1);  // member 0's second call: the others have returned, nobody will come
  CHECK(took < 1s);
}

TEST_CASE("A team's barrier waits for a slow member past its patience", "[parallel]") {
  Barrier barrier(4, 1s);  // outside a team, 1 s would be taken for a member that never arrives
  std::atomic<int> failed{0};
  run_team(4, [&](int member) {
    if (member == 3) std::this_thread::sleep_for(1300ms);  // a big shape on a slow CPU
    failed += !barrier.arrive_and_wait();
    failed += !barrier.arrive_and_wait();
  });
  CHECK(failed == 0);
}

TEST_CASE("A barrier outside a team, or of part of one, still gives up after its patience", "[parallel]") {
  Barrier barrier(3, 1s);
  std::atomic<int> failed{0};
  std::thread a([&] { failed += !barrier.arrive_and_wait(); });
  std::thread b([&] { failed += !barrier.arrive_and_wait(); });
  a.join();
  b.join();
  CHECK(failed == 2);
}
