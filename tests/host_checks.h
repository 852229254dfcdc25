// What the host-side test programs share: CHECK(x) counts a check and prints a failed one with
// its place in the test file (tests/NAME:LINE: the test, not the lab it tests); finish() prints the
// verdict line ctest matches ("PASS: 0 of N checks failed", or "FAIL: k of N checks failed") and
// returns the exit code (0 when every check passed, 1 otherwise). They take no options:
// no_options() refuses any (exit 2), so a typed option is never silently ignored.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>

static int g_checks = 0, g_failed = 0;
static void check(bool ok, const char* what, const char* file, int line) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    const char* tests = std::strstr(file, "tests/");
    std::printf("  failed (%s:%d): %s\n", tests ? tests : file, line, what);
  }
}
#define CHECK(x) check((x), #x, __FILE__, __LINE__)

static void no_options(int argc, char** argv) {
  if (argc > 1) {
    std::printf("bad input: %s takes no options (it runs its checks and prints PASS or FAIL)\n", argv[0]);
    std::exit(2);
  }
}

static int finish() {
  std::printf("%s: %d of %d checks failed\n", g_failed ? "FAIL" : "PASS", g_failed, g_checks);
  return g_failed ? 1 : 0;
}
