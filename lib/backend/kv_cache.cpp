#include "backend/kv_cache.hpp"

#include "kernels/kv_layout.hpp"
#include "util/check.hpp"

#include <cstring>
#include <limits>

namespace ember::backend {

std::size_t KvGeometry::bytes_per_block() const {
  return static_cast<std::size_t>(layers) * 2 * static_cast<std::size_t>(block_size) *
         static_cast<std::size_t>(kv_heads) * static_cast<std::size_t>(kernels::kv_head_bytes(dtype, head_dim));
}

int kv_blocks_for_bytes(const KvGeometry& geometry, std::size_t bytes) {
  const std::size_t per_block = geometry.bytes_per_block();
  if (per_block == 0) fail(ErrorCode::invalid_argument, "KV cache geometry has a zero size");
  const std::size_t blocks = bytes / per_block;
  return static_cast<int>(std::min<std::size_t>(blocks, std::numeric_limits<int>::max() / 2));
}

void check_kv_geometry(const KvGeometry& geometry) {
  if (geometry.layers <= 0 || geometry.kv_heads <= 0 || geometry.head_dim <= 0 || geometry.block_size <= 0 ||
      geometry.block_count <= 0) {
    fail(ErrorCode::invalid_argument,
         "invalid KV cache geometry: layers {} kv_heads {} head_dim {} block_size {} blocks {}", geometry.layers,
         geometry.kv_heads, geometry.head_dim, geometry.block_size, geometry.block_count);
  }
}

KvCache::KvCache(const KvGeometry& geometry) : geometry_(geometry) {
  check_kv_geometry(geometry);
  // Each layer's K or V as bytes: [block_count, block_size, kv_heads, head slice bytes]
  // (kernels/kv_layout.hpp; an int8 slice carries its scale).
  const auto slice_bytes = static_cast<std::int64_t>(kernels::kv_head_bytes(geometry.dtype, geometry.head_dim));
  auto tensors = std::make_shared<std::vector<Tensor>>();
  for (int l = 0; l < 2 * geometry.layers; ++l) {
    tensors->push_back(
        Tensor::empty(DType::u8, {geometry.block_count, geometry.block_size, geometry.kv_heads, slice_bytes}));
    (l % 2 == 0 ? keys_ : values_).push_back(tensors->back().raw());
  }
  owner_ = std::move(tensors);
}

KvCache::KvCache(const KvGeometry& geometry, MemorySpace memory, std::vector<void*> keys, std::vector<void*> values,
                 std::shared_ptr<void> owner)
    : geometry_(geometry),
      memory_(memory),
      keys_(std::move(keys)),
      values_(std::move(values)),
      owner_(std::move(owner)) {
  check_kv_geometry(geometry);
  EMBER_ASSERT(keys_.size() == static_cast<std::size_t>(geometry.layers) && values_.size() == keys_.size());
}

namespace {

// Calls f(layer array, byte offset of `block`, bytes of one block in one array) for K then V of
// each layer, in the packed order of read_block/write_block.
template <class F>
void for_each_block_array(const KvGeometry& g, MemorySpace memory, const std::vector<void*>& keys,
                          const std::vector<void*>& values, int block, F&& f) {
  if (memory != MemorySpace::host)
    fail(ErrorCode::unsupported,
         "KV blocks in device memory cannot be read or written by the host "
         "(KV state snapshots need the CPU backend)");
  if (block < 0 || block >= g.block_count)
    fail(ErrorCode::internal, "KV block {} outside [0, {})", block, g.block_count);
  const std::size_t array_bytes = g.bytes_per_block() / (2 * static_cast<std::size_t>(g.layers));
  const std::size_t at = static_cast<std::size_t>(block) * array_bytes;
  for (std::size_t l = 0; l < keys.size(); ++l) {
    f(static_cast<std::uint8_t*>(keys[l]) + at, array_bytes);
    f(static_cast<std::uint8_t*>(values[l]) + at, array_bytes);
  }
}

}  // namespace

void KvCache::read_block(int block, std::uint8_t* out) const {
  for_each_block_array(geometry_, memory_, keys_, values_, block, [&](const std::uint8_t* array, std::size_t n) {
    std::memcpy(out, array, n);
    out += n;
  });
}

void KvCache::write_block(int block, const std::uint8_t* in) {
  for_each_block_array(geometry_, memory_, keys_, values_, block, [&](std::uint8_t* array, std::size_t n) {
    std::memcpy(array, in, n);
    in += n;
  });
}

}  // namespace ember::backend
