// LoRA adapters through the Engine: requests with different adapters share steps and each gets
// the tokens it gets alone; the prefix cache never hands one adapter set's KV to another; an
// adapter in use cannot be unloaded; bad ids and files are errors.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include "model_writer/gguf_writer.hpp"
#include "model_writer/synthetic_adapter.hpp"

#include <filesystem>
#include <set>

namespace ember {
namespace {

// An untied model (llama3's small shape, Q8_0): a tied synthetic model mostly echoes its last
// token whatever the adapter, which would make the comparisons below vacuous.
std::string model_path() {
  static const std::string path = [] {
    model::SyntheticModelSpec spec;
    spec.config = model::SyntheticModelSpec::architecture_config("llama3");
    spec.weight_type = model::GgmlType::Q8_0;
    spec.seed = 43;
    const auto p = std::filesystem::temp_directory_path() / "ember-lora-test-model.gguf";
    model::write_synthetic_model(spec, p.string());
    return p.string();
  }();
  return path;
}

// Adapter `seed` for the synthetic model, written once per process.
std::string adapter_path(std::uint64_t seed) {
  const auto path = std::filesystem::temp_directory_path() / ("ember-lora-test-" + std::to_string(seed) + ".gguf");
  model::SyntheticAdapterSpec spec;
  spec.seed = seed;
  spec.rank = 4 + static_cast<int>(seed % 5);
  spec.alpha = 2.0f * static_cast<float>(spec.rank);
  spec.magnitude = 2.0f;
  model::write_synthetic_adapter(*model::GgufFile::open(model_path()), spec, path.string());
  return path.string();
}

EngineOptions options(bool prefix_cache = true) {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.prefix_cache = prefix_cache;
  return o;
}

Request request(const std::string& prompt, std::vector<AdapterScale> adapters, int max_tokens = 12) {
  Request r = test::greedy_request(prompt, max_tokens);
  r.sampling.adapters = std::move(adapters);
  return r;
}

TEST_CASE("8 requests with 8 different adapters in one batch get the tokens each gets alone") {
  for (const Precision precision : {Precision::int8, Precision::fp32}) {
    CAPTURE(precision == Precision::int8 ? "int8" : "fp32");
    EngineOptions o = options(/*prefix_cache=*/false);
    o.precision = precision;
    Engine engine = Engine::open(model_path(), o);
    std::vector<Request> requests;
    for (int i = 0; i < 8; ++i) {
      const std::int32_t id = engine.load_adapter(adapter_path(100 + static_cast<std::uint64_t>(i)));
      requests.push_back(request("the lighthouse keeper wrote " + std::to_string(i),
                                 {{id, 0.5f + 0.25f * static_cast<float>(i % 3)}}));
    }
    std::vector<std::vector<std::int32_t>> alone;
    for (const Request& r : requests) alone.push_back(engine.generate(r).tokens);
    const std::vector<std::int32_t> base = engine.generate(request("the lighthouse keeper wrote 0", {})).tokens;
    // The adapters change the output, each its own way: the comparison below means something.
    std::set<std::vector<std::int32_t>> distinct(alone.begin(), alone.end());
    distinct.insert(base);
    CHECK(distinct.size() >= 7);
    const std::uint64_t steps_before = engine.stats().steps;
    std::vector<RequestHandle> handles;
    for (const Request& r : requests) handles.push_back(engine.submit(r));
    for (std::size_t i = 0; i < handles.size(); ++i) CHECK(handles[i].wait().tokens == alone[i]);
    // All eight shared each step: 1 prefill step + 11 decode steps, not 8 times that.
    CHECK(engine.stats().steps - steps_before <= 12);
  }
}

TEST_CASE("the prefix cache keys on the adapter set") {
  Engine engine = Engine::open(model_path(), options());
  const std::int32_t x = engine.load_adapter(adapter_path(200)), y = engine.load_adapter(adapter_path(201));
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "harbour ledger gull ";  // several full blocks
  const Completion x1 = engine.generate(request(prompt, {{x, 1.0f}}));
  CHECK(x1.cached_prompt_tokens == 0);
  const Completion x2 = engine.generate(request(prompt, {{x, 1.0f}}));
  CHECK(x2.cached_prompt_tokens > 0);  // the same set: reused
  CHECK(x2.tokens == x1.tokens);
  const Completion y1 = engine.generate(request(prompt, {{y, 1.0f}}));
  CHECK(y1.cached_prompt_tokens == 0);  // another adapter: never X's KV
  const Completion half = engine.generate(request(prompt, {{x, 0.5f}}));
  CHECK(half.cached_prompt_tokens == 0);  // another scale is another set
  const Completion none = engine.generate(request(prompt, {}));
  CHECK(none.cached_prompt_tokens == 0);  // no adapter: not the adapters' KV
  const Completion zero = engine.generate(request(prompt, {{x, 0.0f}}));
  CHECK(zero.cached_prompt_tokens > 0);  // scale 0 leaves the adapter out: the base's KV
  CHECK(zero.tokens == none.tokens);
  // What a fresh engine computes with Y from scratch.
  Engine fresh = Engine::open(model_path(), options(/*prefix_cache=*/false));
  const std::int32_t fy = fresh.load_adapter(adapter_path(201));
  CHECK(fresh.generate(request(prompt, {{fy, 1.0f}})).tokens == y1.tokens);
  CHECK(y1.tokens != x1.tokens);
}

TEST_CASE("an adapter in use cannot be unloaded; unknown ids and bad files are errors") {
  Engine engine = Engine::open(model_path(), options());
  const std::string path = adapter_path(300);
  const std::int32_t id = engine.load_adapter(path);
  REQUIRE(engine.adapters().size() == 1);
  CHECK(engine.adapters()[0].id == id);
  CHECK(engine.adapters()[0].path == path);
  CHECK(engine.adapters()[0].rank == 4 + 300 % 5);
  RequestHandle handle = engine.submit(request("queued with the adapter", {{id, 1.0f}}, 4));
  try {
    engine.unload_adapter(id);
    FAIL("unloaded an adapter a queued request uses");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::busy);
  }
  CHECK(handle.wait().tokens.size() == 4);  // it ran with the adapter
  engine.unload_adapter(id);                // done: now it may go
  CHECK(engine.adapters().empty());
  CHECK_THROWS_AS(engine.unload_adapter(id), Error);
  CHECK_THROWS_AS(engine.submit(request("a", {{id, 1.0f}})), Error);     // unloaded id
  CHECK_THROWS_AS(engine.submit(request("a", {{12345, 1.0f}})), Error);  // never loaded
  const std::int32_t again = engine.load_adapter(path);
  CHECK(again != id);                                                                   // ids are never reused
  CHECK_THROWS_AS(engine.submit(request("a", {{again, 1.0f}, {again, 1.0f}})), Error);  // named twice
  CHECK_THROWS_AS(engine.load_adapter(model_path()), Error);                            // a model, not an adapter
  CHECK_THROWS_AS(engine.load_adapter("/nonexistent/adapter.gguf"), Error);
}

}  // namespace
}  // namespace ember
