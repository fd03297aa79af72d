// KV snapshots: ember's one file format for KV state that outlives a request, used both for a
// saved conversation (Engine::save_state) and for a persistent prefix store
// (Engine::save_prefix_store, EngineOptions::prefix_store_path). A snapshot is a set of full
// prefix-cache blocks, content-addressed by the same hash chain as runtime/block_pool.
//
// Layout, every integer little-endian:
//   header (68 bytes)
//     0  magic "EMBERKV\0"                    8 bytes
//     8  format version (kKvSnapshotVersion)  u32
//    12  ember version, NUL padded            16 bytes
//    28  model identity (GgufFile::identity)  u64
//    36  precision (0 int8, 1 fp32)           u32
//    40  KV cache type (0 f16, 1 f32)         u32
//    44  block size, layers, kv heads, head dim  4 x u32
//    60  block count                          u64
//   blocks, parents before children
//     hash u64, parent hash u64 (0: first block of a chain), block_size token ids (i32),
//     K and V of every layer as [layer][K, V][block_size, kv_heads, head_dim]
//   checksum u64: util/hash.hpp's Hasher over every byte before it
//
// The reader trusts nothing: sizes are checked against the buffer before any use (a huge
// declared count is an Error, never an allocation), and a file from another model, ember
// version, precision, KV type or geometry is refused, as is any block whose hash does not match
// its tokens, whose parent is not earlier in the file, whose ids are outside the vocabulary or
// whose K/V hold a NaN or an infinity.
//
// Thread-safety: free functions and a writer owned by one caller; no shared state.
#pragma once

#include <ember/ember.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

namespace ember::runtime {

// 2: int8 KV groups are stored Hadamard-rotated (kernels/kv_layout.hpp); 1 held them as they were.
inline constexpr std::uint32_t kKvSnapshotVersion = 2;
inline constexpr std::size_t kKvSnapshotHeaderBytes = 68;

// What a snapshot is tied to: the engine that may load it must match every field.
struct KvSnapshotIdentity {
  std::uint64_t model = 0;
  Precision precision = Precision::int8;
  KvCacheType kv_type = KvCacheType::f16;
  int block_size = 0, layers = 0, kv_heads = 0, head_dim = 0;

  std::size_t kv_bytes_per_block() const;      // K and V of every layer
  std::size_t record_bytes_per_block() const;  // hashes, ids and K/V
};

// Limits of the engine that reads: ids must be below `vocab`; at most `max_blocks` blocks.
struct KvSnapshotLimits {
  int vocab = 0;
  std::uint64_t max_blocks = 0;

  // The largest snapshot these limits allow, for checking a file's size before reading it.
  std::uint64_t max_bytes(const KvSnapshotIdentity& identity) const;
};

struct KvSnapshotBlock {
  std::uint64_t hash = 0, parent = 0;
  std::vector<std::int32_t> tokens;
  const std::uint8_t* kv = nullptr;  // kv_bytes_per_block() bytes inside the parsed buffer
};

// Validates `bytes` completely and returns its blocks (views into `bytes`). Throws Error:
// invalid_argument for a truncated, corrupt or foreign snapshot, unsupported for another format
// or ember version, out_of_memory for more blocks than `limits` allow; the message names the
// field and both values.
std::vector<KvSnapshotBlock> read_kv_snapshot(std::span<const std::uint8_t> bytes, const KvSnapshotIdentity& expected,
                                              const KvSnapshotLimits& limits);

// The checksum a snapshot ends with, over `bytes` (every byte before it).
std::uint64_t kv_snapshot_checksum(std::span<const std::uint8_t> bytes);

class KvSnapshotWriter {
 public:
  explicit KvSnapshotWriter(const KvSnapshotIdentity& identity);

  bool contains(std::uint64_t hash) const { return hashes_.contains(hash); }
  // Appends a block (its parent must be 0 or added before) and returns where its
  // kv_bytes_per_block() bytes of K/V go; the pointer is valid until the next call.
  std::uint8_t* add_block(std::uint64_t parent, std::span<const std::int32_t> tokens);
  std::size_t blocks() const { return hashes_.size(); }
  // The finished snapshot (block count and checksum written); the writer is empty after.
  std::vector<std::uint8_t> finish();

 private:
  KvSnapshotIdentity identity_;
  std::vector<std::uint8_t> bytes_;
  std::unordered_set<std::uint64_t> hashes_;
};

// Whole-file helpers. write: through util::AtomicFile (a random O_EXCL | O_NOFOLLOW temporary
// beside `path`, fsynced, renamed over it, removed on failure), so a crash never leaves a
// half-written snapshot and a planted symlink is never followed. read: Error(io) when unreadable, Error(out_of_memory)
// naming both sizes when the file is larger than `max_bytes`.
void write_snapshot_file(const std::string& path, std::span<const std::uint8_t> bytes);
std::vector<std::uint8_t> read_snapshot_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace ember::runtime
