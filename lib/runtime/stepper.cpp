#include "runtime/stepper.hpp"

#include <algorithm>
#include <utility>

namespace ember::runtime {

Stepper::Stepper(backend::Backend& backend, backend::KvCache& kv, Scheduler& scheduler, OutputStage& output,
                 const Logger& logger)
    : backend_(backend), kv_(kv), scheduler_(scheduler), output_(output), logger_(logger) {}

int Stepper::step(Clock::time_point deadline) {
  // Nothing may escape a step: on the background thread it would end the host's process.
  // Failures of the forward pass or of sampling end the step's requests (run_step); anything
  // else ends every unfinished request, so no waiter hangs and the blocks all come back.
  try {
    return run_step(deadline);
  } catch (const std::exception& e) {
    abort_all(e.what());
  } catch (...) {
    abort_all("an unknown exception");
  }
  return 0;
}

void Stepper::cancel_soon(Sequence& seq) {
  seq.cancel_soon.store(true);
  cancel_soon_pending_.store(true);
}

void Stepper::end_cancelled() {
  // Requests cancelled while running end before the step, freeing their blocks for it. The
  // sweep runs only when a cancel flagged one, not on every step.
  if (step_paused_) return;  // the step in progress holds them; they end before the next one
  const bool soon = cancel_soon_pending_.exchange(false);
  if (!std::exchange(cancel_pending_, false) && !soon) return;
  for (const auto& seq : scheduler_.sequences())
    if (seq->cancel_requested || seq->cancel_soon.load()) {
      output_.finish(*seq, FinishReason::cancelled);
      output_.finalize(seq);
    }
}

int Stepper::run_step(Clock::time_point deadline) {
  if (!step_paused_) {
    end_cancelled();
    inject(FaultPoint::schedule);
    std::vector<std::shared_ptr<Sequence>> finished;
    step_ = scheduler_.schedule(batch_, finished);
    for (const auto& seq : finished) output_.finalize(seq);
    if (step_.empty()) return finished.empty() ? kIdle : 0;
  }
  // Two failure points, one rollback: until commit() nothing of the step is published, and
  // finalize() returns every block the step's sequences hold, so the pool stays whole.
  try {
    if (!step_paused_) {
      inject(FaultPoint::forward);
      backend_.begin_forward(batch_, kv_, logits_, &hidden_);
    }
    step_paused_ = !backend_.advance_forward(deadline);
    if (step_paused_) return kPaused;
  } catch (const std::exception& e) {
    step_paused_ = false;
    ++steps_;
    fail_step(std::exchange(step_, {}), e.what());
    return 0;
  }
  return finish_step();
}

int Stepper::finish_step() {
  const std::vector<ScheduledSequence> step = std::exchange(step_, {});
  ++steps_;
  const auto embeddings = std::count_if(step.begin(), step.end(),
                                        [](const ScheduledSequence& s) { return s.sequence->embedding != nullptr; });
  if (embeddings > 0 && embeddings < static_cast<std::ptrdiff_t>(step.size())) ++mixed_steps_;
  const int context_length = scheduler_.limits().context_length;
  try {
    inject(FaultPoint::sample);
    scheduler_.commit(step);
    for (const ScheduledSequence& s : step) {
      if (s.sequence->embedding) take_hidden(s);
      if (s.logit_index < 0) continue;
      try {
        output_.sample_rows(s, logits_.data());
      } catch (const std::exception& e) {  // this request's sampling or its text: it alone ends
        fail_sequence(*s.sequence, e.what());
        continue;
      }
      if (s.sequence->state == SequenceState::running && static_cast<int>(s.sequence->tokens.size()) >= context_length)
        shift(s.sequence);
    }
  } catch (const std::exception& e) {
    fail_step(step, e.what());
    return 0;
  }
  for (const ScheduledSequence& s : step)
    if (s.sequence->state == SequenceState::finished) output_.finalize(s.sequence);
  return batch_.rows();
}

void Stepper::take_hidden(const ScheduledSequence& s) {
  Sequence& seq = *s.sequence;
  seq.embedding->take(hidden_.data() + static_cast<std::ptrdiff_t>(s.hidden_index) * backend_.config().embedding,
                      s.hidden_count);
  if (seq.uncomputed() > 0) return;
  seq.embedding->finish(static_cast<int>(seq.tokens.size()));
  seq.completion.finish_reason = FinishReason::stop;
  seq.state = SequenceState::finished;  // finalized with the step's other finished sequences
}

void Stepper::fail_step(const std::vector<ScheduledSequence>& step, const std::string& why) {
  logger_.log(LogLevel::error, "engine step failed: {}", why);
  // Sequences that finished in this step before the failure keep their finish reason.
  for (const ScheduledSequence& s : step) {
    Sequence& seq = *s.sequence;
    if (seq.state != SequenceState::finished) {
      seq.completion.error = "the engine step failed: " + why;
      seq.completion.finish_reason = FinishReason::error;
    }
    output_.finalize(s.sequence);
  }
}

void Stepper::fail_sequence(Sequence& seq, const std::string& why) {
  logger_.log(LogLevel::error, "request {} failed: {}", seq.id, why);
  seq.completion.error = "the request failed: " + why;
  output_.finish(seq, FinishReason::error, /*discard_held_text=*/true);
}

void Stepper::abort_all(const std::string& why) {
  logger_.log(LogLevel::error, "engine failed outside a step's computation: {}; ending every request", why);
  for (const auto& seq : scheduler_.sequences()) {
    seq->completion.error = "the engine failed: " + why;
    seq->completion.finish_reason = FinishReason::error;
    output_.finalize(seq);
  }
}

void Stepper::shift(const std::shared_ptr<Sequence>& seq) {
  // Keep the first context_keep tokens and the newer half of the rest; the kept tokens are
  // computed again from the start (their blocks at the front are likely still cached).
  const int keep = seq->context_keep;
  const int drop = (static_cast<int>(seq->tokens.size()) - keep) / 2;
  seq->tokens.erase(seq->tokens.begin() + keep, seq->tokens.begin() + keep + drop);
  seq->shifted_tokens += drop;
  ++seq->completion.context_shifts;
  scheduler_.recompute(seq);
}

}  // namespace ember::runtime
