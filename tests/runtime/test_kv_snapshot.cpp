// The KV snapshot format (lib/runtime/kv_snapshot): a written snapshot reads back block for block,
// and every bad snapshot (truncated, bad magic, another model / version / precision / KV type /
// geometry, bad checksum, huge declared sizes, bad ids, hashes, parents or K/V values) is refused
// with an Error whose code and message name the problem. The hashes are pinned: their values are
// stored in files, so they must not change between builds.
#include "runtime/block_pool.hpp"
#include "runtime/kv_snapshot.hpp"
#include "test_support.hpp"
#include "util/hash.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>

using namespace ember;
using namespace ember::runtime;
using Bytes = std::vector<std::uint8_t>;

namespace {

KvSnapshotIdentity tiny_identity() {
  KvSnapshotIdentity id;
  id.model = 0x1234abcd5678ef00ull;
  id.kv_type = KvCacheType::f16;
  id.block_size = 4;
  id.layers = 2;
  id.kv_heads = 1;
  id.head_dim = 8;
  return id;
}

const KvSnapshotLimits kLimits{100, 16};

// Block i's K/V byte b: no two blocks alike at any byte, and every byte below 0x40, so that read
// as f16 the values are small finite numbers.
std::uint8_t kv_byte(std::size_t i, std::size_t b) { return static_cast<std::uint8_t>((i * 37 + b * 5) % 61); }

// Two chains sharing their first block: [1 2 3 4][5 6 7 8] and [1 2 3 4][9 9 9 9], K/V bytes kv_byte's.
Bytes tiny_snapshot(const KvSnapshotIdentity& id = tiny_identity()) {
  KvSnapshotWriter w(id);
  const std::vector<std::vector<std::int32_t>> blocks = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 9, 9, 9}};
  const std::uint64_t first = BlockPool::block_hash(0, blocks[0]);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    std::uint8_t* kv = w.add_block(i == 0 ? 0 : first, blocks[i]);
    for (std::size_t b = 0; b < id.kv_bytes_per_block(); ++b) kv[b] = kv_byte(i, b);
  }
  return w.finish();
}

void put_le(Bytes& bytes, std::size_t at, std::uint64_t v, int width) {
  for (int i = 0; i < width; ++i) bytes[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(v >> (8 * i));
}

// Rewrites the trailing checksum so that only the edited field is wrong.
void reseal(Bytes& bytes) {
  const std::size_t body = bytes.size() - 8;
  put_le(bytes, body, kv_snapshot_checksum(std::span(bytes).first(body)), 8);
}

struct Refusal {
  ErrorCode code;
  std::string message;
};

Refusal refusal(const Bytes& bytes, const KvSnapshotIdentity& id = tiny_identity(),
                const KvSnapshotLimits& limits = kLimits) {
  try {
    (void)read_kv_snapshot(bytes, id, limits);
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("the snapshot was accepted");
  return {};
}

}  // namespace

TEST_CASE("hashes are pinned: block hashes and the byte hasher give fixed values") {
  const std::vector<std::int32_t> ids = {1, 2, 3, 4};
  CHECK(BlockPool::block_hash(0, ids) == 0x90fce63e3115efbdull);
  CHECK(BlockPool::block_hash(BlockPool::block_hash(0, ids), ids) == 0x1d3e805c9dea6c59ull);
  CHECK(BlockPool::block_hash(0, std::vector<std::int32_t>{49151, 0, -1}) == 0xf4bc66c9e5eb361dull);
  Hasher h(7);
  h.update("ember kv snapshot", 17);
  CHECK(h.value() == 0x7b2b78dfeae050ecull);
  // Any split of the same bytes gives the same value.
  Hasher split(7);
  split.update("ember", 5);
  split.update(" kv snap", 8);
  split.update("shot", 4);
  CHECK(split.value() == h.value());
}

TEST_CASE("a written snapshot reads back block for block") {
  const KvSnapshotIdentity id = tiny_identity();
  const Bytes bytes = tiny_snapshot();
  CHECK(bytes.size() == kKvSnapshotHeaderBytes + 3 * id.record_bytes_per_block() + 8);
  CHECK(id.kv_bytes_per_block() == 2 * 2 * 4 * 1 * 8 * 2);
  const auto blocks = read_kv_snapshot(bytes, id, kLimits);
  REQUIRE(blocks.size() == 3);
  CHECK(blocks[0].parent == 0);
  CHECK(blocks[0].tokens == std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(blocks[1].parent == blocks[0].hash);
  CHECK(blocks[2].parent == blocks[0].hash);
  CHECK(blocks[2].tokens == std::vector<std::int32_t>{9, 9, 9, 9});
  CHECK(blocks[1].hash == BlockPool::block_hash(blocks[0].hash, blocks[1].tokens));
  for (std::size_t i = 0; i < blocks.size(); ++i) {  // each block's own bytes, every one
    CAPTURE(i);
    REQUIRE(blocks[i].kv != nullptr);
    std::size_t wrong = 0;
    for (std::size_t b = 0; b < id.kv_bytes_per_block(); ++b) wrong += blocks[i].kv[b] != kv_byte(i, b);
    CHECK(wrong == 0);
  }
  CHECK(kLimits.max_bytes(id) == kKvSnapshotHeaderBytes + 16 * id.record_bytes_per_block() + 8);
}

TEST_CASE("bad state file: truncated") {
  Bytes bytes = tiny_snapshot();
  for (std::size_t size :
       {std::size_t{0}, std::size_t{10}, kKvSnapshotHeaderBytes + 7, bytes.size() - 1, bytes.size() - 100}) {
    const Refusal r = refusal(Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)));
    CHECK(r.code == ErrorCode::invalid_argument);
    CHECK(r.message.find("truncated") != std::string::npos);
  }
}

TEST_CASE("bad state file: bad magic") {
  Bytes bytes = tiny_snapshot();
  bytes[0] = 'G';
  const Refusal r = refusal(bytes);
  CHECK(r.code == ErrorCode::invalid_argument);
  CHECK(r.message.find("bad magic") != std::string::npos);
}

TEST_CASE("bad state file: another format version or ember version") {
  Bytes bytes = tiny_snapshot();
  put_le(bytes, 8, kKvSnapshotVersion - 1, 4);  // the version before (int8 KV not yet rotated)
  reseal(bytes);
  Refusal r = refusal(bytes);
  CHECK(r.code == ErrorCode::unsupported);
  CHECK(r.message.find(fmt::format("format version {}", kKvSnapshotVersion - 1)) != std::string::npos);

  bytes = tiny_snapshot();
  std::memcpy(bytes.data() + 12, "0.0.1\0\0\0", 8);
  reseal(bytes);
  r = refusal(bytes);
  CHECK(r.code == ErrorCode::unsupported);
  CHECK(r.message.find("written by ember 0.0.1") != std::string::npos);
  CHECK(r.message.find(version()) != std::string::npos);
}

TEST_CASE("bad state file: another model") {
  KvSnapshotIdentity other = tiny_identity();
  other.model ^= 1;
  const Refusal r = refusal(tiny_snapshot(), other);
  CHECK(r.code == ErrorCode::invalid_argument);
  CHECK(r.message.find("another model") != std::string::npos);
  CHECK(r.message.find("1234abcd5678ef00") != std::string::npos);
}

TEST_CASE("bad state file: wrong KV type, precision or geometry") {
  KvSnapshotIdentity id = tiny_identity();
  id.kv_type = KvCacheType::f32;
  Refusal r = refusal(tiny_snapshot(), id);
  CHECK(r.code == ErrorCode::invalid_argument);
  CHECK(r.message.find("KV cache type 0 does not match the engine's 1 (f32)") != std::string::npos);

  id = tiny_identity();
  id.precision = Precision::fp32;
  r = refusal(tiny_snapshot(), id);
  CHECK(r.message.find("precision 0 does not match the engine's 1 (fp32)") != std::string::npos);

  id = tiny_identity();
  id.block_size = 16;
  r = refusal(tiny_snapshot(), id);
  CHECK(r.message.find("block size is 4, the engine's is 16") != std::string::npos);
  id = tiny_identity();
  id.head_dim = 64;
  r = refusal(tiny_snapshot(), id);
  CHECK(r.message.find("head dim is 8, the engine's is 64") != std::string::npos);
}

TEST_CASE("bad state file: bad checksum") {
  Bytes bytes = tiny_snapshot();
  bytes[kKvSnapshotHeaderBytes + 40] ^= 0x01;  // one bit of K/V data
  const Refusal r = refusal(bytes);
  CHECK(r.code == ErrorCode::invalid_argument);
  CHECK(r.message.find("checksum mismatch") != std::string::npos);
}

TEST_CASE("bad state file: huge declared sizes are refused before any allocation") {
  for (const std::uint64_t count : {std::uint64_t{4}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    Bytes bytes = tiny_snapshot();
    put_le(bytes, 60, count, 8);
    reseal(bytes);
    const Refusal r = refusal(bytes);
    CHECK(r.code == ErrorCode::invalid_argument);
    CHECK(r.message.find("declares " + std::to_string(count) + " blocks") != std::string::npos);
  }
  // A consistent snapshot with more blocks than the reading engine's KV cache holds.
  const Refusal r = refusal(tiny_snapshot(), tiny_identity(), KvSnapshotLimits{100, 2});
  CHECK(r.code == ErrorCode::out_of_memory);
  CHECK(r.message.find("holds 3 blocks, more than the 2") != std::string::npos);
}

TEST_CASE("bad state file: a block whose ids, hash, parent or values are wrong") {
  const std::size_t block1 = kKvSnapshotHeaderBytes + tiny_identity().record_bytes_per_block();
  Bytes bytes = tiny_snapshot();
  Refusal r = refusal(bytes, tiny_identity(), KvSnapshotLimits{8, 16});  // id 8 and 9 out of range
  CHECK(r.message.find("block 1: token id 8 outside the vocabulary [0, 8)") != std::string::npos);

  bytes = tiny_snapshot();
  put_le(bytes, block1 + 16, 6, 4);  // a token changed, its hash not
  reseal(bytes);
  r = refusal(bytes);
  CHECK(r.message.find("block 1: hash") != std::string::npos);

  bytes = tiny_snapshot();
  // A parent that is not in the file, with the hash that goes with it.
  put_le(bytes, block1 + 8, 77, 8);
  put_le(bytes, block1, BlockPool::block_hash(77, std::vector<std::int32_t>{5, 6, 7, 8}), 8);
  reseal(bytes);
  r = refusal(bytes);
  CHECK(r.code == ErrorCode::invalid_argument);
  CHECK(r.message.find("block 1: parent 000000000000004d is not an earlier block") != std::string::npos);

  bytes = tiny_snapshot();
  put_le(bytes, block1 + 16 + 16 + 6, 0x7e00, 2);  // an f16 NaN in block 1's K
  reseal(bytes);
  r = refusal(bytes);
  CHECK(r.message.find("block 1: K/V data holds a NaN or an infinity") != std::string::npos);
}

TEST_CASE("snapshot files: written atomically, size-checked before reading") {
  const auto dir = test::temp_dir("ember-kvsnap");
  const std::string path = (dir / "state.emberkv").string();
  const Bytes bytes = tiny_snapshot();
  write_snapshot_file(path, bytes);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK(read_snapshot_file(path, bytes.size()) == bytes);
  try {
    (void)read_snapshot_file(path, bytes.size() - 1);
    FAIL("an oversized file was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::out_of_memory);
    CHECK(std::string(e.what()).find(std::to_string(bytes.size()) + " bytes") != std::string::npos);
  }
  try {
    (void)read_snapshot_file((dir / "missing").string(), 1000);
    FAIL("a missing file was read");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::io);
  }
  std::filesystem::remove_all(dir);
}
