// Save, restore and continue on the default model (SmolLM2-135M, 30 layers): the restored
// engine reuses the saved blocks and continues with the uninterrupted run's tokens and
// log-probabilities. Skipped (exit 77) when the model is not available.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

namespace ember {
namespace {

TEST_CASE("real model: save, restore in a fresh engine, continue exactly") {
  const std::string path = test::require_default_model();
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 32u << 20;
  Request r;  // prompt_tokens, so the saved ids are exactly the ones the engine computed
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;
  r.sampling.max_tokens = 24;

  std::vector<std::int32_t> saved;
  std::vector<std::uint8_t> bytes;
  Completion full;
  {
    Engine a = Engine::open(path, o);
    r.prompt_tokens = a.tokenize("The old lighthouse keeper looked out over the harbour and said");
    full = a.generate(r);
    REQUIRE(full.tokens.size() == 24);
    saved = r.prompt_tokens;
    saved.insert(saved.end(), full.tokens.begin(), full.tokens.begin() + 12);
    bytes = a.save_state(saved);
  }
  Engine b = Engine::open(path, o);
  CHECK(b.load_state(bytes) == saved.size() / 16);
  Request next;
  next.prompt_tokens = saved;
  next.sampling = r.sampling;
  next.sampling.max_tokens = 12;
  const Completion resumed = b.generate(next);
  CHECK(resumed.cached_prompt_tokens == static_cast<int>(saved.size() / 16 * 16));
  CHECK(resumed.tokens == std::vector<std::int32_t>(full.tokens.begin() + 12, full.tokens.end()));
  CHECK(resumed.logprobs == std::vector<float>(full.logprobs.begin() + 12, full.logprobs.end()));
}

}  // namespace
}  // namespace ember
