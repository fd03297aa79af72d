// Which elements of a head form a rotated pair in rotary position embedding: one definition for
// the model description and every device's kernels.
#pragma once

namespace ember {

enum class RopeLayout {
  interleaved,  // (2i, 2i+1): GGUF llama files, whose Q/K rows the converter permuted
  half,         // (i, i + rope_dims/2): the GPT-NeoX / Hugging Face layout (qwen2, gemma3, ...)
};

}  // namespace ember
