// 01 naive attention (§12.1): the baseline every later section beats.
//
// What it does: attention as three separate steps, each a kernel that reads its input from HBM
// and writes its output back to HBM:
//     S = Q Kᵀ · scale   (masked entries -inf)       [B, H, T_q, T_kv] fp32 in HBM
//     P = softmax(S)     row by row, max subtracted  [B, H, T_q, T_kv] fp32 in HBM
//     O = P V                                        [B, T_q, H, D]
// Why it is slow: S and P are T_q x T_kv per head. At T = 16384 with B·H = 16 they take 17 GB
// each, and the three kernels move ~16 bytes per score through HBM while doing only 4·D FLOPs
// with it: 16 FLOP per byte at D = 64, an order of magnitude below what the Tensor Cores need.
// Memory bounds this program: its speed once the arithmetic is fast, and T (the fit check refuses
// a shape whose S and P do not fit in device memory).
// Variants:
//   kernels  three hand-written kernels (tiled S and PV, one block per softmax row)
//   cublas   cuBLAS SGEMMs (fp32, no TF32) for S and PV around the same softmax kernel: the
//            unfused path eager PyTorch takes. Faster GEMMs, same O(T²) traffic and memory.
// Exercise (ch12/01_naive.md): the softmax of one row of S, with the max subtraction
// (EXERCISE softmax, shared by the kernel and the CPU model). --bug no-max-subtract drops the
// max subtraction: harmless on small scores, inf/NaN once scores pass ~88 (exp overflows
// fp32); try --magnitude 8.
// Run: scripts/lab run 01 -- --t 4096 --causal     (the stub)
//      build/bin/01_naive --variant cublas --t 4096  (the solution)
#include <cublas_v2.h>

#include <atomic>
#include <cstring>

#include "lab.cuh"

constexpr int TILE = 16;               // S and PV tiles: 16 x 16 threads, one output each
constexpr int SOFTMAX_THREADS = 256;   // one block per row of S
static_assert(SOFTMAX_THREADS % 32 == 0 && SOFTMAX_THREADS <= 1024, "whole warps, one block");

#define CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                       \
    cublasStatus_t st_ = (expr);                                                             \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      std::fprintf(stderr, "cuBLAS error %d (%s)\n  in %s\n  at %s:%d\n", int(st_),         \
                   cublasGetStatusString(st_), #expr, __FILE__, __LINE__);                   \
      std::exit(3);                                                                          \
    }                                                                                        \
  } while (0)

struct Shape {  // what the kernels need of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  int window;
  float scale;
};

// ---------------------------------------------------------------------------------------------
// Step 1: S = Q Kᵀ · scale. One 16x16 block computes a 16-query x 16-key tile of S; the two
// 16 x D input tiles are staged in shared memory (rows padded by one float so the column-wise
// reads of k_smem fall in 16 different banks).
template <int HEAD_DIM>
__global__ void __launch_bounds__(TILE * TILE)
scores_kernel(const float* __restrict__ q,  // [B, T_q, H, D]
              const float* __restrict__ k,  // [B, T_kv, H_kv, D]
              float* __restrict__ s,        // [B, H, T_q, T_kv]
              Shape sh) {
  __shared__ float q_smem[TILE][HEAD_DIM + 1];
  __shared__ float k_smem[TILE][HEAD_DIM + 1];
  const int kv0 = blockIdx.x * TILE, q0 = blockIdx.y * TILE;
  const int bh = blockIdx.z, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int tid = threadIdx.y * TILE + threadIdx.x;

  for (int idx = tid; idx < TILE * HEAD_DIM; idx += TILE * TILE) {
    const int r = idx / HEAD_DIM, c = idx % HEAD_DIM;
    const int i = q0 + r, j = kv0 + r;
    q_smem[r][c] = i < sh.t_q ? q[((int64_t(b) * sh.t_q + i) * sh.h + head) * HEAD_DIM + c] : 0.f;
    k_smem[r][c] = j < sh.t_kv ? k[((int64_t(b) * sh.t_kv + j) * sh.h_kv + kv_head) * HEAD_DIM + c] : 0.f;
  }
  __syncthreads();  // the tiles are complete before any thread reads them

  const int i = q0 + threadIdx.y, j = kv0 + threadIdx.x;
  if (i >= sh.t_q || j >= sh.t_kv) return;
  float dot = 0.f;
#pragma unroll 16
  for (int c = 0; c < HEAD_DIM; ++c) dot += q_smem[threadIdx.y][c] * k_smem[threadIdx.x][c];
  const bool visible = lab::key_visible(i, j, sh.t_q, sh.t_kv, sh.causal, sh.window);
  s[(int64_t(bh) * sh.t_q + i) * sh.t_kv + j] = visible ? dot * sh.scale : -INFINITY;
}

// Block-wide reductions for the softmax: warp shuffles, then one value per warp through shared.
template <class Op>
__device__ float block_reduce(float x, Op op, float* scratch /* [32] */) {
  for (int off = 16; off > 0; off >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = x;
  __syncthreads();  // every warp's partial is in scratch
  x = scratch[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w) x = op(x, scratch[w]);
  __syncthreads();  // everyone has read scratch before it is reused
  return x;
}
struct MaxOp { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct SumOp { __device__ float operator()(float a, float b) const { return a + b; } };

// ---------------------------------------------------------------------------------------------
// Step 2: P = softmax(S), one row at a time. The row is shared by a team of threads: on the GPU
// the SOFTMAX_THREADS threads of a block (block-wide reductions), in the CPU model CPU_TEAM
// threads (reductions through a barrier). The softmax is written once, against the team, and
// both call it: what the CPU model checks is the code the kernel runs, shared as the kernel
// shares it (a member that ignores rank() and size() sums the row CPU_TEAM times over).
//   team.rank(), team.size()   this thread's index in the team, and the team's size
//   team.max(x), team.sum(x)   the max / sum of x over the team, returned to every member
//   team.leader()              true for exactly one member (it writes per-row values)
// --bug no-max-subtract lives in the team, not in the softmax: its max() answers 0, as if the code
// never subtracted the row max, so the pitfall runs on any softmax that uses team.max().
struct BlockTeam {
  float* scratch;  // __shared__ float[32]
  bool forget_max;
  __device__ int rank() const { return int(threadIdx.x); }
  __device__ int size() const { return int(blockDim.x); }
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ float max(float x) const {
    const float m = block_reduce(x, MaxOp{}, scratch);
    return forget_max ? 0.f : m;
  }
  __device__ float sum(float x) const { return block_reduce(x, SumOp{}, scratch); }
};

constexpr int CPU_TEAM = 4;  // the CPU model's team: more than one, so the sharing is checked

struct CpuTeam {  // the CPU model: member `member` of CPU_TEAM threads
  int member;
  float* partials;  // [CPU_TEAM]: each member's value of the reduction under way
  lab::Barrier* barrier;
  std::atomic<bool>* hung;  // set when a member waited at a reduction that another never reached
  bool forget_max;
  int rank() const { return member; }
  int size() const { return CPU_TEAM; }
  bool leader() const { return member == 0; }
  template <class Op>
  float reduce(float x, Op op) const {
    partials[member] = x;
    if (!barrier->arrive_and_wait()) *hung = true;  // every partial written before any is read
    float r = partials[0];
    for (int i = 1; i < CPU_TEAM; ++i) r = op(r, partials[i]);
    if (!barrier->arrive_and_wait()) *hung = true;  // every member has read them before the next write
    return r;
  }
  float max(float x) const {
    const float m = reduce(x, [](float a, float b) { return std::fmax(a, b); });
    return forget_max ? 0.f : m;
  }
  float sum(float x) const { return reduce(x, [](float a, float b) { return a + b; }); }
};

// The softmax of one row of S: s_row and p_row are the row's T_kv scores and probabilities,
// `keys` the keys the row may see (masked scores are -inf), *lse_row its log-sum-exp.
#pragma nv_exec_check_disable
template <class Team>
__host__ __device__ void softmax_row(const Team& team, const float* s_row, float* p_row, float* lse_row,
                                     lab::KeyRange keys, int t_kv) {
  // BEGIN EXERCISE softmax: P = softmax of this row, numerically safe, and the row's LSE.
  //   Each member handles keys keys.begin + team.rank(), + team.size(), ...; team.max() and
  //   team.sum() combine the members' partial results. Subtract the row's max before exp():
  //   exp() of a float overflows past ~88, and scores grow with |q|·|k|. Masked keys (outside
  //   `keys`) get P = 0; a row that sees no key at all gets P = 0 and LSE = -INFINITY.
  //   The leader writes *lse_row = log of the row's sum of exp(s), in natural log.
  //   Shape of the code: ch12/hints/01_naive.md.
  // STUB: (void)team; (void)s_row; (void)p_row; (void)lse_row; (void)keys; (void)t_kv;
  float m = -INFINITY;
  for (int j = keys.begin + team.rank(); j < keys.end; j += team.size()) m = fmaxf(m, s_row[j]);
  m = team.max(m);
  float l = 0.f;
  for (int j = keys.begin + team.rank(); j < keys.end; j += team.size()) l += expf(s_row[j] - m);
  l = team.sum(l);
  const float inv_l = 1.f / l;
  for (int j = team.rank(); j < t_kv; j += team.size()) p_row[j] = keys.contains(j) ? expf(s_row[j] - m) * inv_l : 0.f;
  if (team.leader()) *lse_row = keys.empty() ? -INFINITY : m + logf(l);
  // END EXERCISE
}

// One block per row of S. Also writes the row's LSE = m + log(l), the statistic FlashAttention
// keeps instead of P.
__global__ void __launch_bounds__(SOFTMAX_THREADS)
softmax_kernel(const float* __restrict__ s,  // [B, H, T_q, T_kv]
               float* __restrict__ p,        // [B, H, T_q, T_kv]
               float* __restrict__ lse,      // [B, H, T_q]
               Shape sh, bool subtract_max) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;  // (b·H + h)·T_q + i: also the LSE index
  const int i = int(row % sh.t_q);
  const lab::KeyRange keys = lab::visible_keys(i, sh.t_q, sh.t_kv, sh.causal, sh.window);
  softmax_row(BlockTeam{scratch, !subtract_max}, s + row * sh.t_kv, p + row * sh.t_kv, lse + row, keys, sh.t_kv);
}

// ---------------------------------------------------------------------------------------------
// Step 3: O = P V. One 16x16 block computes 16 query rows x all D columns (each thread
// HEAD_DIM/16 of them), streaming 16-key tiles of P and V through shared memory.
template <int HEAD_DIM>
__global__ void __launch_bounds__(TILE * TILE)
pv_kernel(const float* __restrict__ p,  // [B, H, T_q, T_kv]
          const float* __restrict__ v,  // [B, T_kv, H_kv, D]
          float* __restrict__ o,        // [B, T_q, H, D]
          Shape sh) {
  __shared__ float p_smem[TILE][TILE + 1];
  __shared__ float v_smem[TILE][HEAD_DIM];
  const int q0 = blockIdx.x * TILE;
  const int bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * TILE + tx;
  const int i = q0 + ty;
  constexpr int COLS = HEAD_DIM / TILE;  // output columns per thread
  float acc[COLS] = {};
  for (int j0 = 0; j0 < sh.t_kv; j0 += TILE) {
    const int j = j0 + tx;
    p_smem[ty][tx] = (i < sh.t_q && j < sh.t_kv) ? p[(int64_t(bh) * sh.t_q + i) * sh.t_kv + j] : 0.f;
    for (int idx = tid; idx < TILE * HEAD_DIM; idx += TILE * TILE) {
      const int r = idx / HEAD_DIM, c = idx % HEAD_DIM;
      v_smem[r][c] = j0 + r < sh.t_kv ? v[((int64_t(b) * sh.t_kv + j0 + r) * sh.h_kv + kv_head) * HEAD_DIM + c] : 0.f;
    }
    __syncthreads();  // the P and V tiles are complete
#pragma unroll
    for (int jj = 0; jj < TILE; ++jj) {
      const float pj = p_smem[ty][jj];
#pragma unroll
      for (int c = 0; c < COLS; ++c) acc[c] += pj * v_smem[jj][tx + TILE * c];
    }
    __syncthreads();  // everyone is done with the tiles before the next ones overwrite them
  }
  if (i < sh.t_q)
    for (int c = 0; c < COLS; ++c) o[((int64_t(b) * sh.t_q + i) * sh.h + head) * HEAD_DIM + tx + TILE * c] = acc[c];
}

// ---------------------------------------------------------------------------------------------
// softmax_row asked directly about the end of its row. S and P are dense ([rows, T_kv]), so a loop
// that runs one key too far reads the next row's first score (in the max: no visible change) and
// writes the next row's first probability, which that row then overwrites: the output cannot show
// it (on a GPU that row belongs to another block, running at the same time). Here every row is
// followed by PROBE_PAD floats: the scores' padding is NaN in one run and large in another, so a
// softmax that reads it answers differently (compared bitwise); P's padding holds a value no
// probability takes, so a write there is seen. Asked on the host by the CPU model and after a GPU
// run, with the CPU model's team: the same source the kernel compiles.
constexpr int PROBE_PAD = 2 * CPU_TEAM;  // floats after each probed row

std::string softmax_row_probe() {
  constexpr int t_kv = 37;  // ragged: not a multiple of the team, a warp or a tile
  // full, window, one key (all three reach t_kv), causal, no key
  constexpr lab::KeyRange rows[] = {{0, t_kv}, {t_kv - 7, t_kv}, {t_kv - 1, t_kv}, {0, 20}, {0, 0}};
  constexpr int n_rows = int(std::size(rows)), stride = t_kv + PROBE_PAD;
  constexpr float big = 1000.f, unwritten = -1.f;  // unwritten: no probability is negative
  struct Out {
    std::vector<float> p, lse;  // [n_rows, stride], [n_rows]
  };
  std::atomic<bool> hung{false};
  auto run = [&](auto pad) {  // pad(k): the score stored in s_row[t_kv + k]
    std::vector<float> s(size_t(n_rows) * stride);
    Out out{std::vector<float>(s.size(), std::nanf("")), std::vector<float>(n_rows, std::nanf(""))};
    for (int r = 0; r < n_rows; ++r)
      for (int j = 0; j < stride; ++j) {
        const size_t at = size_t(r) * stride + j;
        s[at] = j >= t_kv ? pad(j - t_kv) : rows[r].contains(j) ? 0.25f * float((5 * j + 3 * r) % 13) - 1.f : -INFINITY;
        if (j >= t_kv) out.p[at] = unwritten;
      }
    float partials[CPU_TEAM];
    lab::Barrier barrier(CPU_TEAM);
    lab::run_team(CPU_TEAM, [&](int member) {
      const CpuTeam team{member, partials, &barrier, &hung, false};
      for (int r = 0; r < n_rows && !hung; ++r)
        softmax_row(team, &s[size_t(r) * stride], &out.p[size_t(r) * stride], &out.lse[size_t(r)], rows[r], t_kv);
    });
    return out;
  };
  const auto nan_pad = [](int) { return std::nanf(""); };
  const Out quiet = run(nan_pad), again = run(nan_pad), loud = run([=](int) { return big; });
  if (hung) return "";  // the CPU model's own run names it
  auto keys_of = [&](int r) {
    return "softmax_row(keys=[" + std::to_string(rows[r].begin) + ", " + std::to_string(rows[r].end) +
           "), t_kv=" + std::to_string(t_kv) + ")";
  };
  const std::string rule = "keys.end is exclusive, one past the last visible key (j < keys.end, j < t_kv, never <=)"
                           " (a test row the check asks softmax_row about before the case: not the case's shape)";
  for (const Out* out : {&quiet, &loud})
    for (int r = 0; r < n_rows; ++r)
      for (int k = 0; k < PROBE_PAD; ++k)
        if (std::memcmp(&out->p[size_t(r) * stride + t_kv + k], &unwritten, sizeof(float)) != 0)
          return keys_of(r) + " wrote p_row[" + std::to_string(t_kv + k) +
                 "], past the row's end: a row has exactly t_kv probabilities, p_row[0 .. t_kv-1] (in P the next "
                 "row follows, on a GPU another block's), and " + rule;
  auto same_row = [&](const Out& a, const Out& b, int r) {
    return std::memcmp(&a.p[size_t(r) * stride], &b.p[size_t(r) * stride], t_kv * sizeof(float)) == 0 &&
           std::memcmp(&a.lse[size_t(r)], &b.lse[size_t(r)], sizeof(float)) == 0;
  };
  for (int r = 0; r < n_rows; ++r) {
    if (!same_row(quiet, again, r) || same_row(quiet, loud, r)) continue;  // unrepeatable, or no read
    std::string read = "s_row[j] for some j >= t_kv";
    for (int k = 0; k < PROBE_PAD; ++k)  // which score: the one that alone changes the answer
      if (!same_row(quiet, run([=](int x) { return x == k ? big : std::nanf(""); }), r)) {
        read = "s_row[" + std::to_string(t_kv + k) + "]";
        break;
      }
    return keys_of(r) + " read " + read +
           ", past the row's end: a row has exactly t_kv scores, s_row[0 .. t_kv-1] (in S the next row's "
           "scores follow), and " + rule;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Launchers.
template <int HEAD_DIM>
void launch_kernels(const float* q, const float* k, const float* v, float* s, float* p, float* o, float* lse,
                    const Shape& sh, int bh, bool subtract_max, cudaStream_t stream) {
  const dim3 block(TILE, TILE);
  scores_kernel<HEAD_DIM><<<dim3(lab::ceil_div(sh.t_kv, TILE), lab::ceil_div(sh.t_q, TILE), bh), block, 0, stream>>>(q, k, s, sh);
  CUDA_CHECK_LAST();
  softmax_kernel<<<unsigned(int64_t(bh) * sh.t_q), SOFTMAX_THREADS, 0, stream>>>(s, p, lse, sh, subtract_max);
  CUDA_CHECK_LAST();
  pv_kernel<HEAD_DIM><<<dim3(lab::ceil_div(sh.t_q, TILE), bh), block, 0, stream>>>(p, v, o, sh);
  CUDA_CHECK_LAST();
}

// cuBLAS is column-major. A row-major [rows, cols] matrix with leading dimension ld is the
// column-major [cols, rows] matrix with the same ld, so for each (b, h):
//   Sᵀ (col-major T_kv x T_q) = Kᵀᵀ·Qᵀ  -> gemm(T, N, m=T_kv, n=T_q, k=D, A=K (ld H_kv·D), B=Q (ld H·D))
//   Oᵀ (col-major D x T_q)    = Vᵀ·Pᵀ   -> gemm(N, N, m=D, n=T_q, k=T_kv, A=V (ld H_kv·D), B=P (ld T_kv))
// Heads are strided by D inside a row and GQA shares K/V heads, so batches go by pointer arrays.
struct CublasPlan {
  cublasHandle_t handle = nullptr;
  lab::DeviceBuffer ptrs;  // [6][B·H] pointers: Q, K, V, S, P, O
  int batch = 0;
  ~CublasPlan() { if (handle) cublasDestroy(handle); }
};

std::shared_ptr<CublasPlan> make_cublas_plan(const lab::Problem& pr, const float* q, const float* k, const float* v,
                                             float* s, float* p, float* o) {
  auto plan = std::make_shared<CublasPlan>();
  CUBLAS_CHECK(cublasCreate(&plan->handle));
  // Plain fp32 SGEMM, as eager PyTorch with TF32 off: default math uses no TF32 tensor ops.
  CUBLAS_CHECK(cublasSetMathMode(plan->handle, CUBLAS_DEFAULT_MATH));
  plan->batch = pr.b * pr.h;
  std::vector<const float*> host(size_t(6) * size_t(plan->batch));
  for (int b = 0; b < pr.b; ++b)
    for (int h = 0; h < pr.h; ++h) {
      const size_t n = size_t(b) * pr.h + h;
      const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
      const int64_t score = int64_t(n) * pr.t_q * pr.t_kv;
      host[0 * plan->batch + n] = q + pr.q_index(b, 0, h);
      host[1 * plan->batch + n] = k + pr.kv_index(b, 0, hk);
      host[2 * plan->batch + n] = v + pr.kv_index(b, 0, hk);
      host[3 * plan->batch + n] = s + score;
      host[4 * plan->batch + n] = p + score;
      host[5 * plan->batch + n] = o + pr.q_index(b, 0, h);
    }
  plan->ptrs = lab::DeviceBuffer(host.size() * sizeof(float*));
  CUDA_CHECK(cudaMemcpy(plan->ptrs.get(), host.data(), plan->ptrs.bytes(), cudaMemcpyHostToDevice));
  return plan;
}

void launch_cublas(const CublasPlan& plan, const lab::Problem& pr, float* p, float* lse, const float* s,
                   const Shape& sh, bool subtract_max, cudaStream_t stream) {
  const float** ptr = plan.ptrs.as<const float*>();
  const int n = plan.batch;
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(cublasSetStream(plan.handle, stream));
  CUBLAS_CHECK(cublasSgemmBatched(plan.handle, CUBLAS_OP_T, CUBLAS_OP_N, pr.t_kv, pr.t_q, pr.d, &sh.scale,
                                  ptr + 1 * n, pr.h_kv * pr.d, ptr + 0 * n, pr.h * pr.d, &zero,
                                  const_cast<float**>(ptr + 3 * n), pr.t_kv, n));
  // The GEMM cannot mask: the softmax applies the causal/window mask from the indices.
  softmax_kernel<<<unsigned(int64_t(n) * sh.t_q), SOFTMAX_THREADS, 0, stream>>>(s, p, lse, sh, subtract_max);
  CUDA_CHECK_LAST();
  CUBLAS_CHECK(cublasSgemmBatched(plan.handle, CUBLAS_OP_N, CUBLAS_OP_N, pr.d, pr.t_q, pr.t_kv, &one,
                                  ptr + 2 * n, pr.h_kv * pr.d, ptr + 4 * n, pr.t_kv, &zero,
                                  const_cast<float**>(ptr + 5 * n), pr.h * pr.d, n));
}

int64_t score_bytes(const lab::Problem& p) { return 2 * p.score_elems() * int64_t(sizeof(float)); }  // S and P
// S written, S read, P written, P read: 16 bytes of HBM traffic per score on top of the fused
// minimum (the softmax's second and third reads of S are not counted).
int64_t naive_hbm_bytes(const lab::Problem& p) { return lab::fused_hbm_bytes(p) + 2 * score_bytes(p); }

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Shape sh{pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.causal, pr.window, pr.softmax_scale()};
  auto scores = std::make_shared<lab::DeviceBuffer>(size_t(score_bytes(pr)));
  scores->poison();  // an unwritten P shows up as NaN in O instead of stale memory
  float* s = scores->as<float>();
  float* p = s + pr.score_elems();
  const auto* q = static_cast<const float*>(ctx.tensors.q);
  const auto* k = static_cast<const float*>(ctx.tensors.k);
  const auto* v = static_cast<const float*>(ctx.tensors.v);
  auto* o = static_cast<float*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  const bool subtract_max = ctx.bug != "no-max-subtract";

  lab::GpuRun run;
  run.extra_device_bytes = score_bytes(pr);
  run.hbm_bytes_model = naive_hbm_bytes(pr);
  run.metrics["score_matrix_bytes"] = score_bytes(pr) / 2;
  run.after_check_run = [](nlohmann::json&) { return softmax_row_probe(); };  // what the output cannot show
  if (ctx.variant == "cublas") {
    auto plan = make_cublas_plan(pr, q, k, v, s, p, o);
    run.forward = [=](cudaStream_t st) { launch_cublas(*plan, pr, p, lse, s, sh, subtract_max, st); (void)scores; };
  } else {
    const int bh = pr.b * pr.h;
    run.forward = [=](cudaStream_t st) {
      if (pr.d == 64) launch_kernels<64>(q, k, v, s, p, o, lse, sh, bh, subtract_max, st);
      else launch_kernels<128>(q, k, v, s, p, o, lse, sh, bh, subtract_max, st);
      (void)scores;  // keeps the workspace alive as long as the forward
    };
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// True when every row of P that sees a key sums to `total` (rows that see none are skipped).
bool every_row_sums_to(const std::vector<float>& p, const lab::Problem& pr, float total) {
  bool any = false;
  for (int64_t row = 0; row < int64_t(pr.b) * pr.h * pr.t_q; ++row) {
    if (lab::visible_keys(int(row % pr.t_q), pr.t_q, pr.t_kv, pr.causal, pr.window).empty()) continue;
    double sum = 0;
    for (int j = 0; j < pr.t_kv; ++j) sum += p[size_t(row) * pr.t_kv + j];
    if (!(std::fabs(sum - total) <= 1e-3 * total)) return false;
    any = true;
  }
  return any;
}

// CPU model: the same three steps in plain C++ (float, like the kernels): S for every row, then
// the softmax by the kernel's own softmax_row, run by a team of CPU_TEAM threads row after row,
// then O. S and P are materialised exactly as on the GPU, so the memory it reports is the lesson.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  const bool subtract_max = opt.bug != "no-max-subtract";
  const float scale = pr.softmax_scale();
  const int64_t rows = int64_t(pr.b) * pr.h * pr.t_q;  // row = (b·H + h)·T_q + i, as S is laid out
  const std::string past_the_end = softmax_row_probe();
  // P starts as NaN, as the GPU's workspace does: a softmax that leaves it unwritten shows in O.
  // One row more of each, NaN: a loop past the last row's end (the probe names it) stays inside.
  std::vector<float> s(size_t(pr.score_elems() + pr.t_kv), std::nanf("")), p(s.size(), std::nanf(""));
  lab::parallel_for(rows, [&](int64_t row) {  // step 1: S
    const int i = int(row % pr.t_q), h = int(row / pr.t_q) % pr.h, b = int(row / pr.t_q) / pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const float* qr = &in.q[size_t(pr.q_index(b, i, h))];
    for (int j = 0; j < pr.t_kv; ++j) {
      const float* kr = &in.k[size_t(pr.kv_index(b, j, hk))];
      float dot = 0.f;
      for (int c = 0; c < pr.d; ++c) dot += qr[c] * kr[c];
      s[size_t(row) * pr.t_kv + j] = lab::key_visible(i, j, pr.t_q, pr.t_kv, pr.causal, pr.window) ? dot * scale : -INFINITY;
    }
  });
  float partials[CPU_TEAM];
  lab::Barrier barrier(CPU_TEAM);
  std::atomic<bool> hung{false};
  lab::run_team(CPU_TEAM, [&](int member) {  // step 2: P, the kernel's code
    const CpuTeam team{member, partials, &barrier, &hung, !subtract_max};
    for (int64_t row = 0; row < rows && !hung; ++row) {
      const lab::KeyRange keys = lab::visible_keys(int(row % pr.t_q), pr.t_q, pr.t_kv, pr.causal, pr.window);
      softmax_row(team, &s[size_t(row) * pr.t_kv], &p[size_t(row) * pr.t_kv], &lse[size_t(row)], keys, pr.t_kv);
    }
  });
  lab::parallel_for(rows, [&](int64_t row) {  // step 3: O
    const int i = int(row % pr.t_q), h = int(row / pr.t_q) % pr.h, b = int(row / pr.t_q) / pr.h;
    const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
    const float* p_row = &p[size_t(row) * pr.t_kv];
    float* orow = &o[size_t(pr.q_index(b, i, h))];
    for (int c = 0; c < pr.d; ++c) orow[c] = 0.f;
    for (int j = 0; j < pr.t_kv; ++j) {
      const float* vr = &in.v[size_t(pr.kv_index(b, j, hk))];
      for (int c = 0; c < pr.d; ++c) orow[c] += p_row[j] * vr[c];
    }
  });
  lab::CpuRun run;
  if (hung)
    run.failure = "the softmax's team stopped at a team.max() or team.sum() that not every member called: every "
                  "member must call each reduction, the same number of times (on a GPU the block would hang)";
  else if (!past_the_end.empty())
    run.failure = past_the_end;
  else if (every_row_sums_to(p, pr, 1.f / CPU_TEAM))
    run.failure = "every row of P sums to 1/" + std::to_string(CPU_TEAM) + " with a team of " +
                  std::to_string(CPU_TEAM) + ": each member summed the whole row, so team.sum() counted every key " +
                  std::to_string(CPU_TEAM) + " times (a member takes keys keys.begin + team.rank(), step team.size())";
  run.extra_host_bytes = score_bytes(pr);
  run.hbm_bytes_model = naive_hbm_bytes(pr);
  return run;
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "01_naive";
  s.title = "naive attention: S and P materialised in HBM (§12.1)";
  s.variants = {"kernels", "cublas"};
  s.bugs = {"no-max-subtract"};
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 1024;
  s.workspace_bytes = [](const lab::Problem& p, const std::string&) { return score_bytes(p); };
  s.workspace_what = "S and P";
  s.validate = [](const lab::Problem& p, const lab::Options&) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid dimension per head)";
    if (lab::ceil_div(p.t_q, TILE) > 65535) return "T_q must be <= " + std::to_string(65535 * TILE) + " for the naive kernels";
    return "";
  };
  s.supports_window = true;
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
