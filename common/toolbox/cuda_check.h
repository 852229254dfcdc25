// CUDA error checking: every runtime call and every launch is checked, and a failure names the
// call, the file and the line. A failed CUDA call is a bug in the program, never bad input, so it
// ends the program with exit code 3 (distinct from 1 = wrong answer and 2 = bad input).
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

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

namespace lab {
// --smem-limit: behave as on a GPU that allows this many bytes of shared memory per block (0: this
// GPU's own limit). Kernels that pick a smaller configuration on such GPUs can so be run and
// checked on a large one; a kernel that needs more says "cannot run here", as it would there.
inline int forced_shared_memory_limit = 0;

// The dynamic shared memory a block may opt in to on the current device (A100: 163 KB; sm_86,
// sm_89, sm_120: 99 KB; Hopper: 227 KB), or less under --smem-limit. Asked of the driver once per
// thread and device: a run's set-up may opt in several kernels.
inline int shared_memory_limit() {
  thread_local int cached_device = -1, limit = 0;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  if (device != cached_device) {
    CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    cached_device = device;
  }
  return forced_shared_memory_limit > 0 && forced_shared_memory_limit < limit ? forced_shared_memory_limit : limit;
}

// Opts `kernel` in to `bytes` of dynamic shared memory per block (past the 48 KB default). A GPU
// that allows less per block cannot run the kernel: that is "cannot run here" (exit 77, one line),
// as for a missing GPU, not the "invalid argument" of cudaFuncSetAttribute. The PyTorch op defines
// LAB_CANNOT_RUN_THROWS: the same sentence as a Python RuntimeError instead of the end of the process.
template <class Kernel>
void opt_in_shared_memory(Kernel* kernel, int bytes) {
  const int limit = shared_memory_limit();
  if (bytes > limit) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char why[512];
    std::snprintf(why, sizeof why,
                  "cannot run here: this kernel needs %d KB of shared memory per block and %s (sm_%d%d) allows "
                  "%d KB%s; add --cpu to run the CPU model instead",
                  (bytes + 1023) / 1024, prop.name, prop.major, prop.minor, limit / 1024,
                  forced_shared_memory_limit == limit ? " under --smem-limit" : "");
#ifdef LAB_CANNOT_RUN_THROWS
    throw std::runtime_error(why);
#else
    std::fprintf(stderr, "%s\n", why);
    std::exit(77);
#endif
  }
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}
}  // namespace lab
