#include "runtime/background_driver.hpp"

#include "util/platform.hpp"

namespace ember::runtime {

BackgroundDriver::BackgroundDriver(const EngineLock& lock, Stepper& stepper, const Logger& logger, BatchWindow window,
                                   bool low_priority)
    : lock_(lock), stepper_(stepper), logger_(logger), window_(window) {
  thread_ = std::thread([this, low_priority] { loop(low_priority); });
}

void BackgroundDriver::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundDriver::queued() {
  {
    std::lock_guard lock(mutex_);
    if (arrivals_++ == 0) first_arrival_ = Clock::now();
  }
  changed_.notify_all();
}

void BackgroundDriver::wake() {
  {
    std::lock_guard lock(mutex_);
    cancels_ = true;
  }
  changed_.notify_all();
}

void BackgroundDriver::loop(bool low_priority) {
  // EngineOptions::background_low_priority: this thread's priority goes down, and so does the
  // OpenMP team it starts afterwards, which inherits it.
  if (low_priority && !platform::lower_current_thread_priority())
    logger_.log(LogLevel::warning,
                "background_low_priority: the OS refused a lower priority; computing at the normal one");
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || arrivals_ > 0 || cancels_; });
    if (stopping_) return;
    const bool hold = window_holds(lock);
    if (stopping_) return;
    cancels_ = false;
    lock.unlock();
    // A client that leaves during the window has its request ended now, not after it.
    if (hold)
      end_cancelled();
    else
      run_until_idle();
    lock.lock();
  }
}

bool BackgroundDriver::window_holds(std::unique_lock<std::mutex>& lock) {
  if (arrivals_ == 0) return false;  // only cancels: a run finds nothing to step
  const auto closes = first_arrival_ + window_.max_wait;
  changed_.wait_until(lock, closes, [&] { return stopping_ || cancels_ || arrivals_ >= window_.min_requests; });
  return arrivals_ < window_.min_requests && Clock::now() < closes;
}

void BackgroundDriver::end_cancelled() {
  auto engine = lock_.lock();
  stepper_.end_cancelled();
  if (!stepper_.idle()) return;
  std::lock_guard lock(mutex_);  // every arrival was cancelled: the next one opens a new window
  arrivals_ = 0;
}

void BackgroundDriver::run_until_idle() {
  auto engine = lock_.lock();
  while (!stopping_) {
    if (stepper_.step() == Stepper::kIdle) {
      // queued() runs under the engine's lock, held here: nothing arrived that this step missed.
      std::lock_guard lock(mutex_);
      arrivals_ = 0;
      return;
    }
    lock_.let_callers_in(engine);
  }
}

}  // namespace ember::runtime
