// 02 FlashAttention-1 loop order (§12.2–12.3, exercise 1): tile-wise online softmax, any T.
//
// What it adds over 01: S and P never reach HBM. Q is cut into tiles of Br = 64 rows and K/V into
// tiles of Bc = 64 keys; a 64 x 64 tile of S lives on chip only while it is used, and each query
// row keeps a running softmax state instead: its maximum m, its sum l = Σ exp(s - m) and its
// output O. When a new K/V tile raises the maximum from m_old to m_new, everything accumulated so
// far was relative to m_old and is corrected by exp(m_old - m_new) — the online rescale (§12.2):
//     m_new = max(m_old, rowmax(S_ij))              p = exp(S_ij - m_new)
//     l_new = exp(m_old - m_new) · l_old + rowsum(p)
//     O_new = (exp(m_old - m_new) · l_old · O_old + p V_j) / l_new
// Memory drops from O(T²) to O(T·D), and the result is exact (not an approximation).
//
// The loop order is FlashAttention-1's (Dao et al. 2022, Algorithm 1): K/V tiles OUTSIDE, Q tiles
// inside. K_j, V_j are loaded once; every Q tile then visits them, so the running O, m and l of
// every Q tile must wait in HBM between two K/V steps: read, update, written back, at every step.
// Like Algorithm 1, O is stored normalised (divided by l_new) at every step. That round trip —
// O(T·D) bytes per K/V tile — is what FlashAttention-2 removes (section 03).
//
// How it maps to CUDA here:
//   init_state_kernel       O = 0, m = -inf, l = 0 in the HBM workspace  (Algorithm 1, line 2)
//   for kv_tile (host loop) one launch of v1_step_kernel per K/V tile   (the OUTER loop, line 5)
//     grid = (Q tiles, B·H)  the INNER loop over Q tiles (line 7): its iterations are independent,
//                            so they run as parallel blocks. The launch boundary is the barrier
//                            that orders step j's writes of O/m/l before step j+1's reads.
//   finalize_kernel         O and LSE = m + log(l) to the outputs
// Honest note: the original FA1 CUDA code ran the whole of Algorithm 1 inside one thread block per
// (batch, head) — B·H blocks, so B·H = 32 keeps 32 of an H200's 132 SMs busy. Launching once per
// K/V tile gives every Q tile its own block instead; the HBM traffic of the state is the same.
// Inside a block, one thread owns one query row (as in §12.3's teaching kernel): 64 threads, the
// Q/K/V tiles in shared memory, the thread's row of S (64 scores) in registers. Every FMA of
// S = Q Kᵀ reads both operands from shared memory and every FMA of P V one, so this kernel is
// bound by shared-memory bandwidth and latency, not arithmetic: 03 register-tiles both products
// (and keeps Q and the state on chip). Measured numbers: scripts/lab bench 02.
// Causal masks use GLOBAL indices (query q0 + r, key kv0 + c; bottom-right aligned when
// T_q != T_kv, see attention_math.h); a (Q tile, K/V tile) pair no row of which sees a key is
// skipped whole. A row that sees no key at all (T_q > T_kv, causal) gets O = 0 and LSE = -inf.
//
// Bugs (--bug, the self-check must catch them):
//   no-rescale     forgets exp(m_old - m_new) on O and l: wrong as soon as a later tile raises a
//                  row's maximum, which happens for some row at almost any T > 64
//   local-causal   tests the causal mask with tile-local indices (r, c) instead of (q0 + r, kv0 + c):
//                  every tile then looks like a diagonal tile; wrong with --causal and T > 64
// Exercises (ch12/02_v1_tile.md), shared by the kernel and the CPU model: the guards of the
// ragged last tiles, any T (EXERCISE ragged, the chapter's exercise 1), and the online rescale
// of one row's state by one K/V tile (EXERCISE online-rescale).
// Run: scripts/lab run 02 -- --t 1000 --causal          (your stub)
//      build/bin/02_v1_tile --t 4096 --causal --h 32     (the solution)
//      build/bin/02_v1_tile --cpu --t 65 --bug no-rescale (the CPU model, with a pitfall)
#include "lab.cuh"

constexpr int BLOCK_Q = 64;    // Br: query rows per Q tile
constexpr int BLOCK_KV = 64;   // Bc: keys per K/V tile
constexpr int THREADS = BLOCK_Q;  // one thread per query row (§12.3)
static_assert(THREADS % 32 == 0, "whole warps");
static_assert(BLOCK_KV % 4 == 0, "K/V tiles are loaded as float4");

enum Bug : int { kNoBug = 0, kNoRescale = 1, kLocalCausal = 2 };

struct Shape {  // what the kernels need of a lab::Problem
  int t_q, t_kv, h, h_kv;
  bool causal;
  float scale;
};

// Shared memory of one step: the Q tile, the K/V tile. Q rows are padded by one float: thread r
// reads q[r][c] while its neighbours read q[r+1][c], ... — with the padding those fall in 32
// different banks. Every thread reads the same k[j][c] and v[j][c] (a broadcast), no padding.
// 48.25 KiB at D = 64, 96.25 KiB at D = 128: more than the 48 KiB a kernel gets without asking (setup_gpu
// opts in with cudaFuncSetAttribute).
template <int HEAD_DIM>
struct StepSmem {
  float q[BLOCK_Q][HEAD_DIM + 1];
  float k[BLOCK_KV][HEAD_DIM];
  float v[BLOCK_KV][HEAD_DIM];
};

// ---------------------------------------------------------------------------------------------
// Algorithm 1, line 2: the running state starts as "no key seen": O = 0, m = -inf, l = 0.
__global__ void init_state_kernel(float* __restrict__ o_run,  // [B·H, T_q, D]
                                  float* __restrict__ m_run,  // [B·H, T_q]
                                  float* __restrict__ l_run,  // [B·H, T_q]
                                  int64_t o_elems, int64_t rows) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < o_elems; n += stride) o_run[n] = 0.f;
  for (int64_t n = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; n < rows; n += stride) {
    m_run[n] = -INFINITY;
    l_run[n] = 0.f;
  }
}

// ---------------------------------------------------------------------------------------------
// The exercises, and the pieces of a step built on them. Every function here is
// __host__ __device__: the kernel calls them per thread, and the CPU model calls the very same
// ones per row, so what `--cpu` checks is the code the kernel runs.

// BEGIN EXERCISE ragged: the edges of a problem whose T is not a multiple of the tile size.
//   T_q and T_kv are arbitrary: the last Q tile and the last K/V tile are ragged (fewer than
//   BLOCK_Q / BLOCK_KV rows exist). Three small functions, each the guard of one edge:
//   rows_in_tile  how many rows of tile `tile` (of `tile_size` rows) exist in a sequence of t;
//   tile_load     one float4 of row r of a tile (columns c..c+3; c is a multiple of 4 and
//                 every row starts 16-byte aligned, so it is one float4 load): the row from
//                 memory if it exists, zeros if not (a missing row must not be read, and must
//                 not leave garbage in shared memory: garbage can be NaN, and P·V computes
//                 0·NaN = NaN);
//   score_kept    whether query i may attend key j, in GLOBAL indices: j must exist (a padded
//                 key of the last tile is not a key) and, with sh.causal, pass the
//                 bottom-right aligned causal test of attention_math.h.
//   The code shape of each is in ch12/hints/02_v1_tile.md.
// STUB: LAB_HD int rows_in_tile(int tile, int tile_size, int t) {
// STUB:   (void)tile; (void)tile_size; (void)t;
// STUB:   return 0;
// STUB: }
// STUB: LAB_HD float4 tile_load(const float* tile_row0, int64_t row_stride, int r, int c, int rows_valid) {
// STUB:   (void)tile_row0; (void)row_stride; (void)r; (void)c; (void)rows_valid;
// STUB:   return make_float4(0.f, 0.f, 0.f, 0.f);
// STUB: }
// STUB: LAB_HD bool score_kept(int i, int j, const Shape& sh) {
// STUB:   (void)i; (void)j; (void)sh;
// STUB:   return false;
// STUB: }
LAB_HD int rows_in_tile(int tile, int tile_size, int t) { return lab::imin(tile_size, t - tile * tile_size); }

LAB_HD float4 tile_load(const float* tile_row0, int64_t row_stride, int r, int c, int rows_valid) {
  if (r >= rows_valid) return make_float4(0.f, 0.f, 0.f, 0.f);
  return *reinterpret_cast<const float4*>(tile_row0 + r * row_stride + c);
}

LAB_HD bool score_kept(int i, int j, const Shape& sh) {
  return j < sh.t_kv && lab::key_visible(i, j, sh.t_q, sh.t_kv, sh.causal, 0);
}
// END EXERCISE

// BEGIN EXERCISE online-rescale: fold one K/V tile's scores into one query row's running state.
//   s[0..BLOCK_KV): the row's scores against this tile (already scaled; dropped ones -INFINITY).
//   v_tile: the tile's V rows (zeros past T_kv). The state: m (running max), l (running sum of
//   exp(s - m)), o_row[0..HEAD_DIM) (O so far, normalised by l, as FA1's Algorithm 1 keeps it).
//   If the tile raises the row's max from m_old to m_new, everything summed so far was relative
//   to m_old: it must be rescaled by exp(m_old - m_new) before this tile's terms are added.
//   A tile in which the row sees no key leaves the state unchanged (and must not compute
//   exp(-inf - -inf) = NaN). The formulas are in the header above; the shape of the code in
//   ch12/hints/02_v1_tile.md.
// STUB: template <int HEAD_DIM>
// STUB: LAB_HD void online_update(float (&s)[BLOCK_KV], const float (*v_tile)[HEAD_DIM], float* o_row, float& m, float& l) {
// STUB:   (void)s; (void)v_tile; (void)o_row; (void)m; (void)l;
// STUB: }
template <int HEAD_DIM>
LAB_HD void online_update(float (&s)[BLOCK_KV], const float (*v_tile)[HEAD_DIM], float* o_row, float& m, float& l) {
  float m_tile = -INFINITY;
#pragma unroll
  for (int c = 0; c < BLOCK_KV; ++c) m_tile = fmaxf(m_tile, s[c]);
  if (m_tile == -INFINITY) return;  // no key of this tile: the state is unchanged

  const float m_new = fmaxf(m, m_tile);
  const float alpha = expf(m - m_new);  // the online rescale: 0 on the row's first keys
  float l_tile = 0.f;
#pragma unroll
  for (int c = 0; c < BLOCK_KV; ++c) {
    s[c] = expf(s[c] - m_new);  // P_ij, unnormalised
    l_tile += s[c];
  }
  const float l_new = alpha * l + l_tile;
  // O_new = (alpha·l_old·O_old + P_ij V_j) / l_new, one column at a time.
  const float keep = alpha * l / l_new, add = 1.f / l_new;
  for (int d = 0; d < HEAD_DIM; ++d) {
    float pv = 0.f;
#pragma unroll
    for (int c = 0; c < BLOCK_KV; ++c) pv += s[c] * v_tile[c][d];
    o_row[d] = o_row[d] * keep + pv * add;
  }
  m = m_new;
  l = l_new;
}
// END EXERCISE

// Q_i, K_j, V_j -> the step's tiles, float4 by float4; member `rank` of a team of `size` copies
// every size-th float4 (the kernel: the block's threads; the CPU model: one).
template <int HEAD_DIM>
LAB_HD void load_step_tiles(StepSmem<HEAD_DIM>& sm, const float* q_row0, int64_t q_stride, int q_rows,
                            const float* k_row0, const float* v_row0, int64_t kv_stride, int kv_rows,
                            int rank, int size) {
  constexpr int C4 = HEAD_DIM / 4;  // float4 per row
  for (int idx = rank; idx < BLOCK_Q * C4; idx += size) {
    const int r = idx / C4, c = (idx % C4) * 4;
    const float4 x = tile_load(q_row0, q_stride, r, c, q_rows);
    sm.q[r][c] = x.x; sm.q[r][c + 1] = x.y; sm.q[r][c + 2] = x.z; sm.q[r][c + 3] = x.w;
  }
  for (int idx = rank; idx < BLOCK_KV * C4; idx += size) {
    const int r = idx / C4, c = (idx % C4) * 4;
    *reinterpret_cast<float4*>(&sm.k[r][c]) = tile_load(k_row0, kv_stride, r, c, kv_rows);
    *reinterpret_cast<float4*>(&sm.v[r][c]) = tile_load(v_row0, kv_stride, r, c, kv_rows);
  }
}

// One query row's share of a step: its scores against the K/V tile, then the online update.
// Both pitfalls are injected here, outside the exercises, so they run on any filled-in stub:
//   local-causal  asks score_kept with the tile-local (r, c) instead of the global (q0 + r, kv0 + c);
//   no-rescale    raises m to the tile's max BEFORE the update: the update then sees no change
//                 of max (alpha = 1) while its p = exp(s - m_new), which is exactly the code that
//                 forgets the rescale.
template <int HEAD_DIM>
LAB_HD void step_row(const StepSmem<HEAD_DIM>& sm, int r, int q0, int kv0, const Shape& sh, int bug,
                     float* o_row, float& m, float& l) {
  float s[BLOCK_KV];  // S_ij, this row, in registers
  float m_tile = -INFINITY;
#pragma unroll
  for (int c = 0; c < BLOCK_KV; ++c) {
    float dot = 0.f;
#pragma unroll 16
    for (int d = 0; d < HEAD_DIM; ++d) dot += sm.q[r][d] * sm.k[c][d];
    const bool kept = bug == kLocalCausal ? score_kept(r, c, sh) : score_kept(q0 + r, kv0 + c, sh);
    s[c] = kept ? dot * sh.scale : -INFINITY;
    m_tile = fmaxf(m_tile, s[c]);
  }
  if (bug == kNoRescale) m = fmaxf(m, m_tile);
  online_update<HEAD_DIM>(s, sm.v, o_row, m, l);
}

// ---------------------------------------------------------------------------------------------
// One step of the outer loop: K/V tile `kv_tile` meets Q tile blockIdx.x of head blockIdx.y.
// Reads the tile's running O, m, l from HBM, folds in S_ij = Q_i K_jᵀ · scale, writes them back.
template <int HEAD_DIM>
__global__ void __launch_bounds__(THREADS)
v1_step_kernel(const float* __restrict__ q,   // [B, T_q, H, D]
               const float* __restrict__ k,   // [B, T_kv, H_kv, D]
               const float* __restrict__ v,   // [B, T_kv, H_kv, D]
               float* __restrict__ o_run,     // [B·H, T_q, D]  running O (normalised), fp32
               float* __restrict__ m_run,     // [B·H, T_q]     running row max
               float* __restrict__ l_run,     // [B·H, T_q]     running row sum, relative to m
               Shape sh, int kv_tile, int bug) {
  extern __shared__ float4 smem_raw[];
  StepSmem<HEAD_DIM>& sm = *reinterpret_cast<StepSmem<HEAD_DIM>*>(smem_raw);
  const int q_tile = blockIdx.x, bh = blockIdx.y, b = bh / sh.h, head = bh % sh.h;
  const int kv_head = lab::kv_head_of(head, sh.h, sh.h_kv);
  const int q0 = q_tile * BLOCK_Q, q_rows = rows_in_tile(q_tile, BLOCK_Q, sh.t_q);
  const int kv0 = kv_tile * BLOCK_KV, kv_rows = rows_in_tile(kv_tile, BLOCK_KV, sh.t_kv);

  // Tile skip: if no row of this Q tile sees a key of this K/V tile, the state does not change.
  // (The whole block returns together, before any barrier.)
  if (q_rows <= 0 || kv_rows <= 0) return;
  const lab::KeyRange seen = lab::visible_keys_of_rows(q0, q0 + q_rows, sh.t_q, sh.t_kv, sh.causal);
  if (kv0 + kv_rows <= seen.begin || kv0 >= seen.end) return;

  const int64_t q_stride = int64_t(sh.h) * HEAD_DIM, kv_stride = int64_t(sh.h_kv) * HEAD_DIM;  // row to row
  const int64_t kv_at = ((int64_t(b) * sh.t_kv + kv0) * sh.h_kv + kv_head) * HEAD_DIM;
  load_step_tiles<HEAD_DIM>(sm, q + ((int64_t(b) * sh.t_q + q0) * sh.h + head) * HEAD_DIM, q_stride, q_rows,
                            k + kv_at, v + kv_at, kv_stride, kv_rows, int(threadIdx.x), THREADS);
  __syncthreads();  // the three tiles are complete before any thread reads them

  const int r = threadIdx.x;  // this thread's query row (tile-local; global q0 + r)
  if (r >= q_rows) return;    // past T_q (ragged last Q tile); no barrier follows

  // The state is in HBM: read, update, written back at every K/V step.
  const int64_t row = int64_t(bh) * sh.t_q + q0 + r;  // index of this row's state (and of its LSE)
  float m = m_run[row], l = l_run[row];
  step_row<HEAD_DIM>(sm, r, q0, kv0, sh, bug, o_run + row * HEAD_DIM, m, l);
  m_run[row] = m;
  l_run[row] = l;
}

// ---------------------------------------------------------------------------------------------
// After the last K/V step: the state becomes the outputs. O is already normalised (FA1 divides
// by l at every step); LSE = m + log(l), the statistic a backward pass (or a merge) needs.
__global__ void finalize_kernel(const float* __restrict__ o_run,  // [B·H, T_q, D]
                                const float* __restrict__ m_run,  // [B·H, T_q]
                                const float* __restrict__ l_run,  // [B·H, T_q]
                                float* __restrict__ o,            // [B, T_q, H, D]
                                float* __restrict__ lse,          // [B, H, T_q]
                                int b_count, Shape sh, int head_dim) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t rows = int64_t(b_count) * sh.h * sh.t_q;
  for (int64_t n = first; n < rows * head_dim; n += stride) {  // n walks O in its own layout
    const int d = int(n % head_dim);
    const int64_t bti = n / head_dim;  // (b·T_q + i)·H + h
    const int h = int(bti % sh.h);
    const int64_t bt = bti / sh.h;
    const int i = int(bt % sh.t_q), b = int(bt / sh.t_q);
    const int64_t row = (int64_t(b) * sh.h + h) * sh.t_q + i;
    o[n] = l_run[row] > 0.f ? o_run[row * head_dim + d] : 0.f;
  }
  for (int64_t row = first; row < rows; row += stride)
    lse[row] = l_run[row] > 0.f ? m_run[row] + logf(l_run[row]) : -INFINITY;
}

// ---------------------------------------------------------------------------------------------
// online_update asked directly: a row that has seen no key yet (m = -inf, l = 0, O = 0) meets a
// tile in which it sees none either (with T_q > T_kv, causal, the first rows never see a key). The
// state must stay as it is; the output cannot show it, as finalize writes O = 0 for any row whose
// l is not > 0, NaN included. Asked on the host by the CPU model and after a GPU run: the same
// source the kernel compiles.
template <int HEAD_DIM>
std::string online_update_probe() {
  float s[BLOCK_KV];
  std::fill(s, s + BLOCK_KV, -INFINITY);
  const std::vector<float> v(size_t(BLOCK_KV) * HEAD_DIM, 1.f);  // [BLOCK_KV, HEAD_DIM]
  std::vector<float> o_row(HEAD_DIM, 0.f);
  float m = -INFINITY, l = 0.f;
  online_update<HEAD_DIM>(s, reinterpret_cast<const float(*)[HEAD_DIM]>(v.data()), o_row.data(), m, l);
  const auto moved = std::find_if(o_row.begin(), o_row.end(), [](float x) { return x != 0.f; });  // NaN too
  if (m == -INFINITY && l == 0.f && moved == o_row.end()) return "";
  const size_t at = moved == o_row.end() ? 0 : size_t(moved - o_row.begin());
  return "online_update(scores all -inf, m=-inf, l=0, O=0) left m=" + lab::format_number("%g", m) + ", l=" +
         lab::format_number("%g", l) + ", O[" + std::to_string(at) + "]=" + lab::format_number("%g", o_row[at]) +
         ": a tile in which the row sees no key must leave the state unchanged (exp(-inf - -inf) is NaN)";
}

// The ragged exercise's three guards asked directly, at the edges a case's output may not reach
// (or reaches only by a crash: a tile that claims more rows than it has overruns shared memory).
// The first wrong answer, or "".
std::string ragged_probe() {
  const int sizes[][3] = {{0, 64, 1000}, {1, 64, 65}, {0, 64, 1}};  // (tile, tile_size, t)
  for (const auto& a : sizes) {
    const int got = rows_in_tile(a[0], a[1], a[2]), most = std::min(a[1], a[2] - a[0] * a[1]);
    if (got > most)
      return "rows_in_tile(tile=" + std::to_string(a[0]) + ", tile_size=" + std::to_string(a[1]) + ", t=" +
             std::to_string(a[2]) + ") = " + std::to_string(got) + ", want " + std::to_string(most) +
             ": a tile has at most tile_size rows, and none past t";
  }
  const float two_rows[2][4] = {{1.f, 2.f, 3.f, 4.f}, {NAN, NAN, NAN, NAN}};
  const float4 past = tile_load(&two_rows[0][0], 4, 1, 0, 1);
  if (!(past.x == 0.f && past.y == 0.f && past.z == 0.f && past.w == 0.f))
    return "tile_load(tile_row0, row_stride, r=1, c=0, rows_valid=1) = (" + lab::format_number("%g", past.x) +
           ", ...), want zeros: row 1 of a tile with 1 valid row is past its end and must not be read";
  if (score_kept(0, 1, Shape{1, 1, 1, 1, false, 1.f}))
    return "score_kept(i=0, j=1, T_q=1, T_kv=1, not causal) = true, want false: key 1 is a padded key of the "
           "last tile (j >= T_kv), not a key";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Workspace, tile counts and the traffic model (also used by the CPU model).
int64_t state_bytes(const lab::Problem& p) {  // O (fp32) + m + l
  return (p.q_elems() + 2 * p.lse_elems()) * int64_t(sizeof(float));
}

struct TileCounts {
  int64_t visited = 0, total = 0;  // (Q tile, K/V tile) pairs, per head, times B·H
  int64_t visited_rows = 0;        // Σ over visited pairs of the Q tile's rows (for the traffic model)
};

TileCounts count_tiles(const lab::Problem& p) {
  TileCounts t;
  const int nq = lab::ceil_div(p.t_q, BLOCK_Q), nkv = lab::ceil_div(p.t_kv, BLOCK_KV);
  for (int qt = 0; qt < nq; ++qt) {
    const int q0 = qt * BLOCK_Q, rows = rows_in_tile(qt, BLOCK_Q, p.t_q);
    if (rows <= 0) continue;
    const lab::KeyRange seen = lab::visible_keys_of_rows(q0, q0 + rows, p.t_q, p.t_kv, p.causal);
    for (int kt = 0; kt < nkv; ++kt) {
      const int kv0 = kt * BLOCK_KV, kv_end = kv0 + rows_in_tile(kt, BLOCK_KV, p.t_kv);
      const bool visit = kv_end > seen.begin && kv0 < seen.end;
      t.visited += visit;
      t.visited_rows += visit ? rows : 0;
    }
  }
  const int64_t heads = int64_t(p.b) * p.h;
  t.visited *= heads;
  t.visited_rows *= heads;
  t.total = int64_t(nq) * nkv * heads;
  return t;
}

// HBM bytes of this loop order: K and V read once (each K/V tile is loaded by every Q tile of its
// head in the same launch, so after the first it comes from L2); per visited pair the Q tile is
// read and the tile's O, m, l are read and written back; plus the init and the finalize passes.
int64_t v1_hbm_bytes(const lab::Problem& p, const TileCounts& t) {
  const int64_t f = sizeof(float);
  const int64_t per_row = p.d + 2 * p.d + 4;  // Q row, O row read + written, m and l read + written
  return 2 * p.kv_elems() * f + t.visited_rows * per_row * f +
         state_bytes(p) /* init */ + state_bytes(p) /* finalize reads */ + p.q_elems() * f + p.lse_elems() * f;
}

// ---------------------------------------------------------------------------------------------
// Launcher.
template <int HEAD_DIM>
void launch_v1(const float* q, const float* k, const float* v, float* o, float* lse, float* o_run, float* m_run,
               float* l_run, const lab::Problem& pr, const Shape& sh, int bug, cudaStream_t stream) {
  const int64_t rows = pr.lse_elems();
  constexpr int kStrideBlocks = 1024;  // the grid-stride kernels: enough blocks to fill the GPU
  init_state_kernel<<<kStrideBlocks, 256, 0, stream>>>(o_run, m_run, l_run, pr.q_elems(), rows);
  CUDA_CHECK_LAST();
  const dim3 grid(lab::ceil_div(pr.t_q, BLOCK_Q), pr.b * pr.h);
  for (int kv_tile = 0; kv_tile < lab::ceil_div(pr.t_kv, BLOCK_KV); ++kv_tile) {  // the OUTER loop
    v1_step_kernel<HEAD_DIM><<<grid, THREADS, sizeof(StepSmem<HEAD_DIM>), stream>>>(q, k, v, o_run, m_run, l_run, sh,
                                                                                  kv_tile, bug);
    CUDA_CHECK_LAST();
  }
  finalize_kernel<<<kStrideBlocks, 256, 0, stream>>>(o_run, m_run, l_run, o, lse, pr.b, sh, HEAD_DIM);
  CUDA_CHECK_LAST();
}

int bug_code(const std::string& bug) {
  return bug == "no-rescale" ? kNoRescale : bug == "local-causal" ? kLocalCausal : kNoBug;
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  const Shape sh{pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.causal, pr.softmax_scale()};
  // The step kernel's tiles need more than the default 48 KiB of shared memory per block
  // (StepSmem: 48.25 KiB at D = 64, 96.25 KiB at D = 128); a kernel must opt in to more, once.
  if (pr.d == 64)
    lab::opt_in_shared_memory(v1_step_kernel<64>, int(sizeof(StepSmem<64>)));
  else
    lab::opt_in_shared_memory(v1_step_kernel<128>, int(sizeof(StepSmem<128>)));

  auto state = std::make_shared<lab::DeviceBuffer>(size_t(state_bytes(pr)));
  float* o_run = state->as<float>();
  float* m_run = o_run + pr.q_elems();
  float* l_run = m_run + pr.lse_elems();
  const auto* q = static_cast<const float*>(ctx.tensors.q);
  const auto* k = static_cast<const float*>(ctx.tensors.k);
  const auto* v = static_cast<const float*>(ctx.tensors.v);
  auto* o = static_cast<float*>(ctx.tensors.o);
  float* lse = ctx.tensors.lse;
  const int bug = bug_code(ctx.bug);

  const TileCounts tiles = count_tiles(pr);
  lab::GpuRun run;
  run.extra_device_bytes = state_bytes(pr);
  run.hbm_bytes_model = v1_hbm_bytes(pr, tiles);
  run.metrics["tiles_visited"] = tiles.visited;
  run.metrics["tiles_total"] = tiles.total;
  run.metrics["kernel_launches"] = lab::ceil_div(pr.t_kv, BLOCK_KV) + 2;
  run.metrics["block_q"] = BLOCK_Q;
  run.metrics["block_kv"] = BLOCK_KV;
  run.after_check_run = [d = pr.d](nlohmann::json&) {  // what the output cannot show (the probes)
    const std::string ragged = ragged_probe();
    if (!ragged.empty()) return ragged;
    return d == 64 ? online_update_probe<64>() : online_update_probe<128>();
  };
  run.forward = [=](cudaStream_t st) {
    if (pr.d == 64) launch_v1<64>(q, k, v, o, lse, o_run, m_run, l_run, pr, sh, bug, st);
    else launch_v1<128>(q, k, v, o, lse, o_run, m_run, l_run, pr, sh, bug, st);
    (void)state;  // keeps the workspace alive as long as the forward
  };
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: the kernel's loop order and the kernel's own per-row code (load_step_tiles,
// step_row and the exercises they call), K/V tiles outside, Q tiles inside, the O/m/l state in a
// workspace that every step reads and writes back, the same tile skip and the same --bug
// pitfalls. Inputs are copied with NaN rows after the end, so a missing guard reads NaN (as a GPU
// reads whatever lies past the end) instead of crashing; a tile that claims rows past T (or past
// its size) is reported, not read; and the ragged guards and online_update are asked directly
// about the edges the output hides (ragged_probe, online_update_probe).
template <int HEAD_DIM>
lab::CpuRun run_cpu_d(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                      std::vector<float>& o, std::vector<float>& lse) {
  const int bug = bug_code(opt.bug);
  const int nq = lab::ceil_div(pr.t_q, BLOCK_Q), nkv = lab::ceil_div(pr.t_kv, BLOCK_KV);
  const Shape sh{pr.t_q, pr.t_kv, pr.h, pr.h_kv, pr.causal, pr.softmax_scale()};
  auto padded = [&](const std::vector<float>& x, int heads) {
    std::vector<float> y(x.size() + size_t(std::max(BLOCK_Q, BLOCK_KV)) * heads * HEAD_DIM, std::nanf(""));
    std::copy(x.begin(), x.end(), y.begin());
    return y;
  };
  const std::vector<float> q = padded(in.q, pr.h), k = padded(in.k, pr.h_kv), v = padded(in.v, pr.h_kv);
  std::vector<float> o_run(size_t(pr.q_elems()), 0.f);          // [B·H, T_q, D]
  std::vector<float> m_run(size_t(pr.lse_elems()), -INFINITY);  // [B·H, T_q]
  std::vector<float> l_run(size_t(pr.lse_elems()), 0.f);        // [B·H, T_q]
  const int64_t q_stride = int64_t(pr.h) * HEAD_DIM, kv_stride = int64_t(pr.h_kv) * HEAD_DIM;
  std::string failure = ragged_probe();
  if (failure.empty()) failure = online_update_probe<HEAD_DIM>();
  for (int kv_tile = 0; kv_tile < nkv; ++kv_tile) {  // the OUTER loop: one K/V tile
    const int kv0 = kv_tile * BLOCK_KV, kv_rows = rows_in_tile(kv_tile, BLOCK_KV, pr.t_kv);
    if (kv_rows > pr.t_kv - kv0 && failure.empty())
      failure = "rows_in_tile(" + std::to_string(kv_tile) + ", " + std::to_string(BLOCK_KV) + ", T_kv=" +
                std::to_string(pr.t_kv) + ") = " + std::to_string(kv_rows) + ": rows past T_kv would be read";
    lab::parallel_for(int64_t(pr.b) * pr.h * nq, [&](int64_t blk) {  // the inner loop: every Q tile, a "block"
      const int q_tile = int(blk % nq), bh = int(blk / nq), b = bh / pr.h, h = bh % pr.h;
      const int hk = lab::kv_head_of(h, pr.h, pr.h_kv);
      const int q0 = q_tile * BLOCK_Q, q_rows = rows_in_tile(q_tile, BLOCK_Q, pr.t_q);
      if (q_rows <= 0 || kv_rows <= 0 || q_rows > std::min(BLOCK_Q, pr.t_q - q0) ||
          kv_rows > std::min(BLOCK_KV, pr.t_kv - kv0))
        return;  // (a tile that claims more rows than it has: reported, not read past its end)
      const lab::KeyRange seen = lab::visible_keys_of_rows(q0, q0 + q_rows, pr.t_q, pr.t_kv, pr.causal);
      if (kv0 + kv_rows <= seen.begin || kv0 >= seen.end) return;  // tile skip
      auto sm = std::make_unique<StepSmem<HEAD_DIM>>();
      const size_t kv_at = size_t(pr.kv_index(b, kv0, hk));
      load_step_tiles<HEAD_DIM>(*sm, &q[size_t(pr.q_index(b, q0, h))], q_stride, q_rows, &k[kv_at], &v[kv_at],
                                kv_stride, kv_rows, 0, 1);
      for (int r = 0; r < q_rows; ++r) {  // the block's threads, one after the other
        const size_t row = size_t(bh) * pr.t_q + q0 + r;
        step_row<HEAD_DIM>(*sm, r, q0, kv0, sh, bug, &o_run[row * HEAD_DIM], m_run[row], l_run[row]);
      }
    });
  }
  if (failure.empty())
    for (int q_tile = 0; q_tile < nq; ++q_tile) {
      const int q_rows = rows_in_tile(q_tile, BLOCK_Q, pr.t_q);
      if (q_rows > pr.t_q - q_tile * BLOCK_Q) {
        failure = "rows_in_tile(" + std::to_string(q_tile) + ", " + std::to_string(BLOCK_Q) + ", T_q=" +
                  std::to_string(pr.t_q) + ") = " + std::to_string(q_rows) + ": rows past T_q would be read";
        break;
      }
    }
  // Finalize (finalize_kernel's rule): O (already normalised) and LSE.
  lab::parallel_for(int64_t(pr.b) * pr.h * pr.t_q, [&](int64_t row) {
    const int i = int(row % pr.t_q), bh = int(row / pr.t_q), b = bh / pr.h, h = bh % pr.h;
    const bool seen = l_run[size_t(row)] > 0.f;
    float* orow = &o[size_t(pr.q_index(b, i, h))];
    for (int x = 0; x < HEAD_DIM; ++x) orow[x] = seen ? o_run[size_t(row) * HEAD_DIM + x] : 0.f;
    lse[size_t(row)] = seen ? m_run[size_t(row)] + std::log(l_run[size_t(row)]) : -INFINITY;
  });
  const TileCounts tiles = count_tiles(pr);
  lab::CpuRun run;
  run.extra_host_bytes = state_bytes(pr);
  run.hbm_bytes_model = v1_hbm_bytes(pr, tiles);
  run.metrics["tiles_visited"] = tiles.visited;
  run.metrics["tiles_total"] = tiles.total;
  run.failure = failure;
  return run;
}

lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  return pr.d == 64 ? run_cpu_d<64>(pr, opt, in, o, lse) : run_cpu_d<128>(pr, opt, in, o, lse);
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "02_v1_tile";
  s.title = "FlashAttention-1 loop order: K/V tiles outer, O/m/l in HBM, online softmax (§12.2-12.3)";
  s.variants = {"v1"};
  s.bugs = {"no-rescale", "local-causal"};
  s.default_problem.b = 1;
  s.default_problem.h = 8;
  s.default_problem.t_q = s.default_problem.t_kv = 1024;
  s.workspace_bytes = [](const lab::Problem& p, const std::string&) { return state_bytes(p); };
  s.workspace_what = "running O, m, l";
  s.validate = [](const lab::Problem& p, const lab::Options&) -> std::string {
    if (int64_t(p.b) * p.h > 65535) return "B*H must be <= 65535 (one grid row per head)";
    return "";
  };
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
