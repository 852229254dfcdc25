// What the host-side test programs share: CHECK(x) counts a check and prints a failed one with
// its place in the test file (tests/NAME:LINE: the test, not the lab it tests); finish() prints the
// verdict line ctest matches ("PASS: 0 of N checks failed", or "FAIL: k of N checks failed") and
// returns the exit code (0 when every check passed, 1 otherwise). They take no options:
// no_options() refuses any (exit 2), so a typed option is never silently ignored.
//
// The tests of a lab's exercises are read by students, who should not need the test source to
// learn what is wrong: exercise("split-merge") opens the checks of one exercise (its BEGIN
// EXERCISE id), and CHECKF(ok, format, ...) prints a failure in plain words, as printf would:
//   "  split-merge: merged_lse({2, 1, -inf}, n=3, stride=1) = NaN, want 2.31326 (...) [tests/...:104]"
// A float is printed with num(x) and "%s" (the harness's format_number): printf's "%g" writes a NaN
// as "nan" or "-nan" by its sign bit, where every other output of the lab says NaN.
// ok and the values to print are one call's arguments, evaluated in no set order: print values
// computed before, never a call to the student's code (online_step changes its arguments). A check
// that fails in a loop prints its first two failures and then how many more. finish() then lists
// the exercises, each with its first failure, just above the verdict: scripts/lab check shows a
// failed run's first lines and its last (these, and the verdict).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "harness/compare.h"

static std::string num(double x) { return lab::format_number("%.6g", x); }

static int g_checks = 0, g_failed = 0;
struct ExerciseTally {
  const char* id;
  int checks, failed;
  std::string first;  // its first failure, for the summary
};
static std::vector<ExerciseTally> g_exercises;
struct SiteTally {  // the failures of one CHECKF line in the current exercise
  const char* file;
  int line, failed;
};
static std::vector<SiteTally> g_sites;

static const char* test_path(const char* file) {
  const char* tests = std::strstr(file, "tests/");
  return tests ? tests : file;
}

static inline void check(bool ok, const char* what, const char* file, int line) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::printf("  failed (%s:%d): %s\n", test_path(file), line, what);
  }
}
#define CHECK(x) check((x), #x, __FILE__, __LINE__)

// Says how many failures of each line of the exercise were not printed.
static void close_exercise() {
  for (const SiteTally& s : g_sites)
    if (s.failed > 2)
      std::printf("  %s: (and %d more failure%s of the check at %s:%d)\n", g_exercises.back().id, s.failed - 2,
                  s.failed == 3 ? "" : "s", test_path(s.file), s.line);
  g_sites.clear();
}

static void exercise(const char* id) {
  if (!g_exercises.empty()) close_exercise();
  g_exercises.push_back({id, 0, 0, {}});
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static bool check_f(bool ok, const char* file, int line, const char* format, ...) {
  ++g_checks;
  ExerciseTally* ex = g_exercises.empty() ? nullptr : &g_exercises.back();
  if (ex) ++ex->checks;
  if (ok) return true;
  ++g_failed;
  char what[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(what, sizeof what, format, args);
  va_end(args);
  if (!ex) {
    std::printf("  failed (%s:%d): %s\n", test_path(file), line, what);
    return false;
  }
  if (ex->failed++ == 0) ex->first = what;
  SiteTally* site = nullptr;
  for (SiteTally& s : g_sites)
    if (s.line == line && std::strcmp(s.file, file) == 0) site = &s;
  if (!site) {
    g_sites.push_back({file, line, 0});
    site = &g_sites.back();
  }
  if (++site->failed <= 2) std::printf("  %s: %s [%s:%d]\n", ex->id, what, test_path(file), line);
  return false;
}
#define CHECKF(ok, ...) check_f((ok), __FILE__, __LINE__, __VA_ARGS__)

// A failed step that later checks build on: not_run(n) counts those n checks as failed without
// running them (their messages would describe a state the test never reached), so a group counts
// the same checks whether it passes or fails. Returns nothing: write `return not_run(n);`.
static void not_run(int n) {
  g_checks += n;
  g_failed += n;
  if (g_exercises.empty()) return;
  ExerciseTally& ex = g_exercises.back();
  ex.checks += n;
  ex.failed += n;
  std::printf("  %s: (%d check%s after it not run: %s on this step)\n", ex.id, n, n == 1 ? "" : "s",
              n == 1 ? "it builds" : "they build");
}

// One check over a whole loop (ok = ok && ... each time round) keeps its first counterexample, the
// one worth reading: note(pass, format, ...) returns pass and words the first failure; after the
// loop, CHECKF(c.ok, "%s", c.what) counts it as the one check it is.
struct FirstFailure {
  bool ok = true;
  char what[512] = "";
#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  bool note(bool pass, const char* format, ...) {
    if (!pass && ok) {
      va_list args;
      va_start(args, format);
      std::vsnprintf(what, sizeof what, format, args);
      va_end(args);
    }
    ok = ok && pass;
    return pass;
  }
};

// A test of code that may throw (the student's, or a library it misuses): an exception is one
// failed check naming the test and the error, and the tests after it still run, where an uncaught
// one would abort the program before finish() lists the exercises.
template <class Test>
static void run_catching(const char* what, Test test) {
  try {
    test();
  } catch (const std::exception& e) {
    CHECKF(false, "%s stopped with an error: %s; want it to run without one", what, e.what());
  }
}

static void no_options(int argc, char** argv) {
  if (argc > 1) {
    std::printf("bad input: %s takes no options (it runs its checks and prints PASS or FAIL)\n", argv[0]);
    std::exit(2);
  }
}

static int finish() {
  if (!g_exercises.empty()) close_exercise();
  if (g_failed)
    for (const ExerciseTally& ex : g_exercises)
      if (ex.failed)
        std::printf("exercise %s: %d of %d checks failed; the first: %s\n", ex.id, ex.failed, ex.checks,
                    ex.first.c_str());
      else
        std::printf("exercise %s: its %d checks pass\n", ex.id, ex.checks);
  std::printf("%s: %d of %d checks failed\n", g_failed ? "FAIL" : "PASS", g_failed, g_checks);
  return g_failed ? 1 : 0;
}
