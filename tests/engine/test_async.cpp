// The asynchronous API: submit from many threads, wait, cancel at any time, a host loop driving
// step(budget), the background thread, priorities and the running statistics.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

namespace ember {
namespace {

std::string model_path() { return test::synthetic_model_file(43); }

EngineOptions options(bool background = false) {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.kv_cache_bytes = 4u << 20;
  o.background_thread = background;
  return o;
}

Request greedy(const std::string& prompt, int max_tokens, int priority = 0) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.priority = priority;
  return r;
}

TEST_CASE("submit returns at once; step(budget) from a host loop completes every request") {
  Engine engine = Engine::open(model_path(), options());
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "frame one ";  // several full KV blocks to reuse
  const Completion alone = engine.generate(greedy(prompt, 20));
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 6; ++i) handles.push_back(engine.submit(greedy(prompt, 20)));
  for (const auto& h : handles) CHECK(h.status() == RequestStatus::queued);
  int frames = 0;
  StepResult r;
  do {
    r = engine.step(std::chrono::microseconds(2000));
    ++frames;
  } while (!r.idle && frames < 10000);
  CHECK(r.idle);
  for (auto& h : handles) {
    CHECK(h.status() == RequestStatus::finished);
    const Completion c = h.wait();  // already finished: returns at once
    CHECK(c.tokens == alone.tokens);
  }
  const EngineStats s = engine.stats();
  CHECK(s.requests_submitted == 7);
  CHECK(s.requests_finished == 7);
  CHECK(s.generated_tokens == 7 * 20);
  CHECK(s.prompt_tokens_reused > 0);  // the same prompt again, after the first one published it
  CHECK(s.running == 0);
  CHECK(s.queued == 0);
  CHECK(s.kv_blocks_free == s.kv_blocks_total);  // everything released (cached blocks count as free)
}

TEST_CASE("step(budget) pauses a step between pieces, hides it until done, and keeps the tokens") {
  Engine engine = Engine::open(model_path(), options());
  const Completion alone = engine.generate(greedy("a frame budget of nothing at all", 12));
  const std::uint64_t steps_before = engine.stats().steps;
  std::vector<std::int32_t> streamed;
  RequestHandle h = engine.submit(greedy("a frame budget of nothing at all", 12), [&](const Chunk& c) {
    streamed.insert(streamed.end(), c.tokens, c.tokens + c.token_count);
    return true;
  });
  // A budget of 0: each call runs one piece of the synthetic model's forward pass.
  StepResult first = engine.step(std::chrono::microseconds(0));
  CHECK(first.step_paused);
  CHECK(first.steps == 0);
  CHECK(first.tokens == 0);
  CHECK(streamed.empty());                      // no token of a half-finished step
  CHECK(engine.stats().steps == steps_before);  // nor is it counted
  int calls = 1, paused = 1;
  StepResult r;
  do {
    r = engine.step(std::chrono::microseconds(0));
    ++calls;
    paused += r.step_paused;
  } while (!r.idle && calls < 100000);
  CHECK(r.idle);
  CHECK(h.wait().tokens == alone.tokens);  // bit-identical to unbudgeted stepping
  CHECK(streamed == alone.tokens);
  const int layers = engine.info().layers;
  CHECK(paused >= 12 * layers);  // every step of 12 paused at least once in each of its layers
  CHECK(engine.stats().steps == steps_before + 12);

  // A paused step is finished by the next caller that needs it: generate() here.
  RequestHandle next = engine.submit(greedy("a frame budget of nothing at all", 12));
  CHECK(engine.step(std::chrono::microseconds(0)).step_paused);
  CHECK(engine.generate(greedy("a frame budget of nothing at all", 12)).tokens == alone.tokens);
  CHECK(next.wait().tokens == alone.tokens);

  // A budget too long for the clock's arithmetic is a long one: the queue runs to its end.
  RequestHandle last = engine.submit(greedy("a frame budget of nothing at all", 12));
  const StepResult all = engine.step(std::chrono::microseconds::max());
  CHECK(all.idle);
  CHECK_FALSE(all.step_paused);
  CHECK(all.steps == 12);
  CHECK(last.wait().tokens == alone.tokens);
}

TEST_CASE("two host threads waiting on their requests take turns: the short one returns first") {
  // One thread waits on a short request and steps; this one then waits on a long request and
  // is let in between two steps. It must let the first back in between its own steps: before,
  // the first waited (its request long finished) until the long request ended.
  Engine engine = Engine::open(model_path(), options());
  RequestHandle long_request = engine.submit(greedy("a long story begins", 200));
  RequestHandle short_request = engine.submit(greedy("a short one", 20));
  std::atomic<bool> long_finished_first{false};
  std::thread other([&] {
    short_request.wait();
    long_finished_first = long_request.status() == RequestStatus::finished;
  });
  while (short_request.status() == RequestStatus::queued) std::this_thread::yield();  // the other thread steps
  CHECK(long_request.wait().generated_tokens == 200);
  other.join();
  CHECK_FALSE(long_finished_first.load());
}

TEST_CASE("a request whose sampling fails ends alone; the others of its step go on") {
  Engine engine = Engine::open(model_path(), options());
  Request banned = greedy("every token banned", 4);
  for (std::int32_t t = 0; t < engine.info().vocab; ++t)
    banned.sampling.logit_bias.push_back({t, -std::numeric_limits<float>::infinity()});
  RequestHandle ok = engine.submit(greedy("a plain request", 6));
  RequestHandle failing = engine.submit(banned);
  const Completion failed = failing.wait();
  CHECK(failed.finish_reason == FinishReason::error);
  CHECK(failed.error.find("no token can be sampled") != std::string::npos);
  const Completion fine = ok.wait();
  CHECK(fine.finish_reason == FinishReason::length);
  CHECK(fine.generated_tokens == 6);
  CHECK(fine.error.empty());
}

TEST_CASE("cancel: a queued request ends at once, a running one at the next step") {
  Engine engine = Engine::open(model_path(), options());
  RequestHandle queued = engine.submit(greedy("cancel me", 30));
  queued.cancel();
  CHECK(queued.status() == RequestStatus::finished);
  CHECK(queued.wait().finish_reason == FinishReason::cancelled);
  queued.cancel();  // twice: nothing happens

  RequestHandle running = engine.submit(greedy("cancel me later", 200));
  engine.step(std::chrono::microseconds(0));  // one step: prefill and the first token
  CHECK(running.status() == RequestStatus::running);
  running.cancel();
  engine.step(std::chrono::microseconds(0));
  const Completion c = running.wait();
  CHECK(c.finish_reason == FinishReason::cancelled);
  CHECK(c.generated_tokens < 200);
  CHECK(engine.stats().kv_blocks_free == engine.stats().kv_blocks_total);
  RequestHandle empty;
  CHECK_THROWS_AS(empty.wait(), Error);
}

TEST_CASE("higher priority runs first when requests wait for room") {
  EngineOptions o = options();
  o.max_sequences = 1;  // one at a time, so the queue order is visible
  Engine engine = Engine::open(model_path(), o);
  std::vector<std::uint64_t> finished_order;
  auto record = [&](std::uint64_t tag) {
    return [&finished_order, tag](const Chunk& c) {
      if (c.completion != nullptr) finished_order.push_back(tag);
      return true;
    };
  };
  engine.submit(greedy("low", 4, 0), record(0));
  engine.submit(greedy("high", 4, 5), record(5));
  engine.submit(greedy("mid", 4, 2), record(2));
  while (!engine.step(std::chrono::milliseconds(50)).idle) {
  }
  CHECK(finished_order == std::vector<std::uint64_t>{5, 2, 0});
}

TEST_CASE("background thread: submissions from many threads all complete, same tokens as alone") {
  Completion alone;
  {
    Engine engine = Engine::open(model_path(), options());
    alone = engine.generate(greedy("the same question", 24));
  }
  Engine engine = Engine::open(model_path(), options(/*background=*/true));
  std::vector<std::thread> clients;
  std::atomic<int> matches{0};
  for (int i = 0; i < 8; ++i)
    clients.emplace_back([&] {
      RequestHandle h = engine.submit(greedy("the same question", 24));
      if (h.wait().tokens == alone.tokens) ++matches;
    });
  for (auto& t : clients) t.join();
  CHECK(matches == 8);
  CHECK(engine.step(std::chrono::microseconds(100)).steps == 0);  // the thread does the work
}

TEST_CASE("background thread: a request submitted mid-generation joins the running batch") {
  // The background thread steps back to back; submit() must get in between two steps, not wait
  // until the engine is idle. B is submitted once A has started, and A's third chunk holds its
  // step (and the engine's lock) until submit() has had ample time to arrive at the lock; B's
  // first token must then come within the next two steps, and B (8 tokens) finish while A, with hundreds of tokens to go, is still
  // running. Counted in A's chunks, not timed: a loaded machine may hold any thread back.
  EngineOptions o = options(/*background=*/true);
  o.kv_cache_bytes = 64u << 20;
  Engine engine = Engine::open(test::synthetic_model_file(43, 1024), o);
  const int held_chunk = 3;
  std::atomic<bool> submitting{false};
  std::atomic<int> a_chunks{0}, a_chunks_at_b{-1};
  RequestHandle a = engine.submit(greedy("a long story", 900), [&](const Chunk&) {
    if (++a_chunks == held_chunk) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!submitting && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (a_chunks == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  REQUIRE(a_chunks > 0);
  submitting = true;
  RequestHandle b = engine.submit(greedy("a short one", 8), [&](const Chunk&) {
    int unset = -1;
    a_chunks_at_b.compare_exchange_strong(unset, a_chunks.load());
    return true;
  });
  CHECK(b.wait().generated_tokens == 8);
  CHECK(a_chunks_at_b >= 1);
  CHECK(a_chunks_at_b <= held_chunk + 2);  // submit() got in between two steps, not after A's 900
  CHECK(a.status() == RequestStatus::running);
  CHECK(engine.stats().running == 1);  // stats() answers while the engine is busy
  a.cancel();
  const Completion done = a.wait();
  CHECK(done.finish_reason == FinishReason::cancelled);
  CHECK(done.generated_tokens < 900);
}

TEST_CASE("destroying the engine ends unfinished requests as cancelled; handles stay usable") {
  RequestHandle h;
  {
    Engine engine = Engine::open(model_path(), options(/*background=*/false));
    h = engine.submit(greedy("never run", 10));
  }
  CHECK(h.status() == RequestStatus::finished);
  CHECK(h.wait().finish_reason == FinishReason::cancelled);
}

TEST_CASE("destroying the engine while another thread waits on a request stops it on the destroying thread") {
  // The waiter's wait() holds the engine for its duration; ~Engine must still end the request
  // (not leave it generating on the waiter's thread, or the background thread) and no chunk may
  // come after it returns.
  for (const bool background : {false, true}) {
    CAPTURE(background);
    EngineOptions o = options(background);
    o.kv_cache_bytes = 64u << 20;
    std::atomic<bool> destroyed{false}, chunk_after{false};
    std::atomic<int> chunks{0};
    Completion waited;
    std::thread waiter;
    {
      Engine engine = Engine::open(test::synthetic_model_file(43, 1024), o);
      RequestHandle h = engine.submit(greedy("a long story", 900), [&](const Chunk&) {
        if (destroyed) chunk_after = true;
        // Past the third chunk each takes a millisecond: the 900 tokens outlast ~Engine's wait for
        // the lock by far, even on a loaded machine.
        if (++chunks > 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return true;
      });
      waiter = std::thread([h, &waited]() mutable { waited = h.wait(); });  // steps without a background thread
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (chunks < 3 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      REQUIRE(chunks >= 3);
    }
    destroyed = true;
    waiter.join();
    CHECK(waited.finish_reason == FinishReason::cancelled);
    CHECK(waited.generated_tokens < 900);
    CHECK_FALSE(chunk_after);
  }
}

TEST_CASE("a throwing callback stops its own request only") {
  Engine engine = Engine::open(model_path(), options());
  RequestHandle bad = engine.submit(greedy("boom", 20), [](const Chunk& c) -> bool {
    if (c.completion == nullptr) throw std::runtime_error("host bug");
    return true;
  });
  RequestHandle good = engine.submit(greedy("fine", 20));
  const Completion b = bad.wait(), g = good.wait();
  CHECK(b.finish_reason == FinishReason::cancelled);
  CHECK(!b.error.empty());
  CHECK(g.finish_reason == FinishReason::length);
  CHECK(g.generated_tokens == 20);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST_CASE("a callback that captures its own request's handle does not keep it alive") {
  Engine engine = Engine::open(model_path(), options());
  struct State {
    RequestHandle handle;
  };
  auto state = std::make_shared<State>();
  std::weak_ptr<State> watch = state;
  state->handle = engine.submit(greedy("cycle", 4), [state](const Chunk&) { return true; });
  RequestHandle h = state->handle;
  state.reset();  // the callback and the handle now hold the only references
  CHECK(h.wait().generated_tokens == 4);
  h = RequestHandle();
  CHECK(watch.expired());  // ember dropped the callback when the request finished
}

}  // namespace
}  // namespace ember
