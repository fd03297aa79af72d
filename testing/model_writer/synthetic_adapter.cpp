#include "model_writer/synthetic_adapter.hpp"

#include "model_writer/gguf_writer.hpp"
#include "model_writer/splitmix_random.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>

namespace ember::model {
namespace {

// The tensor's kind: "attn_q" for "blk.3.attn_q.weight", "output" for "output.weight", "" for
// anything else (vectors, experts, embeddings).
std::string kind_of(const GgufTensor& t) {
  std::string_view name = t.name;
  if (t.shape.size() != 2 || !name.ends_with(".weight")) return {};
  name.remove_suffix(7);
  if (name == "output") return "output";
  if (!name.starts_with("blk.")) return {};
  const auto dot = name.find('.', 4);
  if (dot == std::string_view::npos) return {};
  const std::string_view kind = name.substr(dot + 1);
  if (kind.ends_with("_exps") || kind == "ffn_gate_inp") return {};
  return std::string(kind);
}

}  // namespace

std::vector<std::string> adapted_tensors(const GgufFile& base, const SyntheticAdapterSpec& spec) {
  std::vector<std::string> out;
  for (const GgufTensor& t : base.tensors()) {
    const std::string kind = kind_of(t);
    if (kind.empty() || kind == "token_embd") continue;
    if (spec.tensors.empty() || std::find(spec.tensors.begin(), spec.tensors.end(), kind) != spec.tensors.end())
      out.push_back(t.name);
  }
  return out;
}

namespace {

GgufWriter adapter_writer(const GgufFile& base, const SyntheticAdapterSpec& spec) {
  if (spec.rank <= 0) fail(ErrorCode::invalid_argument, "adapter rank {} must be positive", spec.rank);
  const std::vector<std::string> names = adapted_tensors(base, spec);
  if (names.empty()) fail(ErrorCode::invalid_argument, "no tensor of the base model matches the adapter's tensors");
  GgufWriter w;
  w.set_string("general.architecture", std::string(base.get_string("general.architecture")));
  w.set_string("general.type", "adapter");
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", spec.alpha);
  SplitMixRandom rng(spec.seed);
  for (const std::string& name : names) {
    const GgufTensor& t = base.tensor(name);
    const std::int64_t in = t.shape[0], out = t.shape[1], r = spec.rank;
    // |A x| ~ |x| and |B t| ~ |t| / 2: with alpha / rank near 2 the update is about as large as
    // the base product, so an adapter visibly changes the tokens.
    w.add_tensor(name + ".lora_a", spec.type, {in, r},
                 rng.values(in * r, spec.magnitude * std::sqrt(3.0f / static_cast<float>(in))));
    w.add_tensor(name + ".lora_b", spec.type, {r, out},
                 rng.values(r * out, 0.5f * std::sqrt(3.0f / static_cast<float>(r))));
  }
  return w;
}

}  // namespace

std::vector<std::uint8_t> make_synthetic_adapter(const GgufFile& base, const SyntheticAdapterSpec& spec) {
  return adapter_writer(base, spec).bytes();
}

void write_synthetic_adapter(const GgufFile& base, const SyntheticAdapterSpec& spec, const std::string& path) {
  adapter_writer(base, spec).write(path);
}

}  // namespace ember::model
