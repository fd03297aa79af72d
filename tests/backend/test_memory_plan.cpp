// A model that cannot fit is refused at open with Error(out_of_memory) saying what it needs.
#include "backend/cpu/memory_plan.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "model/decoder_tensors.hpp"
#include "model_writer/gguf_writer.hpp"

#include <doctest/doctest.h>

#include <string>

namespace ember {
namespace {

model::ModelConfig llama_8b() {
  model::ModelConfig c = model::SyntheticModelSpec::tiny_config();
  c.name = "llama-8b-shape";
  c.layers = 32, c.embedding = 4096, c.ffn = 14336, c.heads = 32, c.kv_heads = 8, c.head_dim = 128;
  c.vocab = 128256;
  return c;
}

TEST_CASE("the memory plan of an 8B model: two INT8 layouts of 8.0 billion weights") {
  const auto plan = backend::cpu::plan_memory(llama_8b(), Precision::int8);
  // 32 x 218 M weights a layer + 525 M of lm_head = 7.50 G weights, two bytes each.
  CHECK(plan.prepared_bytes == 2ull * (32ull * 218103808ull + 128256ull * 4096ull));
  CHECK(plan.transient_bytes == 8ull * 218103808ull);  // one layer in FP32, twice
  const auto fp32 = backend::cpu::plan_memory(llama_8b(), Precision::fp32);
  CHECK(fp32.prepared_bytes == 2 * plan.prepared_bytes);
}

TEST_CASE("a model that does not fit is out_of_memory, naming what it needs and what there is") {
  const auto c = llama_8b();
  const auto plan = backend::cpu::plan_memory(c, Precision::int8);
  try {
    backend::cpu::check_fits(plan, 8ull << 30, c);
    FAIL("an 8B model fitted in 8 GiB");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::out_of_memory);
    const std::string message = e.what();
    CHECK(message.find("llama-8b-shape") != std::string::npos);
    CHECK(message.find("needs about 15.6 GiB") != std::string::npos);
    CHECK(message.find("8.0 GiB are available") != std::string::npos);
  }
  CHECK_NOTHROW(backend::cpu::check_fits(plan, 64ull << 30, c));
  CHECK_NOTHROW(backend::cpu::check_fits(plan, 0, c));  // unknown: never refused
}

// Qwen3-30B-A3B's shape: 48 layers of attention (2048 -> 32 heads of 128, 4 KV heads) and 128
// experts of 768, and a 151936-token lm_head.
model::ModelConfig qwen3_30b_a3b() {
  model::ModelConfig c = model::SyntheticModelSpec::architecture_config("qwen3moe");
  c.name = "qwen3-30b-a3b-shape";
  c.layers = 48, c.embedding = 2048, c.heads = 32, c.kv_heads = 4, c.head_dim = 128, c.vocab = 151936;
  c.experts = 128, c.experts_used = 8, c.expert_ffn = 768;
  return c;
}

// The 4-bit layouts are not one size: Q4_0 groups keep a scale (18 bytes per 32 weights), Q4_1
// groups a scale and an offset (20 bytes).
TEST_CASE("the memory plan counts 9/16 of a byte a Q4_0 weight and 5/8 a Q4_1 weight") {
  const std::uint64_t layer = 2048ull * (4096 + 2 * 512) + 4096ull * 2048 + 128ull * 3 * 768 * 2048 + 128ull * 2048;
  const std::uint64_t weights = 48 * layer + 151936ull * 2048;
  REQUIRE(weights == 30220746752ull);
  const auto q4_0 = backend::cpu::plan_memory(qwen3_30b_a3b(), Precision::int8, {1.0, 0.0});
  const auto q4_1 = backend::cpu::plan_memory(qwen3_30b_a3b(), Precision::int8, {0.0, 1.0});
  CHECK(q4_0.prepared_bytes == weights / 32 * 18);
  CHECK(q4_1.prepared_bytes == weights / 32 * 20);
  // Half and half, and a quarter left to the two-layout INT8 path.
  const auto mixed = backend::cpu::plan_memory(qwen3_30b_a3b(), Precision::int8, {0.375, 0.375});
  const std::uint64_t part = weights / 8 * 3;
  CHECK(mixed.prepared_bytes == 2 * (weights - 2 * part) + part / 16 * 9 + part / 8 * 5);
  CHECK(backend::cpu::plan_memory(qwen3_30b_a3b(), Precision::int8).prepared_bytes == 2 * weights);
}

// Which layout each matrix of a file takes: Q4_0 files have no offsets, Q4_1 files do; the
// router stays FP32 (counted in neither); the FP32 path keeps no 4-bit groups.
TEST_CASE("four_bit_shares tells Q4_0 matrices from Q4_1 ones") {
  for (const auto type : {model::GgmlType::Q4_0, model::GgmlType::Q4_1}) {
    model::SyntheticModelSpec spec;
    spec.config = model::SyntheticModelSpec::architecture_config("qwen3moe");
    spec.weight_type = type;
    const auto bytes = model::make_synthetic_model(spec);
    const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "shares");
    const model::ModelConfig c = model::read_model_config(*file);
    const model::DecoderTensors t = model::map_decoder_tensors(*file, c);
    const auto shares = backend::cpu::four_bit_shares(c, t, Precision::int8, WeightFormat::automatic);
    CAPTURE(model::ggml_type_info(type).name);
    const double four = type == model::GgmlType::Q4_0 ? shares.scale_only : shares.with_offsets;
    const double other = type == model::GgmlType::Q4_0 ? shares.with_offsets : shares.scale_only;
    CHECK(four > 0.9);
    CHECK(four < 1.0);  // the routers are FP32 matrices
    CHECK(other == 0.0);
    const auto fp32 = backend::cpu::four_bit_shares(c, t, Precision::fp32, WeightFormat::automatic);
    CHECK(fp32.scale_only + fp32.with_offsets == 0.0);
  }
}

TEST_CASE("this machine says how much memory it has") { CHECK(backend::cpu::available_memory() > (64ull << 20)); }

}  // namespace
}  // namespace ember
