// Fuzz target: the KV snapshot reader (saved conversations and prefix stores) on any bytes. A
// snapshot it accepts must keep every promise of runtime/kv_snapshot.hpp (counts within the
// limits, hashes that match their tokens, parents earlier in the file, ids in the vocabulary,
// K/V inside the input), and importing it into a block pool must keep the pool consistent.
// Only ember::Error may come out; anything else, a crash, a sanitizer report or an allocation
// over the fuzzer's cap is a finding.
#include "fuzz_support.hpp"
#include "kv_snapshot_seed.hpp"

#include <ember/ember.hpp>

#include <span>
#include <unordered_set>

namespace {

using namespace ember::runtime;

void import_all(const std::vector<KvSnapshotBlock>& blocks) {
  BlockPool pool(6, ember::fuzz::snapshot_identity().block_size, true);  // fewer than the limit: some may not fit
  std::vector<int> held;
  std::unordered_set<std::uint64_t> cached;
  for (const KvSnapshotBlock& b : blocks) {
    if (b.parent != 0 && !cached.contains(b.parent)) continue;
    if (const auto imported = pool.import_block(b.parent, b.tokens)) {
      FUZZ_CHECK(imported->hash == b.hash);
      held.push_back(imported->block);
      cached.insert(imported->hash);
    }
  }
  for (auto it = held.rbegin(); it != held.rend(); ++it) pool.release(*it);
  pool.check_invariants();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const KvSnapshotIdentity id = ember::fuzz::snapshot_identity();
  const KvSnapshotLimits limits = ember::fuzz::kSnapshotLimits;
  std::vector<KvSnapshotBlock> blocks;
  try {
    blocks = read_kv_snapshot(std::span(data, size), id, limits);
  } catch (const ember::Error&) {
    return 0;
  }
  FUZZ_CHECK(blocks.size() <= limits.max_blocks);
  FUZZ_CHECK(size == kKvSnapshotHeaderBytes + blocks.size() * id.record_bytes_per_block() + 8);
  std::unordered_set<std::uint64_t> earlier;
  for (const KvSnapshotBlock& b : blocks) {
    FUZZ_CHECK(b.tokens.size() == static_cast<std::size_t>(id.block_size));
    for (const std::int32_t t : b.tokens) FUZZ_CHECK(t >= 0 && t < limits.vocab);
    FUZZ_CHECK(b.hash == BlockPool::block_hash(b.parent, b.tokens));
    FUZZ_CHECK(b.parent == 0 || earlier.contains(b.parent));
    FUZZ_CHECK(b.kv >= data && b.kv + id.kv_bytes_per_block() <= data + size);
    earlier.insert(b.hash);
  }
  import_all(blocks);
  return 0;
}
