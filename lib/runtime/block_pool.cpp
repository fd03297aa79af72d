#include "runtime/block_pool.hpp"

#include "util/check.hpp"
#include "util/hash.hpp"

#include <algorithm>

namespace ember::runtime {

BlockPool::BlockPool(int block_count, int block_size, bool prefix_caching)
    : block_size_(block_size), prefix_caching_(prefix_caching) {
  if (block_count <= 0) fail(ErrorCode::invalid_argument, "block_count must be > 0, got {}", block_count);
  if (block_size <= 0) fail(ErrorCode::invalid_argument, "block_size must be > 0, got {}", block_size);
  blocks_.resize(static_cast<std::size_t>(block_count));
  if (prefix_caching_) block_tokens_.resize(blocks_.size() * static_cast<std::size_t>(block_size));
  free_.reserve(blocks_.size());
  // Reverse order so that a fresh pool hands out 0, 1, 2, ... (easier to read in tests and dumps).
  for (int b = block_count - 1; b >= 0; --b) {
    free_.push_back(b);
    blocks_[static_cast<std::size_t>(b)].in_free = true;
  }
}

std::uint64_t BlockPool::block_hash(std::uint64_t parent_hash, std::span<const std::int32_t> tokens) {
  std::uint64_t h = mix64(parent_hash + kHashGolden * (static_cast<std::uint64_t>(tokens.size()) + 1));
  for (std::int32_t id : tokens) h = mix64(h ^ (static_cast<std::uint32_t>(id) + kHashGolden));
  return h == 0 ? 1 : h;
}

void BlockPool::check_id(int block, const char* what) const {
  if (block < 0 || block >= block_count())
    fail(ErrorCode::internal, "{}: block id {} outside [0, {})", what, block, block_count());
}

int BlockPool::ref_count(int block) const {
  check_id(block, "ref_count");
  return blocks_[static_cast<std::size_t>(block)].ref;
}

std::optional<std::uint64_t> BlockPool::published_hash(int block) const {
  check_id(block, "published_hash");
  const Block& b = blocks_[static_cast<std::size_t>(block)];
  if (!b.cached) return std::nullopt;
  return b.hash;
}

void BlockPool::lru_push_back(int block) {
  Block& b = blocks_[static_cast<std::size_t>(block)];
  b.lru_prev = lru_tail_;
  b.lru_next = kNone;
  if (lru_tail_ != kNone)
    blocks_[static_cast<std::size_t>(lru_tail_)].lru_next = block;
  else
    lru_head_ = block;
  lru_tail_ = block;
  ++lru_size_;
}

void BlockPool::lru_unlink(int block) {
  Block& b = blocks_[static_cast<std::size_t>(block)];
  if (b.lru_prev != kNone)
    blocks_[static_cast<std::size_t>(b.lru_prev)].lru_next = b.lru_next;
  else
    lru_head_ = b.lru_next;
  if (b.lru_next != kNone)
    blocks_[static_cast<std::size_t>(b.lru_next)].lru_prev = b.lru_prev;
  else
    lru_tail_ = b.lru_prev;
  b.lru_prev = b.lru_next = kNone;
  --lru_size_;
}

void BlockPool::evict(int block) {
  Block& b = blocks_[static_cast<std::size_t>(block)];
  by_hash_.erase(b.hash);
  b.cached = false;
  b.hash = b.parent_hash = 0;
}

std::optional<int> BlockPool::allocate() {
  int block;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
    blocks_[static_cast<std::size_t>(block)].in_free = false;
  } else if (lru_head_ != kNone) {
    block = lru_head_;
    lru_unlink(block);
    evict(block);
    ++stats_.evictions;
  } else {
    return std::nullopt;
  }
  blocks_[static_cast<std::size_t>(block)].ref = 1;
  return block;
}

void BlockPool::retain(int block) {
  check_id(block, "retain");
  Block& b = blocks_[static_cast<std::size_t>(block)];
  if (b.ref == 0) {
    if (!b.cached) fail(ErrorCode::internal, "retain of free block {}", block);
    lru_unlink(block);
  }
  ++b.ref;
}

void BlockPool::release(int block) {
  check_id(block, "release");
  Block& b = blocks_[static_cast<std::size_t>(block)];
  if (b.ref <= 0) fail(ErrorCode::internal, "release of block {} whose ref count is 0", block);
  if (--b.ref > 0) return;
  if (b.cached) {
    lru_push_back(block);
  } else {
    b.in_free = true;
    free_.push_back(block);
  }
}

bool BlockPool::holds(int block, std::uint64_t parent_hash, std::span<const std::int32_t> tokens) const {
  const Block& b = blocks_[static_cast<std::size_t>(block)];
  const auto first = block_tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_;
  return b.parent_hash == parent_hash && std::equal(tokens.begin(), tokens.end(), first);
}

std::vector<int> BlockPool::match_prefix(std::span<const std::int32_t> tokens, std::uint64_t root) {
  ++stats_.lookups;
  if (tokens.empty()) return {};
  // Leaves the last token to compute, so the caller gets its logits.
  std::vector<int> chain = find_chain(tokens.first(tokens.size() - 1), root);
  stats_.hit_blocks += chain.size();
  stats_.hit_tokens += chain.size() * static_cast<std::size_t>(block_size_);
  return chain;
}

std::vector<int> BlockPool::find_chain(std::span<const std::int32_t> tokens, std::uint64_t root) {
  std::vector<int> chain;
  if (!prefix_caching_) return chain;
  const std::size_t bs = static_cast<std::size_t>(block_size_);
  std::uint64_t parent = root;
  for (std::size_t i = 0; i < tokens.size() / bs; ++i) {
    const auto ids = tokens.subspan(i * bs, bs);
    const std::uint64_t h = block_hash(parent, ids);
    const auto it = by_hash_.find(h);
    if (it == by_hash_.end() || !holds(it->second, parent, ids)) break;
    retain(it->second);
    chain.push_back(it->second);
    parent = h;
  }
  return chain;
}

std::optional<BlockPool::Imported> BlockPool::import_block(std::uint64_t parent_hash,
                                                           std::span<const std::int32_t> tokens) {
  if (!prefix_caching_) fail(ErrorCode::internal, "import_block without prefix caching");
  if (tokens.size() != static_cast<std::size_t>(block_size_))
    fail(ErrorCode::internal, "import_block: {} ids for a block of {}", tokens.size(), block_size_);
  const std::uint64_t h = block_hash(parent_hash, tokens);
  if (const auto it = by_hash_.find(h); it != by_hash_.end() && holds(it->second, parent_hash, tokens)) {
    retain(it->second);
    return Imported{it->second, h, false};
  }
  const std::optional<int> block = allocate();
  if (!block) return std::nullopt;
  publish_full_block(*block, parent_hash, tokens);
  return Imported{*block, h, true};
}

std::uint64_t BlockPool::publish_full_block(int block, std::uint64_t parent_hash,
                                            std::span<const std::int32_t> tokens) {
  check_id(block, "publish_full_block");
  if (tokens.size() != static_cast<std::size_t>(block_size_))
    fail(ErrorCode::internal, "publish_full_block: {} ids for a block of {}", tokens.size(), block_size_);
  const std::uint64_t h = block_hash(parent_hash, tokens);
  if (!prefix_caching_ || by_hash_.contains(h)) return h;
  Block& b = blocks_[static_cast<std::size_t>(block)];
  if (b.ref <= 0) fail(ErrorCode::internal, "publish_full_block: block {} is not held", block);
  // A held block is published once; a second, different publication would orphan the first hash.
  if (b.cached) fail(ErrorCode::internal, "publish_full_block: block {} is already published", block);
  b.cached = true;
  b.hash = h;
  b.parent_hash = parent_hash;
  std::copy(tokens.begin(), tokens.end(), block_tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  by_hash_.emplace(h, block);
  return h;
}

void BlockPool::check_invariants() const {
  std::size_t cached = 0, on_free = 0;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    EMBER_ASSERT(b.ref >= 0);
    EMBER_ASSERT(!(b.in_free && (b.ref > 0 || b.cached)));
    EMBER_ASSERT(b.ref > 0 || b.cached || b.in_free);  // an unreferenced block is reachable
    if (b.cached) {
      ++cached;
      const auto it = by_hash_.find(b.hash);
      EMBER_ASSERT(it != by_hash_.end() && it->second == static_cast<int>(i));
    }
    on_free += b.in_free ? 1 : 0;
  }
  EMBER_ASSERT(cached == by_hash_.size());
  EMBER_ASSERT(on_free == free_.size());
  for (int b : free_) EMBER_ASSERT(blocks_[static_cast<std::size_t>(b)].in_free);

  // The LRU holds exactly the unreferenced cached blocks, linked both ways.
  int count = 0, prev = kNone;
  for (int b = lru_head_; b != kNone; b = blocks_[static_cast<std::size_t>(b)].lru_next) {
    const Block& blk = blocks_[static_cast<std::size_t>(b)];
    EMBER_ASSERT(blk.ref == 0 && blk.cached && blk.lru_prev == prev);
    prev = b;
    EMBER_ASSERT(++count <= block_count());
  }
  EMBER_ASSERT(prev == lru_tail_ && count == lru_size_);
  std::size_t idle_cached = 0;
  for (const Block& b : blocks_) idle_cached += (b.ref == 0 && b.cached) ? 1 : 0;
  EMBER_ASSERT(idle_cached == static_cast<std::size_t>(lru_size_));
}

}  // namespace ember::runtime
