// Hyper-parameters of a Llama-family decoder, read from GGUF metadata and checked for
// consistency with the tensor shapes.
#pragma once

#include "model/gguf.hpp"

#include <cstdint>
#include <string>

namespace ember::model {

enum class RopeLayout {
  interleaved,  // rotate adjacent pairs (x0,x1),(x2,x3)... : GGUF llama (Q/K permuted at export)
  half,         // rotate (x_i, x_{i+d/2}) : GPT-NeoX style, used by qwen2 GGUFs
};

struct ModelConfig {
  std::string architecture;  // "llama" or "qwen2"
  std::string name;
  int layers = 0;
  int embedding = 0;     // model width
  int ffn = 0;           // feed-forward hidden width
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;      // embedding / heads unless the file says otherwise
  int rope_dims = 0;     // rotated dimensions per head (== head_dim for these models)
  float rope_base = 10000.0f;
  RopeLayout rope_layout = RopeLayout::interleaved;
  float rms_eps = 1e-5f;
  int context_length = 0;
  int vocab = 0;
  bool tied_embeddings = false;  // no output.weight: lm_head reuses token_embd
  bool attention_bias = false;   // qwen2: q/k/v projections carry a bias
};

// Reads and validates the config. Throws Error(unsupported) for an architecture ember does not
// run (the message lists the supported ones) and Error(invalid_model) for inconsistent values.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace ember::model
