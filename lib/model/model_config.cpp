#include "model/model_config.hpp"

#include "util/check.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <string>
#include <vector>

namespace ember::model {
namespace {

// Upper bounds that no real Llama-family model reaches; larger values are corrupt metadata.
constexpr std::uint32_t kMaxLayers = 1024;
constexpr std::uint32_t kMaxWidth = 1u << 16;
constexpr std::uint32_t kMaxFfn = 1u << 18;
constexpr std::uint32_t kMaxHeads = 1024;
constexpr std::uint32_t kMaxVocab = 1u << 22;
constexpr std::uint32_t kMaxContext = 1u << 24;
constexpr std::uint32_t kMaxExperts = 1024;

constexpr ArchitectureTraits kArchitectures[] = {
    {"llama", RopeLayout::interleaved, false, false, false, FeedForward::swiglu, false, 0, 0.0f, false, 1, true},
    {"qwen2", RopeLayout::half, true, false, false, FeedForward::swiglu, false, 0, 0.0f},
    {"qwen3", RopeLayout::half, false, true, false, FeedForward::swiglu, false, 0, 0.0f},
    // Gemma 3: five sliding layers (RoPE base 10000) then one global, llama.cpp's
    // set_swa_pattern(6) and rope_freq_base_train_swa. Its converter already added Gemma's
    // "1 +" to the RMSNorm weights.
    {"gemma3", RopeLayout::half, false, true, true, FeedForward::geglu, true, 6, 10000.0f},
    // Phi-3 / 3.5: Q|K|V in one attn_qkv tensor (or three), gate|up in ffn_up; llama.cpp
    // leaves its sliding window off (phi3.cpp), and so does ember.
    {"phi3", RopeLayout::half, false, false, false, FeedForward::swiglu, false, 0, 0.0f, true},
    // Mixture-of-experts architectures (llama.cpp: qwen3moe.cpp, olmoe.cpp, and llama.cpp's
    // llama graph with ffn_gate_inp). qwen3moe and Mixtral normalize the top-k weights, OLMoE
    // does not (norm_w false); OLMoE's q/k norms span whole q and k.
    {"qwen3moe", RopeLayout::half, false, true, false, FeedForward::swiglu, false, 0, 0.0f, false, 2, true, true},
    {"olmoe", RopeLayout::half, false, true, false, FeedForward::swiglu, false, 0, 0.0f, false, 2, false, false, true},
    // BERT (all-MiniLM, bge): llama.cpp's llama_model_bert. No RoPE: rope_layout is unused.
    {"bert", RopeLayout::half, true, false, false, FeedForward::gelu, false, 0, 0.0f, false, 0, false, false, false,
     true},
};

// The parts of BERT's layer (model/bert.cpp in llama.cpp), which its files leave unsaid.
void describe_bert(ModelConfig& c, const GgufFile& file) {
  c.causal = file.find_bool(c.architecture + ".attention.causal").value_or(false);
  c.norm = NormKind::layer;
  c.norm_after_residual = true;
  c.position_embeddings = true;
  c.linear_biases = true;
  c.has_lm_head = false;
  c.rope_dims = 0;
}

const ArchitectureTraits& architecture(const GgufFile& file, std::string_view name) {
  if (const ArchitectureTraits* a = find_architecture(name)) return *a;
  fail(ErrorCode::unsupported, "{}: architecture '{}' is not supported (supported: {})", file.path(), name,
       supported_architectures());
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
    r.invalid(
        fmt::format("rope.dimension_count {} must be even and at most the head dimension {}", c.rope_dims, c.head_dim));
  }
  if (!(c.rope_base > 0.0f) || !std::isfinite(c.rope_base)) {
    r.invalid(fmt::format("rope.freq_base {} must be positive and finite", c.rope_base));
  }
  if (!(c.rms_eps > 0.0f) || !(c.rms_eps < 1.0f)) {
    r.invalid(fmt::format("attention.layer_norm_rms_epsilon {} must be in (0, 1)", c.rms_eps));
  }
}

// {arch}.rope.scaling.*, as llama.cpp's llama_model::load_hparams reads them: the type defaults
// to "linear", the factor to 1 (absent or 0; the older key rope.scale_linear is the fallback),
// and "none" never scales. ember runs "none" and "linear"; any other type is refused rather than
// silently run unscaled.
void read_rope_scaling(ModelConfig& c, const GgufFile& file, const ConfigReader& r) {
  const std::string prefix = c.architecture + ".rope.";
  const std::string_view type = file.find_string(prefix + "scaling.type").value_or("linear");
  if (type == "linear") {
    c.rope_scaling = RopeScaling::linear;
  } else if (type == "none") {
    c.rope_scaling = RopeScaling::none;
  } else {
    fail(ErrorCode::unsupported, "{}: {}scaling.type '{}' is not supported (supported: none, linear)", file.path(),
         prefix, type);
  }
  auto factor = file.find_f32(prefix + "scaling.factor");
  if (!factor) factor = file.find_f32(prefix + "scale_linear");
  c.rope_scaling_factor = factor.value_or(0.0f) == 0.0f ? 1.0f : *factor;
  if (!(c.rope_scaling_factor > 0.0f) || !std::isfinite(c.rope_scaling_factor)) {
    r.invalid(fmt::format("{}scaling.factor {} must be positive and finite", prefix, c.rope_scaling_factor));
  }
  // llama.cpp multiplies every cos and sin by it (rope_yarn's mscale, ext_factor 0): for heads
  // rotated whole that is its square on q.k; on partly rotated heads it is refused, not ignored.
  const std::string attn_factor = prefix + "scaling.attn_factor";
  if (const auto f = file.find_f32(attn_factor); f && *f != 1.0f) {
    if (!(*f > 0.0f) || !std::isfinite(*f))
      r.invalid(fmt::format("{} = {} must be positive and finite", attn_factor, *f));
    if (c.rope_dims != c.head_dim)
      fail(ErrorCode::unsupported, "{}: {} = {} with {} of {} head dimensions rotated is not supported", file.path(),
           attn_factor, *f, c.rope_dims, c.head_dim);
    c.rope_attention_factor = *f;
  }
  const std::string original = prefix + "scaling.original_context_length";
  const std::uint32_t context = file.find_u32(original).value_or(0);
  if (context > kMaxContext) r.invalid(fmt::format("{} = {} is above {}", original, context, kMaxContext));
  c.rope_original_context = static_cast<int>(context);
}

// A RoPE frequency-factor tensor: one divisor of the frequency per rotated pair (llama.cpp
// creates rope_freqs.weight, rope_factors_short/long.weight with shape {n_rot / 2} and passes
// one to ggml_rope_ext as freq_factors). Empty when the file has none.
std::vector<float> read_rope_factor_tensor(const char* name, const ModelConfig& c, const GgufFile& file,
                                           const ConfigReader& r) {
  const GgufTensor* t = file.find_tensor(name);
  if (t == nullptr) return {};
  const std::int64_t pairs = c.rope_dims / 2;
  if (t->shape.size() != 1 || t->shape[0] != pairs) {
    r.invalid(fmt::format("tensor '{}' has shape [{}], expected [{}] (rope.dimension_count {} / 2)", name,
                          fmt::join(t->shape, ", "), pairs, c.rope_dims));
  }
  if (!ggml_type_info(t->type).dequantizable) {
    fail(ErrorCode::unsupported, "{}: tensor '{}' has type {}, which ember cannot dequantize", file.path(), name,
         ggml_type_info(t->type).name);
  }
  std::vector<float> factors(static_cast<std::size_t>(pairs));
  dequantize(t->type, t->data, factors.data(), pairs);
  for (std::size_t i = 0; i < factors.size(); ++i) {
    if (!(factors[i] > 0.0f) || !std::isfinite(factors[i])) {
      r.invalid(fmt::format("tensor '{}' value {} = {} must be positive and finite", name, i, factors[i]));
    }
  }
  return factors;
}

void read_rope_freq_factors(ModelConfig& c, const GgufFile& file, const ConfigReader& r) {
  c.rope_freq_factors = read_rope_factor_tensor("rope_freqs.weight", c, file, r);
  std::vector<float> short_factors = read_rope_factor_tensor("rope_factors_short.weight", c, file, r);
  c.rope_freq_factors_long = read_rope_factor_tensor("rope_factors_long.weight", c, file, r);
  if (!c.rope_freq_factors.empty() && (!short_factors.empty() || !c.rope_freq_factors_long.empty()))
    r.invalid("both rope_freqs.weight and rope_factors_short/long.weight");
  if (!short_factors.empty()) c.rope_freq_factors = std::move(short_factors);
  if (!c.rope_freq_factors_long.empty() && c.rope_freq_factors.empty())
    r.invalid("rope_factors_long.weight without rope_factors_short.weight");
}

// {arch}.expert_count, expert_used_count and (qwen3moe) expert_feed_forward_length, as llama.cpp
// reads them; an architecture that is always routed refuses a file without experts.
// {arch}.expert_weights_scale and expert_weights_norm are not read, as llama.cpp does not read
// them for these architectures: its qwen3moe, olmoe and llama graphs fix norm_w per
// architecture and pass hparams.expert_weights_scale, which only other architectures'
// load_arch_hparams set (0 for these: no scaling; llama.cpp as vendored by llama-cpp-python
// 0.3.36, src/models/{qwen3moe,olmoe,llama}.cpp), and their converters write neither key. A
// file that carries them runs as llama.cpp runs it (moe_test checks the logits are unchanged).
void read_experts(ModelConfig& c, const ArchitectureTraits& arch, const ConfigReader& r) {
  if (arch.experts == 0) return;
  c.experts = r.optional(".expert_count", 0, kMaxExperts);
  if (c.experts == 0) {
    if (arch.experts == 2) r.invalid(fmt::format("{}.expert_count is missing", c.architecture));
    return;
  }
  c.experts_used = r.required(".expert_used_count", static_cast<std::uint32_t>(c.experts));
  c.expert_ffn = arch.expert_ffn_key ? r.required(".expert_feed_forward_length", kMaxFfn) : c.ffn;
  c.expert_weights_norm = arch.expert_weights_norm;
}

}  // namespace

const ArchitectureTraits* find_architecture(std::string_view name) {
  for (const ArchitectureTraits& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string names;
  for (const ArchitectureTraits& a : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.architecture = std::string(file.get_string("general.architecture"));
  const ArchitectureTraits& arch = architecture(file, c.architecture);
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
  c.rms_eps = r.optional_f32(arch.bert_encoder ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon",
                             arch.bert_encoder ? 1e-12f : 1e-5f);
  c.context_length = r.required(".context_length", kMaxContext);
  c.vocab = read_vocab(file, r);
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  c.attention_bias = arch.attention_bias;
  c.qk_norm = arch.qk_norm;
  c.post_norms = arch.post_norms;
  c.feed_forward = arch.feed_forward;
  c.fused_gate_up = arch.fused_gate_up;
  c.qk_norm_whole = arch.qk_norm_whole;
  read_experts(c, arch, r);
  c.embedding_scale = arch.scaled_embeddings ? std::sqrt(static_cast<float>(c.embedding)) : 1.0f;
  // llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA3): query_pre_attn_scalar is embedding / heads
  // for the 27B model, recognised by its 62 layers, and head_dim for every other size.
  if (c.architecture == "gemma3" && c.layers == 62)
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.embedding / c.heads));
  // Only where llama.cpp reads it: a Mistral file's llama.attention.sliding_window changes
  // nothing in llama.cpp either.
  if (arch.sliding_window_pattern > 0) {
    c.sliding_window = r.optional(".attention.sliding_window", 0, kMaxContext);
    c.sliding_window_pattern = r.optional(".attention.sliding_window_pattern", arch.sliding_window_pattern, kMaxLayers);
    c.rope_base_sliding = arch.rope_base_sliding;
  }
  if (arch.bert_encoder) describe_bert(c, file);
  if (const auto pooling = file.find_u32(c.architecture + ".pooling_type"); pooling && *pooling <= 4)
    c.pooling_type = static_cast<int>(*pooling);
  check_consistency(c, r);  // rope_dims is valid from here on
  read_rope_scaling(c, file, r);
  read_rope_freq_factors(c, file, r);
  return c;
}

float ModelConfig::attention_score_scale() const {
  const float base = attention_scale > 0.0f ? attention_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  return base * rope_attention_factor * rope_attention_factor;
}

void ModelConfig::use_context(int context) {
  // llama.cpp's n_ctx_orig_yarn: the original context when the file says it, else the trained one.
  const int original = rope_original_context > 0 ? rope_original_context : context_length;
  if (!rope_freq_factors_long.empty() && context > original) rope_freq_factors = rope_freq_factors_long;
}

}  // namespace ember::model
