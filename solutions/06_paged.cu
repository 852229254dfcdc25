// 06 paged (§12.9.4, §12.6): the decode of 05 over a paged KV cache, vLLM's PagedAttention.
//
// What it adds: the cache is no longer one [T_max, H_kv, D] slab per sequence, reserved at the
// longest length a sequence may reach, but a pool of fixed-size physical blocks of page_size tokens
// (K and V each [num_blocks, page_size, H_kv, D]) handed out as sequences grow. Sequence b's block
// table maps its logical block j / page_size to a physical block; key j is at slot j % page_size.
// The kernel is 05's (common/decode/decode.cuh, shared), except where a K/V row's address comes from (EXERCISE
// block-table, through PagedKv below): the kernel stages in shared memory a window of the block's
// pages, each entry kv_row_offset of a page's first key (read from global memory in the loop, each
// tile's copies waited a round trip for the table), and a tile's address is one window read per
// group of 16 keys (a warp's keys of a tile: every lane reads the same entry; a group never
// straddles a page); groups at the ends of a range call kv_row_offset row by row. Also a ring one
// tile deeper per warp set (3 stages against 05's 2), and 16-byte copies as before (a page of 16
// tokens is 16 rows of 256 contiguous bytes per head: full 32-byte sectors, no waste).
// Same logical cache, same splits, same arithmetic: O and LSE are bit-identical to 05's
// (tests/paged_matches_decode.py checks it for several page sizes).
// What the pool holds here: the blocks of every sequence, allocated page by page from a free list
// shuffled with --seed (so logical neighbours are physically scattered), plus spare free blocks;
// every slot no sequence owns (free blocks, the tail of a last block) is NaN, so a read past
// kv_len poisons the output and fails the check. The block allocator (free list, reference counts,
// prefix sharing) is common/decode/block_allocator.h; the tables are checked on the host before any
// launch: an entry outside the pool or a table too short for its length is bad input (exit 2).
// --bug table-entry-oob / table-too-short corrupt one table entry to show that check; with
// LAB_UNCHECKED_TABLES=1 the GPU run skips it and the kernel reads what the table says (an
// illegal address: run it under compute-sanitizer). --bug gqa-index as in 05.
// Variants: single, split (as in 05). --page-size P (a positive multiple of 16; default 16).
// Memory simulation (host only, no GPU): 06_paged --simulate [--help] runs a stream of requests
// through a continuously batched server and reports the KV memory that contiguous max_seq_len
// allocation reserves against what the paged pool uses, and what prefix sharing saves.
// Exercise (ch12/06_paged.md): the block-table address computation (EXERCISE block-table).
// Run: scripts/lab run 06 -- --t 1 --t-kv 4096 --h-kv 8 --page-size 16       (the stub)
//      build/bin/06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --page-size 16
//      build/bin/06_paged --simulate
#include <filesystem>
#include <type_traits>

#include "decode/block_allocator.h"
#include "decode/kv_cache.h"
#include "lab.cuh"
#include "decode/decode.cuh"  // 05's decode kernel, plan, launcher and CPU model
#include "harness/npy.h"

using namespace decode;

// ---------------------------------------------------------------------------------------------
// The paged address: where K/V row (sequence b, key j, K/V head kv_head) starts in the pool,
// in elements. Used by the kernel's tile loader and by the CPU model.
LAB_HD int64_t kv_row_offset(const int* block_table, int table_stride, int page_size, int n_kv_heads,
                             int head_dim, int b, int j, int kv_head) {
  // BEGIN EXERCISE block-table: the element offset of row (b, j, kv_head) in the paged pool.
  //   Pool [num_blocks, page_size, H_kv, D]; block_table [B, table_stride] (int).
  //   1. logical block j / page_size of sequence b -> physical block: block_table[b·table_stride + j / page_size]
  //   2. slot = physical block · page_size + j % page_size   (the token's row of the pool)
  //   3. offset = (slot · H_kv + kv_head) · D. Compute in 64 bits: a large pool has > 2^31 elements.
  //   (Contiguous 05 had ((b·T_max + j)·H_kv + kv_head)·D: the table replaces b·T_max + j.)
  //   Until this returns an offset >= 0, every block skips its work and writes nothing.
  // STUB: (void)block_table; (void)table_stride; (void)page_size; (void)n_kv_heads; (void)head_dim;
  // STUB: (void)b; (void)j; (void)kv_head;
  // STUB: return -1;
  const int block = block_table[int64_t(b) * table_stride + j / page_size];
  const int64_t slot = int64_t(block) * page_size + j % page_size;
  return (slot * n_kv_heads + kv_head) * head_dim;
  // END EXERCISE
}

// The paged cache as the kernel sees it: the pools and the tables; a row's address is the
// exercise's kv_row_offset. Same first members as decode::ContiguousKv.
// PAGE > 0: the page size is PAGE, known when compiling, and kv_row_offset's j / page_size and
// j % page_size (inlined) become a shift and a mask. With a page size known only at run time
// (PAGE = 0) they are integer divisions, about a dozen instructions for each of a thread's 8 rows per
// tile: Nsight Compute counted about 1.4x 05's instructions per tile, on a kernel that issues from one
// warp per scheduler. Page 16 (the default) is specialised; vLLM's kernels likewise take the block
// size as a template parameter.
template <int PAGE>
struct PagedKv {
  const void* k;           // the pool: [num_blocks, page_size, H_kv, D]
  const void* v;           // the pool: [num_blocks, page_size, H_kv, D]
  const int* block_table;  // [B, table_stride]: logical block -> physical block (-1: none)
  int table_stride, page_size;  // (page_size == PAGE when PAGE > 0)
  static constexpr bool kAddressMayFail = true;  // the stub's kv_row_offset returns -1
  static constexpr int kTableWindow = MAX_TABLE_WINDOW;  // pages whose first rows the kernel stages (see common/decode/decode.cuh)
  static constexpr int kStages = 3;                      // each set's ring: one tile more in flight than 05 (see common/decode/decode.cuh)
  LAB_HD int page() const { return PAGE > 0 ? PAGE : page_size; }
  LAB_HD int64_t row_offset(int b, int j, int kv_head, int /*t_kv*/, int h_kv, int head_dim) const {
    return kv_row_offset(block_table, table_stride, page(), h_kv, head_dim, b, j, kv_head);
  }
};
constexpr int SPECIALISED_PAGE = 16;

// What the shared decode kernel (common/decode/decode.cuh) calls: 05's lessons (given here, solved) over
// K/V rows found through the block table.
template <int PAGE>
struct Decode06 {
  using Kv = PagedKv<PAGE>;

  // GQA: K/V head kv_head serves `group` = H / H_kv query heads; row r of a block's group is
  // query head query_head_of(...).
  static LAB_HD int query_head_of(int kv_head, int r, int group, int n_kv_heads, bool wrong_mapping) {
    // (05's EXERCISE gqa.) wrong_mapping is --bug gqa-index: the modulo mapping h_kv = h % H_kv.
    if (wrong_mapping) return r * n_kv_heads + kv_head;
    return kv_head * group + r;
  }

  // The online softmax of one query row over one split, in the log2 domain (scores are
  // s·scale·log2(e), so exp(x) becomes exp2(x)). The state is m (the largest score so far) and l (the
  // sum of exp2(s - m) so far); the running O is kept unnormalised beside it.
  // online_step folds in a tile whose largest score is tile_max: it updates m and l and returns in
  // `alpha` the factor the running O must be multiplied by, and in `base` the value to subtract from
  // the tile's scores before exp2. split_lse turns the final state into the split's natural-log LSE.
  // (05's EXERCISE online-softmax.) An empty state (m = -inf) uses base 0: never -inf - -inf. It
  // always returns true here (05's stub returns false).
  static LAB_HD bool online_step(float tile_max, float& m, float& l, float& alpha, float& base) {
    const float m_new = fmaxf(m, tile_max);
    base = m_new == -INFINITY ? 0.f : m_new;
    alpha = exp2f(m - base);
    l *= alpha;
    m = m_new;
    return true;
  }
  static LAB_HD float split_lse(float m, float l) { return l > 0.f ? (m + log2f(l)) * kLn2 : -INFINITY; }
};

// ---------------------------------------------------------------------------------------------
std::vector<int> lengths_of(const lab::Problem& pr) {
  return pr.kv_len.empty() ? std::vector<int>(size_t(pr.b), pr.t_kv) : pr.kv_len;
}

// The paged cache of the problem: the allocator's tables (physical blocks shuffled with the seed),
// then, for --bug table-*, one entry corrupted. `clean` gets the tables before the corruption.
lab::PagedCache make_cache(const std::vector<int>& lengths, const lab::Problem& pr, uint64_t seed,
                           const std::string& bug, lab::PagedCache* clean = nullptr) {
  lab::PagedCache c = lab::build_paged_cache(lengths, pr.t_kv, pr.page_size, seed);
  if (clean) *clean = c;
  const int need0 = lab::blocks_for(lengths[0], pr.page_size);  // sequence 0 is never empty
  if (bug == "table-entry-oob") c.tables[size_t(need0 - 1)] = c.num_blocks + 7;
  if (bug == "table-too-short") c.tables[size_t(need0 - 1)] = -1;
  return c;
}

int64_t pool_bytes(const lab::Problem& pr, int num_blocks) {
  return int64_t(num_blocks) * pr.page_size * pr.h_kv * pr.d * 2 * lab::dtype_bytes(pr.dtype);  // K and V
}

// HBM bytes a decode step must move beyond 05's (decode::hbm_bytes): the block-table entries of
// the K/V rows some query row can see.
int64_t table_bytes_read(const lab::Problem& pr) {
  int64_t table_entries = 0;
  for (int b = 0; b < pr.b; ++b) {
    const lab::KeyRange r = lab::visible_keys_of_rows(0, pr.t_q, pr.t_q, pr.keys_of(b), pr.causal, pr.window);
    if (!r.empty()) table_entries += (r.end - 1) / pr.page_size - r.begin / pr.page_size + 1;
  }
  return table_entries * 4;
}

// Memory of this run's cache: what contiguous allocation reserves against what the pool uses.
nlohmann::json memory_metrics(const lab::Problem& pr, const lab::PagedCache& c) {
  const int64_t per_token = int64_t(pr.h_kv) * pr.d * 2 * lab::dtype_bytes(pr.dtype);
  const lab::Footprint f = lab::footprint(c.lengths, pr.page_size, pr.t_kv);
  return {{"page_size", pr.page_size}, {"pool_blocks", c.num_blocks}, {"used_blocks", c.used_blocks()},
          {"pool_bytes", pool_bytes(pr, c.num_blocks)}, {"live_kv_bytes", f.live_tokens * per_token},
          {"paged_kv_bytes", f.paged_slots * per_token}, {"contiguous_kv_bytes", f.contiguous_slots * per_token},
          {"paged_waste", f.paged_waste()}, {"contiguous_waste", f.contiguous_waste()}};
}

void dump_tables(const std::string& dir, const lab::PagedCache& c) {
  std::filesystem::create_directories(dir);
  if (!lab::write_npy(dir + "/block_tables.npy", std::vector<int32_t>(c.tables.begin(), c.tables.end()),
                      {int64_t(c.lengths.size()), c.table_stride}))
    std::fprintf(stderr, "warning: could not write %s/block_tables.npy\n", dir.c_str());
}

bool tables_unchecked() {
  const char* e = std::getenv("LAB_UNCHECKED_TABLES");
  return e && std::string(e) == "1";
}

// The pool and the tables, alive as long as the forward.
struct PagedBuffers {
  lab::DeviceBuffer k_pool, v_pool, tables;
};

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  lab::PagedCache clean;
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, ctx.options.seed, ctx.bug, &clean);
  if (std::string bad = lab::check_block_tables(cache); !bad.empty() && !tables_unchecked()) {
    std::fprintf(stderr, "bad input: %s\n", bad.c_str());  // (Section::validate refused it already)
    std::exit(lab::kExitBadInput);
  }
  if (!ctx.options.dump_dir.empty()) dump_tables(ctx.options.dump_dir, cache);

  auto buf = std::make_shared<PagedBuffers>();
  buf->k_pool = lab::DeviceBuffer(size_t(pool_bytes(pr, cache.num_blocks) / 2));
  buf->v_pool = lab::DeviceBuffer(size_t(pool_bytes(pr, cache.num_blocks) / 2));
  buf->tables = lab::DeviceBuffer(cache.tables.size() * sizeof(int));
  buf->k_pool.poison();     // every slot no sequence owns stays NaN (0xFFFF: NaN in fp16 and bf16)
  buf->v_pool.poison();
  // The kernel reads through `cache` (corrupted only under --bug table-* with
  // LAB_UNCHECKED_TABLES=1); the pool is filled through the clean tables.
  CUDA_CHECK(cudaMemcpy(buf->tables.get(), cache.tables.data(), buf->tables.bytes(), cudaMemcpyHostToDevice));
  // The pool, built from the contiguous cache the harness uploaded, [B, T_kv, H_kv, D].
  const int64_t row_bytes = int64_t(pr.h_kv) * pr.d * lab::dtype_bytes(pr.dtype);
  lab::copy_to_paged_pool(clean, ctx.tensors.k, buf->k_pool.get(), pr.t_kv, row_bytes);
  lab::copy_to_paged_pool(clean, ctx.tensors.v, buf->v_pool.get(), pr.t_kv, row_bytes);

  auto gpu_run = [&](auto hooks) {  // Decode06<SPECIALISED_PAGE> or Decode06<0>
    using Hooks = decltype(hooks);
    return make_gpu_run<Hooks>(ctx, typename Hooks::Kv{buf->k_pool.get(), buf->v_pool.get(), buf->tables.as<int>(),
                                                       cache.table_stride, pr.page_size}, buf);
  };
  lab::GpuRun run = pr.page_size == SPECIALISED_PAGE ? gpu_run(Decode06<SPECIALISED_PAGE>{}) : gpu_run(Decode06<0>{});
  run.extra_device_bytes += pool_bytes(pr, cache.num_blocks) + int64_t(buf->tables.bytes());
  run.hbm_bytes_model += table_bytes_read(pr);
  run.metrics.update(memory_metrics(pr, cache));
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: 05's model reading K and V from a host pool built the same way (NaN where no
// sequence owns a slot) through kv_row_offset, the exercise's function. It always checks the tables.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, opt.seed, opt.bug);
  if (std::string bad = lab::check_block_tables(cache); !bad.empty()) {
    std::fprintf(stderr, "bad input: %s\n", bad.c_str());
    std::exit(lab::kExitBadInput);
  }
  if (!opt.dump_dir.empty()) dump_tables(opt.dump_dir, cache);
  const int64_t row_elems = int64_t(pr.h_kv) * pr.d;
  const std::vector<float> k_pool = lab::paged_pool(cache, in.k, pr.t_kv, row_elems);
  const std::vector<float> v_pool = lab::paged_pool(cache, in.v, pr.t_kv, row_elems);
  auto k_row = [&](int b, int j, int kv_head) -> const float* {
    const int64_t off = kv_row_offset(cache.tables.data(), cache.table_stride, pr.page_size, pr.h_kv, pr.d, b, j, kv_head);
    return off < 0 ? nullptr : &k_pool[size_t(off)];
  };
  auto v_row = [&](int b, int j, int kv_head) -> const float* {
    const int64_t off = kv_row_offset(cache.tables.data(), cache.table_stride, pr.page_size, pr.h_kv, pr.d, b, j, kv_head);
    return off < 0 ? nullptr : &v_pool[size_t(off)];
  };
  lab::CpuRun run = run_cpu_model<Decode06<0>>(pr, opt, in, o, lse, k_row, v_row);
  run.extra_host_bytes += int64_t(k_pool.size() + v_pool.size()) * 4;
  run.hbm_bytes_model += table_bytes_read(pr);
  run.metrics.update(memory_metrics(pr, cache));
  return run;
}

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a)  // the host-only memory simulation has its own options
    if (std::string(argv[a]) == "--simulate") return lab::simulation_main(argc, argv);
  lab::Section s;
  s.name = "06_paged";
  s.title = "decode over a paged KV cache: block tables, block allocator (§12.9.4); --simulate: memory simulation";
  s.variants = {"single", "split"};
  s.bugs = {"gqa-index", "table-entry-oob", "table-too-short"};
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
  s.default_problem.page_size = 16;
  s.workspace_bytes = [](const lab::Problem& p, const std::string& variant) {
    const int blocks = lab::build_paged_cache(lengths_of(p), p.t_kv, p.page_size, 0).num_blocks;
    return pool_bytes(p, blocks) + split_workspace_bytes(p, make_plan(p, variant, 256, 128));  // splits: a 256-SM bound
  };
  s.workspace_what = "paged pool and split partials";
  // Runs before anything is printed or allocated: the tables are built (deterministic: lengths
  // and permutation come from --seed) and checked here, so a bad table is refused in one line.
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (p.page_size < 16) return "the paged cache needs --page-size (a positive multiple of 16)";
    if (int64_t(p.b) * p.t_q * p.h > (int64_t(1) << 31) - 1) return "B*T_q*H must be < 2^31 (one grid dimension)";
    const std::vector<int> lengths =
        o.ragged_kv ? lab::make_kv_lengths(p.b, p.t_kv, o.seed) : std::vector<int>(size_t(p.b), p.t_kv);
    if (o.cpu || !tables_unchecked())
      if (std::string bad = lab::check_block_tables(make_cache(lengths, p, o.seed, o.bug)); !bad.empty()) return bad;
    return "";
  };
  s.supports_window = true;
  s.paged = true;
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  return lab::lab_main(argc, argv, s);
}
