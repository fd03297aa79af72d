// Every architecture against llama.cpp on the very same file: a small synthetic model of each
// (SyntheticModelSpec::architecture_config, F32 weights, written by ember's GGUF writer) and
// llama.cpp's logits on it (tests/reference/make_arch_goldens.py). ember's FP32 reference and
// FP32 kernel path must compute the same function: the difference is FP32 rounding only.
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/reference.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace ember {
namespace {

// The options with `precision`: the CPU backend's matrix products (int8 or fp32).
backend::BackendOptions at_precision(backend::BackendOptions options, Precision precision) {
  options.precision = precision;
  return options;
}

using nlohmann::json;

json load_goldens(const std::string& file) {
  std::ifstream in(test::data_path("reference/" + file));
  REQUIRE_MESSAGE(in.good(), "missing tests/data/reference/", file);
  return json::parse(in);
}

// The dense architectures' goldens, and the mixture-of-experts ones (make_arch_goldens.py --moe).
const json& goldens() {
  static const json doc = load_goldens("arch_goldens.json");
  return doc;
}
const json& moe_goldens() {
  static const json doc = load_goldens("moe_goldens.json");
  return doc;
}

struct Agreement {
  double max_abs = 0, mean_abs = 0, top1 = 0;
};

Agreement against_llama_cpp(backend::Backend& b, const json& golden) {
  const auto tokens = golden["tokens"].get<std::vector<std::int32_t>>();
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16, KvCacheType::f32);
  const std::vector<float> logits = runner.append(tokens, /*all_rows=*/true, 7);  // chunked
  const int vocab = golden["vocab"].get<int>();
  REQUIRE(logits.size() == tokens.size() * static_cast<std::size_t>(vocab));
  Agreement a;
  int same = 0;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    const auto want = golden["logits"][r].get<std::vector<float>>();
    const float* got = logits.data() + r * vocab;
    for (int i = 0; i < vocab; ++i) {
      const double d = std::fabs(got[i] - want[static_cast<std::size_t>(i)]);
      a.max_abs = std::max(a.max_abs, d);
      a.mean_abs += d;
    }
    same += test::argmax(got, vocab) == test::argmax(want.data(), vocab);
  }
  a.mean_abs /= static_cast<double>(tokens.size()) * vocab;
  a.top1 = static_cast<double>(same) / static_cast<double>(tokens.size());
  return a;
}

void check_architecture(const std::string& name, const json& doc = goldens()) {
  const json& golden = doc["models"][name];
  model::SyntheticModelSpec spec;
  spec.config = model::SyntheticModelSpec::architecture_config(name);
  spec.weight_type = model::GgmlType::F32;
  const auto bytes = model::make_synthetic_model(spec);
  // The same file llama.cpp read (make_arch_goldens.py runs ember-make-synthetic NAME).
  REQUIRE(bytes.size() == golden["file_bytes"].get<std::size_t>());
  const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), name);
  model::ModelConfig c = model::read_model_config(*file);
  c.use_context(128);  // the context llama.cpp ran with (make_arch_goldens.py N_CTX)
  backend::BackendOptions options;
  options.threads = 2;
  auto reference = backend::cpu::make_reference_backend(file, c, options);
  auto kernels = backend::cpu::make_cpu_backend(file, c, at_precision(options, Precision::fp32));
  for (auto* b : {reference.get(), kernels.get()}) {
    const Agreement a = against_llama_cpp(*b, golden);
    MESSAGE(name, " ", b->name(), " vs llama.cpp: max abs logit difference ", a.max_abs, ", mean ", a.mean_abs,
            ", top-1 agreement ", a.top1 * 100, " %");
    // Logits here are O(1-30): FP32 rounding in a different order stays far below 1e-2.
    CHECK(a.max_abs < 1e-2);
    CHECK(a.mean_abs < 1e-3);
    CHECK(a.top1 == 1.0);
  }
}

TEST_CASE("llama with Llama 3 RoPE frequency factors matches llama.cpp") { check_architecture("llama3"); }
TEST_CASE("qwen2 matches llama.cpp") { check_architecture("qwen2"); }
TEST_CASE("qwen3 matches llama.cpp") { check_architecture("qwen3"); }
TEST_CASE("gemma3 (sliding-window layers) matches llama.cpp") { check_architecture("gemma3"); }
TEST_CASE("phi3 (fused tensors, LongRoPE short factors, attention factor) matches llama.cpp") {
  check_architecture("phi3");
}
TEST_CASE("phi3 past its original context (LongRoPE long factors) matches llama.cpp") {
  check_architecture("phi3_long");
}
TEST_CASE("qwen3moe (8 experts, top-4, normalized weights) matches llama.cpp") {
  check_architecture("qwen3moe", moe_goldens());
}
TEST_CASE("olmoe (top-3, unnormalized weights, whole-q/k norms) matches llama.cpp") {
  check_architecture("olmoe", moe_goldens());
}
TEST_CASE("llama with experts (Mixtral-style, top-2) matches llama.cpp") {
  check_architecture("mixtral", moe_goldens());
}

}  // namespace
}  // namespace ember
