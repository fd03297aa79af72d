// The engine behind ember::Engine: the composition of its parts and the entry points.
//
// EngineCore checks the options and owns the model file, tokenizer, backend, KV cache, block
// pool, scheduler and response cache; the work is done by its parts:
//   request_builder    a Request -> a Sequence (limits, chat template, tokens, grammar)
//   stepper            the scheduled step: schedule -> forward (resumable) -> commit
//   output_stage       sampling, detokenizing, stop strings, callbacks, timings, completion
//   background_driver  background_thread: the stepping thread and its batch window
//   engine_lock        the one lock, its turns between steps, callbacks that cannot re-enter
// Here: submit, wait, cancel, status and stats, and the KV state of engine_state.cpp.
//
// Thread-safety: every public member may be called from any thread; the engine's lock
// (EngineLock) guards the mutable state, and callbacks run on the thread inside a step.
#pragma once

#include "backend/backend.hpp"
#include "backend/kv_cache.hpp"
#include "model/classifier_head.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "runtime/background_driver.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/engine_lock.hpp"
#include "runtime/kv_snapshot.hpp"
#include "runtime/lora_registry.hpp"
#include "runtime/output_stage.hpp"
#include "runtime/request_builder.hpp"
#include "runtime/response_cache.hpp"
#include "runtime/scheduler.hpp"
#include "runtime/sequence.hpp"
#include "runtime/stepper.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ember::runtime {

class EngineCore {
 public:
  EngineCore(const std::string& path, const EngineOptions& options);
  ~EngineCore();  // shutdown(), if nothing called it
  // Stops the background thread (after the step in progress) and ends every unfinished request
  // as `cancelled`, waking its waiters; after it no callback of this engine runs again, and
  // submit() refuses. The Engine calls it when destroyed, so that a RequestHandle still holding
  // the core for a moment (a wait() returning, a cancel_soon()) never keeps the engine running
  // past ~Engine, nor drops the last reference on the background thread. Idempotent. From
  // inside one of this engine's callbacks it does nothing: the step that runs the callback
  // holds the lock it needs (the destructor's contract forbids that call).
  void shutdown() noexcept;
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Validates and tokenizes a request into a new sequence (not yet queued). Throws
  // Error(invalid_argument | context_overflow | unsupported).
  // (engine_adapters.cpp: with the request's LoRA adapters attached.)
  std::shared_ptr<Sequence> make_sequence(const Request& request, StreamCallback on_chunk) const;
  // Queues a sequence; a request with max_tokens == 0 completes at once. The exact response
  // cache may answer it unless `allow_response_cache` is false (a prefill that must compute).
  void submit(const std::shared_ptr<Sequence>& seq, bool allow_response_cache = true);
  // Blocks until `seq` is finished: waits for the background thread, or runs steps itself.
  void wait(const std::shared_ptr<Sequence>& seq);
  void cancel(const std::shared_ptr<Sequence>& seq);
  // Flags `seq` for the stepping thread to end before its next step; takes no lock that a step
  // holds, so it never waits for one (and works inside a callback).
  void cancel_soon(const std::shared_ptr<Sequence>& seq);
  RequestStatus status(const Sequence& seq) const;
  // Steps until `budget` is spent or there is no work (returns at once in background mode).
  StepResult run_for(std::chrono::microseconds budget);
  // The share of a step(budget) call's budget its work is planned to fill.
  static constexpr double kPlannedShareOfBudget = 0.75;
  EngineStats stats() const;

  // KV state that outlives a request (engine_state.cpp; format in runtime/kv_snapshot.hpp).
  // save: computes what the prefix cache lacks of each token list, then exports the full
  // blocks of all of them (shared blocks once). load: validates, then imports the blocks as
  // cached prefix blocks; returns how many are now cached (fewer when the pool is full).
  std::vector<std::uint8_t> save_state(const std::vector<std::vector<std::int32_t>>& token_lists);
  std::size_t load_state(std::span<const std::uint8_t> snapshot);
  std::size_t load_state_file(const std::string& path);

  // LoRA adapters (engine_adapters.cpp), as Engine::load_adapter and friends document. unload
  // takes the engine's lock to see that no queued or running request names the adapter.
  std::int32_t load_adapter(const std::string& path) { return adapters_->load(path); }
  void unload_adapter(std::int32_t id);
  std::vector<AdapterInfo> adapters() const { return adapters_->list(); }

  // Engine::embed_tokens (embedder.cpp): the token lists already truncated or checked.
  std::vector<Embedding> embed(const std::vector<std::vector<std::int32_t>>& token_lists, const EmbedOptions& options);
  // The longest token list embed() takes: the context, and an encoder's position table.
  int embed_limit() const;
  // A reranker's classification head (rank pooling), if the file has one.
  const std::optional<model::ClassifierHead>& classifier() const { return classifier_; }

  std::string render_chat(const std::vector<Message>& messages) const { return requests_->render_chat(messages); }
  bool has_chat_template() const { return requests_->has_chat_template(); }
  const RequestBuilder& requests() const { return *requests_; }
  std::string weight_format() const { return backend_->weight_format(); }
  std::uint64_t decode_weight_bytes() const { return backend_->decode_weight_bytes(); }
  std::string cpu_tier() const { return backend_->cpu_tier(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const model::ModelConfig& config() const { return config_; }
  const std::string& model_name() const { return config_.name; }
  int context_length() const { return context_length_; }
  double load_ms() const { return load_ms_; }

  // For tests: see Stepper::set_fault_hook (the hook runs under the engine's lock).
  void set_fault_hook(std::function<void(FaultPoint)> hook);
  // For tests: the block pool's bookkeeping is consistent (throws Error(internal) otherwise).
  void check_block_pool() const;

 private:
  KvSnapshotIdentity snapshot_identity() const;
  KvSnapshotLimits snapshot_limits() const;
  void prefill(const std::vector<std::int32_t>& tokens);  // computes and caches their KV
  // Exports the cached full blocks of `tokens` into `out`; false when some are not cached.
  bool export_chain(const std::vector<std::int32_t>& tokens, KvSnapshotWriter& out);

  EngineOptions options_;
  EngineLock lock_;  // guards what the parts below hold and the sequences' mutable state
  Logger logger_;
  std::shared_ptr<const model::GgufFile> file_;
  model::ModelConfig config_;
  std::optional<model::ClassifierHead> classifier_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<RequestBuilder> requests_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<backend::KvCache> kv_;
  std::unique_ptr<BlockPool> pool_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ResponseCache> response_cache_;
  std::unique_ptr<AdapterRegistry> adapters_;
  std::unique_ptr<OutputStage> output_;
  std::unique_ptr<Stepper> stepper_;
  std::unique_ptr<BackgroundDriver> driver_;  // background_thread only
  int context_length_ = 0;
  double load_ms_ = 0;
  bool stopping_ = false;  // shutdown() ran: submit() refuses
  std::uint64_t next_id_ = 1;
  std::uint64_t requests_submitted_ = 0;
};

}  // namespace ember::runtime
