// The KV snapshot geometry the kv_snapshot fuzz target reads with, and a valid snapshot of it
// (two chains sharing a first block) that make_seeds.cpp writes and corrupts into seeds.
#pragma once

#include "runtime/block_pool.hpp"
#include "runtime/kv_snapshot.hpp"

#include <cstdint>
#include <vector>

namespace ember::fuzz {

inline runtime::KvSnapshotIdentity snapshot_identity() {
  runtime::KvSnapshotIdentity id;
  id.model = 0x0123456789abcdefull;
  id.block_size = 4;
  id.layers = 2;
  id.kv_heads = 1;
  id.head_dim = 4;
  return id;
}

inline constexpr runtime::KvSnapshotLimits kSnapshotLimits{64, 8};

inline std::vector<std::uint8_t> valid_snapshot() {
  const runtime::KvSnapshotIdentity id = snapshot_identity();
  runtime::KvSnapshotWriter w(id);
  const std::vector<std::int32_t> head{1, 2, 3, 4}, tail_a{5, 6, 7, 8}, tail_b{9, 10, 11, 12};
  const std::uint64_t parent = runtime::BlockPool::block_hash(0, head);
  int counter = 0;
  for (const auto* ids : {&head, &tail_a, &tail_b}) {
    std::uint8_t* kv = w.add_block(ids == &head ? 0 : parent, *ids);
    for (std::size_t i = 0; i < id.kv_bytes_per_block(); ++i) kv[i] = static_cast<std::uint8_t>(counter++ & 0x3f);
  }
  return w.finish();
}

}  // namespace ember::fuzz
