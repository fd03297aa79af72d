// The engine's lock, and the host's callbacks that run under it.
//
// One mutex guards an engine's mutable state (scheduler, KV pool, the sequences); a step holds it
// for its whole forward pass and runs the stream and log callbacks with it held. Two things make
// that safe to use from several threads:
//  * Turns between steps. std::mutex is not fair, so a thread that steps back to back (the
//    background thread, step(), a host-driven wait()) would keep it forever. Callers announce
//    themselves in lock() and the stepping thread lets them in between two steps
//    (let_callers_in()), so a request submitted mid-generation joins the next step and stats()
//    never stalls for a whole busy period. The stepping thread waits only for the callers that
//    had announced themselves when it stopped, and takes the lock back as an announced caller:
//    two host threads waiting on their requests take turns step by step (neither waits for the
//    other's whole generation), and callers that keep arriving cannot hold the steps off.
//  * Re-entry. A callback that calls back into its own engine would wait forever for the lock its
//    step holds: run_callback() marks the thread, and lock() from a marked thread throws
//    Error(invalid_argument) saying so instead.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include "util/check.hpp"

#include <ember/ember.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

namespace ember::runtime {

class EngineLock {
 public:
  // The lock for an entry point of the engine; from inside one of this engine's callbacks it
  // throws Error(invalid_argument) instead of deadlocking.
  std::unique_lock<std::mutex> lock() const;
  // The lock without that check, for the engine's shutdown (which must not throw); like lock(),
  // it is let in between two steps of a thread that steps back to back.
  std::unique_lock<std::mutex> lock_unchecked() const;
  // For a thread that steps back to back, between two steps: lets every caller that announced
  // itself in lock() take the lock first.
  void let_callers_in(std::unique_lock<std::mutex>& lock) const;
  // Runs a host callback with this thread marked as inside one of this engine's callbacks.
  void run_callback(const std::function<void()>& call) const;
  // Throws Error(invalid_argument) when this thread is inside one of this engine's callbacks.
  void check_not_in_callback() const;
  // Whether this thread is inside one of this engine's callbacks.
  bool in_callback() const noexcept;

 private:
  mutable std::mutex mutex_;  // guards the engine's mutable state and its sequences
  // Callers that announced themselves, and those of them that have had mutex_ since: the ones
  // waiting are the difference. entered_ changes only with mutex_ held.
  mutable std::atomic<std::uint64_t> arrived_{0};
  mutable std::atomic<std::uint64_t> entered_{0};
  mutable std::condition_variable callers_cv_;  // a waiting caller got mutex_
};

// EngineOptions::log, run as a callback of its engine. A log callback that throws loses its
// line; the exception never reaches ember's threads.
class Logger {
 public:
  Logger(LogCallback callback, const EngineLock& lock) : callback_(std::move(callback)), lock_(lock) {}

  template <class... Args>
  void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) const noexcept {
    if (!callback_) return;
    try {
      const std::string line = fmt::format(f, std::forward<Args>(args)...);
      lock_.run_callback([&] { callback_(level, line); });
    } catch (...) {
    }
  }

 private:
  LogCallback callback_;
  const EngineLock& lock_;
};

}  // namespace ember::runtime
