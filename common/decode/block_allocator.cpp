#include "decode/block_allocator.h"

#include "decode/kv_cache.h"
#include "harness/rng.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace lab {
namespace {
int blocks_needed(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }
}  // namespace

// ---------------------------------------------------------------------------------------------
BlockAllocator::BlockAllocator(int num_blocks, int block_size) : block_size_(block_size) {
  if (num_blocks < 0) throw std::invalid_argument("BlockAllocator: num_blocks must be >= 0");
  if (block_size < 1) throw std::invalid_argument("BlockAllocator: block_size must be >= 1");
  refs_.assign(size_t(num_blocks), 0);
  free_.reserve(size_t(num_blocks));
  for (int b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 is handed out first
}

void BlockAllocator::shuffle_free_list(uint64_t seed) {
  if (used_blocks() != 0) throw std::logic_error("BlockAllocator: shuffle_free_list on a pool in use");
  Rng rng{seed};
  for (size_t i = free_.size(); i > 1; --i) std::swap(free_[i - 1], free_[size_t(rng.next() % i)]);
}

void BlockAllocator::check_id(int block, const char* what) const {
  if (block < 0 || block >= num_blocks())
    throw std::invalid_argument(std::string("BlockAllocator::") + what + ": block " + std::to_string(block) +
                                " is outside the pool of " + std::to_string(num_blocks()));
}

int BlockAllocator::allocate() {
  if (free_.empty()) return -1;
  const int b = free_.back();
  free_.pop_back();
  refs_[size_t(b)] = 1;
  return b;
}

void BlockAllocator::retain(int block) {
  check_id(block, "retain");
  if (refs_[size_t(block)] == 0)
    throw std::logic_error("BlockAllocator::retain: block " + std::to_string(block) + " is free");
  ++refs_[size_t(block)];
}

void BlockAllocator::release(int block) {
  check_id(block, "release");
  if (refs_[size_t(block)] == 0)
    throw std::logic_error("BlockAllocator::release: block " + std::to_string(block) + " is already free");
  if (--refs_[size_t(block)] == 0) free_.push_back(block);
}

int BlockAllocator::ref_count(int block) const {
  check_id(block, "ref_count");
  return refs_[size_t(block)];
}

bool append_tokens(BlockAllocator& a, SequenceBlocks& s, int n) {
  if (n < 0) throw std::invalid_argument("append_tokens: n must be >= 0");
  const int need = blocks_needed(s.length + n, a.block_size()) - int(s.blocks.size());
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

Footprint footprint(const std::vector<int>& lengths, int block_size, int max_seq_len) {
  if (block_size < 1) throw std::invalid_argument("footprint: block_size must be >= 1");
  Footprint f;
  for (int len : lengths) {
    f.live_tokens += len;
    f.paged_slots += int64_t(blocks_needed(len, block_size)) * block_size;
    f.contiguous_slots += max_seq_len;
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
int PagedCache::used_blocks() const {
  return int(std::count_if(tables.begin(), tables.end(), [](int e) { return e >= 0; }));
}

PagedCache build_paged_cache(const std::vector<int>& lengths, int t_kv, int page_size, uint64_t seed) {
  if (page_size < 1) throw std::invalid_argument("build_paged_cache: page_size must be >= 1");
  PagedCache c;
  c.page_size = page_size;
  c.lengths = lengths;
  c.table_stride = blocks_needed(std::max(t_kv, 1), page_size);
  int needed = 0;
  for (int len : lengths) needed += blocks_needed(len, page_size);
  c.num_blocks = needed + std::max(1, needed / 8);
  BlockAllocator pool(c.num_blocks, page_size);
  pool.shuffle_free_list(seed);
  std::vector<SequenceBlocks> seqs(lengths.size());
  for (bool more = true; more;) {  // one page per sequence per round
    more = false;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const int step = std::min(page_size, lengths[b] - seqs[b].length);
      if (step <= 0) continue;
      if (!append_tokens(pool, seqs[b], step)) throw std::logic_error("build_paged_cache: pool too small");
      more = true;
    }
  }
  c.tables.assign(lengths.size() * size_t(c.table_stride), -1);
  for (size_t b = 0; b < seqs.size(); ++b)
    for (size_t i = 0; i < seqs[b].blocks.size() && i < size_t(c.table_stride); ++i)
      c.tables[b * size_t(c.table_stride) + i] = seqs[b].blocks[i];
  return c;
}

std::vector<float> paged_pool(const PagedCache& c, const std::vector<float>& x, int t_kv, int64_t row_elems) {
  std::vector<float> pool(size_t(int64_t(c.num_blocks) * c.page_size * row_elems), NAN);
  for (int b = 0; b < int(c.lengths.size()); ++b)
    for (int j = 0; j < c.lengths[size_t(b)]; ++j) {
      const int64_t slot = paged_slot(c.tables.data(), c.table_stride, c.page_size, b, j);
      std::copy_n(&x[size_t((int64_t(b) * t_kv + j) * row_elems)], row_elems, &pool[size_t(slot * row_elems)]);
    }
  return pool;
}

std::string check_block_tables(const PagedCache& c) {
  if (c.page_size < 1) return "page size " + std::to_string(c.page_size) + " must be >= 1";
  if (c.tables.size() != c.lengths.size() * size_t(c.table_stride))
    return "the block tables hold " + std::to_string(c.tables.size()) + " entries, not " +
           std::to_string(c.lengths.size()) + " sequences x " + std::to_string(c.table_stride);
  for (size_t b = 0; b < c.lengths.size(); ++b) {
    const int need = blocks_needed(c.lengths[b], c.page_size);
    const std::string seq = "sequence " + std::to_string(b) + " has " + std::to_string(c.lengths[b]) +
                            " keys, which need " + std::to_string(need) + " blocks of " +
                            std::to_string(c.page_size);
    if (need > c.table_stride)
      return seq + ", but its block table has only " + std::to_string(c.table_stride) + " entries";
    for (int i = 0; i < need; ++i) {
      const int e = c.tables[b * size_t(c.table_stride) + size_t(i)];
      if (e == -1) return seq + ", but its block table holds only " + std::to_string(i);
      if (e < 0 || e >= c.num_blocks)
        return "block table entry [sequence " + std::to_string(b) + ", block " + std::to_string(i) + "] = " +
               std::to_string(e) + " is outside the pool of " + std::to_string(c.num_blocks) + " blocks";
    }
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
ServingReport simulate_serving(const ServingConfig& c) {
  if (c.block_size < 1 || c.max_batch < 1 || c.requests < 0)
    throw std::invalid_argument("simulate_serving: block_size and max_batch must be >= 1, requests >= 0");
  if (c.prompt_min < 1 || c.prompt_min > c.prompt_max || c.output_min < 1 || c.output_min > c.output_max)
    throw std::invalid_argument("simulate_serving: need 1 <= prompt_min <= prompt_max and 1 <= output_min <= output_max");
  if (c.shared_prefix < 0 || c.share_fraction < 0 || c.share_fraction > 1)
    throw std::invalid_argument("simulate_serving: shared_prefix must be >= 0 and share_fraction in [0, 1]");
  if (c.shared_prefix + c.prompt_max + c.output_max > c.max_seq_len)
    throw std::invalid_argument("simulate_serving: shared_prefix + prompt_max + output_max = " +
                                std::to_string(c.shared_prefix + c.prompt_max + c.output_max) +
                                " exceeds max_seq_len = " + std::to_string(c.max_seq_len));

  struct Request {
    int prompt, output;
    bool shares;
  };
  struct Running {
    SequenceBlocks seq;
    int to_generate;
  };
  Rng rng{c.seed * 0x5851F42D4C957F2Dull + 11};
  std::deque<Request> queue;
  for (int r = 0; r < c.requests; ++r) {
    Request q;
    q.shares = c.shared_prefix > 0 && rng.unit() < c.share_fraction;
    q.prompt = rng.between(c.prompt_min, c.prompt_max) + (q.shares ? c.shared_prefix : 0);
    q.output = rng.between(c.output_min, c.output_max);
    queue.push_back(q);
  }

  ServingReport rep;
  const int per_seq = blocks_needed(c.max_seq_len, c.block_size);
  rep.blocks_in_pool = int64_t(c.max_batch) * per_seq + blocks_needed(c.shared_prefix, c.block_size);
  BlockAllocator pool(int(rep.blocks_in_pool), c.block_size);
  SequenceBlocks prefix_cache;  // the system prompt, filled once and kept (prefix caching)
  if (c.shared_prefix > 0) append_tokens(pool, prefix_cache, c.shared_prefix);
  const bool any_share = c.shared_prefix > 0 && c.share_fraction > 0;
  if (!any_share) free_sequence(pool, prefix_cache);

  std::vector<Running> running;
  double sum_live = 0, sum_contig = 0, sum_paged = 0, sum_shared = 0;
  int peak_blocks = -1;
  while (!queue.empty() || !running.empty()) {
    while (int(running.size()) < c.max_batch && !queue.empty()) {  // admit: prefill the prompt
      const Request q = queue.front();
      queue.pop_front();
      Running r{q.shares ? fork_prefix(pool, prefix_cache, c.shared_prefix) : SequenceBlocks{}, q.output};
      if (!append_tokens(pool, r.seq, q.prompt - r.seq.length))
        throw std::logic_error("simulate_serving: the pool ran out (it is sized for the worst case)");
      running.push_back(std::move(r));
    }
    for (auto& r : running) {  // one decode step
      if (!append_tokens(pool, r.seq, 1)) throw std::logic_error("simulate_serving: the pool ran out");
      --r.to_generate;
    }
    std::vector<int> lengths;
    for (const auto& r : running) lengths.push_back(r.seq.length);
    const Footprint f = footprint(lengths, c.block_size, c.max_seq_len);
    const double shared = double(pool.used_blocks()) * c.block_size;
    sum_live += double(f.live_tokens);
    sum_contig += double(f.contiguous_slots);
    sum_paged += double(f.paged_slots);
    sum_shared += shared;
    if (pool.used_blocks() > peak_blocks) {
      peak_blocks = pool.used_blocks();
      rep.peak_live_tokens = double(f.live_tokens);
      rep.peak_contiguous_slots = double(f.contiguous_slots);
      rep.peak_paged_slots = double(f.paged_slots);
      rep.peak_shared_slots = shared;
    }
    ++rep.steps;
    for (size_t i = 0; i < running.size();) {  // finished sequences free their blocks
      if (running[i].to_generate == 0) {
        free_sequence(pool, running[i].seq);
        running[i] = std::move(running.back());
        running.pop_back();
      } else {
        ++i;
      }
    }
  }
  if (rep.steps > 0) {
    rep.live_tokens = sum_live / double(rep.steps);
    rep.contiguous_slots = sum_contig / double(rep.steps);
    rep.paged_slots = sum_paged / double(rep.steps);
    rep.shared_slots = sum_shared / double(rep.steps);
  }
  return rep;
}

// ---------------------------------------------------------------------------------------------
int simulation_main(int argc, const char* const* argv) {
  ServingConfig c;
  int layers = 32, h_kv = 8, d = 128, elt = 2;
  std::string json_path;
  bool simulate = false;
  CLI::App app{"06_paged --simulate: KV-cache memory of a stream of requests, contiguous vs paged (host only)"};
  app.set_help_flag("--help,-h", "Print this help and exit");
  app.get_formatter()->column_width(30);
  app.add_flag("--simulate", simulate, "Run the simulation (this mode)");
  app.add_option("--requests", c.requests, "Requests in the stream")->capture_default_str();
  app.add_option("--seed", c.seed, "Seed of the request lengths")->capture_default_str();
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
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bad input: %s\n", e.what());
    return 2;
  }
  if (layers < 1 || h_kv < 1 || d < 1) {
    std::fprintf(stderr, "bad input: --layers, --h-kv and --d must be >= 1\n");
    return 2;
  }
  ServingReport r;
  try {
    r = simulate_serving(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bad input: %s\n", e.what());
    return 2;
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
    const ServingReport rs = simulate_serving(cs);
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

}  // namespace lab
