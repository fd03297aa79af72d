#include "runtime/engine_lock.hpp"

namespace ember::runtime {
namespace {

// The engine whose callback (a stream callback, the log) runs on this thread, if any: a call
// from it back into the same engine would wait for the lock the step holds, forever.
thread_local const EngineLock* callback_engine = nullptr;

class InCallback {
 public:
  explicit InCallback(const EngineLock* engine) : previous_(std::exchange(callback_engine, engine)) {}
  ~InCallback() { callback_engine = previous_; }
  InCallback(const InCallback&) = delete;
  InCallback& operator=(const InCallback&) = delete;

 private:
  const EngineLock* previous_;
};

}  // namespace

void EngineLock::run_callback(const std::function<void()>& call) const {
  const InCallback guard(this);
  call();
}

void EngineLock::check_not_in_callback() const {
  if (callback_engine == this)
    fail(ErrorCode::invalid_argument,
         "a callback of this engine (stream or log) called back into the same engine, which "
         "runs that callback with its lock held; call it after the callback returns, or from "
         "another thread that does not wait for the callback");
}

std::unique_lock<std::mutex> EngineLock::lock() const {
  check_not_in_callback();
  ++callers_waiting_;
  std::unique_lock lock(mutex_);
  --callers_waiting_;
  callers_cv_.notify_all();
  return lock;
}

void EngineLock::let_callers_in(std::unique_lock<std::mutex>& lock) const {
  callers_cv_.wait(lock, [&] { return callers_waiting_.load() == 0; });
}

}  // namespace ember::runtime
