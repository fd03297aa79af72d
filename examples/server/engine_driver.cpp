#include "engine_driver.hpp"

namespace server {

EngineDriver::EngineDriver(ember::Engine& engine, BatchWindow window)
    : engine_(engine), window_(window), thread_([this] { loop(); }) {}

EngineDriver::~EngineDriver() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

ember::RequestHandle EngineDriver::submit(const ember::Request& request, ember::StreamCallback on_chunk) {
  // Engine::submit gets in between two steps on its own (the engine lets waiting callers in).
  ember::RequestHandle handle = engine_.submit(request, std::move(on_chunk));
  {
    std::lock_guard lock(mutex_);
    if (arrivals_++ == 0) first_arrival_ = std::chrono::steady_clock::now();
  }
  changed_.notify_all();
  return handle;
}

void EngineDriver::cancel(ember::RequestHandle& handle) { handle.cancel(); }

void EngineDriver::cancel_soon(ember::RequestHandle handle) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(std::move(handle));
  }
  changed_.notify_all();
}

ember::EngineStats EngineDriver::stats() { return engine_.stats(); }

void EngineDriver::run_cancels(std::unique_lock<std::mutex>& lock) {
  if (cancels_.empty()) return;
  std::vector<ember::RequestHandle> cancels = std::move(cancels_);
  cancels_.clear();
  lock.unlock();
  for (ember::RequestHandle& h : cancels) h.cancel();
  lock.lock();
}

void EngineDriver::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || arrivals_ > 0 || !cancels_.empty(); });
    if (stopping_) return;
    run_cancels(lock);
    if (arrivals_ == 0) continue;
    // A client that leaves during the window has its request cancelled now, not after it.
    changed_.wait_until(lock, first_arrival_ + window_.max_wait,
                        [&] { return stopping_ || arrivals_ >= window_.min_requests || !cancels_.empty(); });
    if (stopping_) return;
    if (!cancels_.empty() && arrivals_ < window_.min_requests &&
        std::chrono::steady_clock::now() < first_arrival_ + window_.max_wait) {
      continue;  // cancels run at the top; the window goes on
    }
    if (!run_until_idle(lock)) return;
  }
}

bool EngineDriver::run_until_idle(std::unique_lock<std::mutex>& lock) {
  while (true) {
    if (stopping_) return false;
    run_cancels(lock);
    const int seen = arrivals_;
    lock.unlock();
    const ember::StepResult r = engine_.step(std::chrono::microseconds(0));  // one step
    lock.lock();
    // Idle, and nothing was submitted since: a request submitted meanwhile gets its steps now.
    if (r.idle && arrivals_ == seen) {
      arrivals_ = 0;
      return true;
    }
  }
}

}  // namespace server
