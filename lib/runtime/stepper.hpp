// The scheduled step: the scheduler picks the work, the backend runs the forward pass (resumable
// between pieces of a layer, so a deadline is kept to about a piece), and once it is done the step is
// committed and the output stage samples its rows. Until then nothing of the step is published:
// its sequences are still running, its tokens uncommitted, steps() has not counted it.
// Also here: requests cancelled since the last step end before the next; a failure ends the
// step's requests (or every request, outside the computation) and never escapes; the test fault
// hook.
//
// Thread-safety: none of its own; the engine calls it under its lock. The one exception is
// cancel_soon(), which only sets atomics and may run on any thread at any time.
#pragma once

#include "backend/backend.hpp"
#include "backend/kv_cache.hpp"
#include "runtime/engine_lock.hpp"
#include "runtime/output_stage.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/sequence.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ember::runtime {

// Where in a step a test's fault hook runs (see Stepper::set_fault_hook).
enum class FaultPoint {
  schedule,  // before the scheduler picks the step's work
  forward,   // just before the backend's forward pass
  sample,    // after the forward pass, before the step is committed and sampled
};

class Stepper {
 public:
  static constexpr int kIdle = -1;    // step(): there was nothing to do
  static constexpr int kPaused = -2;  // step(): the deadline came inside the forward pass

  Stepper(backend::Backend& backend, backend::KvCache& kv, Scheduler& scheduler, OutputStage& output,
          const Logger& logger);
  Stepper(const Stepper&) = delete;
  Stepper& operator=(const Stepper&) = delete;

  // Runs one step, or what the deadline leaves of it: a step whose forward pass does not fit
  // stops between pieces (kPaused) and the next call continues it before anything else. A
  // budgeted step is the step an unbudgeted one would be (the same rows), spread over calls.
  // Returns the rows computed, kPaused or kIdle. Nothing escapes: a failure ends requests with
  // FinishReason::error instead.
  int step(Clock::time_point deadline = Clock::time_point::max());
  std::uint64_t steps() const { return steps_; }  // finished steps
  // Finished steps that carried rows of generating and of embedding sequences both
  // (EngineStats::mixed_steps).
  std::uint64_t mixed_steps() const { return mixed_steps_; }
  bool idle() const { return !step_paused_ && scheduler_.idle(); }  // no request left
  bool paused() const { return step_paused_; }                      // a step stopped inside its pass

  // A running request was cancelled: it ends before the next step.
  void cancel_at_next_step() { cancel_pending_ = true; }
  // RequestHandle::cancel_soon: flags `seq`; it ends before the next step. Any thread, never blocks.
  void cancel_soon(Sequence& seq);
  // Ends the cancelled requests now (a step starts with it; the background thread also calls it
  // while its batch window holds the queue). Does nothing inside a paused step.
  void end_cancelled();

  // For tests: fault injection without global state. `hook` runs at every FaultPoint of every
  // step; what it throws is handled as a real failure there would be: at `forward` and `sample`
  // the step's requests end with FinishReason::error, at `schedule` every unfinished request
  // does. An empty hook removes it.
  void set_fault_hook(std::function<void(FaultPoint)> hook) { fault_hook_ = std::move(hook); }

 private:
  int run_step(Clock::time_point deadline);      // step()'s body; may throw
  int finish_step();                             // commits and samples the step whose forward pass is done
  void take_hidden(const ScheduledSequence& s);  // an embedding sequence's rows of the step
  void fail_step(const std::vector<ScheduledSequence>& step, const std::string& why);
  // One sequence of the step ends with `error` (its sampling failed); finalized with the step's
  // other finished sequences.
  void fail_sequence(Sequence& seq, const std::string& why);
  void abort_all(const std::string& why);
  void shift(const std::shared_ptr<Sequence>& seq);  // ContextPolicy::shift on a full window
  void inject(FaultPoint point) {
    if (fault_hook_) fault_hook_(point);
  }

  backend::Backend& backend_;
  backend::KvCache& kv_;
  Scheduler& scheduler_;
  OutputStage& output_;
  const Logger& logger_;
  std::uint64_t steps_ = 0;
  std::uint64_t mixed_steps_ = 0;
  bool cancel_pending_ = false;                   // a running request was cancelled since the last step
  std::atomic<bool> cancel_soon_pending_{false};  // cancel_soon() flagged a request since then
  backend::Batch batch_;
  std::vector<float> logits_;
  std::vector<float> hidden_;  // the embedding sequences' rows (Batch::hidden_rows)
  // The step whose forward pass is under way (step_paused_: it stopped inside it).
  std::vector<ScheduledSequence> step_;
  bool step_paused_ = false;
  std::function<void(FaultPoint)> fault_hook_;
};

}  // namespace ember::runtime
