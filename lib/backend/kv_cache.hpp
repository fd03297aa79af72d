// The paged KV cache's memory: per layer, K and V arrays of
// [block_count, block_size, kv_heads] head slices in f16, f32 or int8 with a scale per slice
// (kernels/kv_layout.hpp). Block ids index every layer at
// once; which block belongs to which sequence is the runtime's business (runtime/block_pool).
#pragma once

#include "util/kv_layout.hpp"
#include "util/tensor.hpp"

#include <ember/ember.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember::backend {

// The pool's shape: `block_count` blocks of `layers` layers, each in the one layout the kernels
// read and write (ember::KvLayout: block_size, kv_heads, head_dim, dtype).
struct KvGeometry : KvLayout {
  int layers = 0;
  int block_count = 0;

  std::size_t bytes_per_block() const;  // all layers, K and V
};

class KvCache {
 public:
  // Allocates host memory for the geometry. Throws Error(out_of_memory) when it cannot.
  explicit KvCache(const KvGeometry& geometry);
  // Memory a backend allocated itself (a GPU's): per layer, the K and V arrays of the geometry
  // in `memory`, kept alive by `owner`.
  KvCache(const KvGeometry& geometry, MemorySpace memory, std::vector<void*> keys, std::vector<void*> values,
          std::shared_ptr<void> owner);

  const KvGeometry& geometry() const { return geometry_; }
  MemorySpace memory() const { return memory_; }
  // [block_count, block_size, kv_heads, head_dim] arrays of one layer.
  void* keys(int layer) const { return keys_[static_cast<std::size_t>(layer)]; }
  void* values(int layer) const { return values_[static_cast<std::size_t>(layer)]; }

  // One block's K and V of every layer, packed as [layer][K, V][block_size, kv_heads, head_dim]
  // in bytes_per_block() bytes: how saved KV state (runtime/kv_snapshot) stores a block.
  void read_block(int block, std::uint8_t* out) const;
  void write_block(int block, const std::uint8_t* in);

 private:
  KvGeometry geometry_;
  MemorySpace memory_ = MemorySpace::host;
  std::vector<void*> keys_, values_;
  std::shared_ptr<void> owner_;
};

// Throws Error(invalid_argument) for a geometry with a zero or negative dimension.
void check_kv_geometry(const KvGeometry& geometry);

// Blocks that fit `bytes` for a model with this geometry (geometry.block_count ignored).
int kv_blocks_for_bytes(const KvGeometry& geometry, std::size_t bytes);

}  // namespace ember::backend
