#include "runtime/block_pool.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

using ember::runtime::BlockPool;
using Ids = std::vector<std::int32_t>;

namespace {

Ids iota_ids(int n, std::int32_t first = 0) {
  Ids v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::span<const std::int32_t> block_of(const Ids& ids, int i, int bs) {
  return std::span<const std::int32_t>(ids).subspan(static_cast<std::size_t>(i * bs), static_cast<std::size_t>(bs));
}

// Allocates and publishes the full blocks of `ids` as one chain; returns the blocks (held once).
std::vector<int> fill(BlockPool& pool, const Ids& ids) {
  const int bs = pool.block_size();
  std::vector<int> blocks;
  std::uint64_t parent = 0;
  for (int i = 0; i < static_cast<int>(ids.size()) / bs; ++i) {
    const std::optional<int> b = pool.allocate();
    REQUIRE(b.has_value());
    parent = pool.publish_full_block(*b, parent, block_of(ids, i, bs));
    blocks.push_back(*b);
  }
  return blocks;
}

// Releases last-to-first, as the engine does, so a chain's tail is evicted before its head.
void release_all(BlockPool& pool, const std::vector<int>& blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) pool.release(*it);
}

ember::ErrorCode code_of(auto&& f) {
  try {
    f();
  } catch (const ember::Error& e) {
    return e.code();
  }
  return ember::ErrorCode::cancelled;  // stands for "did not throw"
}

}  // namespace

TEST_CASE("allocate every block, exhaust, release and reuse") {
  BlockPool pool(8, 16, true);
  CHECK(pool.block_size() == 16);
  CHECK(pool.free_blocks() == 8);
  std::set<int> seen;
  for (int i = 0; i < 8; ++i) {
    const std::optional<int> b = pool.allocate();
    REQUIRE(b.has_value());
    CHECK(*b == i);  // a fresh pool hands out ids in order
    CHECK(pool.ref_count(*b) == 1);
    seen.insert(*b);
    CHECK(pool.free_blocks() == 7 - i);
  }
  CHECK(seen.size() == 8);
  CHECK_FALSE(pool.allocate().has_value());
  pool.release(5);
  CHECK(pool.free_blocks() == 1);
  CHECK(pool.allocate() == 5);
  CHECK_FALSE(pool.allocate().has_value());
  pool.retain(3);
  pool.release(3);
  CHECK(pool.free_blocks() == 0);  // still referenced once
  pool.release(3);
  CHECK(pool.free_blocks() == 1);
  pool.check_invariants();
}

TEST_CASE("prefix match returns 0..n full blocks and never covers the last token") {
  const int bs = 4;
  BlockPool pool(16, bs, true);
  const Ids prompt = iota_ids(17, 100);  // 4 full blocks + 1 token
  const std::vector<int> chain = fill(pool, prompt);
  REQUIRE(chain.size() == 4);
  release_all(pool, chain);
  CHECK(pool.free_blocks() == 16);  // cached blocks count as free (evictable)

  auto matched = [&](std::size_t length) {
    const Ids head(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(length));
    const std::vector<int> got = pool.match_prefix(head);
    release_all(pool, got);
    return got;
  };
  CHECK(matched(0).empty());
  CHECK(matched(1).empty());
  CHECK(matched(4).empty());  // one full block, but it holds the last token
  CHECK(matched(5) == std::vector<int>{chain[0]});
  CHECK(matched(8).size() == 1);
  CHECK(matched(9).size() == 2);
  CHECK(matched(16).size() == 3);  // exactly 4 blocks long: the last block is left to compute
  CHECK(matched(17) == chain);
  pool.check_invariants();
}

TEST_CASE("a divergent or partial block ends the match; the chain makes position matter") {
  const int bs = 4;
  BlockPool pool(16, bs, true);
  const Ids prompt = iota_ids(12, 0);  // 3 full blocks
  release_all(pool, fill(pool, prompt));

  Ids other = prompt;
  other[9] = 999;  // third block differs
  other.push_back(7);
  std::vector<int> got = pool.match_prefix(other);
  CHECK(got.size() == 2);
  release_all(pool, got);

  // The second block's ids alone, at position 0, are not the cached second block.
  Ids shifted(prompt.begin() + 4, prompt.end());
  shifted.push_back(1);
  CHECK(pool.match_prefix(shifted).empty());

  // A partially filled block is never published, so it is never matched.
  BlockPool partial(4, bs, true);
  const std::optional<int> b = partial.allocate();
  REQUIRE(b.has_value());
  partial.release(*b);  // filled with 3 ids only: not published
  CHECK(partial.match_prefix(Ids{0, 1, 2, 3, 4}).empty());
}

TEST_CASE("eviction is least-recently-released first and removes the hash entry") {
  const int bs = 2;
  BlockPool pool(4, bs, true);
  std::vector<Ids> docs;
  std::vector<int> blocks;
  for (int d = 0; d < 4; ++d) {
    docs.push_back(Ids{d * 10, d * 10 + 1, 5});  // one full block each, plus one token
    const std::vector<int> c = fill(pool, docs.back());
    blocks.push_back(c.at(0));
  }
  CHECK_FALSE(pool.allocate().has_value());
  for (int d : {2, 0, 3, 1}) pool.release(blocks[static_cast<std::size_t>(d)]);
  CHECK(pool.free_blocks() == 4);

  // Touching doc 0 (match + release) makes it the most recently used.
  std::vector<int> got = pool.match_prefix(docs[0]);
  REQUIRE(got.size() == 1);
  pool.release(got[0]);  // LRU order now: 2, 3, 1, 0

  CHECK(pool.allocate() == blocks[2]);
  CHECK(pool.stats().evictions == 1);
  CHECK_FALSE(pool.published_hash(blocks[2]).has_value());
  CHECK(pool.match_prefix(docs[2]).empty());  // its hash entry is gone
  CHECK(pool.allocate() == blocks[3]);
  CHECK(pool.allocate() == blocks[1]);
  CHECK(pool.match_prefix(docs[0]).size() == 1);  // the most recent survivor still hits
  CHECK_FALSE(pool.allocate().has_value());       // ...and is now held, so not evictable
  CHECK(pool.stats().evictions == 3);
  pool.check_invariants();
}

TEST_CASE("a matched block is retained and cannot be evicted while referenced") {
  const int bs = 4;
  BlockPool pool(3, bs, true);
  const Ids prompt = iota_ids(9, 50);
  const std::vector<int> chain = fill(pool, prompt);
  REQUIRE(chain.size() == 2);
  release_all(pool, chain);

  const std::vector<int> a = pool.match_prefix(prompt);
  const std::vector<int> b = pool.match_prefix(prompt);  // a second sequence shares the blocks
  CHECK(a == chain);
  CHECK(b == chain);
  CHECK(pool.ref_count(chain[0]) == 2);
  CHECK(pool.free_blocks() == 1);
  const std::optional<int> fresh = pool.allocate();
  REQUIRE(fresh.has_value());
  CHECK(std::find(chain.begin(), chain.end(), *fresh) == chain.end());
  CHECK_FALSE(pool.allocate().has_value());
  release_all(pool, a);
  CHECK_FALSE(pool.allocate().has_value());  // b still holds them
  release_all(pool, b);
  // Released last-to-first: the chain's tail goes first.
  CHECK(pool.allocate() == chain[1]);
  CHECK(pool.allocate() == chain[0]);
  pool.check_invariants();
}

TEST_CASE("publishing a hash that is already cached leaves the first block alone") {
  const int bs = 2;
  BlockPool pool(4, bs, true);
  const Ids ids{1, 2};
  const int first = *pool.allocate();
  const int second = *pool.allocate();
  const std::uint64_t h1 = pool.publish_full_block(first, 0, ids);
  const std::uint64_t h2 = pool.publish_full_block(second, 0, ids);
  CHECK(h1 == h2);
  CHECK(h1 == BlockPool::block_hash(0, ids));
  CHECK(pool.published_hash(first) == h1);
  CHECK_FALSE(pool.published_hash(second).has_value());
  pool.release(second);
  pool.release(first);
  CHECK(pool.match_prefix(Ids{1, 2, 3}) == std::vector<int>{first});
  // `second` went back to the free stack, so it is reused before the cached block is evicted.
  CHECK(pool.allocate() == second);
  CHECK(pool.stats().evictions == 0);
  pool.check_invariants();
}

TEST_CASE("stats count lookups, hit blocks and hit tokens") {
  const int bs = 4;
  BlockPool pool(8, bs, true);
  const Ids prompt = iota_ids(13, 0);
  release_all(pool, fill(pool, prompt));
  release_all(pool, pool.match_prefix(prompt));          // 3 blocks
  release_all(pool, pool.match_prefix(iota_ids(6, 0)));  // 1 block
  release_all(pool, pool.match_prefix(iota_ids(6, 1)));  // miss
  const BlockPool::Stats s = pool.stats();
  CHECK(s.lookups == 3);
  CHECK(s.hit_blocks == 4);
  CHECK(s.hit_tokens == 16);
  CHECK(s.evictions == 0);
}

TEST_CASE("without prefix caching nothing is cached or matched") {
  BlockPool pool(2, 2, false);
  const std::vector<int> c = fill(pool, Ids{1, 2, 3});
  CHECK_FALSE(pool.published_hash(c[0]).has_value());
  pool.release(c[0]);
  CHECK(pool.match_prefix(Ids{1, 2, 3}).empty());
  CHECK(pool.stats().lookups == 1);
  pool.check_invariants();
}

TEST_CASE("misuse is reported, never undefined") {
  CHECK(code_of([] { BlockPool(0, 16, true); }) == ember::ErrorCode::invalid_argument);
  CHECK(code_of([] { BlockPool(4, 0, true); }) == ember::ErrorCode::invalid_argument);
  BlockPool pool(2, 2, true);
  CHECK(code_of([&] { pool.release(0); }) == ember::ErrorCode::internal);   // ref count 0
  CHECK(code_of([&] { pool.retain(1); }) == ember::ErrorCode::internal);    // free block
  CHECK(code_of([&] { pool.retain(2); }) == ember::ErrorCode::internal);    // bad id
  CHECK(code_of([&] { pool.release(-1); }) == ember::ErrorCode::internal);  // bad id
  const int b = *pool.allocate();
  CHECK(code_of([&] { pool.publish_full_block(b, 0, Ids{1}); }) == ember::ErrorCode::internal);
  pool.publish_full_block(b, 0, Ids{1, 2});
  CHECK(code_of([&] { pool.publish_full_block(b, 0, Ids{3, 4}); }) == ember::ErrorCode::internal);
  pool.check_invariants();
}

TEST_CASE("block_hash mixes every id, the order and the parent") {
  const Ids a{1, 2, 3, 4};
  CHECK(BlockPool::block_hash(0, a) == BlockPool::block_hash(0, Ids{1, 2, 3, 4}));
  CHECK(BlockPool::block_hash(0, a) != BlockPool::block_hash(0, Ids{2, 1, 3, 4}));
  CHECK(BlockPool::block_hash(0, a) != BlockPool::block_hash(1, a));
  CHECK(BlockPool::block_hash(0, Ids{0}) != BlockPool::block_hash(0, Ids{0, 0}));
  // Avalanche: flipping one id bit flips about half of the 64 hash bits on average.
  std::mt19937 rng(3);
  double flipped = 0;
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    Ids ids(16);
    for (auto& x : ids) x = static_cast<std::int32_t>(rng() % 49152);
    const std::uint64_t parent = rng();
    Ids changed = ids;
    changed[rng() % 16] ^= 1 << (rng() % 16);
    flipped += std::popcount(BlockPool::block_hash(parent, ids) ^ BlockPool::block_hash(parent, changed));
  }
  CHECK(flipped / trials == doctest::Approx(32.0).epsilon(0.05));
}

TEST_CASE("randomized operations keep every invariant and the ref counts of a shadow model") {
  const int count = 24, bs = 2;
  BlockPool pool(count, bs, true);
  std::mt19937_64 rng(2024);
  std::map<int, int> held;  // block -> references we hold
  // A small token alphabet so that chains repeat and the cache hits often.
  std::vector<Ids> docs;
  for (int d = 0; d < 6; ++d) {
    Ids doc(9);
    for (auto& x : doc) x = static_cast<std::int32_t>(rng() % 3);
    docs.push_back(doc);
  }
  auto hold = [&](int b) { ++held[b]; };
  auto drop_one = [&]() {
    auto it = held.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng() % held.size()));
    pool.release(it->first);
    if (--it->second == 0) held.erase(it);
  };
  std::uint64_t hits = 0;
  for (int step = 0; step < 10000; ++step) {
    const int op = static_cast<int>(rng() % 6);
    if (op == 0) {
      const int free_before = pool.free_blocks();
      const std::optional<int> b = pool.allocate();
      CHECK(b.has_value() == (free_before > 0));
      if (b) {
        CHECK(held.count(*b) == 0);
        hold(*b);
      }
    } else if (op == 1 && !held.empty()) {
      drop_one();
    } else if (op == 2 && !held.empty()) {
      const int b = std::next(held.begin(), static_cast<std::ptrdiff_t>(rng() % held.size()))->first;
      pool.retain(b);
      hold(b);
    } else if (op == 3) {
      // Fill a document as a sequence would (when the pool has room), publishing each block.
      const Ids& doc = docs[rng() % docs.size()];
      if (pool.free_blocks() >= 4) {
        for (int b : fill(pool, doc)) hold(b);
      }
    } else if (op == 4) {
      const Ids& doc = docs[rng() % docs.size()];
      const std::vector<int> got = pool.match_prefix(doc);
      hits += got.size();
      CHECK(got.size() <= 4);
      std::uint64_t parent = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        parent = BlockPool::block_hash(parent, block_of(doc, static_cast<int>(i), bs));
        CHECK(pool.published_hash(got[i]) == parent);  // the right block at the right place
        hold(got[i]);
      }
    } else if (!held.empty()) {
      while (!held.empty() && rng() % 4 != 0) drop_one();
    }
    if (step % 3 == 0) {
      pool.check_invariants();
      int used = 0;
      for (const auto& [b, refs] : held) {
        CHECK(pool.ref_count(b) == refs);
        ++used;
      }
      CHECK(pool.free_blocks() + used == count);
    }
  }
  while (!held.empty()) drop_one();
  pool.check_invariants();
  CHECK(pool.free_blocks() == count);
  CHECK(hits > 100);  // the sequence really exercised the cache
  CHECK(pool.stats().hit_blocks == hits);
  CHECK(pool.stats().evictions > 0);
}

TEST_CASE("find_chain covers every full block and counts no statistics") {
  BlockPool pool(8, 4, true);
  const Ids ids = iota_ids(12, 100);
  release_all(pool, fill(pool, ids));
  const std::vector<int> chain = pool.find_chain(ids);  // 12 ids: all 3 blocks, the last included
  CHECK(chain.size() == 3);
  for (int b : chain) CHECK(pool.ref_count(b) == 1);
  CHECK(pool.stats().lookups == 0);
  const std::vector<int> matched = pool.match_prefix(ids);  // leaves the last token to compute
  CHECK(matched == std::vector<int>{chain[0], chain[1]});
  CHECK(pool.stats().lookups == 1);
  release_all(pool, matched);
  release_all(pool, chain);
  pool.check_invariants();
  CHECK(pool.free_blocks() == 8);
}

TEST_CASE("import_block: new blocks are published and held, known ones retained, a full pool says no") {
  BlockPool pool(3, 4, true);
  const Ids ids = iota_ids(8, 10);
  const auto a = pool.import_block(0, block_of(ids, 0, 4));
  REQUIRE(a.has_value());
  CHECK(a->fresh);
  CHECK(a->hash == BlockPool::block_hash(0, block_of(ids, 0, 4)));
  CHECK(pool.published_hash(a->block) == a->hash);
  CHECK(pool.ref_count(a->block) == 1);
  const auto again = pool.import_block(0, block_of(ids, 0, 4));
  REQUIRE(again.has_value());
  CHECK_FALSE(again->fresh);
  CHECK(again->block == a->block);
  CHECK(pool.ref_count(a->block) == 2);
  const auto b = pool.import_block(a->hash, block_of(ids, 1, 4));
  REQUIRE(b.has_value());
  const auto c = pool.import_block(b->hash, iota_ids(4, 50));
  REQUIRE(c.has_value());
  CHECK_FALSE(pool.import_block(c->hash, iota_ids(4, 60)).has_value());  // all three held
  for (int block : {c->block, b->block, a->block, a->block}) pool.release(block);
  pool.check_invariants();
  // Released, the imported chain is an ordinary cached prefix.
  Ids prompt = ids;
  prompt.push_back(1);
  CHECK(pool.match_prefix(prompt) == std::vector<int>{a->block, b->block});
}
