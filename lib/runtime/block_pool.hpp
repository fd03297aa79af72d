// KV block bookkeeping with automatic prefix caching. No tensors live here: a block id indexes
// the backend's KV arrays, and this class only decides who owns which block.
//
// Every block is in exactly one state:
//   free    ref 0, holds nothing reusable       -> on the free stack
//   cached  ref 0, a published full block       -> in the LRU list and the hash map (evictable)
//   used    ref > 0 (may also be published)     -> owned by one or more sequences
// allocate() takes a free block first and otherwise evicts the least recently released cached
// block. All operations except match_prefix/publish_full_block (O(blocks touched)) are O(1).
//
// Prefix cache: a full block is identified by a hash chain, hash(parent hash, its token ids),
// so equal hashes mean equal whole prefixes. The parent hash and ids are stored with each
// published block and compared on lookup, so a 64-bit collision can only cause a miss, never
// wrong KV. Release a sequence's blocks last-to-first: the LRU then evicts the tail of a chain
// before its head, and the head (shared system prompts) stays matchable longest.
//
// Thread-safety: none; the engine's scheduler owns the pool and calls it from its step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace ember::runtime {

class BlockPool {
 public:
  // Throws Error(invalid_argument) when block_count or block_size is not positive.
  BlockPool(int block_count, int block_size, bool prefix_caching);

  int block_size() const { return block_size_; }
  int block_count() const { return static_cast<int>(blocks_.size()); }
  // The most tokens one sequence can hold: every block.
  std::int64_t token_capacity() const { return std::int64_t{block_count()} * block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Blocks allocate() can hand out: never used or released-uncached, plus evictable cached ones.
  int free_blocks() const { return static_cast<int>(free_.size()) + lru_size_; }
  int ref_count(int block) const;  // for tests and diagnostics
  // The hash `block` is published under, or nullopt (never published, or evicted since).
  std::optional<std::uint64_t> published_hash(int block) const;

  // A block with ref count 1, or nullopt when every block is referenced.
  std::optional<int> allocate();

  // Reference counting. retain() of an unreferenced cached block takes it out of the LRU;
  // release() to zero keeps a published block cached (most recently used) and returns any
  // other block to the free stack. Misuse (bad id, release at 0, retain of a free block) throws
  // Error(internal): it is a bug in the caller.
  void retain(int block);
  void release(int block);

  // The cached blocks holding the longest run of leading full blocks of `tokens`, each retained
  // once for the caller. It never covers the last token, so the caller always computes at least
  // one position and gets logits. Empty without prefix caching.
  // `root`: the parent hash of the first block (0; a request with LoRA adapters starts its
  // chain at a hash of its adapter set, so its blocks are found by requests with the same set only).
  std::vector<int> match_prefix(std::span<const std::int32_t> tokens, std::uint64_t root = 0);

  // The cached blocks holding the longest run of leading full blocks of `tokens` (all of them,
  // the last token included), each retained once for the caller. Counts no statistics.
  std::vector<int> find_chain(std::span<const std::int32_t> tokens, std::uint64_t root = 0);

  // For loading saved KV (runtime/kv_snapshot): a published block for `tokens` after the chain
  // ending in `parent_hash`, retained once for the caller. `fresh` means a newly allocated block
  // whose K/V the caller must write before releasing it; otherwise the block was cached already.
  // nullopt when every block is referenced. Requires prefix caching.
  struct Imported {
    int block;
    std::uint64_t hash;
    bool fresh;
  };
  std::optional<Imported> import_block(std::uint64_t parent_hash, std::span<const std::int32_t> tokens);

  // Publishes `block` (held by the caller), just filled with `tokens` (block_size ids) after the
  // chain ending in `parent_hash` (0 for a sequence's first block). Returns the block's hash for
  // the next block. When the hash is already published (by another block) nothing changes.
  // Without prefix caching it only computes the hash.
  std::uint64_t publish_full_block(int block, std::uint64_t parent_hash, std::span<const std::int32_t> tokens);

  // splitmix64-style mixing (util/hash.hpp) of the parent hash, the id count and every id; never
  // returns 0 (0 means "no parent"). Its values are stored in KV snapshot files, so they must
  // not change between builds: tests/runtime/test_block_pool.cpp pins them.
  static std::uint64_t block_hash(std::uint64_t parent_hash, std::span<const std::int32_t> tokens);

  struct Stats {
    std::uint64_t lookups = 0;     // match_prefix calls
    std::uint64_t hit_blocks = 0;  // blocks returned by match_prefix
    std::uint64_t hit_tokens = 0;  // hit_blocks * block_size
    std::uint64_t evictions = 0;   // cached blocks reclaimed by allocate()
  };
  Stats stats() const { return stats_; }

  // For tests: ref counts, free stack, LRU links and hash map agree. Throws Error(internal).
  void check_invariants() const;

 private:
  static constexpr int kNone = -1;
  struct Block {
    int ref = 0;
    bool cached = false;   // published: in the hash map under `hash`
    bool in_free = false;  // on the free stack
    int lru_prev = kNone, lru_next = kNone;
    std::uint64_t hash = 0, parent_hash = 0;
  };

  void check_id(int block, const char* what) const;
  void lru_push_back(int block);
  void lru_unlink(int block);
  void evict(int block);  // drops a cached block's publication
  bool holds(int block, std::uint64_t parent_hash, std::span<const std::int32_t> tokens) const;

  int block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<std::int32_t> block_tokens_;                  // block_size ids per block, valid while cached
  std::vector<int> free_;                                   // stack of free blocks
  int lru_head_ = kNone, lru_tail_ = kNone, lru_size_ = 0;  // head = least recently used
  std::unordered_map<std::uint64_t, int> by_hash_;
  Stats stats_;
};

}  // namespace ember::runtime
