// Device-side plumbing: what GPU this is, owned allocations, uploads in the problem's element
// type, poisoning, and the event timer.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/dtype.h"

namespace lab {

struct DeviceInfo {
  std::string name;    // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  int64_t free_bytes = 0;
  int l2_bytes = 0;
  int sm_clock_mhz = 0, mem_clock_mhz = 0;
  std::string driver;  // kernel module version where readable, else the CUDA driver API version
  std::string slug() const;  // results folder name: "h200"
};

// Returns false (and a reason) when no usable CUDA device is present. Never exits.
bool query_device(DeviceInfo* info, std::string* why_not);

// The kernel module's version in the first line of /proc/driver/nvidia/version ("NVRM version:
// NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..."): its first word made
// of digits and dots with at least one dot, or "" if there is none.
std::string driver_version_in(const std::string& proc_line);

// An owned device allocation (RAII, move-only). Allocation failure is a CUDA error (exit 3); the
// harness checks that a problem fits before anything is allocated.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void poison(cudaStream_t s = 0);  // every byte 0xFF (see dtype.h)
 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct PagedCache;  // block_allocator.h
// Copies the contiguous device cache src [B, t_kv, row_bytes] into the paged pool `pool`, page by
// page to the slots c's tables give, with copy-engine copies (no kernel: a profile of the run then
// holds the forward alone), and waits for them. Slots no sequence owns are left as they are:
// poison the pool first. (On the host: paged_pool.)
void copy_to_paged_pool(const PagedCache& c, const void* src, void* pool, int t_kv, int64_t row_bytes);

// Host floats -> device buffer in element type t (values already representable: see make_inputs).
DeviceBuffer upload(const std::vector<float>& host, DType t);
// Device buffer in element type t -> host floats; the poison pattern maps to poison_float().
std::vector<float> download(const DeviceBuffer& dev, int64_t count, DType t);

struct Timing {
  int warmup = 0, iters = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;  // of the method kept
  std::string method = "queued";                  // "queued" (launched), or "cuda-graph" (replayed)
  double eager_median_ms = -1, graph_median_ms = -1;  // both, where the forward was also replayed
};
// Times `forward` with CUDA events: `warmup` untimed runs, then `iters` timed runs, each timed
// on its own. With flush_l2, a buffer twice the L2 size is rewritten before every timed run
// (outside the timed region), so every run starts from a cold cache. With graph, the forward is
// also captured once in a CUDA graph and the graph replayed, timed the same way, and the faster
// of the two is kept, the other in eager_/graph_median_ms: how the PyTorch baselines are timed
// (scripts/baselines.py), so a µs-scale step and its baseline meet on the same terms.
Timing time_forward(const std::function<void(cudaStream_t)>& forward, int warmup, int iters,
                    bool flush_l2, const DeviceInfo& dev, cudaStream_t stream, bool graph = false);

}  // namespace lab
