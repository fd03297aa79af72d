// Stress: thousands of requests with random prompts, lengths, priorities and cancellations from
// four host threads against the background thread. Afterwards every handle has resolved and the
// block pool is whole again. EMBER_STRESS_REQUESTS scales it (smaller under ThreadSanitizer).
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

namespace ember {
namespace {

TEST_CASE("stress: random requests and cancellations from four threads") {
  const std::string path = test::synthetic_model_file(45);

  const char* env = std::getenv("EMBER_STRESS_REQUESTS");
  const int total = env != nullptr ? std::max(4, std::atoi(env)) : 2000;
  EngineOptions o;
  o.threads = 1;
  o.background_thread = true;
  o.kv_cache_bytes = 64u << 10;  // 16 blocks: admission waits and preemption happen
  o.max_batch_tokens = 48;
  Engine engine = Engine::open(path, o);

  std::atomic<int> resolved{0}, cancelled{0}, completed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t + 1));
      std::vector<RequestHandle> handles;
      for (int i = 0; i < total / 4; ++i) {
        Request r;
        const int len = 1 + static_cast<int>(rng() % 60);
        for (int c = 0; c < len; ++c) r.prompt += static_cast<char>('a' + rng() % 26);
        r.sampling.max_tokens = 1 + static_cast<int>(rng() % 8);
        r.sampling.seed = rng();
        r.priority = static_cast<int>(rng() % 3);
        handles.push_back(engine.submit(r));
        if (rng() % 4 == 0) handles[rng() % handles.size()].cancel();
      }
      for (auto& h : handles) {
        const Completion c = h.wait();
        ++resolved;
        if (c.finish_reason == FinishReason::cancelled)
          ++cancelled;
        else if (c.finish_reason == FinishReason::length || c.finish_reason == FinishReason::stop)
          ++completed;
        h.cancel();  // after the end: a no-op
      }
    });
  }
  for (auto& c : clients) c.join();
  const EngineStats s = engine.stats();
  MESSAGE(resolved.load(), " resolved: ", completed.load(), " completed, ", cancelled.load(), " cancelled, ",
          s.preemptions, " preemptions, ", s.steps, " steps");
  CHECK(resolved == total / 4 * 4);
  CHECK(completed + cancelled == resolved);
  CHECK(cancelled > 0);
  CHECK(s.requests_finished == static_cast<std::uint64_t>(resolved.load()));
  CHECK(s.running == 0);
  CHECK(s.queued == 0);
  CHECK(s.kv_blocks_free == s.kv_blocks_total);
}

}  // namespace
}  // namespace ember
