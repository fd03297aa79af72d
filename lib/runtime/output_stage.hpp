// The output stage: what becomes of a request once the forward pass has computed its logits
// rows. Sampling (with a speculative draft, the rows it confirms), end of sequence, the
// incremental detokenizer, stop strings, the stream callback and the request's Timings; then
// finishing it: its blocks go back through the scheduler, its completion to the exact response
// cache and to the token totals of stats(), and the threads waiting for it wake up.
//
// Thread-safety: none of its own. Every member runs under the engine's lock except wait_done(),
// which sleeps on a mutex of its own: a waiter must not need the lock a busy stepping thread
// holds. Stream callbacks run through EngineLock::run_callback, so they cannot re-enter.
#pragma once

#include "runtime/engine_lock.hpp"
#include "runtime/response_cache.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/sequence.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ember::runtime {

class OutputStage {
 public:
  OutputStage(const tokenizer::Tokenizer& tokenizer, Scheduler& scheduler, ResponseCache& response_cache,
              const EngineLock& lock, int vocab, int context_length);
  OutputStage(const OutputStage&) = delete;
  OutputStage& operator=(const OutputStage&) = delete;

  void set_load_ms(double ms) { load_ms_ = ms; }  // reported in the Timings of later completions

  // Samples a scheduled sequence's token from the step's logits (`logits`: row 0 of the step),
  // and with a draft, keeps sampling while the draft is confirmed (accepting its rows' K/V).
  void sample_rows(const ScheduledSequence& s, float* logits);
  // Marks a sequence finished and releases the text held back for incomplete UTF-8 or a
  // possible stop string (unless a stop string ended it: then that text is dropped).
  void finish(Sequence& seq, FinishReason reason, bool discard_held_text = false);
  // Removes a sequence from the scheduler (its blocks return to the pool, published ones stay in
  // the prefix cache), completes its Timings, sends the last chunk and wakes its waiters.
  void finalize(const std::shared_ptr<Sequence>& seq);
  // Answers a request with a completion from the exact response cache, without inference.
  void serve_from_response_cache(const std::shared_ptr<Sequence>& seq, Completion hit);
  // Blocks until `seq` has been finalized; from any thread, without the engine's lock.
  void wait_done(const Sequence& seq);
  // The totals of finished requests: requests_finished and the token counters of EngineStats,
  // and the embedding sequences computed.
  void add_totals(EngineStats& stats) const;

 private:
  void on_token(Sequence& seq, float* logits);
  void mark_done(Sequence& seq);  // wakes the sequence's waiters
  void emit(Sequence& seq, const std::string& text, const std::int32_t* tokens, std::size_t token_count, bool last,
            const float* logprobs = nullptr, const std::vector<TokenLogprob>* top_logprobs = nullptr,
            ChunkStream stream = ChunkStream::answer);

  const tokenizer::Tokenizer& tokenizer_;
  Scheduler& scheduler_;
  ResponseCache& response_cache_;
  const EngineLock& lock_;
  const int vocab_;
  const int context_length_;
  double load_ms_ = 0;
  EngineStats totals_;  // only the fields add_totals() reports
  // Sequence::done is set under finished_mutex_, so a waiter between its check and its sleep
  // misses no wake-up.
  std::mutex finished_mutex_;
  std::condition_variable finished_cv_;
};

}  // namespace ember::runtime
