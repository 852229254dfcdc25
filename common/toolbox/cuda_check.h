// CUDA error checking: every runtime call and every launch is checked, and a failure names the
// call, the file and the line. A failed CUDA call is a bug in the program, never bad input, so it
// ends the program with exit code 3 (distinct from 1 = wrong answer and 2 = bad input).
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

namespace lab {
[[noreturn]] inline void cuda_fail(cudaError_t err, const char* call, const char* file, int line) {
  std::fprintf(stderr, "CUDA error: %s (%s)\n  in %s\n  at %s:%d\n", cudaGetErrorString(err),
               cudaGetErrorName(err), call, file, line);
  std::exit(3);
}
}  // namespace lab

#define CUDA_CHECK(expr)                                                      \
  do {                                                                        \
    cudaError_t lab_err_ = (expr);                                            \
    if (lab_err_ != cudaSuccess) lab::cuda_fail(lab_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a launch: catches bad launch configurations at once (the kernel itself may still fault
// later; the harness synchronises and checks again before reading results).
#define CUDA_CHECK_LAST() CUDA_CHECK(cudaGetLastError())
