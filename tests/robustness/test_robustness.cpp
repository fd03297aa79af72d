// Bad prompts, sampling parameters and API misuse through ember::Engine on a synthetic model:
// each gives a typed ember::Error or a completion with a documented finish reason, never a
// crash, a hang or text that is not UTF-8. Listed, with every other bad input, in
// docs/robustness.md.
#include "api_checks.hpp"
#include "test_support.hpp"
#include "tests/fuzz/fuzz_support.hpp"  // is_valid_utf8

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

constexpr int kContext = 64;

EngineOptions small_options() {
  EngineOptions o;
  o.threads = 1;
  o.context_length = kContext;
  o.kv_cache_bytes = 2u << 20;
  return o;
}

Engine open_engine() { return Engine::open(test::synthetic_model_file(42, 256), small_options()); }

using test::error_of;
using test::greedy;

void check_generated(const Completion& c, FinishReason reason, int tokens) {
  CHECK(c.finish_reason == reason);
  CHECK(c.generated_tokens == tokens);
  CHECK(fuzz::is_valid_utf8(c.text));
}

TEST_CASE("prompts: invalid UTF-8, NUL bytes, whitespace, special-token text, huge") {
  Engine engine = open_engine();
  SUBCASE("invalid UTF-8 is generated from, and the output is valid UTF-8") {
    const Completion c = engine.generate(greedy("\xff\xfe\xc0\x80 abc \xed\xa0\x80 \xe2\x82", 6));
    check_generated(c, FinishReason::length, 6);
    CHECK(c.prompt_tokens >= 6);
  }
  SUBCASE("NUL bytes inside the prompt are ordinary bytes") {
    const Completion c = engine.generate(greedy(std::string("a\0b\0c", 5), 3));
    check_generated(c, FinishReason::length, 3);
    CHECK(c.prompt_tokens >= 3);
  }
  SUBCASE("a prompt of one space") { check_generated(engine.generate(greedy(" ", 2)), FinishReason::length, 2); }
  SUBCASE("special-token text is plain text unless parse_special_tokens") {
    const auto plain = engine.tokenize("<|im_end|>", /*parse_special=*/false);
    const auto special = engine.tokenize("<|im_end|>", /*parse_special=*/true);
    CHECK(special == std::vector<std::int32_t>{2});  // the synthetic vocabulary's <|im_end|>
    CHECK(plain.size() > 1);
    CHECK(std::find(plain.begin(), plain.end(), 2) == plain.end());
    Request r = greedy("<|im_end|><|im_start|>", 2);
    const Completion as_text = engine.generate(r);
    r.parse_special_tokens = true;
    const Completion as_tokens = engine.generate(r);
    CHECK(as_tokens.prompt_tokens == 2);
    CHECK(as_text.prompt_tokens > 2);
    check_generated(as_text, FinishReason::length, 2);
    check_generated(as_tokens, FinishReason::length, 2);
  }
  SUBCASE("a 200 kB prompt is a context_overflow naming the sizes") {
    std::string huge;
    while (huge.size() < 200000) huge += "lorem ipsum dolor sit amet ";
    CHECK(error_of([&] { engine.generate(greedy(huge, 4)); }, "context holds 64") == ErrorCode::context_overflow);
  }
  SUBCASE("a prompt that leaves no room to generate") {
    std::vector<std::int32_t> tokens(kContext, 40);
    Request r = greedy("", 4);
    r.prompt_tokens = tokens;
    CHECK(error_of([&] { engine.generate(r); }) == ErrorCode::context_overflow);
    tokens.pop_back();
    r.prompt_tokens = tokens;
    check_generated(engine.generate(r), FinishReason::context, 1);
  }
}

TEST_CASE("sampling parameters: NaN, infinite, negative and huge values through the Engine") {
  Engine engine = open_engine();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto rejected = [&](const char* field, auto edit) {
    CAPTURE(field);
    Request r = greedy("hello", 4);
    edit(r.sampling);
    CHECK(error_of([&] { engine.generate(r); }, field) == ErrorCode::invalid_argument);
    CHECK(error_of([&] { engine.submit(r); }, field) == ErrorCode::invalid_argument);
  };
  rejected("repetition_penalty", [&](SamplingParams& p) { p.repetition_penalty = nan; });
  rejected("presence_penalty", [&](SamplingParams& p) { p.presence_penalty = nan; });
  rejected("frequency_penalty", [&](SamplingParams& p) { p.frequency_penalty = inf; });
  rejected("temperature", [&](SamplingParams& p) { p.temperature = inf; });
  rejected("top_p", [&](SamplingParams& p) { p.top_p = -0.5f; });
  rejected("min_p", [&](SamplingParams& p) { p.min_p = nan; });
  rejected("max_tokens", [&](SamplingParams& p) { p.max_tokens = INT_MIN; });
  rejected("top_k", [&](SamplingParams& p) { p.top_k = -7; });
  rejected("penalty_last_n", [&](SamplingParams& p) { p.penalty_last_n = INT_MIN; });
  CHECK(engine.stats().requests_submitted == 0);  // nothing reached the scheduler

  SUBCASE("max_tokens = INT_MAX ends at the context window") {
    Request r = greedy("hello", INT_MAX);
    const Completion c = engine.generate(r);
    CHECK(c.finish_reason == FinishReason::context);
    CHECK(c.prompt_tokens + c.generated_tokens == kContext);
  }
  SUBCASE("huge but valid values sample inside the vocabulary") {
    Request r = greedy("hello", 5);
    r.sampling.temperature = 1e30f;
    r.sampling.top_k = INT_MAX;
    r.sampling.penalty_last_n = INT_MAX;
    r.sampling.repetition_penalty = 1e30f;
    r.sampling.presence_penalty = -1e30f;
    r.sampling.frequency_penalty = 1e30f;
    r.sampling.seed = ~0ull;
    const Completion c = engine.generate(r);
    check_generated(c, FinishReason::length, 5);
    for (const auto id : c.tokens) CHECK((id >= 0 && id < engine.info().vocab));
  }
  SUBCASE("a 10 kB stop string never matches and is harmless") {
    Request r = greedy("hello", 4);
    r.sampling.stop = {std::string(10000, 'z')};
    check_generated(engine.generate(r), FinishReason::length, 4);
  }
}

TEST_CASE("engine options out of range are invalid_argument naming the field") {
  const std::string path = test::synthetic_model_file(42, 256);
  auto rejected = [&](const char* field, auto edit) {
    CAPTURE(field);
    EngineOptions o = small_options();
    edit(o);
    CHECK(error_of([&] { Engine::open(path, o); }, field) == ErrorCode::invalid_argument);
  };
  rejected("threads", [](EngineOptions& o) { o.threads = -1; });
  rejected("threads", [](EngineOptions& o) { o.threads = std::numeric_limits<int>::max(); });
  rejected("context_length", [](EngineOptions& o) { o.context_length = -5; });
  rejected("kv_block_size", [](EngineOptions& o) { o.kv_block_size = 4096; });
  rejected("max_batch_tokens", [](EngineOptions& o) { o.max_batch_tokens = 0; });
  rejected("max_sequences", [](EngineOptions& o) { o.max_sequences = -3; });
  rejected("kv_cache_bytes", [](EngineOptions& o) { o.kv_cache_bytes = 1; });
}

TEST_CASE("API misuse: moved-from engine, empty handle, double cancel, calls after destruction") {
  SUBCASE("every call on a moved-from Engine is invalid_argument") {
    Engine a = open_engine();
    Engine b = std::move(a);
    CHECK(error_of([&] { a.generate(greedy("x", 1)); }, "moved-from") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { a.submit(greedy("x", 1)); }, "moved-from") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { a.tokenize("x"); }, "moved-from") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { a.stats(); }, "moved-from") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { a.step(std::chrono::microseconds(10)); }, "moved-from") == ErrorCode::invalid_argument);
    check_generated(b.generate(greedy("x", 1)), FinishReason::length, 1);  // b took it over
  }
  SUBCASE("an empty RequestHandle") {
    RequestHandle h;
    CHECK(!h.valid());
    CHECK(error_of([&] { h.wait(); }, "empty RequestHandle") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { h.cancel(); }, "empty RequestHandle") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { h.status(); }, "empty RequestHandle") == ErrorCode::invalid_argument);
    CHECK(error_of([&] { h.id(); }, "empty RequestHandle") == ErrorCode::invalid_argument);
  }
  SUBCASE("cancel twice, then wait twice; cancel after finishing changes nothing") {
    Engine engine = open_engine();
    RequestHandle h = engine.submit(greedy("hello", 20));
    h.cancel();
    h.cancel();
    CHECK(h.wait().finish_reason == FinishReason::cancelled);
    CHECK(h.wait().finish_reason == FinishReason::cancelled);
    RequestHandle done = engine.submit(greedy("hello", 2));
    CHECK(done.wait().finish_reason == FinishReason::length);
    done.cancel();
    CHECK(done.wait().finish_reason == FinishReason::length);
    CHECK(engine.stats().running == 0);
    CHECK(engine.stats().queued == 0);
  }
  SUBCASE("cancel, status and wait on a handle whose engine is destroyed") {
    RequestHandle h;
    {
      Engine engine = open_engine();
      h = engine.submit(greedy("never run", 10));
    }
    CHECK_NOTHROW(h.cancel());
    CHECK_NOTHROW(h.cancel());
    CHECK(h.status() == RequestStatus::finished);
    CHECK(h.wait().finish_reason == FinishReason::cancelled);
  }
  SUBCASE("a callback that throws inside generate() does not escape") {
    Engine engine = open_engine();
    Completion c;
    CHECK_NOTHROW(
        c = engine.generate(greedy("boom", 10), [](const Chunk&) -> bool { throw std::logic_error("host bug"); }));
    CHECK(c.finish_reason == FinishReason::cancelled);
    CHECK(c.error.find("callback threw") != std::string::npos);
    check_generated(engine.generate(greedy("after", 2)), FinishReason::length, 2);
  }
  SUBCASE("out-of-vocabulary ids to detokenize and as a prompt") {
    Engine engine = open_engine();
    CHECK(error_of([&] { engine.detokenize({1, -1}); }) == ErrorCode::invalid_argument);
    CHECK(error_of([&] { engine.detokenize({INT_MAX}); }) == ErrorCode::invalid_argument);
    Request r = greedy("", 2);
    r.prompt_tokens = {-5};
    CHECK(error_of([&] { engine.generate(r); }, "-5") == ErrorCode::invalid_argument);
    CHECK(engine.tokenize("").empty());
    CHECK(engine.detokenize({}).empty());
  }
}

}  // namespace
}  // namespace ember
