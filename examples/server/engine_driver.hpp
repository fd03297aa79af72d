// Drives ember-server's engine (opened host-driven) from one thread of its own, so the server
// decides when a batch starts and no client waits behind a run of steps:
//  - a batch window: an idle engine starts stepping once `min_requests` requests are queued, or
//    once the first of them has waited `max_wait` (throughput for latency; off by default);
//  - submit() counts the arrivals the window waits for. Every call reaches the engine between
//    two steps (the engine lets waiting callers in before its next step), so a request that
//    arrives mid-generation joins the running batch at the next step.
#pragma once

#include <ember/ember.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace server {

struct BatchWindow {
  int min_requests = 1;                 // 1: step as soon as a request arrives
  std::chrono::milliseconds max_wait{0};
};

class EngineDriver {
 public:
  EngineDriver(ember::Engine& engine, BatchWindow window);
  ~EngineDriver();  // stops stepping; call it only once no request is waited for
  EngineDriver(const EngineDriver&) = delete;
  EngineDriver& operator=(const EngineDriver&) = delete;

  // Engine::submit. Chunks (and the final one, with the completion) reach
  // `on_chunk` on the stepping thread. Throws what Engine::submit throws.
  ember::RequestHandle submit(const ember::Request& request, ember::StreamCallback on_chunk);
  void cancel(ember::RequestHandle& handle);
  // Queues a cancel for the stepping thread, which makes it before its next step; never blocks
  // (the front end's I/O thread calls it when a client leaves).
  void cancel_soon(ember::RequestHandle handle);
  ember::EngineStats stats();
  // The text of one token (Engine::detokenize takes no engine lock: safe from a stream callback).
  std::string token_text(std::int32_t id) const { return engine_.detokenize({id}); }

 private:
  void loop();
  bool run_until_idle(std::unique_lock<std::mutex>& lock);  // false when stopping
  void run_cancels(std::unique_lock<std::mutex>& lock);     // unlocks while cancelling

  ember::Engine& engine_;
  const BatchWindow window_;
  std::mutex mutex_;  // guards the members below, never held during a step
  std::condition_variable changed_;
  int arrivals_ = 0;              // requests submitted since the engine was last idle
  std::vector<ember::RequestHandle> cancels_;  // from cancel_soon()
  std::chrono::steady_clock::time_point first_arrival_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace server
