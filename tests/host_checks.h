// What the host-side test programs share: CHECK(x) counts a check and prints a failed one with its
// line; finish() prints the verdict line ctest matches ("PASS: 0 of N checks failed", or "FAIL: k
// of N checks failed") and returns the exit code (0 when every check passed, 1 otherwise).
#pragma once
#include <cstdio>

static int g_checks = 0, g_failed = 0;
static void check(bool ok, const char* what, int line) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::printf("  failed (line %d): %s\n", line, what);
  }
}
#define CHECK(x) check((x), #x, __LINE__)

static int finish() {
  std::printf("%s: %d of %d checks failed\n", g_failed ? "FAIL" : "PASS", g_failed, g_checks);
  return g_failed ? 1 : 0;
}
