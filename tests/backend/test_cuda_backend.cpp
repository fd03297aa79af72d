// The CUDA backend against the CPU INT8 backend on the same file: a synthetic model of the
// default model's shape (and the default model itself where its file is present), teacher-
// forced; graphs against eager steps; errors at open.
#include "cuda_test_support.hpp"

#include "backend/backend_factory.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <random>

namespace ember {
namespace {

// The options with `precision`: the CPU backend's matrix products (int8 or fp32).
backend::BackendOptions at_precision(backend::BackendOptions options, Precision precision) {
  options.precision = precision;
  return options;
}

model::ModelConfig default_shape() {
  model::ModelConfig c = model::SyntheticModelSpec::default_model_config();
  c.context_length = 512;
  return c;
}

std::shared_ptr<const model::GgufFile> synthetic(const model::ModelConfig& config, std::uint64_t seed) {
  model::SyntheticModelSpec spec;
  spec.config = config;
  spec.weight_type = model::GgmlType::Q4_1;  // as the default model's matrices
  spec.seed = seed;
  const auto bytes = std::make_shared<std::vector<std::uint8_t>>(model::make_synthetic_model(spec));
  return model::GgufFile::parse(bytes->data(), bytes->size(), "synthetic");
}

using test::random_tokens;

struct Agreement {
  double top1 = 0, max_abs = 0, mean_abs = 0;
};

Agreement agreement(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  REQUIRE(a.size() == b.size());
  Agreement g;
  const std::size_t rows = a.size() / static_cast<std::size_t>(vocab);
  int same = 0;
  for (std::size_t r = 0; r < rows; ++r)
    same += test::argmax(a.data() + r * vocab, vocab) == test::argmax(b.data() + r * vocab, vocab);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    g.max_abs = std::max(g.max_abs, d);
    g.mean_abs += d / static_cast<double>(a.size());
  }
  g.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return g;
}

// Teacher-forced logits of every position: a prefill in chunks, then single-token steps.
std::vector<float> teacher_forced(backend::Backend& b, const std::vector<std::int32_t>& tokens, int prefill) {
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16);
  auto logits = runner.append({tokens.begin(), tokens.begin() + prefill}, /*all_rows=*/true, 48);
  for (std::size_t i = static_cast<std::size_t>(prefill); i < tokens.size(); ++i) {
    const auto row = runner.append({tokens[i]}, /*all_rows=*/true);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

backend::BackendOptions cuda_options(Precision precision) {
  backend::BackendOptions o;
  o.device = Device::cuda(0);
  o.precision = precision;
  o.threads = 4;
  return o;
}

// CUDA INT8 requantizes every matrix per output channel where the CPU keeps a 4-bit file's
// groups (W4A8): the two agree to `int8_top1` (the tiny synthetic models' near-flat logits
// leave less margin than a real vocabulary's, hence their lower bound).
void compare_with_cpu(const std::shared_ptr<const model::GgufFile>& file, const char* what, int vocab_tokens,
                      double int8_top1 = 0.99) {
  const model::ModelConfig c = model::read_model_config(*file);
  backend::BackendOptions cpu_options;  // no calibration on either side: the same INT8 weights
  cpu_options.threads = 4;
  auto cpu = backend::cpu::make_cpu_backend(file, c, at_precision(cpu_options, Precision::int8));
  auto gpu = backend::cuda::make_cuda_backend(file, c, cuda_options(Precision::int8));
  auto gpu16 = backend::cuda::make_cuda_backend(file, c, cuda_options(Precision::fp16));
  const auto tokens = random_tokens(200, vocab_tokens, 21);
  const auto want = teacher_forced(*cpu, tokens, 150);
  const Agreement int8 = agreement(teacher_forced(*gpu, tokens, 150), want, c.vocab);
  MESSAGE(std::string(what), ": cuda-int8 vs cpu-int8 over ", tokens.size(), " positions: top-1 ", int8.top1,
          ", max abs ", int8.max_abs, ", mean abs ", int8.mean_abs);
  CHECK(int8.top1 >= int8_top1);
  const Agreement fp16 = agreement(teacher_forced(*gpu16, tokens, 150), want, c.vocab);
  MESSAGE(std::string(what), ": cuda-fp16 vs cpu-int8: top-1 ", fp16.top1, ", max abs ", fp16.max_abs, ", mean abs ",
          fp16.mean_abs);
  CHECK(fp16.top1 >= 0.9);
  CHECK(fp16.mean_abs > 0.0);  // a different numeric path really ran
}

TEST_CASE("whole-model logits: CUDA vs CPU INT8 on a synthetic model of the default shape") {
  test::require_cuda_device();
  compare_with_cpu(synthetic(default_shape(), 3), "synthetic default shape", 49152);
}

TEST_CASE("whole-model logits: CUDA vs CPU INT8 on the default model, when present") {
  test::require_cuda_device();
  const std::string path = test::default_model_path();
  if (path.empty()) {
    MESSAGE("the default model is not available: only the synthetic comparison ran");
    return;
  }
  compare_with_cpu(model::GgufFile::open(path), "default model", 49152);
}

// Every architecture whose graph the CUDA backend runs, on its tiny synthetic file: Gemma 3
// (sliding windows with their own RoPE base, q/k norms, post-norms, GeGLU, scaled embeddings,
// its own attention scale) and Qwen3 (q/k norms) among them.
TEST_CASE("whole-model logits: CUDA vs CPU INT8 on every architecture's synthetic model") {
  test::require_cuda_device();
  for (const char* arch : {"llama3", "qwen2", "qwen3", "gemma3"}) {
    CAPTURE(arch);
    compare_with_cpu(synthetic(model::SyntheticModelSpec::architecture_config(arch), 31), arch, 200, 0.95);
  }
}

TEST_CASE("Llama 3 RoPE frequency factors and linear scaling: CUDA follows the CPU's scaled function") {
  test::require_cuda_device();
  model::ModelConfig shape = model::SyntheticModelSpec::tiny_config();
  shape.rope_freq_factors = model::SyntheticModelSpec::llama3_rope_factors(shape, 8.0f, 1.0f, 4.0f, 32);
  shape.rope_scaling_factor = 2.0f;
  const auto file = synthetic(shape, 9);
  const model::ModelConfig c = model::read_model_config(*file);
  REQUIRE(c.rope_freq_factors == shape.rope_freq_factors);
  model::ModelConfig unscaled = c;  // the same file run as if its RoPE were plain
  unscaled.rope_freq_factors.clear();
  unscaled.rope_scaling_factor = 1.0f;
  backend::BackendOptions cpu_options;
  cpu_options.threads = 4;
  const auto tokens = random_tokens(60, c.vocab, 4);
  const auto want =
      teacher_forced(*backend::cpu::make_cpu_backend(file, c, at_precision(cpu_options, Precision::int8)), tokens, 40);
  const auto wrong = teacher_forced(
      *backend::cpu::make_cpu_backend(file, unscaled, at_precision(cpu_options, Precision::int8)), tokens, 40);
  for (Precision p : {Precision::int8, Precision::fp16}) {
    auto gpu = backend::cuda::make_cuda_backend(file, c, cuda_options(p));
    const auto got = teacher_forced(*gpu, tokens, 40);
    const Agreement scaled = agreement(got, want, c.vocab), plain = agreement(got, wrong, c.vocab);
    MESSAGE(gpu->name(), " vs cpu-int8: mean abs ", scaled.mean_abs, " (scaled), ", plain.mean_abs, " (unscaled)");
    CHECK(scaled.mean_abs < plain.mean_abs / 4);
    CHECK(scaled.top1 >= 0.9);
  }
}

TEST_CASE("CUDA graphs replay exactly what the eager steps compute") {
  test::require_cuda_device();
  const auto file = synthetic(model::SyntheticModelSpec::tiny_config(), 5);
  const model::ModelConfig c = model::read_model_config(*file);
  for (Precision p : {Precision::int8, Precision::fp16}) {
    auto graphs = backend::cuda::make_cuda_backend(file, c, cuda_options(p), true);
    auto eager = backend::cuda::make_cuda_backend(file, c, cuda_options(p), false);
    const auto tokens = random_tokens(40, c.vocab, 8);
    CHECK(teacher_forced(*graphs, tokens, 20) == teacher_forced(*eager, tokens, 20));
  }
}

TEST_CASE("bad devices, precisions and sizes are errors at open") {
  test::require_cuda_device();
  const auto file = synthetic(model::SyntheticModelSpec::tiny_config(), 5);
  const model::ModelConfig c = model::read_model_config(*file);
  auto o = cuda_options(Precision::int8);
  o.device = Device::cuda(1000);
  CHECK_THROWS_WITH_AS(backend::make_backend(file, c, o), doctest::Contains("1000"), Error);
  o = cuda_options(Precision::fp32);
  CHECK_THROWS_WITH_AS(backend::make_backend(file, c, o), doctest::Contains("fp16"), Error);
  auto b = backend::make_backend(file, c, cuda_options(Precision::int8));
  backend::KvGeometry g{{16, c.kv_heads, c.head_dim, KvCacheType::f16}, c.layers, 1 << 30};  // petabytes
  try {
    b->make_kv_cache(g);
    FAIL("a KV pool larger than the GPU was allocated");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::out_of_memory);
  }
  // int8 KV is CPU only for now: refused when the pool is made (at Engine::open), by name.
  g = backend::KvGeometry{{16, c.kv_heads, c.head_dim, KvCacheType::int8}, c.layers, 4};
  try {
    b->make_kv_cache(g);
    FAIL("an int8 KV cache was made on CUDA");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(std::string(e.what()).find("int8") != std::string::npos);
  }
  backend::KvCache host(backend::KvGeometry{{16, c.kv_heads, c.head_dim, KvCacheType::f16}, c.layers, 4});
  backend::Batch batch;
  batch.tokens = {5};
  batch.positions = {0};
  batch.slots = {0};
  batch.sequences.push_back({0, 1, {0}, {}});
  std::vector<float> logits;
  CHECK_THROWS_AS(b->forward(batch, host, logits), Error);  // host memory handed to the GPU
}

}  // namespace
}  // namespace ember
