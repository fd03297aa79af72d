// Background mode's batch window (EngineOptions::batch_min_requests / batch_max_wait) and
// RequestHandle::cancel_soon(), the cancel that never waits for a step: from another thread while
// a step runs, from inside a stream callback, during the window, and without a background thread.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace ember {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string model_path() { return test::synthetic_model_file(43); }

EngineOptions options(bool background) {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.kv_cache_bytes = 4u << 20;
  o.background_thread = background;
  return o;
}

EngineOptions window(int min_requests, std::chrono::milliseconds max_wait) {
  EngineOptions o = options(/*background=*/true);
  o.batch_min_requests = min_requests;
  o.batch_max_wait = max_wait;
  return o;
}

Request greedy(const std::string& prompt, int max_tokens) { return test::greedy_request(prompt, max_tokens); }

std::string open_error(const EngineOptions& o) {
  try {
    Engine::open(model_path(), o);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_CASE("batch window options are checked at open, and the message says what is wrong") {
  CHECK(contains(open_error(window(0, 10ms)), "batch_min_requests must be at least 1"));
  CHECK(contains(open_error(window(2, -1ms)), "batch_max_wait must be in [0, 3600000] ms, got -1 ms"));
  CHECK(contains(open_error(window(2, 2h)), "batch_max_wait must be in"));
  CHECK(contains(open_error(window(4, 0ms)), "would never wait for them"));
  EngineOptions host = window(2, 10ms);
  host.background_thread = false;
  CHECK(contains(open_error(host), "needs background_thread"));
  CHECK_NOTHROW(Engine::open(model_path(), window(1, 5ms)));  // a wait alone is a window too
}

TEST_CASE("batch window: too few requests wait batch_max_wait for their first token") {
  Engine engine = Engine::open(model_path(), window(3, 300ms));
  Clock::time_point first_chunk{};
  const auto submitted = Clock::now();
  RequestHandle h = engine.submit(greedy("alone in the window", 4), [&](const Chunk& c) {
    if (c.token_count > 0 && first_chunk == Clock::time_point{}) first_chunk = Clock::now();
    return true;
  });
  std::this_thread::sleep_for(100ms);
  CHECK(h.status() == RequestStatus::queued);  // the window holds it
  CHECK(engine.stats().steps == 0);
  const Completion c = h.wait();  // the stream's writes happen before wait() returns
  CHECK(c.generated_tokens == 4);
  CHECK(first_chunk - submitted >= 300ms);
  CHECK(c.timings.queue_ms >= 300.0);  // submit to the first step: the whole window
}

TEST_CASE("batch window: batch_min_requests queued start the batch at once, all in the same steps") {
  Engine engine = Engine::open(model_path(), window(3, 30s));
  std::vector<RequestHandle> handles;
  handles.push_back(engine.submit(greedy("first of three", 8)));
  handles.push_back(engine.submit(greedy("second of three, a longer prompt", 8)));
  std::this_thread::sleep_for(200ms);
  CHECK(engine.stats().steps == 0);  // two of three: no token yet
  for (const RequestHandle& h : handles) CHECK(h.status() == RequestStatus::queued);
  const auto third = Clock::now();
  handles.push_back(engine.submit(greedy("third", 8)));
  for (RequestHandle& h : handles) {
    const Completion c = h.wait();
    CHECK(c.generated_tokens == 8);
    CHECK(c.timings.queue_ms < 15000.0);  // the third arrival closed the window, not the 30 s
  }
  CHECK(Clock::now() - third < 15s);
  // They started together and ran together: one step per token for all three, not three times.
  CHECK(engine.stats().steps == 8);
}

TEST_CASE("cancel_soon from another thread returns while a step runs; the request ends cancelled") {
  for (const bool background : {false, true}) {
    CAPTURE(background);
    Engine engine = Engine::open(model_path(), options(background));
    std::atomic<bool> in_step{false}, step_done{false};
    RequestHandle h = engine.submit(greedy("hold the step", 200), [&](const Chunk& c) {
      if (c.completion == nullptr && !in_step.exchange(true)) {
        std::this_thread::sleep_for(400ms);  // the step, and the engine's lock, are held meanwhile
        step_done = true;
      }
      return true;
    });
    Completion done;
    std::thread host;  // without a background thread, wait() steps the engine
    if (!background) host = std::thread([&done, h]() mutable { done = h.wait(); });
    const auto deadline = Clock::now() + 60s;
    while (!in_step && Clock::now() < deadline) std::this_thread::sleep_for(1ms);
    REQUIRE(in_step);
    const auto t0 = Clock::now();
    h.cancel_soon();
    const auto took = Clock::now() - t0;
    CHECK(!step_done);  // it returned while the step was still running
    CHECK(took < 100ms);
    if (host.joinable())
      host.join();
    else
      done = h.wait();
    CHECK(done.finish_reason == FinishReason::cancelled);
    CHECK(done.generated_tokens == 1);  // it ended after the token whose callback was running
    CHECK(engine.stats().kv_blocks_free == engine.stats().kv_blocks_total);
  }
}

TEST_CASE("cancel_soon inside a stream callback ends that request after the chunk; others go on") {
  for (const bool background : {false, true}) {
    CAPTURE(background);
    Engine engine = Engine::open(model_path(), options(background));
    // The callback may run before submit() has returned the handle: it gets it through a future.
    std::promise<RequestHandle> promise;
    std::shared_future<RequestHandle> self = promise.get_future().share();
    std::atomic<int> chunks{0};
    std::atomic<bool> cancel_refused{false};
    RequestHandle h = engine.submit(greedy("stop me from inside", 50), [&](const Chunk& c) {
      if (c.completion == nullptr && ++chunks == 3) {
        RequestHandle handle = self.get();
        try {
          handle.cancel();  // takes the engine's lock: refused from a callback
        } catch (const Error& e) {
          cancel_refused = e.code() == ErrorCode::invalid_argument;
        }
        handle.cancel_soon();  // takes no lock: fine
      }
      return true;
    });
    promise.set_value(h);
    RequestHandle other = engine.submit(greedy("keep going", 20));
    const Completion c = h.wait();
    CHECK(cancel_refused);
    CHECK(c.finish_reason == FinishReason::cancelled);
    CHECK(c.generated_tokens == 3);
    CHECK(chunks == 3);
    const Completion o = other.wait();
    CHECK(o.finish_reason == FinishReason::length);
    CHECK(o.generated_tokens == 20);
  }
}

TEST_CASE("cancel_soon during the batch window ends the queued request without waiting for it") {
  Engine engine = Engine::open(model_path(), window(2, 30s));
  RequestHandle h = engine.submit(greedy("leaves while waiting", 10));
  std::this_thread::sleep_for(50ms);
  const auto t0 = Clock::now();
  h.cancel_soon();
  const Completion c = h.wait();
  CHECK(Clock::now() - t0 < 10s);  // ended by the driver now, not when the window closes
  CHECK(c.finish_reason == FinishReason::cancelled);
  CHECK(c.generated_tokens == 0);
  CHECK(engine.stats().steps == 0);
  // Nothing is left queued, so the next arrival opens a new window, which waits for its partner.
  RequestHandle a = engine.submit(greedy("next one", 4));
  std::this_thread::sleep_for(100ms);
  CHECK(a.status() == RequestStatus::queued);
  RequestHandle b = engine.submit(greedy("and its partner", 4));
  CHECK(a.wait().generated_tokens == 4);
  CHECK(b.wait().generated_tokens == 4);
  CHECK(engine.stats().steps == 4);  // together from their first step
}

TEST_CASE("cancel_soon without a background thread: the next step ends the request") {
  Engine engine = Engine::open(model_path(), options(/*background=*/false));
  RequestHandle q = engine.submit(greedy("queued", 30));
  q.cancel_soon();
  CHECK(q.status() == RequestStatus::queued);               // only flagged: nothing has stepped
  CHECK(engine.step(std::chrono::milliseconds(100)).idle);  // the step ends it, then has nothing to do
  CHECK(q.status() == RequestStatus::finished);
  const Completion c = q.wait();
  CHECK(c.finish_reason == FinishReason::cancelled);
  CHECK(c.generated_tokens == 0);
  q.cancel_soon();  // finished: nothing happens
  CHECK(q.wait().finish_reason == FinishReason::cancelled);
  CHECK(engine.stats().kv_blocks_free == engine.stats().kv_blocks_total);
  RequestHandle empty;
  CHECK_THROWS_AS(empty.cancel_soon(), Error);
}

}  // namespace
}  // namespace ember
