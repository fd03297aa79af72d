// EngineOptions::background_thread: the thread that steps the engine, and the batch window in
// front of it. An idle engine starts stepping once batch_min_requests requests are queued or the
// first of them has waited batch_max_wait; then it steps back to back until there is no work,
// letting callers that wait for the engine's lock in between two steps. RequestHandle::
// cancel_soon() wakes it, and the cancelled requests end before its next step, or at once while
// the window holds the queue.
//
// Thread-safety: queued() is called under the engine's lock, so that the count of arrivals
// agrees with the queue when the thread finds the engine idle; wake() and stop() from any
// thread. Lock order: the engine's lock, then the driver's own mutex, never the other way round;
// the driver's mutex is never held during a step, so wake() never waits for one.
#pragma once

#include "runtime/engine_lock.hpp"
#include "runtime/stepper.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace ember::runtime {

struct BatchWindow {
  int min_requests = 1;                   // EngineOptions::batch_min_requests
  std::chrono::milliseconds max_wait{0};  // EngineOptions::batch_max_wait
};

class BackgroundDriver {
 public:
  // Starts the thread. With `low_priority` it lowers its own OS priority first (Linux: nice +10).
  BackgroundDriver(const EngineLock& lock, Stepper& stepper, const Logger& logger, BatchWindow window,
                   bool low_priority);
  ~BackgroundDriver() { stop(); }
  BackgroundDriver(const BackgroundDriver&) = delete;
  BackgroundDriver& operator=(const BackgroundDriver&) = delete;

  void queued();  // a request joined the queue; call under the engine's lock
  void wake();    // a request was flagged by cancel_soon(); never waits for a step
  void stop();    // the step in progress finishes, then the thread ends; idempotent

 private:
  void loop(bool low_priority);
  bool window_holds(std::unique_lock<std::mutex>& lock);  // false once the batch may start
  void end_cancelled();                                   // takes the engine's lock (the thread is not stepping)
  void run_until_idle();                                  // takes the engine's lock for a run of steps

  const EngineLock& lock_;
  Stepper& stepper_;
  const Logger& logger_;
  const BatchWindow window_;
  std::mutex mutex_;  // guards the members below; never held during a step
  std::condition_variable changed_;
  int arrivals_ = 0;  // requests queued since the engine was last found idle (cancelled or not)
  Clock::time_point first_arrival_;
  bool cancels_ = false;               // wake() since the thread last looked
  std::atomic<bool> stopping_{false};  // written under mutex_, read between steps without it
  std::thread thread_;
};

}  // namespace ember::runtime
