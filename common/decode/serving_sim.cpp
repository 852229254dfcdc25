// A serving simulation over the paged KV cache's allocator (section 06's --simulate): the
// allocator's sequence operations (append_tokens, free_sequence, fork_prefix) are section 06's
// exercise, so this file is linked only into section 06 and the tests built from its source.
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include "decode/block_allocator.h"
#include "harness/rng.h"
#include "toolbox/attention_math.h"

namespace lab {

// ---------------------------------------------------------------------------------------------
// The two edges the simulation's own traffic may never reach, asked first on a scratch pool: its
// prefix may be a whole number of blocks (512 tokens at every block size it sweeps) and its pool is
// sized so that no append runs short. A prefix that ends inside a block shares only the full ones;
// an append the pool cannot hold takes nothing (all or none).
static void check_allocator_edges(int block_size) {
  const int prefix = block_size + block_size / 2 + 1;  // ends inside the second block (block size 1: 2 full)
  BlockAllocator pool(8, block_size);
  SequenceBlocks parent;
  if (!append_tokens(pool, parent, prefix))
    throw std::logic_error("simulate_serving: append_tokens(pool, seq, " + std::to_string(prefix) + ") returned false with " +
                           std::to_string(pool.free_blocks()) + " free blocks of " + std::to_string(block_size) + " tokens (" +
                           std::to_string((prefix + block_size - 1) / block_size) + " needed): EXERCISE allocator "
                           "still the stub, or a wrong count of the blocks it needs?");
  const SequenceBlocks child = fork_prefix(pool, parent, prefix);
  const int full = prefix / block_size;
  if (child.length != full * block_size || int(child.blocks.size()) != full)
    throw std::logic_error("simulate_serving: fork_prefix gave " + std::to_string(child.length) + " tokens in " +
                           std::to_string(child.blocks.size()) + " blocks of a " + std::to_string(prefix) +
                           "-token prefix at block size " + std::to_string(block_size) + " (a child shares only the " +
                           "parent's full blocks, here " + std::to_string(full) + ": the partly filled one stays the parent's)");
  SequenceBlocks greedy;
  const int free_before = pool.free_blocks();
  if (append_tokens(pool, greedy, (free_before + 1) * block_size) || greedy.length != 0 ||
      !greedy.blocks.empty() || pool.free_blocks() != free_before)
    throw std::logic_error("simulate_serving: append_tokens of " + std::to_string(free_before + 1) + " blocks' tokens with " +
                           std::to_string(free_before) + " free must return false and take nothing (all or none); it left " +
                           std::to_string(greedy.blocks.size()) + " blocks in the sequence and " +
                           std::to_string(pool.free_blocks()) + " free");
}

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
  check_allocator_edges(c.block_size);
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
  const int per_seq = ceil_div(c.max_seq_len, c.block_size);
  rep.blocks_in_pool = int64_t(c.max_batch) * per_seq + ceil_div(c.shared_prefix, c.block_size);
  BlockAllocator pool(int(rep.blocks_in_pool), c.block_size);
  SequenceBlocks prefix_cache;  // the system prompt, filled once and kept (prefix caching)
  if (c.shared_prefix > 0 && !append_tokens(pool, prefix_cache, c.shared_prefix))
    throw std::logic_error("simulate_serving: append_tokens refused the prefix of an empty pool");
  if (prefix_cache.length != c.shared_prefix || int(prefix_cache.blocks.size()) != ceil_div(c.shared_prefix, c.block_size))
    throw std::logic_error("simulate_serving: after append_tokens(" + std::to_string(c.shared_prefix) + ") the prefix holds " +
                           std::to_string(prefix_cache.length) + " tokens in " + std::to_string(prefix_cache.blocks.size()) + " blocks");
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
      if (q.shares && r.seq.length != c.shared_prefix / c.block_size * c.block_size)
        throw std::logic_error("simulate_serving: fork_prefix gave " + std::to_string(r.seq.length) + " tokens of a " +
                               std::to_string(c.shared_prefix) + "-token prefix (its full blocks are shared)");
      if (!append_tokens(pool, r.seq, q.prompt - r.seq.length))
        throw std::logic_error("simulate_serving: append_tokens refused a prompt (the pool is sized for the worst case)");
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
  // Every request has finished: only the prefix cache may still hold blocks, each once.
  const int expected = any_share ? int(prefix_cache.blocks.size()) : 0;
  if (pool.used_blocks() != expected)
    throw std::logic_error("simulate_serving: " + std::to_string(pool.used_blocks()) + " blocks in use after every request " +
                           "finished (expected " + std::to_string(expected) + "): free_sequence or fork_prefix leaks");
  for (int b : prefix_cache.blocks)
    if (any_share && pool.ref_count(b) != 1)
      throw std::logic_error("simulate_serving: prefix block " + std::to_string(b) + " has " +
                             std::to_string(pool.ref_count(b)) + " references after every request finished (expected 1)");
  if (rep.steps > 0) {
    rep.live_tokens = sum_live / double(rep.steps);
    rep.contiguous_slots = sum_contig / double(rep.steps);
    rep.paged_slots = sum_paged / double(rep.steps);
    rep.shared_slots = sum_shared / double(rep.steps);
  }
  return rep;
}

}  // namespace lab
