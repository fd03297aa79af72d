#include "runtime/engine_lock.hpp"

namespace ember::runtime {
namespace {

// The engines whose callbacks (a stream callback, the log) run on this thread, innermost
// first: a call from one back into any of them would wait for the lock its step holds, forever.
// Each is a link on the stack of run_callback; several when a callback uses another engine
// whose callback then runs.
struct InCallback {
  explicit InCallback(const EngineLock* engine);
  ~InCallback();
  InCallback(const InCallback&) = delete;
  InCallback& operator=(const InCallback&) = delete;

  const EngineLock* engine;
  const InCallback* outer;
};

thread_local const InCallback* innermost_callback = nullptr;

InCallback::InCallback(const EngineLock* e) : engine(e), outer(std::exchange(innermost_callback, this)) {}
InCallback::~InCallback() { innermost_callback = outer; }

}  // namespace

void EngineLock::run_callback(const std::function<void()>& call) const {
  const InCallback guard(this);
  call();
}

bool EngineLock::in_callback() const noexcept {
  for (const InCallback* c = innermost_callback; c != nullptr; c = c->outer)
    if (c->engine == this) return true;
  return false;
}

void EngineLock::check_not_in_callback() const {
  if (in_callback())
    fail(ErrorCode::invalid_argument,
         "a callback of this engine (stream or log) called back into the same engine, which "
         "runs that callback with its lock held; call it after the callback returns, or from "
         "another thread that does not wait for the callback");
}

std::unique_lock<std::mutex> EngineLock::lock() const {
  check_not_in_callback();
  return lock_unchecked();
}

std::unique_lock<std::mutex> EngineLock::lock_unchecked() const {
  ++arrived_;
  std::unique_lock lock(mutex_);
  ++entered_;
  callers_cv_.notify_all();
  return lock;
}

void EngineLock::let_callers_in(std::unique_lock<std::mutex>& lock) const {
  const std::uint64_t waiting_up_to = arrived_.load();
  if (entered_.load() >= waiting_up_to) return;  // nobody is waiting
  // This thread comes back as a caller too, so that another thread stepping back to back lets
  // it in after its own step.
  ++arrived_;
  callers_cv_.wait(lock, [&] { return entered_.load() >= waiting_up_to; });
  ++entered_;
  callers_cv_.notify_all();
}

}  // namespace ember::runtime
