#include "model/lora_adapter.hpp"

#include "model/decoder_tensors.hpp"
#include "util/check.hpp"

#include <cmath>
#include <map>
#include <string_view>

namespace ember::model {
namespace {

constexpr std::string_view kLoraA = ".lora_a", kLoraB = ".lora_b";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Where a base tensor's rows are in the graph: which weight, from which row.
struct Placement {
  WeightRef ref;
  std::int64_t row_offset = 0, rows = 0, cols = 0;
};

// Every base tensor an adapter may name, and (for a clear refusal) the ones it may not.
struct BaseMatrices {
  std::map<std::string, Placement, std::less<>> adaptable;
  std::map<std::string, std::string, std::less<>> refused;  // name -> why
};

void add_weight(BaseMatrices& out, const GraphWeight& w) {
  if (!w.is_matrix()) return;
  if (w.experts > 0 || w.ref.id == WeightId::router) {
    for (const GgufTensor* t : w.sources)
      out.refused[t->name] = "mixture-of-experts tensors (experts, router) take no LoRA in ember";
    return;
  }
  std::int64_t offset = 0;
  for (const GgufTensor* t : w.sources) {
    out.adaptable[t->name] = {w.ref, offset, t->rows(), w.cols};
    offset += t->rows();
  }
}

BaseMatrices base_matrices(const ModelConfig& config, const DecoderTensors& base) {
  BaseMatrices out;
  for (int l = 0; l < config.layers; ++l)
    for (const GraphWeight& w : layer_weights(base, config, l)) add_weight(out, w);
  for (const GraphWeight& w : head_weights(base, config)) add_weight(out, w);
  if (base.token_embd != nullptr) {
    out.adaptable.erase(base.token_embd->name);  // a tied lm_head is the embedding table
    out.refused[base.token_embd->name] = "LoRA on the token embeddings (or a tied output) is not supported";
  }
  return out;
}

std::vector<float> values(const GgufTensor& t) {
  std::vector<float> v = dequantize_tensor(t);
  for (const float x : v)
    if (!std::isfinite(x)) fail(ErrorCode::invalid_model, "LoRA tensor '{}' holds a value that is not finite", t.name);
  return v;
}

// The pair of lora_a `a` and lora_b `b` on base tensor `name`, checked as llama.cpp checks it.
LoraPair read_pair(const std::string& name, const GgufTensor& a, const GgufTensor& b, const Placement& p, float alpha) {
  if (a.shape.size() != 2 || b.shape.size() != 2)
    fail(ErrorCode::invalid_model, "LoRA tensors of '{}' must be matrices (lora_a has {} dimensions, lora_b {})", name,
         a.shape.size(), b.shape.size());
  const std::int64_t rank = a.shape[1];
  if (a.shape[0] != p.cols || b.shape[1] != p.rows)
    fail(ErrorCode::invalid_model,
         "LoRA tensor '{}' has incorrect shape: lora_a [{}, {}] and lora_b [{}, {}] for a base [{}, {}] "
         "(the adapter is for another base model?)",
         name, a.shape[0], a.shape[1], b.shape[0], b.shape[1], p.cols, p.rows);
  if (b.shape[0] != rank || rank <= 0)
    fail(ErrorCode::invalid_model,
         "LoRA tensor '{}': lora_a's rank {} differs from lora_b's {} (lora_a not transposed?)", name, rank,
         b.shape[0]);
  LoraPair pair{name, p.row_offset, p.rows, p.cols, rank, values(a), values(b)};
  pair.scale = alpha != 0.0f ? alpha / static_cast<float>(rank) : 1.0f;
  return pair;
}

void check_header(const GgufFile& adapter, const ModelConfig& config) {
  const auto general_type = adapter.find_string("general.type");
  if (general_type.value_or("") != "adapter")
    fail(ErrorCode::invalid_model, "{}: general.type is '{}', not 'adapter': not an adapter file", adapter.path(),
         general_type.value_or(""));
  const auto adapter_type = adapter.find_string("adapter.type");
  if (adapter_type.value_or("") != "lora")
    fail(ErrorCode::unsupported, "{}: adapter.type is '{}'; ember loads 'lora' adapters only", adapter.path(),
         adapter_type.value_or(""));
  const auto arch = adapter.find_string("general.architecture");
  if (arch.value_or("") != config.architecture)
    fail(ErrorCode::invalid_model, "{}: the adapter is for architecture '{}', the model is '{}'", adapter.path(),
         arch.value_or(""), config.architecture);
  if (adapter.find("adapter.alora.invocation_tokens") != nullptr)
    fail(ErrorCode::unsupported, "{}: activated LoRA (adapter.alora.invocation_tokens) is not supported",
         adapter.path());
  if (!config.has_lm_head)
    fail(ErrorCode::unsupported, "LoRA adapters apply to decoder models; {} is an encoder", config.name);
}

}  // namespace

void LoraAdapter::add(WeightRef ref, LoraPair pair) {
  max_rank_ = std::max(max_rank_, static_cast<int>(pair.rank));
  ++tensor_count_;
  pairs_[ref].push_back(std::move(pair));
}

LoraAdapter read_lora_adapter(const GgufFile& adapter, const ModelConfig& config, const DecoderTensors& base) {
  check_header(adapter, config);
  const auto alpha_value = adapter.find_f32("adapter.lora.alpha");
  const float alpha = alpha_value.value_or(0.0f);
  if (!std::isfinite(alpha) || alpha < 0.0f)
    fail(ErrorCode::invalid_model, "{}: adapter.lora.alpha {} is not a finite non-negative number", adapter.path(),
         alpha);
  // lora_a and lora_b by base tensor name.
  std::map<std::string, std::pair<const GgufTensor*, const GgufTensor*>, std::less<>> by_base;
  for (const GgufTensor& t : adapter.tensors()) {
    const std::string_view name = t.name;
    if (ends_with(name, kLoraA))
      by_base[std::string(name.substr(0, name.size() - kLoraA.size()))].first = &t;
    else if (ends_with(name, kLoraB))
      by_base[std::string(name.substr(0, name.size() - kLoraB.size()))].second = &t;
    else if (!ends_with(name, "_norm.weight"))  // norm vectors: llama.cpp skips them too
      fail(ErrorCode::invalid_model, "{}: LoRA tensor '{}' has an unexpected suffix (not .lora_a or .lora_b)",
           adapter.path(), name);
  }
  if (by_base.empty()) fail(ErrorCode::invalid_model, "{}: the adapter has no lora_a/lora_b tensors", adapter.path());
  const BaseMatrices matrices = base_matrices(config, base);
  LoraAdapter out(config.layers, adapter.path(), alpha);
  for (const auto& [name, ab] : by_base) {
    if (ab.first == nullptr || ab.second == nullptr)
      fail(ErrorCode::invalid_model, "{}: LoRA pair for '{}' lacks its {}", adapter.path(), name,
           ab.first == nullptr ? "lora_a" : "lora_b");
    if (const auto why = matrices.refused.find(name); why != matrices.refused.end())
      fail(ErrorCode::unsupported, "{}: LoRA tensor '{}': {}", adapter.path(), name, why->second);
    const auto where = matrices.adaptable.find(name);
    if (where == matrices.adaptable.end())
      fail(ErrorCode::invalid_model, "{}: LoRA tensor '{}' does not exist in the base model (wrong base model?)",
           adapter.path(), name);
    out.add(where->second.ref, read_pair(name, *ab.first, *ab.second, where->second, alpha));
  }
  return out;
}

}  // namespace ember::model
