#include "runtime/kv_snapshot.hpp"

#include "backend/kv_cache.hpp"
#include "runtime/block_pool.hpp"
#include "util/atomic_file.hpp"
#include "util/check.hpp"
#include "util/hash.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace ember::runtime {
namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'K', 'V', '\0'};
constexpr std::size_t kVersionField = 16;
constexpr std::size_t kChecksumBytes = 8;
constexpr std::size_t kBlockCountOffset = 60;
constexpr std::uint64_t kChecksumSeed = 0x6b76736e6170ull;  // "kvsnap"

const char* name_of(KvCacheType type) {
  return type == KvCacheType::f16 ? "f16" : type == KvCacheType::f32 ? "f32" : "int8";
}
const char* name_of(Precision precision) { return precision == Precision::int8 ? "int8" : "fp32"; }

void put_u32(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<std::uint8_t>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void set_u64(std::uint8_t* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint64_t get_le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// True when no K/V element is a NaN or an infinity (all exponent bits set): for int8 K/V, no
// head slice's scale (the halves after its head_dim values, kernels/kv_layout.hpp).
bool all_finite(const std::uint8_t* kv, std::size_t bytes, KvCacheType type, int head_dim) {
  if (type == KvCacheType::int8) {
    const auto values = static_cast<std::size_t>(head_dim);
    const auto slice =
        static_cast<std::size_t>(backend::KvGeometry{{1, 1, head_dim, type}, 1, 1}.bytes_per_block() / 2);
    for (std::size_t at = 0; at + slice <= bytes; at += slice)
      for (std::size_t s = at + values; s + 1 < at + slice; s += 2)
        if ((get_le(kv + s, 2) & 0x7c00u) == 0x7c00u) return false;
  } else if (type == KvCacheType::f16) {
    for (std::size_t i = 0; i + 1 < bytes; i += 2)
      if ((get_le(kv + i, 2) & 0x7c00u) == 0x7c00u) return false;
  } else {
    for (std::size_t i = 0; i + 3 < bytes; i += 4)
      if ((get_le(kv + i, 4) & 0x7f800000u) == 0x7f800000u) return false;
  }
  return true;
}

// The fixed header fields in file order, checked one by one against the reading engine.
void check_header(std::span<const std::uint8_t> bytes, const KvSnapshotIdentity& want) {
  const std::uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0)
    fail(ErrorCode::invalid_argument, "not an ember KV snapshot: bad magic (the first 8 bytes are not \"EMBERKV\\0\")");
  const auto format = static_cast<std::uint32_t>(get_le(p + 8, 4));
  if (format != kKvSnapshotVersion)
    fail(ErrorCode::unsupported, "KV snapshot format version {}; this ember reads version {}", format,
         kKvSnapshotVersion);
  const char* written_by = reinterpret_cast<const char*>(p + 12);
  const std::string writer(written_by, strnlen(written_by, kVersionField));
  if (writer != version())
    fail(ErrorCode::unsupported,
         "KV snapshot written by ember {}; this is ember {} (snapshots are tied to the version)", writer, version());
  const std::uint64_t model = get_le(p + 28, 8);
  if (model != want.model)
    fail(ErrorCode::invalid_argument,
         "KV snapshot of another model: model identity {:016x}, this engine's model is {:016x}", model, want.model);
  const auto precision = get_le(p + 36, 4), kv_type = get_le(p + 40, 4);
  if (precision != static_cast<std::uint64_t>(want.precision))
    fail(ErrorCode::invalid_argument, "KV snapshot precision {} does not match the engine's {} ({})", precision,
         static_cast<int>(want.precision), name_of(want.precision));
  if (kv_type != static_cast<std::uint64_t>(want.kv_type))
    fail(ErrorCode::invalid_argument, "KV snapshot KV cache type {} does not match the engine's {} ({})", kv_type,
         static_cast<int>(want.kv_type), name_of(want.kv_type));
  const char* names[] = {"block size", "layers", "kv heads", "head dim"};
  const int wanted[] = {want.block_size, want.layers, want.kv_heads, want.head_dim};
  for (int i = 0; i < 4; ++i) {
    const std::uint64_t got = get_le(p + 44 + 4 * i, 4);
    if (got != static_cast<std::uint64_t>(wanted[i]))
      fail(ErrorCode::invalid_argument, "KV snapshot {} is {}, the engine's is {}", names[i], got, wanted[i]);
  }
}

void check_block(const KvSnapshotBlock& b, std::size_t index, const std::unordered_set<std::uint64_t>& earlier,
                 const KvSnapshotIdentity& id, const KvSnapshotLimits& limits) {
  for (std::int32_t t : b.tokens)
    if (t < 0 || t >= limits.vocab)
      fail(ErrorCode::invalid_argument, "KV snapshot block {}: token id {} outside the vocabulary [0, {})", index, t,
           limits.vocab);
  const std::uint64_t h = BlockPool::block_hash(b.parent, b.tokens);
  if (h != b.hash)
    fail(ErrorCode::invalid_argument, "KV snapshot block {}: hash {:016x} does not match its tokens ({:016x})", index,
         b.hash, h);
  if (b.parent != 0 && !earlier.contains(b.parent))
    fail(ErrorCode::invalid_argument, "KV snapshot block {}: parent {:016x} is not an earlier block", index, b.parent);
  if (earlier.contains(b.hash))
    fail(ErrorCode::invalid_argument, "KV snapshot block {}: hash {:016x} appears twice", index, b.hash);
  if (!all_finite(b.kv, id.kv_bytes_per_block(), id.kv_type, id.head_dim))
    fail(ErrorCode::invalid_argument, "KV snapshot block {}: K/V data holds a NaN or an infinity", index);
}

}  // namespace

std::uint64_t kv_snapshot_checksum(std::span<const std::uint8_t> bytes) {
  Hasher h(kChecksumSeed);
  h.update(bytes.data(), bytes.size());
  return h.value();
}

std::size_t KvSnapshotIdentity::kv_bytes_per_block() const {
  return backend::KvGeometry{{block_size, kv_heads, head_dim, kv_type}, layers, 1}.bytes_per_block();
}

std::size_t KvSnapshotIdentity::record_bytes_per_block() const {
  return 16 + 4 * static_cast<std::size_t>(block_size) + kv_bytes_per_block();
}

std::uint64_t KvSnapshotLimits::max_bytes(const KvSnapshotIdentity& identity) const {
  const std::uint64_t record = identity.record_bytes_per_block();
  const std::uint64_t fixed = kKvSnapshotHeaderBytes + kChecksumBytes;
  const std::uint64_t cap = std::numeric_limits<std::uint64_t>::max();
  if (max_blocks > (cap - fixed) / record) return cap;
  return fixed + max_blocks * record;
}

std::vector<KvSnapshotBlock> read_kv_snapshot(std::span<const std::uint8_t> bytes, const KvSnapshotIdentity& expected,
                                              const KvSnapshotLimits& limits) {
  if (bytes.size() < kKvSnapshotHeaderBytes + kChecksumBytes)
    fail(ErrorCode::invalid_argument, "KV snapshot truncated: {} bytes, the header and checksum alone need {}",
         bytes.size(), kKvSnapshotHeaderBytes + kChecksumBytes);
  check_header(bytes, expected);

  // The declared count must match the size exactly; dividing (not multiplying) the declared
  // count keeps a huge value from overflowing into a plausible one.
  const std::uint64_t declared = get_le(bytes.data() + kBlockCountOffset, 8);
  const std::size_t record = expected.record_bytes_per_block();
  const std::size_t body = bytes.size() - kKvSnapshotHeaderBytes - kChecksumBytes;
  if (body % record != 0 || declared != body / record)
    fail(ErrorCode::invalid_argument,
         "KV snapshot truncated or padded: it declares {} blocks of {} bytes but holds {} bytes of blocks", declared,
         record, body);
  if (declared > limits.max_blocks)
    fail(ErrorCode::out_of_memory, "KV snapshot holds {} blocks, more than the {} of this engine's KV cache", declared,
         limits.max_blocks);
  const std::uint64_t stored = get_le(bytes.data() + bytes.size() - kChecksumBytes, 8);
  const std::uint64_t actual = kv_snapshot_checksum(bytes.first(bytes.size() - kChecksumBytes));
  if (stored != actual)
    fail(ErrorCode::invalid_argument, "KV snapshot checksum mismatch: stored {:016x}, computed {:016x} (corrupt file)",
         stored, actual);

  std::vector<KvSnapshotBlock> blocks(static_cast<std::size_t>(declared));
  std::unordered_set<std::uint64_t> seen;
  const std::uint8_t* p = bytes.data() + kKvSnapshotHeaderBytes;
  for (std::size_t i = 0; i < blocks.size(); ++i, p += record) {
    KvSnapshotBlock& b = blocks[i];
    b.hash = get_le(p, 8);
    b.parent = get_le(p + 8, 8);
    b.tokens.resize(static_cast<std::size_t>(expected.block_size));
    for (std::size_t t = 0; t < b.tokens.size(); ++t)
      b.tokens[t] = static_cast<std::int32_t>(static_cast<std::uint32_t>(get_le(p + 16 + 4 * t, 4)));
    b.kv = p + 16 + 4 * b.tokens.size();
    check_block(b, i, seen, expected, limits);
    seen.insert(b.hash);
  }
  return blocks;
}

KvSnapshotWriter::KvSnapshotWriter(const KvSnapshotIdentity& identity) : identity_(identity) {
  bytes_.assign(kMagic, kMagic + sizeof kMagic);
  put_u32(bytes_, kKvSnapshotVersion);
  const std::string v = version();
  EMBER_ASSERT(v.size() <= kVersionField);
  bytes_.insert(bytes_.end(), v.begin(), v.end());
  bytes_.resize(bytes_.size() + kVersionField - v.size(), 0);
  put_u64(bytes_, identity.model);
  put_u32(bytes_, static_cast<std::uint32_t>(identity.precision));
  put_u32(bytes_, static_cast<std::uint32_t>(identity.kv_type));
  for (int field : {identity.block_size, identity.layers, identity.kv_heads, identity.head_dim})
    put_u32(bytes_, static_cast<std::uint32_t>(field));
  put_u64(bytes_, 0);  // block count, written by finish()
  EMBER_ASSERT(bytes_.size() == kKvSnapshotHeaderBytes);
}

std::uint8_t* KvSnapshotWriter::add_block(std::uint64_t parent, std::span<const std::int32_t> tokens) {
  EMBER_ASSERT(tokens.size() == static_cast<std::size_t>(identity_.block_size));
  EMBER_ASSERT(parent == 0 || hashes_.contains(parent));
  const std::uint64_t hash = BlockPool::block_hash(parent, tokens);
  EMBER_ASSERT(hashes_.insert(hash).second);
  put_u64(bytes_, hash);
  put_u64(bytes_, parent);
  for (std::int32_t t : tokens) put_u32(bytes_, static_cast<std::uint32_t>(t));
  const std::size_t at = bytes_.size();
  bytes_.resize(at + identity_.kv_bytes_per_block());
  return bytes_.data() + at;
}

std::vector<std::uint8_t> KvSnapshotWriter::finish() {
  set_u64(bytes_.data() + kBlockCountOffset, hashes_.size());
  put_u64(bytes_, kv_snapshot_checksum(bytes_));
  hashes_.clear();
  return std::move(bytes_);
}

void write_snapshot_file(const std::string& path, std::span<const std::uint8_t> bytes) {
  util::write_file_atomically(path, bytes);
}

std::vector<std::uint8_t> read_snapshot_file(const std::string& path, std::uint64_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail(ErrorCode::io, "cannot read {}: not a regular file", path);
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail(ErrorCode::io, "cannot read the size of {}: {}", path, ec.message());
  if (size > max_bytes)
    fail(ErrorCode::out_of_memory, "{} has {} bytes, more than a KV snapshot for this engine can hold ({})", path, size,
         max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::io, "cannot open {}: {}", path, std::strerror(errno));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<std::uint64_t>(in.gcount()) != size)
    fail(ErrorCode::io, "cannot read {}: got {} of {} bytes", path, in.gcount(), size);
  return bytes;
}

}  // namespace ember::runtime
