// The engine behind ember::Engine: model, tokenizer, backend, KV cache, block pool and
// scheduler, and the step that ties them together (schedule -> forward -> sample -> stream).
//
// Thread-safety: submit(), step() and the queries may be called from any thread; one mutex
// serialises the steps, and callbacks run on the thread inside step().
#pragma once

#include "backend/backend.hpp"
#include "backend/kv_cache.hpp"
#include "grammar/token_mask.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/kv_snapshot.hpp"
#include "runtime/response_cache.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/sequence.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ember::runtime {

// Where in a step a test's fault hook runs (see set_fault_hook).
enum class FaultPoint {
  schedule,  // before the scheduler picks the step's work
  forward,   // just before the backend's forward pass
  sample,    // after the forward pass, before the step is committed and sampled
};

class EngineCore {
 public:
  EngineCore(const std::string& path, const EngineOptions& options);
  ~EngineCore();  // stops the background thread; unfinished requests end as `cancelled`
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Validates and tokenizes a request into a new sequence (not yet queued). Throws
  // Error(invalid_argument | context_overflow | unsupported).
  std::shared_ptr<Sequence> make_sequence(const Request& request, StreamCallback on_chunk) const;
  // Queues a sequence; a request with max_tokens == 0 completes at once. The exact response
  // cache may answer it unless `allow_response_cache` is false (a prefill that must compute).
  void submit(const std::shared_ptr<Sequence>& seq, bool allow_response_cache = true);
  // Blocks until `seq` is finished: waits for the background thread, or runs steps itself.
  void wait(const std::shared_ptr<Sequence>& seq);
  void cancel(const std::shared_ptr<Sequence>& seq);
  RequestStatus status(const Sequence& seq) const;
  // Steps until `budget` is spent or there is no work (returns at once in background mode).
  StepResult run_for(std::chrono::microseconds budget);
  EngineStats stats() const;

  // KV state that outlives a request (engine_state.cpp; format in runtime/kv_snapshot.hpp).
  // save: computes what the prefix cache lacks of each token list, then exports the full
  // blocks of all of them (shared blocks once). load: validates, then imports the blocks as
  // cached prefix blocks; returns how many are now cached (fewer when the pool is full).
  std::vector<std::uint8_t> save_state(const std::vector<std::vector<std::int32_t>>& token_lists);
  std::size_t load_state(std::span<const std::uint8_t> snapshot);
  std::size_t load_state_file(const std::string& path);

  std::string render_chat(const std::vector<Message>& messages) const;
  bool has_chat_template() const { return chat_template_.has_value(); }
  std::string weight_format() const { return backend_->weight_format(); }
  std::uint64_t decode_weight_bytes() const { return backend_->decode_weight_bytes(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const model::ModelConfig& config() const { return config_; }
  const std::string& model_name() const { return config_.name; }
  int context_length() const { return context_length_; }
  double load_ms() const { return load_ms_; }

  // For tests: fault injection without global state. `hook` runs at every FaultPoint of every
  // step (under the engine's lock); what it throws is handled as a real failure there would be:
  // at `forward` and `sample` the step's requests end with FinishReason::error, at `schedule`
  // every unfinished request does. An empty hook removes it.
  void set_fault_hook(std::function<void(FaultPoint)> hook);
  // For tests: the block pool's bookkeeping is consistent (throws Error(internal) otherwise).
  void check_block_pool() const;

 private:
  KvSnapshotIdentity snapshot_identity() const;
  KvSnapshotLimits snapshot_limits() const;
  void prefill(const std::vector<std::int32_t>& tokens);  // computes and caches their KV
  // Exports the cached full blocks of `tokens` into `out`; false when some are not cached.
  bool export_chain(const std::vector<std::int32_t>& tokens, KvSnapshotWriter& out);

  // Runs one step, or what the deadline leaves of it: a step whose forward pass does not fit
  // stops between layers (kStepPaused) and the next call continues it before anything else.
  // Nothing it throws escapes (see abort_all). Rows computed, kStepPaused, or -1 when there was
  // nothing to do.
  static constexpr int kStepPaused = -2;
  int step_locked(Clock::time_point deadline = Clock::time_point::max(), int max_rows = 0);
  int run_step(Clock::time_point deadline, int max_rows);  // step_locked's body; may throw
  // The rows of a step whose every layer fits in about half of `budget` (0: no cap), from the
  // measured cost of a row in a layer.
  int rows_for_budget(std::chrono::microseconds budget) const;
  int finish_step();  // commits and samples the step whose forward pass is done
  void fail_step(const std::vector<ScheduledSequence>& step, const std::string& why);
  void abort_all(const std::string& why);
  void sweep_cancelled();
  void inject(FaultPoint point) {
    if (fault_hook_) fault_hook_(point);
  }
  void background_loop();
  void on_token(Sequence& seq, float* logits);
  // Samples a scheduled sequence's token, and with a draft, keeps sampling while the draft is
  // confirmed (accepting its rows' K/V).
  void sample_rows(const ScheduledSequence& s);
  void shift(const std::shared_ptr<Sequence>& seq);  // ContextPolicy::shift on a full window
  std::vector<std::int32_t> encode_rendered(const std::string& text) const;
  // A chat prompt; with `truncate`, without its oldest turns until it fits with max_tokens.
  // dropped: messages left out; system_tokens: the system message's tokens at its start.
  std::vector<std::int32_t> encode_chat(const Request& request, bool truncate, int& dropped,
                                        int& system_tokens) const;
  void finish(Sequence& seq, FinishReason reason, bool discard_held_text = false);
  void finalize(const std::shared_ptr<Sequence>& seq);
  void serve_from_response_cache(const std::shared_ptr<Sequence>& seq, Completion hit);
  void emit(Sequence& seq, const std::string& text, const std::int32_t* tokens,
            std::size_t token_count, bool last, const float* logprobs = nullptr,
            const std::vector<TokenLogprob>* top_logprobs = nullptr);
  // A log callback that throws loses its line; the exception never reaches ember's threads.
  template <class... Args> void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) const noexcept {
    if (!options_.log) return;
    try {
      const std::string line = fmt::format(f, std::forward<Args>(args)...);
      run_callback([&] { options_.log(level, line); });
    } catch (...) {
    }
  }

  // The vocabulary's token trie for grammar masks, built by the first constrained request.
  std::shared_ptr<const grammar::TokenTrie> token_trie() const;
  mutable std::once_flag token_trie_once_;
  mutable std::shared_ptr<const grammar::TokenTrie> token_trie_;
  // A request's grammar (SamplingParams::grammar or json_schema) compiled, or the one requests
  // with the same text in flight already share: their states and masks are computed once. Kept
  // only while some request uses it (weak), so nothing grows with the schemas a server has seen.
  std::shared_ptr<grammar::CompiledGrammar> compiled_grammar(const SamplingParams& sampling) const;
  mutable std::mutex grammars_mutex_;
  mutable std::unordered_map<std::string, std::weak_ptr<grammar::CompiledGrammar>> grammars_;

  EngineOptions options_;
  std::shared_ptr<const model::GgufFile> file_;
  model::ModelConfig config_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::optional<tokenizer::ChatTemplate> chat_template_;
  std::string chat_template_error_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<backend::KvCache> kv_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ResponseCache> response_cache_;
  int context_length_ = 0;
  double load_ms_ = 0;

  // A step holds mutex_ for its whole forward pass. A thread that steps again and again
  // (the background thread, run_for, a host-driven wait) would keep it forever, because
  // std::mutex is not fair: callers announce themselves in callers_waiting_ and the stepping
  // thread lets them in between steps (let_callers_in), so a request submitted mid-generation
  // joins the next step and stats() never stalls for a whole busy period.
  // Every entry point takes the lock through it: from inside one of this engine's callbacks it
  // throws Error(invalid_argument) instead of deadlocking.
  std::unique_lock<std::mutex> lock_as_caller() const;
  void run_callback(const std::function<void()>& call) const;  // marks this thread as in a callback
  void check_not_in_callback() const;
  void let_callers_in(std::unique_lock<std::mutex>& lock) const;

  mutable std::mutex mutex_;  // guards everything below and the sequences' mutable state
  mutable std::atomic<int> callers_waiting_{0};
  mutable std::condition_variable callers_cv_;  // a waiting caller got mutex_
  // A sequence finished (Sequence::done). Waiters on the background thread's engine sleep on
  // their own mutex, not mutex_: waking up must not need the lock the busy thread holds.
  std::mutex finished_mutex_;
  std::condition_variable finished_cv_;
  std::condition_variable work_cv_;      // a request arrived, or the engine is stopping
  bool stopping_ = false;
  bool cancel_pending_ = false;  // a running request was cancelled since the last step
  std::thread background_;
  std::uint64_t next_id_ = 1;
  EngineStats stats_;
  backend::Batch batch_;
  std::vector<float> logits_;
  // The step whose forward pass is under way (step_paused_: it stopped between layers). Until
  // it is finished nothing of it is published: its sequences are still running, its tokens
  // uncommitted, stats_ has not counted it.
  std::vector<ScheduledSequence> step_;
  bool step_paused_ = false;
  Clock::duration step_forward_time_{};  // the forward pass of step_ so far
  // Seconds one row costs in one layer, measured on steps of 32 rows or more (where the rows'
  // work, not reading the weights, dominates); 0 until such a step ran.
  double row_layer_seconds_ = 0;
  Clock::duration last_layer_time_{};  // one layer of the last finished step
  std::function<void(FaultPoint)> fault_hook_;
};

}  // namespace ember::runtime
