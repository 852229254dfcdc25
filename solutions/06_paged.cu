// 06 paged (§12.9.4, §12.6): the decode of 05 over a paged KV cache, vLLM's PagedAttention.
//
// What it adds: the cache is no longer one [T_max, H_kv, D] slab per sequence, reserved at the
// longest length a sequence may reach, but a pool of fixed-size physical blocks of page_size tokens,
// handed out as sequences grow. Sequence b's block table maps its logical block j / page_size to a
// physical block; key j is at slot j % page_size of that block. Two pool layouts (--kv-layout):
//   nhd  [num_blocks, page_size, H_kv, D]   (vLLM's and FlashInfer's default; the default here)
//   hnd  [num_blocks, H_kv, page_size, D]   (FlashInfer's other one: a head's page is contiguous)
// The kernel is 05's (common/decode/decode.cuh, shared) with your 05 hooks (this file includes
// 05_decode.cu from its own folder for them); what changes is where a K/V row's address comes
// from: PagedKv below, through the block table (EXERCISE block-table). The kernel stages in shared
// memory, a window of pages at a time, the address of each page's first row, so a tile's address
// is one shared-memory read per 16-key group, not a table read in global memory; and it keeps one
// more tile in flight than 05 (a 3-stage ring per warp set), since each 64-key tile is 4 pages
// scattered over the pool. That is 104 KB of shared memory a block at D = 64, 200 KB at D = 128;
// a GPU that allows a block less takes 05's 2-stage rings (A100: 136 KB at D = 128), then one warp
// set (99 KB: 72 KB at D = 128), slower (decode.cuh: choose_config; see --smem-limit).
// Same logical cache, same splits, same arithmetic: O and LSE are bit-identical to 05's wherever
// both take the same warp sets, as at 99, 163 and 227 KB a block (tests/paged_matches_decode.py).
// The pool: the blocks of every sequence, allocated page by page from a free list shuffled with
// --seed (logical neighbours are physically scattered), plus spare free blocks; every slot no
// sequence owns is NaN, so a read past kv_len poisons the output and fails the check. The tables
// are checked on the host before any launch (exit 2): an entry outside the pool, a table too
// short for its length, a pool whose layout is not the kernel's (--bug table-entry-oob,
// table-too-short, kv-layout). With LAB_UNCHECKED_TABLES=1 those host checks are skipped and the
// kernel reads what it is given (the self-check, or compute-sanitizer, then catches it).
// The allocator (EXERCISE allocator): appending tokens, freeing a sequence and sharing a prompt's
// full blocks by reference count; the unit tests build against this file and `--simulate` runs a
// serving simulation on it that checks it leaks nothing.
// Variants: single, split (as in 05). --page-size P (a positive multiple of 16; default 16).
// Exercises (ch12/06_paged.md; hints: ch12/hints/06_paged.md): block-table, allocator.
// Run: scripts/lab run 06 -- --t 1 --t-kv 4096 --h-kv 8 --page-size 16       (the stub)
//      build/bin/06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --page-size 16
//      build/bin/06_paged --kv-layout hnd --cpu
//      build/bin/06_paged --simulate
#include <CLI/CLI.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "decode/block_allocator.h"
#include "decode/decode.cuh"  // 05's decode kernel, plan, launcher and CPU model
#include "harness/npy.h"
#include "harness/record.h"  // writable_path_problem (--simulate --json)
#include "lab.cuh"

// Your 05 hooks (GQA mapping, a split's state, the split merge): 05_decode.cu of this folder, its
// hooks only.
#define LAB_DECODE05_HOOKS_ONLY
namespace s05 {
#include "05_decode.cu"
}  // namespace s05

using namespace decode;

// The two pool layouts (see the header). What the host writes and what the kernel reads must agree:
// check_layout below asserts it before any launch.
enum class KvLayout { nhd, hnd };
inline const char* layout_name(KvLayout l) { return l == KvLayout::nhd ? "nhd" : "hnd"; }

// ---------------------------------------------------------------------------------------------
// The paged address: where K/V row (sequence b, key j, K/V head kv_head) starts in the pool, in
// elements. The kernel's tile loader calls it (once per page, and row by row at the ends of a
// split), and so does the CPU model.
template <KvLayout LAYOUT>
LAB_HD int64_t kv_row_offset(const int* block_table, int table_stride, int page_size, int n_kv_heads, int head_dim,
                             int b, int j, int kv_head) {
  // BEGIN EXERCISE block-table: the element offset of row (b, j, kv_head) in the paged pool.
  //   block_table is [B, table_stride] (int): entry [b][n] is the physical block of sequence b's
  //   logical block n. Find key j's logical block and its slot in it, look the block up, then
  //   address the row in the pool's layout (LAYOUT: nhd [block, slot, head, D], hnd [block, head,
  //   slot, D]). A large pool has more than 2^31 elements. (ch12/hints/06_paged.md)
  //   Until this returns an offset >= 0, every block skips its work and writes nothing.
  // STUB: (void)block_table; (void)table_stride; (void)page_size; (void)n_kv_heads; (void)head_dim;
  // STUB: (void)b; (void)j; (void)kv_head;
  // STUB: return -1;
  const int block = block_table[int64_t(b) * table_stride + j / page_size];
  if constexpr (LAYOUT == KvLayout::hnd)
    return ((int64_t(block) * n_kv_heads + kv_head) * page_size + j % page_size) * head_dim;
  const int64_t slot = int64_t(block) * page_size + j % page_size;
  return (slot * n_kv_heads + kv_head) * head_dim;
  // END EXERCISE
}

// ---------------------------------------------------------------------------------------------
// The allocator's sequence operations (declared in common/decode/block_allocator.h; the free list
// and the reference counts are BlockAllocator's: allocate, retain, release, ref_count).
namespace lab {
// BEGIN EXERCISE allocator: append tokens, free a sequence, share a prefix's full blocks.
//   append_tokens(a, s, n): s holds s.length tokens in s.blocks (block_size tokens a block). Take
//     the blocks the new length needs from the allocator, all or none: when too few are free,
//     return false and change nothing. n < 0 is a caller's error (std::invalid_argument).
//   free_sequence(a, s): give back every block s holds (a shared block stays with its other
//     users: that is what the reference count is for), and leave s empty.
//   fork_prefix(a, parent, prefix_tokens): a new sequence that shares parent's FULL blocks among
//     the first prefix_tokens tokens (one more reference each) and holds exactly the tokens of
//     those blocks (40 tokens in blocks of 16: 2 blocks, 32 tokens; the caller appends the rest).
//     A partly filled block is not shared. A prefix outside the parent: std::invalid_argument.
//   Checked by its unit tests (build/bin/lab_exercises_06_paged, the first step of
//   scripts/lab check 06) and by --simulate.
// STUB: bool append_tokens(BlockAllocator&, SequenceBlocks&, int) { return false; }
// STUB: void free_sequence(BlockAllocator&, SequenceBlocks&) {}
// STUB: SequenceBlocks fork_prefix(BlockAllocator&, const SequenceBlocks&, int) { return {}; }
bool append_tokens(BlockAllocator& a, SequenceBlocks& s, int n) {
  if (n < 0) throw std::invalid_argument("append_tokens: n must be >= 0");
  const int need = ceil_div(s.length + n, a.block_size()) - int(s.blocks.size());
  if (need > a.free_blocks()) return false;
  for (int i = 0; i < need; ++i) s.blocks.push_back(a.allocate());
  s.length += n;
  return true;
}

void free_sequence(BlockAllocator& a, SequenceBlocks& s) {
  for (int b : s.blocks) a.release(b);
  s.blocks.clear();
  s.length = 0;
}

SequenceBlocks fork_prefix(BlockAllocator& a, const SequenceBlocks& parent, int prefix_tokens) {
  if (prefix_tokens < 0 || prefix_tokens > parent.length)
    throw std::invalid_argument("fork_prefix: the prefix (" + std::to_string(prefix_tokens) +
                                " tokens) is not inside the parent (" + std::to_string(parent.length) + ")");
  SequenceBlocks child;
  const int full = prefix_tokens / a.block_size();
  for (int i = 0; i < full; ++i) {
    a.retain(parent.blocks[size_t(i)]);
    child.blocks.push_back(parent.blocks[size_t(i)]);
  }
  child.length = full * a.block_size();
  return child;
}
// END EXERCISE
}  // namespace lab

#ifndef LAB_DECODE06_HOOKS_ONLY  // (the unit tests compile this file for the two exercises only)
// ---------------------------------------------------------------------------------------------
// The paged cache as the kernel sees it (the Kv interface of common/decode/decode.cuh): the pools,
// the tables, and a row's address through kv_row_offset.
// PAGE > 0: the page size is PAGE, known when compiling, and kv_row_offset's j / page_size and
// j % page_size (inlined) become a shift and a mask. With a page size known only at run time
// (PAGE = 0) they are integer divisions, about a dozen instructions for each of a thread's rows:
// with two warps a scheduler (decode.cuh's two sets) little hides them, and the time grows with
// the instruction count. Page 16 (the default) with the nhd layout is specialised; vLLM's kernels
// likewise take the block size as a template parameter.
template <int PAGE, KvLayout LAYOUT>
struct PagedKv {
  const void* k;           // the pool: nhd [num_blocks, page_size, H_kv, D], hnd [num_blocks, H_kv, page_size, D]
  const void* v;
  const int* block_table;  // [B, table_stride]: logical block -> physical block (-1: none)
  int table_stride, page_size;  // (page_size == PAGE when PAGE > 0)
  static constexpr bool kAddressMayFail = true;          // the stub's kv_row_offset returns -1
  static constexpr int kTableWindow = MAX_TABLE_WINDOW;  // pages whose first rows the kernel stages
  static constexpr int kStages = 3;                      // each set's ring: one tile more in flight than 05
  LAB_HD int page_keys() const { return PAGE > 0 ? PAGE : page_size; }
  LAB_HD int table_entries() const { return table_stride; }
  // Rows of D elements between keys j and j + 1 of one page and one head.
  LAB_HD int key_stride(int h_kv) const { return LAYOUT == KvLayout::nhd ? h_kv : 1; }
  LAB_HD int64_t row_offset(int b, int j, int kv_head, int /*t_kv*/, int h_kv, int head_dim) const {
    return kv_row_offset<LAYOUT>(block_table, table_stride, page_keys(), h_kv, head_dim, b, j, kv_head);
  }
};
constexpr int SPECIALISED_PAGE = 16;

// What the shared decode kernel calls: your 05 hooks over K/V rows found through the block table.
template <int PAGE, KvLayout LAYOUT>
struct Decode06 : s05::Decode05 {
  using Kv = PagedKv<PAGE, LAYOUT>;
};

// The run's layouts: the pool's (--kv-layout) and the kernel's (the same, except under --bug
// kv-layout, which hands the pool to a kernel built for the other one).
KvLayout g_pool_layout = KvLayout::nhd;
KvLayout kernel_layout(const std::string& bug) {
  if (bug != "kv-layout") return g_pool_layout;
  return g_pool_layout == KvLayout::nhd ? KvLayout::hnd : KvLayout::nhd;
}

// The host's shape/stride assertion: the strides (elements) of block, key and head in the pool as
// written, against those the kernel's layout addresses. "" when they agree.
struct PoolStrides {
  int64_t block, key, head;
};
PoolStrides strides_of(KvLayout l, int page_size, int h_kv, int d) {
  if (l == KvLayout::nhd) return {int64_t(page_size) * h_kv * d, int64_t(h_kv) * d, d};
  return {int64_t(h_kv) * page_size * d, d, int64_t(page_size) * d};
}
std::string check_layout(KvLayout pool, KvLayout kernel, const lab::Problem& p) {
  const PoolStrides a = strides_of(pool, p.page_size, p.h_kv, p.d), k = strides_of(kernel, p.page_size, p.h_kv, p.d);
  if (a.block == k.block && a.key == k.key && a.head == k.head) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "the pool is written %s (key stride %lld, head stride %lld elements) but the kernel reads %s "
                "(key stride %lld, head stride %lld)",
                layout_name(pool), static_cast<long long>(a.key), static_cast<long long>(a.head), layout_name(kernel),
                static_cast<long long>(k.key), static_cast<long long>(k.head));
  return buf;
}

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
  const int need0 = lab::ceil_div(lengths[0], pr.page_size);  // sequence 0 is never empty
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
    const lab::KeyRange r = keys_of_step(pr, b);
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

// The hnd pool of an nhd one: [num_blocks, page, H_kv, D] -> [num_blocks, H_kv, page, D].
template <class E>
__global__ void nhd_to_hnd(const E* nhd, E* hnd, int page, int h_kv, int d, int64_t rows) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < rows * d; e += int64_t(gridDim.x) * blockDim.x) {
    const int c = int(e % d);
    int64_t r = e / d;  // nhd row: (block, slot, head)
    const int head = int(r % h_kv);
    r /= h_kv;
    const int slot = int(r % page);
    const int64_t block = r / page;
    hnd[((block * h_kv + head) * page + slot) * d + c] = nhd[e];
  }
}
std::vector<float> host_nhd_to_hnd(const std::vector<float>& nhd, int page, int h_kv, int d) {
  std::vector<float> hnd(nhd.size());
  const int64_t rows = int64_t(nhd.size()) / d;
  for (int64_t r = 0; r < rows; ++r) {
    const int head = int(r % h_kv), slot = int((r / h_kv) % page);
    const int64_t block = r / h_kv / page;
    std::copy_n(&nhd[size_t(r * d)], d, &hnd[size_t(((block * h_kv + head) * page + slot) * d)]);
  }
  return hnd;
}

std::string cache_line(const lab::Problem& pr, const lab::PagedCache& c, KvLayout kernel) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "paged KV cache: page size %d tokens, %s pool of %d blocks (%d in use), kernel reads %s\n",
                pr.page_size, layout_name(g_pool_layout), c.num_blocks, c.used_blocks(), layout_name(kernel));
  return buf;
}

// The pool and the tables, alive as long as the forward.
struct PagedBuffers {
  lab::DeviceBuffer k_pool, v_pool, tables;
};

// 06 runs section 05's hooks (your labs/05_decode.cu in a lab build): while they are 05's stubs,
// every run here is "output not written" as if 06's own exercise were, so the run says where to look.
std::string unwritten_05_hooks() {
  using H = s05::Decode05;
  std::string names;
  float m = -INFINITY, l = 0.f, alpha = 0.f, base = 0.f;
  const float one_part = 0.f;
  if (H::query_head_of(0, 0, 1) < 0) names += " gqa";
  if (!H::online_step(0.f, m, l, alpha, base)) names += " split-state";
  if (std::isnan(H::merged_lse(&one_part, 1, 1))) names += " split-merge";
  return names.empty() ? ""
                       : "05's exercises" + names + " are still stubs in labs/05_decode.cu: 06 runs them, finish 05 first";
}

lab::GpuRun setup_gpu(const lab::RunContext& ctx) {
  const lab::Problem& pr = ctx.problem;
  lab::PagedCache clean;
  // (Section::validate refused a bad table or layout already, unless LAB_UNCHECKED_TABLES=1.)
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, ctx.options.seed, ctx.bug, &clean);
  const KvLayout kernel = kernel_layout(ctx.bug);
  if (!ctx.options.quiet) std::fputs(cache_line(pr, cache, kernel).c_str(), stdout);
  if (!ctx.options.dump_dir.empty()) dump_tables(ctx.options.dump_dir, cache);

  auto buf = std::make_shared<PagedBuffers>();
  const size_t half = size_t(pool_bytes(pr, cache.num_blocks) / 2);
  buf->k_pool = lab::DeviceBuffer(half);
  buf->v_pool = lab::DeviceBuffer(half);
  buf->tables = lab::DeviceBuffer(cache.tables.size() * sizeof(int));
  buf->k_pool.poison();     // every slot no sequence owns stays NaN (0xFFFF: NaN in fp16 and bf16)
  buf->v_pool.poison();
  // The kernel reads through `cache` (corrupted only under --bug table-* with
  // LAB_UNCHECKED_TABLES=1); the pool is filled through the clean tables.
  CUDA_CHECK(cudaMemcpy(buf->tables.get(), cache.tables.data(), buf->tables.bytes(), cudaMemcpyHostToDevice));
  // The pool, built from the contiguous cache the harness uploaded, [B, T_kv, H_kv, D], in nhd;
  // then transposed to hnd where that is the pool's layout.
  const int64_t row_bytes = int64_t(pr.h_kv) * pr.d * lab::dtype_bytes(pr.dtype);
  lab::copy_to_paged_pool(clean, ctx.tensors.k, buf->k_pool.get(), pr.t_kv, row_bytes);
  lab::copy_to_paged_pool(clean, ctx.tensors.v, buf->v_pool.get(), pr.t_kv, row_bytes);
  if (g_pool_layout == KvLayout::hnd) {
    lab::DeviceBuffer nhd(half);
    const int64_t rows = int64_t(cache.num_blocks) * pr.page_size * pr.h_kv;
    for (lab::DeviceBuffer* pool : {&buf->k_pool, &buf->v_pool}) {
      CUDA_CHECK(cudaMemcpy(nhd.get(), pool->get(), half, cudaMemcpyDeviceToDevice));
      nhd_to_hnd<<<1024, 256>>>(nhd.as<uint16_t>(), pool->as<uint16_t>(), pr.page_size, pr.h_kv, pr.d, rows);
      CUDA_CHECK_LAST();
    }
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  auto gpu_run = [&](auto hooks) {  // one of the Decode06 instantiations below
    using Hooks = decltype(hooks);
    return make_gpu_run<Hooks>(ctx, typename Hooks::Kv{buf->k_pool.get(), buf->v_pool.get(), buf->tables.as<int>(),
                                                       cache.table_stride, pr.page_size}, buf);
  };
  lab::GpuRun run = kernel == KvLayout::hnd                ? gpu_run(Decode06<0, KvLayout::hnd>{})
                    : pr.page_size == SPECIALISED_PAGE ? gpu_run(Decode06<SPECIALISED_PAGE, KvLayout::nhd>{})
                                                       : gpu_run(Decode06<0, KvLayout::nhd>{});
  run.extra_device_bytes += pool_bytes(pr, cache.num_blocks) + int64_t(buf->tables.bytes());
  run.hbm_bytes_model += table_bytes_read(pr);
  run.metrics.update(memory_metrics(pr, cache));
  run.metrics["kv_layout"] = layout_name(g_pool_layout);
  if (std::string why = unwritten_05_hooks(); !why.empty())
    run.after_check_run = [why](nlohmann::json&) { return why; };
  return run;
}

// ---------------------------------------------------------------------------------------------
// CPU model: 05's model reading K and V from a host pool built the same way (NaN where no
// sequence owns a slot) through kv_row_offset, your exercise's function.
lab::CpuRun run_cpu(const lab::Problem& pr, const lab::Options& opt, const lab::HostInputs& in,
                    std::vector<float>& o, std::vector<float>& lse) {
  const lab::PagedCache cache = make_cache(lengths_of(pr), pr, opt.seed, opt.bug);  // (checked by validate)
  const KvLayout kernel = kernel_layout(opt.bug);
  if (!opt.dump_dir.empty()) dump_tables(opt.dump_dir, cache);
  const int64_t row_elems = int64_t(pr.h_kv) * pr.d;
  std::vector<float> k_pool = lab::paged_pool(cache, in.k, pr.t_kv, row_elems);
  std::vector<float> v_pool = lab::paged_pool(cache, in.v, pr.t_kv, row_elems);
  if (g_pool_layout == KvLayout::hnd) {
    k_pool = host_nhd_to_hnd(k_pool, pr.page_size, pr.h_kv, pr.d);
    v_pool = host_nhd_to_hnd(v_pool, pr.page_size, pr.h_kv, pr.d);
  }
  // The tables and, past their end, one row of a block id no pool has: a read past the last entry
  // gives an address past the pool, which is named below.
  std::vector<int> tables = cache.tables;
  tables.resize(tables.size() + size_t(cache.table_stride), 1 << 30);
  auto offset = [&](int b, int j, int kv_head) -> int64_t {
    return kernel == KvLayout::nhd
               ? kv_row_offset<KvLayout::nhd>(tables.data(), cache.table_stride, pr.page_size, pr.h_kv, pr.d, b, j, kv_head)
               : kv_row_offset<KvLayout::hnd>(tables.data(), cache.table_stride, pr.page_size, pr.h_kv, pr.d, b, j, kv_head);
  };
  // An address past the pool (a wrong page or offset) is named, not read: on a GPU a read of
  // whatever lies there, here a crash. The first such key is reported, and a NaN row stands in for it.
  const std::vector<float> past_the_pool(size_t(pr.d), std::nanf(""));
  std::mutex outside_mutex;
  std::string outside;
  auto row_in = [&](const std::vector<float>& pool, int b, int j, int kv_head) -> const float* {
    const int64_t off = offset(b, j, kv_head);
    if (off == -1) return nullptr;  // the stub's "no answer yet": the block skips its work
    if (off < 0 || off + pr.d > int64_t(pool.size())) {
      const std::lock_guard<std::mutex> lock(outside_mutex);
      if (outside.empty())
        outside = "kv_row_offset(b=" + std::to_string(b) + ", j=" + std::to_string(j) + ", kv_head=" +
                  std::to_string(kv_head) + ") = " + std::to_string(off) + ", outside the pool of " +
                  std::to_string(pool.size()) + " elements (" + std::to_string(cache.num_blocks) + " blocks of " +
                  std::to_string(pr.page_size) + " keys)" +
                  (off < 0 ? ", from a table entry of -1 (past the sequence's last block)"
                   : off / (int64_t(pr.page_size) * row_elems) >= (1 << 30)
                       ? ", from the guard entry past the block table's end (an entry past the last sequence's row)"
                       : "") +
                  ": look at the page index j / page_size and the slot j % page_size";
      return past_the_pool.data();
    }
    return &pool[size_t(off)];
  };
  auto k_row = [&](int b, int j, int kv_head) { return row_in(k_pool, b, j, kv_head); };
  auto v_row = [&](int b, int j, int kv_head) { return row_in(v_pool, b, j, kv_head); };
  lab::CpuRun run = run_cpu_model<Decode06<0, KvLayout::nhd>>(pr, opt, in, o, lse, k_row, v_row);
  if (!outside.empty() && run.failure.empty()) run.failure = outside;
  // What the GPU's run holds on top of Q, K, V, O (the pool in the element type and the tables), not
  // this model's fp32 copies: the memory line is the section's lesson, the same with or without a GPU.
  run.extra_host_bytes += pool_bytes(pr, cache.num_blocks) + int64_t(cache.tables.size() * sizeof(int));
  run.hbm_bytes_model += table_bytes_read(pr);
  run.metrics.update(memory_metrics(pr, cache));
  run.metrics["kv_layout"] = layout_name(g_pool_layout);
  run.header = cache_line(pr, cache, kernel) + run.header;  // the pages, then 05's split line
  if (run.failure.empty()) run.failure = unwritten_05_hooks();
  return run;
}

// ---------------------------------------------------------------------------------------------
// `06_paged --simulate [options]`: the host-only memory simulation, on your allocator (its own
// options: --simulate --help). Exit 0; 1 when the allocator misbehaves (a leaked block, a wrong
// reference count, a refused append); 2 on bad options.
int simulate_main(int argc, const char* const* argv) {
  using namespace lab;
  ServingConfig c;
  int layers = 32, h_kv = 8, d = 128, elt = 2;
  std::string json_path;
  bool simulate = false;
  CLI::App app{"06_paged --simulate: KV-cache memory of a stream of requests, contiguous vs paged (host only)"};
  app.set_help_flag("--help,-h", "Print this help and exit");
  app.get_formatter()->column_width(30);
  app.add_flag("--simulate", simulate, "Run the simulation (this mode)");
  bool on_host = false;  // the simulation always runs on the host: --cpu, typed from habit, changes nothing
  app.add_flag("--cpu", on_host, "Accepted and ignored: the simulation runs on the host anyway");
  app.add_option("--requests", c.requests, "Requests in the stream")->capture_default_str();
  int64_t seed = int64_t(c.seed);
  add_seed_option(app, seed, "Seed of the request lengths (>= 0)");
  app.add_option("--page-size", c.block_size, "Tokens per block")->capture_default_str();
  app.add_option("--max-seq-len", c.max_seq_len, "Tokens contiguous allocation reserves per sequence")->capture_default_str();
  app.add_option("--max-batch", c.max_batch, "Sequences running at once")->capture_default_str();
  app.add_option("--prompt-min", c.prompt_min, "Shortest own prompt")->capture_default_str();
  app.add_option("--prompt-max", c.prompt_max, "Longest own prompt")->capture_default_str();
  app.add_option("--output-min", c.output_min, "Fewest generated tokens")->capture_default_str();
  app.add_option("--output-max", c.output_max, "Most generated tokens")->capture_default_str();
  app.add_option("--shared-prefix", c.shared_prefix, "Tokens of the shared system prompt")->capture_default_str();
  app.add_option("--share", c.share_fraction, "Fraction of requests that start with it")->capture_default_str();
  app.add_option("--layers", layers, "Layers (bytes per token = 2 (K, V) x layers x H_kv x D x 2 bytes)")->capture_default_str();
  app.add_option("--h-kv", h_kv, "K/V heads")->capture_default_str();
  app.add_option("--d", d, "Head dimension")->capture_default_str();
  app.add_option("--json", json_path, "Write the report as JSON to this file");
  std::string why;
  if (const int code = parse_command_line(app, argc, argv, &why); code != kExitPass) {
    if (code == -1) return kExitPass;  // --help, printed
    std::fprintf(stderr, "bad input: %s\n", why.c_str());
    return kExitBadInput;
  }
  if (layers < 1 || h_kv < 1 || d < 1) {
    std::fprintf(stderr, "bad input: --layers, --h-kv and --d must be >= 1\n");
    return 2;
  }
  if (const std::string bad = seed_problem(seed); !bad.empty()) {
    std::fprintf(stderr, "bad input: %s\n", bad.c_str());
    return 2;
  }
  c.seed = uint64_t(seed);
  if (!json_path.empty())  // said before the simulation runs, not found after it
    if (const std::string m = writable_path_problem(json_path, false); !m.empty()) {
      std::fprintf(stderr, "bad input: --json: %s\n", m.c_str());
      return 2;
    }
  ServingReport r;
  try {
    r = simulate_serving(c);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bad input: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // the allocator's operations broke an invariant
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  const double per_token = 2.0 * layers * h_kv * d * elt;
  auto gb = [&](double tokens) { return tokens * per_token / 1e9; };
  std::printf("06_paged --simulate: %d requests, at most %d running; own prompt %d..%d tokens, output %d..%d;\n"
              "  %d-token shared system prompt on %.0f%% of them; max_seq_len %d; block %d tokens; seed %llu\n",
              c.requests, c.max_batch, c.prompt_min, c.prompt_max, c.output_min, c.output_max, c.shared_prefix,
              100 * c.share_fraction, c.max_seq_len, c.block_size, static_cast<unsigned long long>(c.seed));
  std::printf("  KV bytes per token: %.0f KiB (K and V, %d layers x %d K/V heads x D=%d x fp16)\n\n", per_token / 1024,
              layers, h_kv, d);
  std::printf("  %-34s %14s %9s %14s %9s\n", "KV memory (token slots, GB)", "mean/step", "GB", "paged peak", "GB");
  auto line = [&](const char* what, double mean, double peak, const std::string& note) {
    std::printf("  %-34s %14.0f %9.2f %14.0f %9.2f   %s\n", what, mean, gb(mean), peak, gb(peak), note.c_str());
  };
  char buf[160];
  line("live tokens (what attention reads)", r.live_tokens, r.peak_live_tokens, "");
  std::snprintf(buf, sizeof buf, "internal fragmentation %.1f%%", 100 * r.contiguous_waste());
  line("contiguous, max_seq_len each", r.contiguous_slots, r.peak_contiguous_slots, buf);
  std::snprintf(buf, sizeof buf, "internal fragmentation %.1f%%", 100 * r.paged_waste());
  line("paged, no sharing", r.paged_slots, r.peak_paged_slots, buf);
  std::snprintf(buf, sizeof buf, "prefix sharing saves %.1f%% of paged", 100 * r.sharing_saving());
  line("paged + prefix sharing", r.shared_slots, r.peak_shared_slots, buf);
  const double gain = r.shared_slots > 0 ? r.contiguous_slots / r.shared_slots : 0;
  std::printf("\n  The memory contiguous allocation reserves would hold %.1fx as many sequences paged (with sharing).\n", gain);
  std::printf("  %d decode steps; pool of %lld blocks (sized for the worst case: no request waits for memory).\n\n",
              int(r.steps), static_cast<long long>(r.blocks_in_pool));

  nlohmann::json sweep = nlohmann::json::array();
  std::printf("  %-6s %22s %22s\n", "block", "paged fragmentation", "sharing saves");
  for (int bs : {16, 32, 64, 128, 256}) {
    ServingConfig cs = c;
    cs.block_size = bs;
    const ServingReport rs = simulate_serving(cs);  // (the same operations: checked above)
    std::printf("  %-6d %21.1f%% %21.1f%%\n", bs, 100 * rs.paged_waste(), 100 * rs.sharing_saving());
    sweep.push_back({{"block_size", bs}, {"paged_waste", rs.paged_waste()}, {"sharing_saving", rs.sharing_saving()}});
  }
  if (!json_path.empty()) {
    nlohmann::json j = {
        {"config", {{"requests", c.requests}, {"seed", c.seed}, {"block_size", c.block_size}, {"max_seq_len", c.max_seq_len},
                    {"max_batch", c.max_batch}, {"prompt", {c.prompt_min, c.prompt_max}}, {"output", {c.output_min, c.output_max}},
                    {"shared_prefix", c.shared_prefix}, {"share_fraction", c.share_fraction}, {"bytes_per_token", per_token}}},
        {"steps", r.steps}, {"blocks_in_pool", r.blocks_in_pool},
        {"mean_tokens", {{"live", r.live_tokens}, {"contiguous", r.contiguous_slots}, {"paged", r.paged_slots},
                         {"paged_shared", r.shared_slots}}},
        {"peak_tokens", {{"live", r.peak_live_tokens}, {"contiguous", r.peak_contiguous_slots}, {"paged", r.peak_paged_slots},
                         {"paged_shared", r.peak_shared_slots}}},
        {"contiguous_waste", r.contiguous_waste()}, {"paged_waste", r.paged_waste()},
        {"sharing_saving", r.sharing_saving()}, {"block_size_sweep", sweep}};
    std::ofstream(json_path) << j.dump(1) << "\n";
  }
  return 0;
}


#ifndef LAB_DECODE06_NO_MAIN
int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a)  // the host-only memory simulation has its own options
    if (std::string(argv[a]) == "--simulate") return simulate_main(argc, argv);
  // --kv-layout nhd|hnd is this section's own option: read here, the rest goes to the harness.
  std::vector<char*> args;
  for (int a = 0; a < argc; ++a) {
    const std::string arg = argv[a];
    std::string value;
    if (arg == "--kv-layout") {
      if (a + 1 >= argc) {
        std::fprintf(stderr, "bad input: --kv-layout needs a value (nhd or hnd)\n");
        return lab::kExitBadInput;
      }
      value = argv[++a];
    } else if (arg.rfind("--kv-layout=", 0) == 0) {
      value = arg.substr(std::strlen("--kv-layout="));
    } else {
      args.push_back(argv[a]);
      continue;
    }
    if (value != "nhd" && value != "hnd") {
      std::fprintf(stderr, "bad input: --kv-layout must be nhd or hnd, not '%s'\n", value.c_str());
      return lab::kExitBadInput;
    }
    g_pool_layout = value == "nhd" ? KvLayout::nhd : KvLayout::hnd;
  }
  lab::Section s;
  s.name = "06_paged";
  s.title = "decode over a paged KV cache: block tables, block allocator (§12.9.4). Also: --kv-layout nhd|hnd "
            "(the pool's layout; default nhd), --simulate [--help] (the allocator's memory simulation, host only)";
  s.variants = {"single", "split"};
  s.bugs = {"gqa-index", "table-entry-oob", "table-too-short", "kv-layout"};
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
  s.workspace_what_of_variant = {{"single", "paged pool"}};  // (single keeps no split partials)
  // Runs before anything is printed or allocated: the tables are built (deterministic: lengths
  // and permutation come from --seed) and checked here, so a bad table is refused in one line.
  s.validate = [](const lab::Problem& p, const lab::Options& o) -> std::string {
    if (p.page_size < 16) return "the paged cache needs --page-size (a positive multiple of 16)";
    if (int64_t(p.b) * p.t_q * p.h > (int64_t(1) << 31) - 1) return "B*T_q*H must be < 2^31 (one grid dimension)";
    if (o.splits > 0 && o.variant != "split") return "--splits applies to --variant split (single never splits)";
    const std::vector<int> lengths =
        o.ragged_kv ? lab::make_kv_lengths(p.b, p.t_kv, o.seed) : std::vector<int>(size_t(p.b), p.t_kv);
    if (o.cpu || !tables_unchecked())
      if (std::string bad = lab::check_block_tables(make_cache(lengths, p, o.seed, o.bug)); !bad.empty()) return bad;
    if (!tables_unchecked())  // the pool's layout against the kernel's (the CPU model honours the skip too)
      if (std::string bad = check_layout(g_pool_layout, kernel_layout(o.bug), p); !bad.empty()) return bad;
    return "";
  };
  s.supports_window = true;
  s.paged = true;
  s.gpu = setup_gpu;
  s.cpu = run_cpu;
  s.precheck = gqa_mapping_error<s05::Decode05>;
  return lab::lab_main(int(args.size()), args.data(), s);
}
#endif  // LAB_DECODE06_NO_MAIN
#endif  // LAB_DECODE06_HOOKS_ONLY
