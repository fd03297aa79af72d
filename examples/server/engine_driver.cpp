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

template <class F> auto EngineDriver::between_steps(F&& f) {
  {
    std::lock_guard lock(mutex_);
    ++callers_;
  }
  struct Leave {  // also when `f` throws
    EngineDriver& d;
    ~Leave() {
      {
        std::lock_guard lock(d.mutex_);
        --d.callers_;
      }
      d.changed_.notify_all();
    }
  } leave{*this};
  return f();
}

ember::RequestHandle EngineDriver::submit(const ember::Request& request, ember::StreamCallback on_chunk) {
  ember::RequestHandle handle =
      between_steps([&] { return engine_.submit(request, std::move(on_chunk)); });
  {
    std::lock_guard lock(mutex_);
    if (arrivals_++ == 0) first_arrival_ = std::chrono::steady_clock::now();
  }
  changed_.notify_all();
  return handle;
}

void EngineDriver::cancel(ember::RequestHandle& handle) {
  between_steps([&] { handle.cancel(); });
}

ember::EngineStats EngineDriver::stats() {
  return between_steps([&] { return engine_.stats(); });
}

void EngineDriver::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || arrivals_ > 0; });
    changed_.wait_until(lock, first_arrival_ + window_.max_wait,
                        [&] { return stopping_ || arrivals_ >= window_.min_requests; });
    if (stopping_ || !run_until_idle(lock)) return;
  }
}

bool EngineDriver::run_until_idle(std::unique_lock<std::mutex>& lock) {
  while (true) {
    // The engine's mutex is not fair: stepping again at once could keep a waiting caller out
    // for the whole run. Callers announce themselves here first, and go before the next step.
    changed_.wait(lock, [&] { return stopping_ || callers_ == 0; });
    if (stopping_) return false;
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
