// Synthetic LoRA adapters in llama.cpp's adapter GGUF format, for tests, goldens and
// ember-make-synthetic: random lora_a/lora_b pairs for chosen tensors of a base model.
#pragma once

#include "model/ggml_types.hpp"
#include "model/gguf.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::model {

struct SyntheticAdapterSpec {
  int rank = 8;
  float alpha = 16.0f;  // adapter.lora.alpha (0: written as 0, the scale then used as given)
  std::uint64_t seed = 7;
  // Which base tensors get a pair, by the part of the name between "blk.N." and ".weight"
  // ("attn_q", "attn_qkv", "ffn_up", ...) or "output" for output.weight. Empty: every layer
  // matrix (attention and feed-forward; not experts or routers) and the untied output.
  std::vector<std::string> tensors;
  GgmlType type = GgmlType::F32;  // of lora_a and lora_b (F32 or F16)
  float magnitude = 1.0f;         // scales the random values (1: an update about as large as W x)
};

// The names of `base`'s tensors an adapter of `spec` adapts, in file order.
std::vector<std::string> adapted_tensors(const GgufFile& base, const SyntheticAdapterSpec& spec);
// An adapter for `base` (general.architecture copied from it). Throws Error(invalid_argument)
// when no tensor of `base` matches spec.tensors.
std::vector<std::uint8_t> make_synthetic_adapter(const GgufFile& base, const SyntheticAdapterSpec& spec);
void write_synthetic_adapter(const GgufFile& base, const SyntheticAdapterSpec& spec, const std::string& path);

}  // namespace ember::model
