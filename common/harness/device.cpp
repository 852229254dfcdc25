#include "harness/device.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "decode/block_allocator.h"
#include "toolbox/cuda_check.h"
#include "decode/kv_cache.h"

namespace lab {

std::string DeviceInfo::slug() const {
  std::string s;
  for (char c : name) s += char(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("nvidia ", 0) == 0) s = s.substr(7);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  return s.empty() ? "unknown-gpu" : s;
}

std::string driver_version_in(const std::string& proc_line) {
  std::istringstream words(proc_line);
  std::string w;
  while (words >> w) {  // (the word after "Module" is "for" in the open kernel module's line)
    const bool digits_and_dots = w.find_first_not_of("0123456789.") == std::string::npos;
    if (digits_and_dots && std::isdigit(static_cast<unsigned char>(w.front())) && w.find('.') != std::string::npos)
      return w;
  }
  return "";
}

namespace {
std::string driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(f, line))
    if (std::string v = driver_version_in(line); !v.empty()) return v;
  int v = 0;
  cudaDriverGetVersion(&v);
  return "cuda " + std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

namespace {
// What is true when the runtime finds no device: with no kernel module loaded the runtime reports
// an "insufficient driver", which would send a user hunting for a driver update on a machine that
// simply has no GPU.
std::string no_gpu_reason(cudaError_t err) {
  if (err == cudaSuccess) return "no CUDA GPU found";
  const bool module_loaded = std::ifstream("/proc/driver/nvidia/version").good();
  if (!module_loaded && (err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice))
    return "no CUDA GPU found (no driver)";
  if (err == cudaErrorNoDevice) return "no CUDA GPU found";
  return std::string("no usable CUDA GPU (") + cudaGetErrorString(err) + ")";
}
}  // namespace

bool query_device(DeviceInfo* info, std::string* why_not) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    *why_not = no_gpu_reason(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return false;
  }
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  info->name = prop.name;
  info->cc_major = prop.major;
  info->cc_minor = prop.minor;
  info->sms = prop.multiProcessorCount;
  info->l2_bytes = prop.l2CacheSize;
  int khz = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  info->sm_clock_mhz = khz / 1000;
  CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev));
  info->mem_clock_mhz = khz / 1000;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  info->free_bytes = int64_t(free_b);
  info->driver = driver_version();
  return true;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // no check: may run during exit after a reported error
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_; bytes_ = o.bytes_;
    o.ptr_ = nullptr; o.bytes_ = 0;
  }
  return *this;
}
void DeviceBuffer::poison(cudaStream_t s) {
  if (ptr_) CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes_, s));
}

DeviceBuffer upload(const std::vector<float>& host, DType t) {
  DeviceBuffer dev(host.size() * size_t(dtype_bytes(t)));
  if (t == DType::f32) {
    CUDA_CHECK(cudaMemcpy(dev.get(), host.data(), dev.bytes(), cudaMemcpyHostToDevice));
    return dev;
  }
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i)
    bits[i] = t == DType::f16 ? float_to_half_bits(host[i]) : float_to_bf16_bits(host[i]);
  CUDA_CHECK(cudaMemcpy(dev.get(), bits.data(), dev.bytes(), cudaMemcpyHostToDevice));
  return dev;
}

std::vector<float> download(const DeviceBuffer& dev, int64_t count, DType t) {
  std::vector<float> out(static_cast<size_t>(count));
  if (t == DType::f32) {
    CUDA_CHECK(cudaMemcpy(out.data(), dev.get(), size_t(count) * 4, cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<uint16_t> bits(static_cast<size_t>(count));
  CUDA_CHECK(cudaMemcpy(bits.data(), dev.get(), size_t(count) * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < bits.size(); ++i)
    out[i] = bits[i] == kPoisonBits16 ? poison_float()
             : t == DType::f16       ? half_bits_to_float(bits[i])
                                     : bf16_bits_to_float(bits[i]);
  return out;
}

namespace {
struct Medians {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

// warmup untimed runs of `run`, then iters timed runs, every one queued before the first wait.
Medians time_queued(const std::function<void(cudaStream_t)>& run, int warmup, int iters, const DeviceBuffer& flush,
                    cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) run(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  // Every run is queued before the first wait (as triton.testing.do_bench does): the GPU goes from
  // one run to the next without waiting for the host, so each start-stop interval is GPU time.
  // Waiting after each run would put the launch's host latency (a few µs; for a PyTorch baseline,
  // its Python dispatch too) inside every interval: a large error on a 50 µs decode step.
  std::vector<cudaEvent_t> start(static_cast<size_t>(iters)), stop(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    CUDA_CHECK(cudaEventCreate(&start[size_t(i)]));
    CUDA_CHECK(cudaEventCreate(&stop[size_t(i)]));
  }
  for (int i = 0; i < iters; ++i) {
    if (flush.bytes()) CUDA_CHECK(cudaMemsetAsync(flush.get(), i & 0xFF, flush.bytes(), stream));
    CUDA_CHECK(cudaEventRecord(start[size_t(i)], stream));
    run(stream);
    CUDA_CHECK(cudaEventRecord(stop[size_t(i)], stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    float e = 0;
    CUDA_CHECK(cudaEventElapsedTime(&e, start[size_t(i)], stop[size_t(i)]));
    ms.push_back(e);
    CUDA_CHECK(cudaEventDestroy(start[size_t(i)]));
    CUDA_CHECK(cudaEventDestroy(stop[size_t(i)]));
  }
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return {n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]), ms.front(), ms.back()};
}
}  // namespace

Timing time_forward(const std::function<void(cudaStream_t)>& forward, int warmup, int iters,
                    bool flush_l2, const DeviceInfo& dev, cudaStream_t stream, bool graph) {
  Timing t;
  t.warmup = warmup;
  t.iters = iters;
  if (iters <= 0) return t;
  DeviceBuffer flush(flush_l2 ? size_t(std::max(dev.l2_bytes, 1 << 20)) * 2 : 0);
  Medians kept = time_queued(forward, warmup, iters, flush, stream);
  if (graph) {
    // One forward captured (relaxed: a section's host-side calls, e.g. cudaFuncSetAttribute, stay
    // allowed), instantiated once, replayed.
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    forward(stream);
    CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    const Medians replayed =
        time_queued([exec](cudaStream_t s) { CUDA_CHECK(cudaGraphLaunch(exec, s)); }, warmup, iters, flush, stream);
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(g));
    t.eager_median_ms = kept.median_ms;
    t.graph_median_ms = replayed.median_ms;
    if (replayed.median_ms <= kept.median_ms) {
      kept = replayed;
      t.method = "cuda-graph";
    }
  }
  t.median_ms = kept.median_ms;
  t.min_ms = kept.min_ms;
  t.max_ms = kept.max_ms;
  return t;
}

void copy_to_paged_pool(const PagedCache& c, const void* src, void* pool, int t_kv, int64_t row_bytes) {
  for (int b = 0; b < int(c.lengths.size()); ++b)
    for (int j0 = 0; j0 < c.lengths[size_t(b)]; j0 += c.page_size) {  // a page's tokens are contiguous in both
      const int keys = std::min(c.page_size, c.lengths[size_t(b)] - j0);
      const int64_t slot = paged_slot(c.tables.data(), c.table_stride, c.page_size, b, j0);
      CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(pool) + slot * row_bytes,
                                 static_cast<const char*>(src) + (int64_t(b) * t_kv + j0) * row_bytes,
                                 size_t(keys * row_bytes), cudaMemcpyDeviceToDevice, 0));
    }
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace lab
