# Experiment only (never committed): stamp %globaltimer per block in decode_kernel (start, first tile
# in shared memory, end of the key loop, exit, and the prologue's first copies issued) and, with
# LAB_TRACE=N, print the spread of the N-th forward's blocks to stderr. Usage: python3 decode-trace.py
# TREE (patches TREE/common/decode.cuh). Session 13: 4 stamps, anchors of the two-set kernel;
# session 15: the 5th stamp. Thread 0 stamps: "first copy issued" is warp 0's (06's window stager).
import sys
p = sys.argv[1] + '/common/decode.cuh'
s = open(p).read()
s = s.replace('namespace decode {\nusing namespace lab::sm80;\n', '''namespace decode {
using namespace lab::sm80;
__device__ unsigned long long g_trace[8192 * 5];
__device__ __forceinline__ unsigned long long gtime() { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
#define TRACE(k) do { if (threadIdx.x == 0) { const int id_ = blockIdx.x + blockIdx.y * gridDim.x; if (id_ < 8192) g_trace[5 * id_ + (k)] = gtime(); } } while (0)
''', 1)
s = s.replace('  if (head_of_row<Hooks>(p, kv_head, chunk, 0) < 0) return;  // serves no head', '  TRACE(0);\n  if (head_of_row<Hooks>(p, kv_head, chunk, 0) < 0) return;  // serves no head', 1)
k = '    __syncwarp();  // the warp\'s rows of its round-r tile are in shared memory'
assert k in s
s = s.replace(k, '    if (r == 0) TRACE(1);\n' + k, 1)
k = '  if (__syncthreads_or(failed)) return;'
assert k in s
s = s.replace(k, k + '\n  TRACE(2);', 1)
for k in ('  if (!p.part_o) return;\n', '  if (!*is_last) return;\n'):
    assert k in s
    s = s.replace(k, k.replace('return;', '{ TRACE(3); return; }'), 1)
# the end of the kernel: before the ticket reset
k = '  if (tid == 0) p.tickets[blockIdx.x] = 0;'
assert k in s
s = s.replace(k, '  TRACE(3);\n' + k, 1)
s = s.replace('''    (void)workspace;  // keep the workspace ...''', '''    static int calls = 0;
    static const int trace_at = getenv("LAB_TRACE") ? atoi(getenv("LAB_TRACE")) : 0;
    if (trace_at && ++calls == trace_at) {
      const int nb = int(std::min<int64_t>(int64_t(rows) * p.num_splits, 8192));
      std::vector<unsigned long long> tr(size_t(nb) * 5);
      CUDA_CHECK(cudaStreamSynchronize(st));
      CUDA_CHECK(cudaMemcpyFromSymbol(tr.data(), g_trace, tr.size() * 8));
      unsigned long long t0 = ~0ull;
      for (int x = 0; x < nb; ++x) t0 = std::min(t0, tr[5 * x]);
      std::vector<double> st0, fst, en1, en2, dur, wait, iss;
      for (int x = 0; x < nb; ++x) {
        st0.push_back((tr[5 * x] - t0) * 1e-3); fst.push_back((tr[5 * x + 1] - t0) * 1e-3);
        en1.push_back((tr[5 * x + 2] - t0) * 1e-3); en2.push_back((tr[5 * x + 3] - t0) * 1e-3);
        dur.push_back((tr[5 * x + 2] - tr[5 * x + 1]) * 1e-3); wait.push_back((tr[5 * x + 1] - tr[5 * x]) * 1e-3); iss.push_back((tr[5 * x + 4] - tr[5 * x]) * 1e-3);
      }
      auto q = [](std::vector<double> v, double f) { std::sort(v.begin(), v.end()); return v[size_t(f * (v.size() - 1))]; };
      fprintf(stderr, "TRACE first copy issued after start us: p50 %.2f max %.2f\\n", q(iss, .5), q(iss, 1));
      fprintf(stderr, "TRACE blocks %d splits %d | start us: p50 %.2f max %.2f | first tile after start us: min %.2f p50 %.2f max %.2f | loop end us: min %.2f p10 %.2f p50 %.2f p90 %.2f max %.2f | exit max %.2f | loop (first tile to end) us: min %.2f p50 %.2f max %.2f\\n",
              nb, p.num_splits, q(st0, .5), q(st0, 1), q(wait, 0), q(wait, .5), q(wait, 1), q(en1, 0), q(en1, .1), q(en1, .5), q(en1, .9), q(en1, 1), q(en2, 1), q(dur, 0), q(dur, .5), q(dur, 1));
    }
    (void)workspace;  // keep the workspace ...''', 1)
s = s.replace('#include <memory>\n', '#include <algorithm>\n#include <cstdio>\n#include <cstdlib>\n#include <memory>\n#include <vector>\n', 1)
k = "#pragma unroll 1  // (one copy of the loader's code here, not STAGES - 1)"
if k in s:
    s = s.replace(k, '  TRACE(4);\n' + k, 1)
else:
    k = "  if (kStaged) {\n    __syncthreads();  // the window is in shared memory"
    assert k in s
    s = s.replace(k, '  TRACE(4);\n' + k, 1)
open(p, 'w').write(s)
print('patched', p)
