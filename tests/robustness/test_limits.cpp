// Resource limits (EngineOptions::max_prompt_tokens, max_generated_tokens, max_requests) and
// failure behaviour: a step that fails (a fault injected through EngineCore's test hook) ends
// only its own requests, the block pool stays whole, and later requests work; callbacks that
// throw never escape into ember's threads. Listed in docs/robustness.md.
#include "api_checks.hpp"
#include "runtime/engine_core.hpp"
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember {
namespace {

using runtime::EngineCore;
using runtime::FaultPoint;

std::string model_path() { return test::synthetic_model_file(44, 256); }

EngineOptions small_options() {
  EngineOptions o;
  o.threads = 1;
  o.kv_cache_bytes = 2u << 20;
  return o;
}

using test::error_of;
using test::greedy;

// ---- limits ------------------------------------------------------------------------------------

TEST_CASE("max_prompt_tokens: a longer prompt is context_overflow, one at the limit runs") {
  EngineOptions o = small_options();
  o.max_prompt_tokens = 12;
  Engine engine = Engine::open(model_path(), o);
  Request at_limit = greedy("", 3);
  Request over = greedy("", 3);
  for (int i = 0; i < 12; ++i) at_limit.prompt_tokens.push_back(10 + i);
  over.prompt_tokens = at_limit.prompt_tokens;
  over.prompt_tokens.push_back(30);
  CHECK(error_of([&] { engine.submit(over); }, "max_prompt_tokens = 12") == ErrorCode::context_overflow);
  CHECK(engine.stats().requests_submitted == 0);  // refused before it was queued
  const Completion c = engine.generate(at_limit);
  CHECK(c.finish_reason == FinishReason::length);
  CHECK(c.prompt_tokens == 12);
  CHECK(c.generated_tokens == 3);
}

TEST_CASE("max_generated_tokens: max_tokens over it is invalid_argument, at it generates that many") {
  EngineOptions o = small_options();
  o.max_generated_tokens = 5;
  Engine engine = Engine::open(model_path(), o);
  CHECK(error_of([&] { engine.generate(greedy("hello", 6)); }, "max_generated_tokens = 5") ==
        ErrorCode::invalid_argument);
  Request defaults;  // SamplingParams' default max_tokens (256) is over the limit too
  defaults.prompt = "hello";
  CHECK(error_of([&] { engine.submit(defaults); }, "max_tokens = 256") == ErrorCode::invalid_argument);
  const Completion c = engine.generate(greedy("hello", 5));
  CHECK(c.finish_reason == FinishReason::length);
  CHECK(c.generated_tokens == 5);
}

TEST_CASE("max_requests: requests past max_sequences queue, past max_requests submit throws busy") {
  EngineOptions o = small_options();
  o.max_sequences = 1;
  o.max_requests = 3;
  Engine engine = Engine::open(model_path(), o);
  std::vector<RequestHandle> accepted;
  for (int i = 0; i < 3; ++i) accepted.push_back(engine.submit(greedy("queued " + std::to_string(i), 4)));
  CHECK(error_of([&] { engine.submit(greedy("one too many", 4)); }, "max_requests") == ErrorCode::busy);
  CHECK(error_of([&] { engine.generate(greedy("one too many", 4)); }, "retry later") == ErrorCode::busy);
  CHECK(engine.stats().requests_submitted == 3);
  engine.step(std::chrono::microseconds(0));  // one step: one running, two still queued
  EngineStats s = engine.stats();
  CHECK(s.running == 1);
  CHECK(s.queued == 2);
  CHECK(error_of([&] { engine.submit(greedy("still too many", 4)); }, "3 requests") == ErrorCode::busy);
  for (auto& h : accepted) CHECK(h.wait().generated_tokens == 4);
  // Room again: the refused request now goes through.
  CHECK(engine.generate(greedy("one too many", 4)).generated_tokens == 4);
  s = engine.stats();
  CHECK(s.requests_submitted == 4);
  CHECK(s.requests_finished == 4);
}

TEST_CASE("max_requests equal to max_sequences refuses instead of queueing") {
  EngineOptions o = small_options();
  o.max_sequences = 2;
  o.max_requests = 2;
  Engine engine = Engine::open(model_path(), o);
  RequestHandle a = engine.submit(greedy("first", 3));
  RequestHandle b = engine.submit(greedy("second", 3));
  CHECK(error_of([&] { engine.submit(greedy("third", 3)); }, "max_requests") == ErrorCode::busy);
  a.cancel();  // a cancelled queued request frees its place at once
  CHECK(engine.submit(greedy("third", 3)).wait().generated_tokens == 3);
  CHECK(b.wait().generated_tokens == 3);
}

TEST_CASE("negative limits are invalid_argument naming them") {
  for (int which = 0; which < 3; ++which) {
    EngineOptions o = small_options();
    (which == 0 ? o.max_prompt_tokens : which == 1 ? o.max_generated_tokens : o.max_requests) = -1;
    CHECK(error_of([&] { Engine::open(model_path(), o); }, "max_requests must be >= 0") == ErrorCode::invalid_argument);
  }
}

// ---- fault injection -----------------------------------------------------------------------------

// Requests driven through EngineCore directly, where the test's fault hook lives.
struct Run {
  std::shared_ptr<EngineCore> core;
  std::vector<std::shared_ptr<runtime::Sequence>> sequences;

  explicit Run(const EngineOptions& o) : core(std::make_shared<EngineCore>(model_path(), o)) {}
  void submit(const Request& r, StreamCallback cb = {}) {
    sequences.push_back(core->make_sequence(r, std::move(cb)));
    core->submit(sequences.back());
  }
  Completion wait(std::size_t i) {
    core->wait(sequences[i]);
    return sequences[i]->completion;
  }
  // Nothing left running or queued, every block back (free or cached) and the pool consistent.
  void check_whole() const {
    const EngineStats s = core->stats();
    CHECK(s.running == 0);
    CHECK(s.queued == 0);
    CHECK(s.kv_blocks_free == s.kv_blocks_total);
    CHECK_NOTHROW(core->check_block_pool());
  }
};

std::vector<Request> four_requests() {
  std::vector<Request> out;
  for (const char* p : {"the first request has a prompt of several blocks, long enough to share", "second one",
                        "third prompt here", "and a fourth"})
    out.push_back(greedy(p, 6));
  return out;
}

// Each request's tokens when it runs alone on a fresh engine, with no faults (computed once:
// opening engines is most of this test's time under ThreadSanitizer).
const std::vector<std::vector<std::int32_t>>& reference_tokens() {
  static const auto tokens = [] {
    std::vector<std::vector<std::int32_t>> out;
    for (const Request& r : four_requests()) {
      Run run(small_options());
      run.submit(r);
      out.push_back(run.wait(0).tokens);
    }
    return out;
  }();
  return tokens;
}

// Options where requests 0 and 1 run together and 2 and 3 wait for them.
EngineOptions two_at_a_time() {
  EngineOptions o = small_options();
  o.max_sequences = 2;
  o.kv_block_size = 4;
  return o;
}

TEST_CASE("a step that fails ends its own requests with `error`; the others finish; pool whole") {
  const auto& reference = reference_tokens();
  for (const FaultPoint point : {FaultPoint::forward, FaultPoint::sample}) {
    CAPTURE(static_cast<int>(point));
    Run run(two_at_a_time());
    int calls = 0;
    run.core->set_fault_hook([&](FaultPoint p) {
      // The third step's forward pass (or its sampling): requests 0 and 1 are decoding.
      if (p == point && ++calls == 3) throw Error(ErrorCode::out_of_memory, "injected: no memory for the step");
    });
    for (const Request& r : four_requests()) run.submit(r);
    for (std::size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      const Completion c = run.wait(i);
      if (i < 2) {
        CHECK(c.finish_reason == FinishReason::error);
        CHECK(c.error.find("injected: no memory") != std::string::npos);
        CHECK(c.generated_tokens < 6);
      } else {
        CHECK(c.finish_reason == FinishReason::length);
        CHECK(c.error.empty());
        CHECK(c.tokens == reference[i]);
      }
    }
    run.check_whole();
    // Later requests work and the prefix cache holds nothing wrong: the failed ones again give
    // the reference tokens, reusing whatever blocks were published before the failure.
    run.core->set_fault_hook({});
    run.submit(four_requests()[0]);
    run.submit(four_requests()[1]);
    CHECK(run.wait(4).tokens == reference[0]);
    CHECK(run.wait(5).tokens == reference[1]);
    CHECK(run.sequences[4]->completion.cached_prompt_tokens > 0);
    run.check_whole();
  }
}

TEST_CASE("a failure outside the computation ends every unfinished request; the engine recovers") {
  const auto& reference = reference_tokens();
  Run run(two_at_a_time());
  int calls = 0;
  run.core->set_fault_hook([&](FaultPoint p) {
    if (p == FaultPoint::schedule && ++calls == 2) throw std::bad_alloc();
  });
  for (const Request& r : four_requests()) run.submit(r);
  for (std::size_t i = 0; i < 4; ++i) {
    const Completion c = run.wait(i);
    CHECK(c.finish_reason == FinishReason::error);
    CHECK(!c.error.empty());
  }
  run.check_whole();
  run.submit(four_requests()[2]);
  CHECK(run.wait(4).tokens == reference[2]);
  run.check_whole();
}

TEST_CASE("background thread: failing steps and throwing callbacks never escape ember's thread") {
  const auto& reference = reference_tokens();
  const auto requests = four_requests();
  EngineOptions o = two_at_a_time();
  o.background_thread = true;
  std::atomic<int> error_logs{0};
  o.log = [&](LogLevel level, std::string_view) {
    if (level == LogLevel::error) ++error_logs;
    throw std::runtime_error("the host's logger fails too");
  };
  Run run(o);

  // Which requests share the failing step depends on when the thread woke: each ends either
  // with the injected error or exactly as it would alone.
  std::atomic<int> forwards{0};
  run.core->set_fault_hook([&](FaultPoint p) {
    if (p == FaultPoint::forward && ++forwards == 2) throw Error(ErrorCode::out_of_memory, "injected");
  });
  run.submit(requests[0]);
  run.submit(requests[1]);
  int errors = 0;
  for (std::size_t i = 0; i < 2; ++i) {
    const Completion c = run.wait(i);
    if (c.finish_reason == FinishReason::error) {
      ++errors;
      CHECK(c.error.find("injected") != std::string::npos);
    } else {
      CHECK(c.tokens == reference[i]);
    }
  }
  CHECK(errors >= 1);      // the second step had at least one of them unfinished
  CHECK(error_logs >= 1);  // the failure was logged, and the throwing logger did no harm
  run.check_whole();

  // A callback that throws on every chunk, one that throws a non-standard exception on the
  // last chunk, and a plain request beside them.
  run.core->set_fault_hook({});
  run.submit(requests[2], [](const Chunk&) -> bool { throw std::logic_error("host bug"); });
  run.submit(requests[3], [](const Chunk& c) -> bool {
    if (c.completion != nullptr) throw 42;
    return true;
  });
  run.submit(requests[0]);
  const Completion thrower = run.wait(2);
  CHECK(thrower.finish_reason == FinishReason::cancelled);
  CHECK(thrower.error.find("callback threw") != std::string::npos);
  CHECK(thrower.generated_tokens == 1);  // stopped at its first chunk
  const Completion last_throws = run.wait(3);
  CHECK(last_throws.finish_reason == FinishReason::length);  // it had finished before the throw
  CHECK(last_throws.tokens == reference[3]);
  CHECK(run.wait(4).tokens == reference[0]);
  run.check_whole();
}

}  // namespace
}  // namespace ember
