// Writes GGUF v3 files: tests and tools use it to make synthetic models of any Llama-family
// shape with random weights, so most tests need no download.
#pragma once

#include "model/ggml_types.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ember::model {

// Collects metadata and tensors in insertion order and lays them out as GGUF v3 with
// general.alignment = 32. Setting a key twice replaces its value; adding a tensor name twice
// throws Error(invalid_argument).
class GgufWriter {
 public:
  static constexpr std::uint32_t kAlignment = 32;

  void set_u32(const std::string& key, std::uint32_t v);
  void set_i32(const std::string& key, std::int32_t v);
  void set_u64(const std::string& key, std::uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<std::int32_t>& v);

  // Adds a tensor from FP32 values, quantized to `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1).
  // `shape` is in ggml order (shape[0] contiguous).
  void add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                  const std::vector<float>& values);
  // The same, its values made by `make` only when the file is written (in the order tensors were
  // added), and dropped once encoded: a file larger than memory is written a tensor at a time.
  void add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                  std::function<std::vector<float>()> make);
  // Adds a tensor from already encoded bytes of any known type (the size is checked).
  void add_raw_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                      std::vector<std::uint8_t> bytes);

  std::vector<std::uint8_t> bytes() const;    // the whole file image
  void write(const std::string& path) const;  // a tensor at a time; throws Error(io)

 private:
  struct Entry {
    std::string key;
    std::vector<std::uint8_t> encoded;  // u32 value type followed by the value
  };
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> data;
    std::function<std::vector<float>()> make;  // when set, data is made from it at write time
    std::uint64_t size = 0;                    // bytes
  };
  void set(const std::string& key, std::vector<std::uint8_t> encoded);
  std::vector<std::uint8_t> header() const;  // everything before the first tensor's data
  // Calls emit(bytes) with each tensor's data, then its padding.
  void for_each_data(const std::function<void(const std::vector<std::uint8_t>&)>& emit) const;

  std::vector<Entry> metadata_;
  std::vector<PendingTensor> tensors_;
};

// Options for a synthetic Llama-family model (random weights, a small byte-level BPE vocabulary
// with a ChatML template) used by tests and benchmarks. The RoPE description of `config` is
// written as a converted file carries it: rope_freq_factors (when not empty) as the F32 tensor
// rope_freqs.weight, rope_scaling "none", or "linear" with a factor other than 1, as
// {arch}.rope.scaling.type and .factor, a non-zero rope_original_context as
// .rope.scaling.original_context_length; the default (linear, factor 1) writes no key.
struct SyntheticModelSpec {
  ModelConfig config = tiny_config();     // shape; any architecture ember runs (experts: config.experts > 0)
  GgmlType weight_type = GgmlType::Q8_0;  // type of the matrices (and token_embd)
  std::uint64_t seed = 1;
  std::string chat_template;      // tokenizer.chat_template; empty: SmolLM2's (kSmolLmChatTemplate)
  bool reasoning_tokens = false;  // the vocabulary ends with <think> and </think> (control tokens)
  // Control tokens the vocabulary ends with (after <think> and </think>), e.g. gpt-oss's
  // <|start|>, <|channel|>, <|message|>, <|end|>, <|return|>, <|call|>.
  std::vector<std::string> control_tokens;
  // Experts as one tensor each (blk.N.ffn_gate.E.weight, older llama.cpp's Mixtral layout)
  // instead of stacked ffn_gate_exps: the same weights for the same seed.
  bool tensor_per_expert = false;
  // Called after the metadata is written, to add keys or tensors of a test's own (what ember
  // ignores or refuses); unset: none.
  std::function<void(GgufWriter&)> extras;

  // 2 layers, width 64, ffn 128, 4 heads, 2 KV heads, vocab 512, context 256, tied.
  static ModelConfig tiny_config();
  // The default model's shape (SmolLM2-135M): 30 layers, width 576, ffn 1536, 9 heads of 64,
  // 3 KV heads, vocab 49152, RoPE base 100000, context 2048, tied.
  static ModelConfig default_model_config();
  // A small model of each architecture ember runs, for goldens from llama.cpp on the very same
  // file (tests/reference/make_arch_goldens.py): "llama3" (Llama 3.1-style frequency factors,
  // untied output), "qwen2" (biases), "qwen3" (q/k norm, 32-wide heads on a width of 64),
  // "gemma3" (6 layers: five sliding ones with a window of 8, then a global one), "phi3" and
  // "phi3_long" (fused Q|K|V and gate|up, LongRoPE short or long factors, attention factor), and
  // mixtures of experts: "qwen3moe" (8 experts of width 32, top-4, normalized), "olmoe" (8 of
  // 64, top-3, not normalized, whole-q/k norms) and "mixtral" (llama, 4 of 64, top-2). Throws
  // Error(invalid_argument) for another name.
  static ModelConfig architecture_config(const std::string& name);

  // Llama 3.1/3.2's RoPE frequency factors for `config`'s rope_dims and rope_base, computed as
  // llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) bakes rope_type
  // "llama3" into rope_freqs.weight: 1 for wavelengths under original_context /
  // high_freq_factor, `factor` above original_context / low_freq_factor, smoothly in between.
  // Set them as config.rope_freq_factors to write a Llama-3-style file.
  static std::vector<float> llama3_rope_factors(const ModelConfig& config, float factor = 8.0f,
                                                float low_freq_factor = 1.0f, float high_freq_factor = 4.0f,
                                                int original_context = 8192);
};

// The SmolLM2 ChatML chat template (as in the real model's tokenizer.chat_template).
extern const char* const kSmolLmChatTemplate;

// Token ids of the synthetic vocabulary: <|endoftext|> 0, <|im_start|> 1, <|im_end|> 2, then
// the 256 byte symbols from id 3, then merged tokens, then <unused_N> padding up to the vocab.
inline constexpr int kSyntheticFirstByteToken = 3;

// Throws Error(invalid_argument) for an inconsistent config (vocab < 259, a width that is not
// a whole number of blocks of weight_type, ...).
std::vector<std::uint8_t> make_synthetic_model(const SyntheticModelSpec& spec);
void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path);

}  // namespace ember::model
