#include "model/model_config.hpp"

#include "util/check.hpp"

#include <cmath>
#include <string>

namespace ember::model {
namespace {

// Upper bounds that no real Llama-family model reaches; larger values are corrupt metadata.
constexpr std::uint32_t kMaxLayers = 1024;
constexpr std::uint32_t kMaxWidth = 1u << 16;
constexpr std::uint32_t kMaxFfn = 1u << 18;
constexpr std::uint32_t kMaxHeads = 1024;
constexpr std::uint32_t kMaxVocab = 1u << 22;
constexpr std::uint32_t kMaxContext = 1u << 24;

struct ArchInfo {
  const char* name;
  RopeLayout rope_layout;
  bool attention_bias;
};

constexpr ArchInfo kArchitectures[] = {
    {"llama", RopeLayout::interleaved, false},
    {"qwen2", RopeLayout::half, true},
};

const ArchInfo& architecture(const GgufFile& file, std::string_view name) {
  for (const ArchInfo& a : kArchitectures) {
    if (name == a.name) return a;
  }
  fail(ErrorCode::unsupported, "{}: architecture '{}' is not supported (supported: llama, qwen2)",
       file.path(), name);
}

class ConfigReader {
 public:
  ConfigReader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  int required(const char* suffix, std::uint32_t max) const {
    const std::string key = arch_ + suffix;
    return check(key, file_.get_u32(key), max);
  }
  int optional(const char* suffix, int fallback, std::uint32_t max) const {
    const std::string key = arch_ + suffix;
    auto v = file_.find_u32(key);
    return v ? check(key, *v, max) : fallback;
  }
  float optional_f32(const char* suffix, float fallback) const {
    const std::string key = arch_ + suffix;
    return file_.find_f32(key).value_or(fallback);
  }
  [[noreturn]] void invalid(const std::string& what) const {
    fail(ErrorCode::invalid_model, "{}: {}", file_.path(), what);
  }

 private:
  int check(const std::string& key, std::uint32_t v, std::uint32_t max) const {
    if (v == 0 || v > max) invalid(fmt::format("{} = {} is outside [1, {}]", key, v, max));
    return static_cast<int>(v);
  }

  const GgufFile& file_;
  std::string arch_;
};

int read_vocab(const GgufFile& file, const ConfigReader& r) {
  int vocab = r.optional(".vocab_size", 0, kMaxVocab);
  if (vocab == 0) {
    if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
        tokens != nullptr && tokens->type == GgufType::array) {
      vocab = static_cast<int>(tokens->elements.size());
    } else if (const GgufTensor* embd = file.find_tensor("token_embd.weight");
               embd != nullptr && embd->shape.size() == 2) {
      vocab = static_cast<int>(std::min<std::int64_t>(embd->shape[1], kMaxVocab + 1ll));
    }
  }
  if (vocab <= 0 || static_cast<std::uint32_t>(vocab) > kMaxVocab) {
    r.invalid(fmt::format("vocabulary size {} is outside [1, {}]", vocab, kMaxVocab));
  }
  return vocab;
}

void check_consistency(const ModelConfig& c, const ConfigReader& r) {
  if (c.heads % c.kv_heads != 0) {
    r.invalid(fmt::format("{} heads are not a multiple of {} KV heads", c.heads, c.kv_heads));
  }
  if (c.head_dim % 2 != 0) r.invalid(fmt::format("head dimension {} is odd", c.head_dim));
  if (c.rope_dims % 2 != 0 || c.rope_dims > c.head_dim) {
    r.invalid(fmt::format("rope.dimension_count {} must be even and at most the head dimension {}",
                          c.rope_dims, c.head_dim));
  }
  if (!(c.rope_base > 0.0f) || !std::isfinite(c.rope_base)) {
    r.invalid(fmt::format("rope.freq_base {} must be positive and finite", c.rope_base));
  }
  if (!(c.rms_eps > 0.0f) || !(c.rms_eps < 1.0f)) {
    r.invalid(fmt::format("attention.layer_norm_rms_epsilon {} must be in (0, 1)", c.rms_eps));
  }
}

}  // namespace

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.architecture = std::string(file.get_string("general.architecture"));
  const ArchInfo& arch = architecture(file, c.architecture);
  c.name = std::string(file.find_string("general.name").value_or(""));
  const ConfigReader r(file, c.architecture);

  c.layers = r.required(".block_count", kMaxLayers);
  c.embedding = r.required(".embedding_length", kMaxWidth);
  c.ffn = r.required(".feed_forward_length", kMaxFfn);
  c.heads = r.required(".attention.head_count", kMaxHeads);
  c.kv_heads = r.optional(".attention.head_count_kv", c.heads, kMaxHeads);
  if (c.embedding % c.heads != 0) {
    r.invalid(fmt::format("embedding {} is not divisible by {} heads", c.embedding, c.heads));
  }
  c.head_dim = r.optional(".attention.key_length", c.embedding / c.heads, kMaxWidth);
  c.rope_dims = r.optional(".rope.dimension_count", c.head_dim, kMaxWidth);
  c.rope_base = r.optional_f32(".rope.freq_base", 10000.0f);
  c.rope_layout = arch.rope_layout;
  c.rms_eps = r.optional_f32(".attention.layer_norm_rms_epsilon", 1e-5f);
  c.context_length = r.required(".context_length", kMaxContext);
  c.vocab = read_vocab(file, r);
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  c.attention_bias = arch.attention_bias;
  check_consistency(c, r);
  return c;
}

}  // namespace ember::model
