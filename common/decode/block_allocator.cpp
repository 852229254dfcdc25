#include "decode/block_allocator.h"

#include "toolbox/attention_math.h"
#include "harness/rng.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace lab {

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

Footprint footprint(const std::vector<int>& lengths, int block_size, int max_seq_len) {
  if (block_size < 1) throw std::invalid_argument("footprint: block_size must be >= 1");
  Footprint f;
  for (int len : lengths) {
    f.live_tokens += len;
    f.paged_slots += int64_t(ceil_div(len, block_size)) * block_size;
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
  c.table_stride = ceil_div(std::max(t_kv, 1), page_size);
  int needed = 0;
  for (int len : lengths) needed += ceil_div(len, page_size);
  c.num_blocks = needed + std::max(1, needed / 8);
  BlockAllocator pool(c.num_blocks, page_size);
  pool.shuffle_free_list(seed);
  std::vector<SequenceBlocks> seqs(lengths.size());
  for (bool more = true; more;) {  // one page per sequence per round (the way decode steps interleave)
    more = false;
    for (size_t b = 0; b < seqs.size(); ++b) {
      if (seqs[b].length >= lengths[b]) continue;
      const int block = pool.allocate();
      if (block < 0) throw std::logic_error("build_paged_cache: pool too small");
      seqs[b].blocks.push_back(block);
      seqs[b].length = std::min(lengths[b], seqs[b].length + page_size);
      more = true;
    }
  }
  c.tables.assign(lengths.size() * size_t(c.table_stride), -1);
  for (size_t b = 0; b < seqs.size(); ++b)
    for (size_t i = 0; i < seqs[b].blocks.size() && i < size_t(c.table_stride); ++i)
      c.tables[b * size_t(c.table_stride) + i] = seqs[b].blocks[i];
  return c;
}

int64_t paged_slot(const int* block_table, int table_stride, int page_size, int seq, int key) {
  const int64_t entry = int64_t(seq) * table_stride + key / page_size;
  return int64_t(block_table[entry]) * page_size + key % page_size;
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
    const int need = ceil_div(c.lengths[b], c.page_size);
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

}  // namespace lab
