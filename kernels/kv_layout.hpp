// The paged KV cache's memory layout as every device's kernels see it: per layer, K and V are
// [num_blocks, block_size, kv_heads, head_dim] arrays of `dtype`; a sequence's token t lives in
// block block_table[t / block_size] at offset t % block_size.
#pragma once

#include <ember/ember.hpp>  // KvCacheType

namespace ember::kernels {

struct KvLayout {
  int block_size;
  int kv_heads;
  int head_dim;
  KvCacheType dtype;  // the engine's KV type (ember::KvCacheType), defined once
};

}  // namespace ember::kernels
