// The host side of a paged KV cache (§12.9.4), in the spirit of vLLM's block manager:
//   BlockAllocator     a pool of fixed-size physical blocks: a free list, reference counts
//   SequenceBlocks     one sequence's block table, grown a block at a time as tokens are appended,
//                      released when the sequence finishes; full prompt blocks can be shared
//                      between sequences (prefix caching) by reference counting. The three
//                      operations on it (append_tokens, free_sequence, fork_prefix) are section
//                      06's exercise: declared here, defined in 06_paged.cu (labs/, or solutions/)
//   PagedCache         the block tables of a decode problem (section 06), from a shuffled pool,
//                      and check_block_tables(): the host-side validation done before any launch
//   simulate_serving   a stream of requests through a continuously batched server: the KV memory
//                      contiguous max_seq_len allocation reserves against what the paged pool
//                      uses, and what prefix sharing saves (serving_sim.cpp, on section 06's
//                      operations, which it checks: no leaked block, no wrong reference count)
// Misuse (freeing a free block, an id outside the pool, a bad configuration) throws
// std::invalid_argument or std::logic_error with the reason.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lab {

class BlockAllocator {
 public:
  BlockAllocator(int num_blocks, int block_size);
  // Reorders the free list with a seeded permutation, so consecutive allocations get scattered
  // physical blocks (as in a pool that has been in use for a while). Only on a pool with no block in use.
  void shuffle_free_list(uint64_t seed);
  int allocate();           // a free block with reference count 1, or -1 when none is free
  void retain(int block);   // one more sequence uses `block` (must be in use)
  void release(int block);  // one fewer; the block returns to the free list when none is left
  int ref_count(int block) const;
  int num_blocks() const { return int(refs_.size()); }
  int block_size() const { return block_size_; }
  int free_blocks() const { return int(free_.size()); }
  int used_blocks() const { return num_blocks() - free_blocks(); }

 private:
  void check_id(int block, const char* what) const;
  int block_size_;
  std::vector<int> free_;  // a stack: back() is handed out next
  std::vector<int> refs_;  // reference count per physical block (0 = free)
};

struct SequenceBlocks {
  std::vector<int> blocks;  // logical block i -> physical block
  int length = 0;           // tokens stored
};

// Section 06's exercise (defined in its source file):
// Appends n tokens, allocating a block whenever the length crosses a block boundary. Returns
// false and changes nothing when the pool has too few free blocks.
bool append_tokens(BlockAllocator& a, SequenceBlocks& s, int n);
// A finished sequence: each of its blocks is released (a shared one stays with its other users).
void free_sequence(BlockAllocator& a, SequenceBlocks& s);
// A new sequence starting with the first `prefix_tokens` tokens of `parent` (a cached prompt). It
// shares parent's FULL blocks among them (reference count + 1) and starts with length = shared
// blocks · block_size; the caller appends the rest of its prompt. A partly filled block is not
// shared: the child's next token would have to go into it, which needs copy-on-write.
SequenceBlocks fork_prefix(BlockAllocator& a, const SequenceBlocks& parent, int prefix_tokens);

// KV memory of a set of sequences, in token slots (multiply by the bytes per token).
struct Footprint {
  int64_t live_tokens = 0;       // tokens the sequences hold (what attention reads)
  int64_t paged_slots = 0;       // sum of ceil(len / block_size) · block_size
  int64_t contiguous_slots = 0;  // sequences · max_seq_len
  double paged_waste() const { return paged_slots ? 1.0 - double(live_tokens) / double(paged_slots) : 0.0; }
  double contiguous_waste() const {
    return contiguous_slots ? 1.0 - double(live_tokens) / double(contiguous_slots) : 0.0;
  }
};
Footprint footprint(const std::vector<int>& lengths, int block_size, int max_seq_len);

// ---------------------------------------------------------------------------------------------
// The paged cache of a decode problem (section 06): sequence b holds lengths[b] keys.
struct PagedCache {
  int page_size = 16;
  int num_blocks = 0;        // blocks in the pool, free spare blocks included
  int table_stride = 0;      // entries per block-table row: ceil(T_kv / page_size)
  std::vector<int> lengths;  // keys per sequence
  std::vector<int> tables;   // [B, table_stride], -1 = no block
  int used_blocks() const;   // entries that point at a block
};
// Allocates every sequence's blocks from a pool whose free list is shuffled with `seed`,
// appending one page at a time to each sequence in turn (the way decode steps interleave), and
// leaves one spare free block per eight used (at least one) in the pool.
PagedCache build_paged_cache(const std::vector<int>& lengths, int t_kv, int page_size, uint64_t seed);
// "" when every sequence's table covers its length with blocks inside the pool, else a one-line
// reason naming the sequence and the entry. What a kernel would do with such a table is read
// outside the pool (an illegal address) or read another sequence's keys.
std::string check_block_tables(const PagedCache& c);
// The pool slot (physical block · page_size + offset) of sequence `seq`'s key `key`: the
// specification the host uses to fill a pool and to check a kernel (host only; the kernel's
// address through the table is section 06's exercise).
int64_t paged_slot(const int* block_table, int table_stride, int page_size, int seq, int key);
// The paged pool of a contiguous cache x [B, t_kv, row_elems]: each sequence's tokens at the
// slots its table gives ([num_blocks·page_size, row_elems]), NaN in every slot no sequence owns,
// so a read past a sequence's length poisons what it touches. (On the GPU: copy_to_paged_pool.)
std::vector<float> paged_pool(const PagedCache& c, const std::vector<float>& x, int t_kv, int64_t row_elems);

// ---------------------------------------------------------------------------------------------
// A serving simulation. `requests` requests wait at time 0; at most `max_batch` run at once.
// A request is admitted when a slot is free: its prompt is appended at once (prefill), then every
// step appends one token to each running sequence (decode) until it has produced its output,
// when it finishes and frees its blocks. A fraction `share_fraction` of the requests start with
// the same `shared_prefix`-token system prompt, kept in a prefix cache and shared by reference.
struct ServingConfig {
  int requests = 2000;
  uint64_t seed = 1;
  int block_size = 16;
  int max_seq_len = 4096;  // what contiguous allocation reserves for every sequence
  int max_batch = 128;
  int prompt_min = 16, prompt_max = 1024;  // a request's own prompt tokens (uniform)
  int output_min = 16, output_max = 1024;  // tokens it generates (uniform)
  int shared_prefix = 512;                 // system-prompt tokens, before the own prompt
  double share_fraction = 0.5;
};

struct ServingReport {
  int64_t steps = 0;
  int64_t blocks_in_pool = 0;  // sized for the worst case, so no request ever waits for memory
  // Averages over the decode steps (token slots), sampled after each step's appends:
  double live_tokens = 0;       // tokens the running sequences hold (shared prefix counted per sequence)
  double contiguous_slots = 0;  // running sequences · max_seq_len
  double paged_slots = 0;       // paged, no sharing: sum of ceil(len / block) · block
  double shared_slots = 0;      // paged with prefix sharing: blocks in use (prefix cache included) · block
  // The same at the step where the paged pool held the most blocks:
  double peak_live_tokens = 0, peak_contiguous_slots = 0, peak_paged_slots = 0, peak_shared_slots = 0;
  double contiguous_waste() const { return contiguous_slots > 0 ? 1 - live_tokens / contiguous_slots : 0; }
  double paged_waste() const { return paged_slots > 0 ? 1 - live_tokens / paged_slots : 0; }
  double sharing_saving() const { return paged_slots > 0 ? 1 - shared_slots / paged_slots : 0; }
};
ServingReport simulate_serving(const ServingConfig& c);

}  // namespace lab
