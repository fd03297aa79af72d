// LoRA adapters on the backend: ember's FP32 logits with a synthetic adapter against llama.cpp's
// with the same adapter and scale (tests/reference/make_lora_goldens.py), the INT8 path's
// smoothing folded into the adapter, and adapter files that must be refused with an Error.
#include "backend/cpu/cpu_backend.hpp"
#include "model/decoder_tensors.hpp"
#include "model/lora_adapter.hpp"
#include "model_writer/gguf_writer.hpp"
#include "model_writer/synthetic_adapter.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace ember {
namespace {

using nlohmann::json;

const json& goldens() {
  static const json doc = [] {
    std::ifstream in(test::data_path("reference/lora_goldens.json"));
    REQUIRE_MESSAGE(in.good(), "missing tests/data/reference/lora_goldens.json");
    return json::parse(in);
  }();
  return doc;
}

std::shared_ptr<const model::GgufFile> synthetic_base(const std::string& arch, model::GgmlType type) {
  model::SyntheticModelSpec spec;
  spec.config = model::SyntheticModelSpec::architecture_config(arch);
  spec.weight_type = type;
  const auto bytes = model::make_synthetic_model(spec);
  return model::GgufFile::parse(bytes.data(), bytes.size(), arch);
}

model::SyntheticAdapterSpec adapter_spec(const json& g) {
  model::SyntheticAdapterSpec spec;
  spec.rank = g["rank"].get<int>();
  spec.alpha = g["alpha"].get<float>();
  spec.seed = g["adapter_seed"].get<std::uint64_t>();
  std::stringstream kinds(g["tensors"].get<std::string>());
  for (std::string kind; std::getline(kinds, kind, ',');) spec.tensors.push_back(kind);
  return spec;
}

model::LoraAdapter read_adapter(const std::vector<std::uint8_t>& bytes, const model::GgufFile& base,
                                const model::ModelConfig& c) {
  const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "adapter");
  return model::read_lora_adapter(*file, c, model::map_decoder_tensors(base, c));
}

std::vector<float> run(backend::Backend& b, const std::vector<std::int32_t>& tokens,
                       std::vector<backend::LoraUse> adapters) {
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16, KvCacheType::f32);
  runner.adapters = std::move(adapters);
  return runner.append(tokens, /*all_rows=*/true, 7);  // chunked
}

void check_case(const std::string& name) {
  const json& g = goldens()["cases"][name];
  const auto base = synthetic_base(g["architecture"].get<std::string>(), model::GgmlType::F32);
  REQUIRE(base->file_size() == g["model_bytes"].get<std::uint64_t>());  // the file llama.cpp read
  const auto adapter_bytes = model::make_synthetic_adapter(*base, adapter_spec(g));
  REQUIRE(adapter_bytes.size() == g["adapter_bytes"].get<std::size_t>());
  model::ModelConfig c = model::read_model_config(*base);
  c.use_context(128);  // make_lora_goldens.py N_CTX
  const model::LoraAdapter raw = read_adapter(adapter_bytes, *base, c);
  backend::BackendOptions options;
  options.threads = 2;
  options.precision = Precision::fp32;
  auto b = backend::cpu::make_cpu_backend(base, c, options);
  const auto adapter = b->prepare_adapter(raw);
  const auto tokens = g["tokens"].get<std::vector<std::int32_t>>();
  const std::vector<float> logits = run(*b, tokens, {{adapter.get(), g["scale"].get<float>()}});
  const int vocab = g["vocab"].get<int>();
  double max_abs = 0, mean_abs = 0;
  int same = 0;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const auto want = g["logits"][r].get<std::vector<float>>();
    const float* got = logits.data() + r * vocab;
    for (int i = 0; i < vocab; ++i) {
      const double d = std::fabs(got[i] - want[static_cast<std::size_t>(i)]);
      max_abs = std::max(max_abs, d);
      mean_abs += d;
    }
    same += test::argmax(got, vocab) == test::argmax(want.data(), vocab);
  }
  mean_abs /= static_cast<double>(tokens.size()) * vocab;
  MESSAGE(name, ": max abs logit difference from llama.cpp ", max_abs, ", mean ", mean_abs, ", top-1 ", same, "/",
          tokens.size(), " (the adapter moved llama.cpp's logits by up to ", g["max_change_from_base"], ")");
  // The bounds of the architectures' goldens (test_arch_golden.cpp).
  CHECK(max_abs < 1e-2);
  CHECK(mean_abs < 1e-3);
  CHECK(same == static_cast<int>(tokens.size()));
  // The adapter really changed the function: the golden is not the base model's.
  CHECK(g["max_change_from_base"].get<double>() > 0.5);
}

TEST_CASE("llama3 with an adapter on every matrix and the output matches llama.cpp") { check_case("llama3_all"); }
TEST_CASE("qwen2 (biases) with an adapter on q, v and the output matches llama.cpp") { check_case("qwen2_qv"); }
TEST_CASE("phi3 with adapters on its fused Q|K|V and gate|up (alpha 0) matches llama.cpp") { check_case("phi3_fused"); }

// The INT8 path smooths activations (multiplies matrix columns by s, divides their inputs by s,
// and divides V and up rows): an adapter must see the activations as the file's weights do. The
// adapter's effect at INT8 must match its effect at FP32 as closely as INT8 matches FP32 without
// it; a missed factor would multiply the update by s, far outside that.
TEST_CASE("the INT8 path's smoothing is folded into the adapter") {
  const auto base = synthetic_base("llama3", model::GgmlType::F32);  // F32: w8a8, smoothable
  model::ModelConfig c = model::read_model_config(*base);
  c.use_context(128);
  model::SyntheticAdapterSpec spec;
  spec.seed = 3;
  spec.magnitude = 0.5f;
  const model::LoraAdapter raw = read_adapter(model::make_synthetic_adapter(*base, spec), *base, c);
  backend::BackendOptions options;
  options.threads = 2;
  options.precision = Precision::fp32;
  auto fp32 = backend::cpu::make_cpu_backend(base, c, options);
  options.precision = Precision::int8;
  options.tokenize = [&](std::string_view) { return test::random_tokens(96, c.vocab, 5); };  // calibration
  auto int8 = backend::cpu::make_cpu_backend(base, c, options);
  REQUIRE(int8->weight_format() == "w8a8");
  const auto tokens = test::random_tokens(20, c.vocab, 9);
  const auto fp32_lora = fp32->prepare_adapter(raw), int8_lora = int8->prepare_adapter(raw);
  const auto base32 = run(*fp32, tokens, {}), base8 = run(*int8, tokens, {});
  const auto lora32 = run(*fp32, tokens, {{fp32_lora.get(), 1.0f}}),
             lora8 = run(*int8, tokens, {{int8_lora.get(), 1.0f}});
  double base_gap = 0, lora_gap = 0, effect = 0;
  for (std::size_t i = 0; i < base32.size(); ++i) {
    base_gap = std::max(base_gap, static_cast<double>(std::fabs(base8[i] - base32[i])));
    lora_gap = std::max(lora_gap, static_cast<double>(std::fabs(lora8[i] - lora32[i])));
    effect = std::max(effect, static_cast<double>(std::fabs(lora32[i] - base32[i])));
  }
  MESSAGE("INT8 vs FP32: ", base_gap, " without the adapter, ", lora_gap, " with it; the adapter moves FP32 by ",
          effect);
  CHECK(effect > 10 * base_gap);
  CHECK(lora_gap < 3 * base_gap + 1e-3);
}

// An adapter file's problems are Errors naming them, never a crash.
TEST_CASE("malformed adapters are refused by name") {
  const auto base = synthetic_base("llama3", model::GgmlType::F32);
  const model::ModelConfig c = model::read_model_config(*base);
  const auto expect = [&](const std::vector<std::uint8_t>& bytes, ErrorCode code, const std::string& words) {
    try {
      read_adapter(bytes, *base, c);
      FAIL("accepted: expected ", words);
    } catch (const Error& e) {
      CHECK_MESSAGE(e.code() == code, e.what());
      CHECK_MESSAGE(std::string(e.what()).find(words) != std::string::npos, e.what());
    }
  };
  const auto writer = [](const std::string& type, const std::string& arch) {
    model::GgufWriter w;
    w.set_string("general.architecture", arch);
    w.set_string("general.type", type);
    w.set_string("adapter.type", "lora");
    w.set_f32("adapter.lora.alpha", 8.0f);
    return w;
  };
  const std::int64_t d = c.embedding;
  const std::vector<float> a(static_cast<std::size_t>(d * 4), 0.01f), b(static_cast<std::size_t>(4 * d), 0.01f);
  expect(writer("model", "llama").bytes(), ErrorCode::invalid_model, "not an adapter file");
  expect(writer("adapter", "qwen2").bytes(), ErrorCode::invalid_model, "architecture 'qwen2'");
  {
    auto w = writer("adapter", "llama");
    w.add_tensor("blk.0.attn_output.weight.lora_a", model::GgmlType::F32, {d, 4}, a);
    expect(w.bytes(), ErrorCode::invalid_model, "lacks its lora_b");
  }
  {
    auto w = writer("adapter", "llama");  // lora_a [d + 1, 4]: for another model's width
    w.add_tensor("blk.0.attn_output.weight.lora_a", model::GgmlType::F32, {d + 1, 4},
                 std::vector<float>(static_cast<std::size_t>((d + 1) * 4), 0.0f));
    w.add_tensor("blk.0.attn_output.weight.lora_b", model::GgmlType::F32, {4, d}, b);
    expect(w.bytes(), ErrorCode::invalid_model, "incorrect shape");
  }
  {
    auto w = writer("adapter", "llama");
    w.add_tensor("blk.9.attn_output.weight.lora_a", model::GgmlType::F32, {d, 4}, a);
    w.add_tensor("blk.9.attn_output.weight.lora_b", model::GgmlType::F32, {4, d}, b);
    expect(w.bytes(), ErrorCode::invalid_model, "does not exist in the base model");
  }
  {
    auto w = writer("adapter", "llama");
    w.add_tensor("token_embd.weight.lora_a", model::GgmlType::F32, {d, 4}, a);
    w.add_tensor("token_embd.weight.lora_b", model::GgmlType::F32, {4, d}, b);
    expect(w.bytes(), ErrorCode::unsupported, "token embeddings");
  }
  {
    auto w = writer("adapter", "llama");
    w.add_tensor("blk.0.attn_output.weight.lora_x", model::GgmlType::F32, {d, 4}, a);
    expect(w.bytes(), ErrorCode::invalid_model, "unexpected suffix");
  }
}

}  // namespace
}  // namespace ember
