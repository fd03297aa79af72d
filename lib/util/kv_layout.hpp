// The paged KV cache's layout, one definition for the pool that holds it (backend::KvGeometry
// adds the pool's size) and for every device's kernels that read and write it
// (kernels/kv_layout.hpp says how the bytes of a block are laid out).
#pragma once

#include <ember/ember.hpp>  // KvCacheType

namespace ember {

struct KvLayout {
  int block_size = 16;  // tokens per block
  int kv_heads = 0;
  int head_dim = 0;
  KvCacheType dtype = KvCacheType::f16;  // the engine's KV type (ember::KvCacheType), defined once
};

}  // namespace ember
