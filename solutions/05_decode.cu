// 05 decode (§12.9.3): one new query token per sequence against its KV cache. Bandwidth-bound.
//
// What it does: at every decode step each sequence b has one new query row per head, Q [B, 1, H, D],
// and attends to the kv_len[b] keys already in its cache, K/V [B, T_max, H_kv, D] (the lengths differ
// within a batch). A query head costs 4·kv_len·D FLOPs (S = q Kᵀ, then P V); the K/V head it shares
// with the G - 1 other heads of its group is 4·kv_len·D bytes (K and V, fp16): G FLOPs per byte
// (4 at H = 32, H_kv = 8), where an H200 does ~185 16-bit Tensor-Core FLOPs per byte of HBM. So the
// whole game is reading K and V at the HBM roofline, and every byte of them only once:
//   - GQA: the G = H / H_kv query heads that share a K/V head are computed by ONE block from ONE
//     read of that head's K/V (the chapter's skeleton, one block per query head, reads it G times).
//     The G heads are the 16 rows of an mma.m16n8k16 (zero-padded), so S = Q Kᵀ and O = P V run on
//     Tensor Cores and the arithmetic hides under the loads.
//   - K/V stream through cp.async rings of 64-key tiles, 16 bytes per copy, XOR-swizzled shared
//     memory (conflict-free ldmatrix), keys past kv_len never read (zero-filled copies).
//   - A block is two sets of 4 warps; set s takes tiles s, s + 2, ... with its own 2-stage ring, and
//     inside a set each warp takes 16 keys of the tile, copies those keys itself (so a warp waits
//     for its own rows, never for the other warps, until the end) and keeps its own online-softmax
//     state; the block merges the 8 states at the end with the log-sum-exp rule. Two sets put two
//     warps on each scheduler: one warp's dependent chain per tile hides behind the other's work.
//     That is 64 KB of shared memory a block at D = 64, 128 KB at D = 128; a GPU that allows a
//     block less (99 KB: RTX 30/40, sm_120) runs the same kernel with one set (64 KB), slower
//     (decode.cuh: choose_config; --smem-limit 99 makes a larger GPU do the same).
// Variants:
//   single  one block per (sequence, K/V head): B·H_kv blocks. At B = 8, H_kv = 8 that is 64
//           blocks on a 132-SM GPU: half the SMs idle, and the bandwidth with them.
//   split   flash-decoding: the keys are also cut into splits, one block each, so B·H_kv·splits
//           blocks fill the GPU; each split writes its partial O (fp32, normalised) and its LSE,
//           and the merge combines them: LSE = log Σ exp(LSE_s), O = Σ exp(LSE_s - LSE)·O_s.
//           A split past the end of a short sequence sees no key (LSE_s = -inf) and weighs 0.
//           The merge is flash-decoding's second kernel folded into the first: the last split
//           block of a row group to finish (an atomic ticket, taken by one thread with
//           acquire-release semantics) merges the group's rows as an online softmax over the
//           splits (LseFold below), which saves a second launch and its ramp. The number of
//           splits comes from the shape, the SM count and each sequence's length (one wave of one
//           block per SM for the blocks with keys: lab::plan_splits); --splits N forces N.
// Any T_q works (each query row is its own block, causal bottom-right aligned to kv_len[b]), but
// only T_q = 1 is what this section is about.
// Exercises (ch12/05_decode.md; hints: ch12/hints/05_decode.md): the GQA mapping (EXERCISE gqa),
// a split's partial state (EXERCISE split-state) and the split merge (EXERCISE split-merge). The
// kernel and the CPU model (--cpu) call the same functions, so a no-GPU check runs your code.
// --bug gqa-index maps query head h to K/V head h % H_kv (given code, outside the exercises).
// Run: scripts/lab run 05 -- --t 1 --t-kv 4096 --h-kv 8               (the stub)
//      build/bin/05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full
#include "decode/decode.cuh"  // the decode kernel, its plan, launcher and CPU model, shared with 06

using namespace decode;

// ---------------------------------------------------------------------------------------------
// This section's lessons, which the shared kernel (common/decode/decode.cuh) and its CPU model
// call: the GQA mapping, a split's partial state and the merge of the splits, over a contiguous cache.
struct Decode05 {
  using Kv = ContiguousKv;

  // GQA: K/V head kv_head serves `group` = H / H_kv query heads. A block computes rows r = 0..group-1
  // of that group (16 at a time) from ONE read of that K/V head; this says which query head row r is.
  static LAB_HD int query_head_of(int kv_head, int r, int group) {
    // BEGIN EXERCISE gqa: the query head of row r of K/V head kv_head's group.
    //   The reference (lab::kv_head_of) gives each K/V head a contiguous run of `group` query
    //   heads. Which run belongs to kv_head, and which head of it is row r? (ch12/hints/05_decode.md)
    //   Until this returns a head >= 0, every block skips its work and writes nothing.
    // STUB: (void)kv_head; (void)r; (void)group;
    // STUB: return -1;
    return kv_head * group + r;
    // END EXERCISE
  }

  // A split's partial state: the online softmax of one query row over the split's keys, in the
  // log2 domain (scores are s·scale·log2(e), so exp(x) becomes exp2(x)). The state is m (the
  // largest score so far) and l (the sum of exp2(s - m) so far); the running O is kept
  // unnormalised beside it. online_step folds in a tile whose largest score is tile_max: it updates
  // m and l and returns in `alpha` the factor the running O must be multiplied by, and in `base`
  // the value to subtract from the tile's scores before exp2. split_lse turns the final state into
  // the split's natural-log LSE, which is what the merge needs.
  // BEGIN EXERCISE split-state: fold a tile into (m, l); a split's LSE (empty splits included).
  //   A split may have seen only masked keys so far (every score -inf): the state must stay empty
  //   and nothing may become NaN. Masked scores are -inf, so `base` must stay finite even then
  //   (exp2(-inf - base) must be 0). A split that saw no key must weigh nothing in the merge.
  //   online_step returns true (the stub returns false: its block stops and writes nothing).
  // STUB: static LAB_HD bool online_step(float tile_max, float& m, float& l, float& alpha, float& base) {
  // STUB:   (void)tile_max; (void)m; (void)l; (void)alpha; (void)base;
  // STUB:   return false;
  // STUB: }
  // STUB: static LAB_HD float split_lse(float m, float l) {
  // STUB:   (void)m; (void)l;
  // STUB:   return -INFINITY;
  // STUB: }
  static LAB_HD bool online_step(float tile_max, float& m, float& l, float& alpha, float& base) {
    const float m_new = fmaxf(m, tile_max);
    base = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: never -inf - -inf
    alpha = exp2f(m - base);
    l *= alpha;
    m = m_new;
    return true;
  }
  static LAB_HD float split_lse(float m, float l) { return l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY; }
  // END EXERCISE

  // The merge of partial states (a split's, or a warp's inside a block): each part s has its LSE_s
  // (natural log) and its normalised O_s; the union's LSE is log Σ_s exp(LSE_s) and its O is
  // Σ_s exp(LSE_s - LSE)·O_s. An empty part has LSE_s = -inf and must weigh exactly 0, even when
  // every part is empty (a row that sees no key): never -inf - -inf.
  //   merged_lse(lse, n, stride): the LSE of lse[0], lse[stride], ..., lse[(n-1)·stride].
  //   partial_weight(lse_part, lse_all): exp(lse_part - lse_all), the weight of O_part.
  //   LseFold: the same merge as an online softmax over groups of parts, for the last block of a
  //   row, which folds its splits in MERGE_GROUP at a time (their loads in flight together):
  //   fold(lse, n, w) folds in lse[0..n), sets w[s] (the weight of O_s in the running
  //   unnormalised O: exp(LSE_s - m), m the largest LSE so far) and returns the factor the running
  //   O must be multiplied by first; lse() and inv_l() give the merged LSE and the 1/l that
  //   normalises O at the end. The kernel default-constructs one LseFold per row: keep the running
  //   state (m, l) in members with initial values.
  // BEGIN EXERCISE split-merge: merge partial states (LSE, O) of the splits, empty splits included.
  //   Subtract the largest LSE first (as a softmax subtracts its max); take care of the case where
  //   every part seen so far is empty. Worked example with numbers: ch12/05_decode.md; formulas:
  //   ch12/hints/05_decode.md. A split LSE that comes out NaN (a merged_lse that forgets the
  //   all-empty case: -inf - -inf) weighs nothing in the merge and makes its row's LSE NaN: the
  //   check names those rows ("LSE is NaN on ... rows").
  // STUB: static LAB_HD float merged_lse(const float* lse, int n, int stride) {
  // STUB:   (void)lse; (void)n; (void)stride;
  // STUB:   return NAN;
  // STUB: }
  // STUB: static LAB_HD float partial_weight(float lse_part, float lse_all) {
  // STUB:   (void)lse_part; (void)lse_all;
  // STUB:   return 0.f;
  // STUB: }
  // STUB: struct LseFold {
  // STUB:   LAB_HD float fold(const float*, int n, float* w) { for (int s = 0; s < n; ++s) w[s] = 0.f; return 1.f; }
  // STUB:   LAB_HD float lse() const { return NAN; }
  // STUB:   LAB_HD float inv_l() const { return 0.f; }
  // STUB: };
  static LAB_HD float merged_lse(const float* lse, int n, int stride) {
    float hi = -INFINITY;
    for (int s = 0; s < n; ++s) hi = fmaxf(hi, lse[s * stride]);
    if (hi == -INFINITY) return -INFINITY;  // every part empty
    float sum = 0.f;
    for (int s = 0; s < n; ++s) sum += expf(lse[s * stride] - hi);
    return hi + logf(sum);
  }
  static LAB_HD float partial_weight(float lse_part, float lse_all) {
    return lse_part == -INFINITY ? 0.f : expf(lse_part - lse_all);
  }
  struct LseFold {
    float m = -INFINITY;  // the largest LSE folded in so far
    float l = 0.f;        // Σ exp(LSE_s - m) so far
    LAB_HD float fold(const float* lse, int n, float* w) {
      float m_new = m;
      for (int s = 0; s < n; ++s) m_new = fmaxf(m_new, lse[s]);
      const float base = m_new == -INFINITY ? 0.f : m_new;  // all empty so far: never -inf - -inf
      const float alpha = expf(m - base);
      l *= alpha;
      for (int s = 0; s < n; ++s) {
        w[s] = expf(lse[s] - base);
        l += w[s];
      }
      m = m_new;
      return alpha;
    }
    LAB_HD float lse() const { return l > 0.f ? m + logf(l) : -INFINITY; }
    LAB_HD float inv_l() const { return l > 0.f ? 1.f / l : 0.f; }
  };
  // END EXERCISE
};

#ifndef LAB_DECODE05_HOOKS_ONLY  // (06 and the unit tests include this file for the hooks above only)
lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  return make_gpu_run<Decode05>(ctx, ContiguousKv{ctx.tensors.k, ctx.tensors.v}, nullptr);
}

lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  auto row_of = [&pr](const std::vector<float>& x) {
    return [&pr, &x](int b, int j, int kv_head) -> const float* { return &x[size_t(pr.kv_index(b, j, kv_head))]; };
  };
  return run_cpu_model<Decode05>(pr, opt, in, o, lse, row_of(in.k), row_of(in.v));
}

int main(int argc, char** argv) {
  lab::Section s;
  s.name = "05_decode";
  s.title = "decode over a KV cache: GQA, split-KV (flash-decoding), bandwidth-bound (§12.9.3)";
  s.variants = {"single", "split"};
  s.bugs = {"gqa-index"};
  s.dtypes = {lab::DType::f16, lab::DType::bf16};
  s.supports_ragged_kv = true;
  s.has_splits = true;
  s.ragged_kv_default = true;
  s.default_problem.b = 8;
  s.default_problem.h = 32;
  s.default_problem.h_kv = 8;
  s.default_problem.t_q = 1;
  s.default_problem.t_kv = 4096;
  s.default_problem.d = 128;
  s.default_problem.dtype = lab::DType::f16;
  s.workspace_bytes = [](const lab::Problem& p, const std::string& variant) {
    return split_workspace_bytes(p, make_plan(p, variant, 256, 128));  // a bound: the plan of a 256-SM GPU
  };
  s.workspace_what = "partial O and LSE of the splits";
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (int64_t(p.b) * p.t_q * p.h > (int64_t(1) << 31) - 1) return "B*T_q*H must be < 2^31 (one grid dimension)";
    if (o.splits > 0 && o.variant != "split") return "--splits applies to --variant split (single never splits)";
    return "";
  };
  s.supports_window = true;
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  s.precheck = gqa_mapping_error<Decode05>;
  return lab::lab_main(argc, argv, s);
}
#endif
