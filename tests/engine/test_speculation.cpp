// Draftless speculative decoding (SamplingParams::speculative_tokens) through the public API:
// greedy and seeded sampled output are the unspeculated run's token for token (the drafts are
// checked by sampling every row in order with the request's own sampler), with logprobs, stop
// strings, max_tokens, a grammar and the int8 KV cache; the counts of proposed and accepted
// tokens add up; out-of-range values are refused. On the default model a request that copies
// its prompt accepts most of its drafts.
#include "runtime/speculation.hpp"
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

namespace ember {
namespace {

Engine open_synthetic(KvCacheType kv = KvCacheType::f16) {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.kv_cache_type = kv;
  return Engine::open(test::synthetic_model_file(44, 512), o);
}

Request request(std::vector<std::int32_t> prompt, float temperature, int speculative_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = temperature;
  r.sampling.seed = 11;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = 60;
  r.sampling.logprobs = true;
  r.sampling.speculative_tokens = speculative_tokens;
  return r;
}

// A prompt that repeats itself, so that its continuation has something to look up.
std::vector<std::int32_t> looping_prompt(int salt) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < 48; ++i) p.push_back(3 + (i % 12) * 7 + salt);
  return p;
}

TEST_CASE("prompt lookup proposes what followed the latest earlier occurrence of the last n-gram") {
  using runtime::propose_by_lookup;
  const std::vector<std::int32_t> t = {1, 2, 3, 4, 5, 9, 2, 3, 4, 6, 7, 8, 2, 3, 4};
  CHECK(propose_by_lookup(t, 3) == std::vector<std::int32_t>{6, 7, 8});  // the latest "2 3 4"
  CHECK(propose_by_lookup(t, 1) == std::vector<std::int32_t>{6});
  CHECK(propose_by_lookup(t, 0).empty());
  const std::vector<std::int32_t> two = {5, 6, 7, 1, 6, 7};  // no "1 6 7" earlier, but "6 7"
  CHECK(propose_by_lookup(two, 4) == std::vector<std::int32_t>{1, 6, 7});
  CHECK(propose_by_lookup(std::vector<std::int32_t>{1, 2, 3, 4}, 4).empty());  // nothing recurs
  CHECK(propose_by_lookup(std::vector<std::int32_t>{7, 7, 7}, 5) == std::vector<std::int32_t>{7});
}

TEST_CASE("speculation: greedy and seeded sampled output equal the unspeculated run, token for token") {
  for (KvCacheType kv : {KvCacheType::f16, KvCacheType::int8}) {
    CAPTURE(static_cast<int>(kv));
    Engine engine = open_synthetic(kv);
    int proposed = 0, accepted = 0;
    for (float temperature : {0.0f, 0.8f})
      for (int salt : {0, 1, 2}) {
        CAPTURE(temperature);
        CAPTURE(salt);
        const Completion plain = engine.generate(request(looping_prompt(salt), temperature, 0));
        const Completion fast = engine.generate(request(looping_prompt(salt), temperature, 8));
        CHECK(fast.tokens == plain.tokens);
        CHECK(fast.logprobs == plain.logprobs);
        CHECK(fast.text == plain.text);
        CHECK(fast.generated_tokens == 60);
        CHECK(plain.speculative_proposed == 0);
        CHECK(fast.speculative_accepted <= fast.speculative_proposed);
        proposed += fast.speculative_proposed;
        accepted += fast.speculative_accepted;
        // Seeded: the same request again gives the same tokens.
        CHECK(engine.generate(request(looping_prompt(salt), temperature, 8)).tokens == fast.tokens);
      }
    MESSAGE("accepted ", accepted, " of ", proposed);
    CHECK(accepted > 0);
    const EngineStats stats = engine.stats();
    CHECK(stats.speculative_proposed >= static_cast<std::uint64_t>(proposed));
    CHECK(stats.speculative_accepted >= static_cast<std::uint64_t>(accepted));
  }
}

TEST_CASE("speculation: stop strings, max_tokens and a grammar end where they do without it") {
  Engine engine = open_synthetic();
  for (int max_tokens : {1, 2, 5, 17}) {
    Request plain = request(looping_prompt(0), 0.0f, 0);
    plain.sampling.max_tokens = max_tokens;
    Request fast = plain;
    fast.sampling.speculative_tokens = 16;
    const Completion a = engine.generate(plain), b = engine.generate(fast);
    CHECK(b.tokens == a.tokens);
    CHECK(b.generated_tokens == max_tokens);
    CHECK(b.finish_reason == FinishReason::length);
  }
  // A stop string cut from the unspeculated text: the same text, ending with `stop`, either way.
  const Completion probe = engine.generate(request(looping_prompt(1), 0.0f, 0));
  REQUIRE(probe.text.size() > 20);
  Request plain = request(looping_prompt(1), 0.0f, 0);
  plain.sampling.stop = {probe.text.substr(12, 4)};
  Request fast = plain;
  fast.sampling.speculative_tokens = 8;
  const Completion a = engine.generate(plain), b = engine.generate(fast);
  CHECK(b.text == a.text);
  CHECK(b.finish_reason == a.finish_reason);
  // A grammar masks each verified row in turn.
  plain = request(looping_prompt(2), 0.7f, 0);
  plain.sampling.ignore_eos = false;
  plain.sampling.grammar = R"(root ::= ("ab" | "a" | "b" | " ")+)";
  fast = plain;
  fast.sampling.speculative_tokens = 8;
  CHECK(engine.generate(fast).tokens == engine.generate(plain).tokens);
}

TEST_CASE("speculative_tokens outside [0, 16] is refused") {
  Engine engine = open_synthetic();
  for (int k : {-1, 17}) {
    Request r = request(looping_prompt(0), 0.0f, k);
    CHECK_THROWS_AS(engine.submit(r), Error);
  }
}

TEST_CASE("speculation on the default model: a copy of the prompt accepts most drafts, same text") {
  const std::string model = test::default_model_path();
  if (model.empty() || !std::filesystem::exists(model)) {  // the synthetic cases above still run
    MESSAGE("the default model is missing (scripts/fetch-model.sh): case skipped");
    return;
  }
  if (test::thread_sanitizer()) {  // one thread's numeric run; the synthetic cases cover the threads
    MESSAGE("under ThreadSanitizer: the default model's case skipped");
    return;
  }
  EngineOptions o;
  o.threads = test::compute_threads(2);
  Engine engine = Engine::open(model, o);
  Request r;
  r.messages = {{"user",
                 "Repeat this sentence exactly: The keeper of the lighthouse wrote down every ship "
                 "that passed the point, the weather of each morning and the birds that struck the glass."}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 64;
  const Completion plain = engine.generate(r);
  r.sampling.speculative_tokens = 8;
  const Completion fast = engine.generate(r);
  CHECK(fast.tokens == plain.tokens);
  MESSAGE("generated ", fast.generated_tokens, ", drafts accepted ", fast.speculative_accepted, " of ",
          fast.speculative_proposed);
  CHECK(fast.speculative_accepted * 2 > fast.generated_tokens);  // more than half the tokens came from drafts
  // Sampled: drafts are rejected here and there, and the seeded output is still the same.
  int rejected = 0;
  for (std::uint64_t seed : {1, 2, 3}) {
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.sampling.speculative_tokens = 0;
    const Completion sampled = engine.generate(r);
    r.sampling.speculative_tokens = 8;
    const Completion speculated = engine.generate(r);
    CHECK(speculated.tokens == sampled.tokens);
    rejected += speculated.speculative_proposed - speculated.speculative_accepted;
  }
  CHECK(rejected > 0);
}

}  // namespace
}  // namespace ember
