// A model that cannot fit is refused at open with Error(out_of_memory) saying what it needs.
#include "backend/cpu/memory_plan.hpp"
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

TEST_CASE("this machine says how much memory it has") { CHECK(backend::cpu::available_memory() > (64ull << 20)); }

}  // namespace
}  // namespace ember
