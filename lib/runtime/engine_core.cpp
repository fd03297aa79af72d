#include "runtime/engine_core.hpp"

#include "backend/backend_factory.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <thread>
#include <utility>

namespace ember::runtime {
namespace {

constexpr int kDefaultMaxContext = 8192;
constexpr std::chrono::milliseconds kMaxBatchWait = std::chrono::hours(1);
// More compute threads than this is a mistake (no machine ember runs on has that many cores),
// and OpenMP would exit the process when it cannot create them.
constexpr int kMaxThreads = 1024;
// A step budget above this is taken as this: no step lasts that long, and the deadline's
// arithmetic (in the clock's nanoseconds) overflows for budgets of a few hundred years.
constexpr std::chrono::microseconds kLongestBudget = std::chrono::hours(24);

// Option checks that need no model: a wrong value fails before anything is read.
void check_options(const EngineOptions& o) {
  if (o.threads < 0 || o.threads > kMaxThreads)
    fail(ErrorCode::invalid_argument, "threads must be in [0, {}] (0 = all hardware threads), got {}", kMaxThreads,
         o.threads);
  if (o.context_length < 0) fail(ErrorCode::invalid_argument, "context_length must be >= 0, got {}", o.context_length);
  if (o.kv_block_size <= 0 || o.kv_block_size > 1024)
    fail(ErrorCode::invalid_argument, "kv_block_size must be in [1, 1024], got {}", o.kv_block_size);
  if (o.max_batch_tokens <= 0)
    fail(ErrorCode::invalid_argument, "max_batch_tokens must be > 0, got {}", o.max_batch_tokens);
  if (o.max_sequences <= 0) fail(ErrorCode::invalid_argument, "max_sequences must be > 0, got {}", o.max_sequences);
  if (o.max_prompt_tokens < 0 || o.max_generated_tokens < 0 || o.max_requests < 0)
    fail(ErrorCode::invalid_argument,
         "max_prompt_tokens, max_generated_tokens and max_requests must be >= 0 (0 = no limit), got {}, {}, {}",
         o.max_prompt_tokens, o.max_generated_tokens, o.max_requests);
  if (o.background_low_priority && !o.background_thread)
    fail(ErrorCode::invalid_argument,
         "background_low_priority needs background_thread (it lowers the engine's own thread)");
  if (o.batch_min_requests < 1)
    fail(ErrorCode::invalid_argument, "batch_min_requests must be at least 1 (1: no window), got {}",
         o.batch_min_requests);
  if (o.batch_max_wait.count() < 0 || o.batch_max_wait > kMaxBatchWait)
    fail(ErrorCode::invalid_argument, "batch_max_wait must be in [0, {}] ms, got {} ms", kMaxBatchWait.count(),
         o.batch_max_wait.count());
  const bool window = o.batch_min_requests > 1 || o.batch_max_wait.count() > 0;
  if (window && !o.background_thread)
    fail(ErrorCode::invalid_argument,
         "the batch window (batch_min_requests = {}, batch_max_wait = {} ms) needs background_thread: a host that "
         "steps the engine itself decides when a batch starts",
         o.batch_min_requests, o.batch_max_wait.count());
  if (o.batch_min_requests > 1 && o.batch_max_wait.count() == 0)
    fail(ErrorCode::invalid_argument,
         "batch_min_requests = {} with batch_max_wait = 0 ms: the window would never wait for them; give "
         "batch_max_wait, the longest the first request waits",
         o.batch_min_requests);
}

}  // namespace

EngineCore::EngineCore(const std::string& path, const EngineOptions& options)
    : options_(options), logger_(options.log, lock_) {
  const auto start = Clock::now();
  check_options(options);

  backend::LoadProgress progress(options.on_load_progress);
  progress.report(LoadPhase::reading, 0.0f);
  file_ = model::GgufFile::open(path);
  config_ = model::read_model_config(*file_);
  classifier_ = model::ClassifierHead::read(*file_, config_);
  progress.report(LoadPhase::tokenizer, 0.0f);
  tokenizer_ = tokenizer::Tokenizer::from_gguf(*file_);
  std::optional<tokenizer::ChatTemplate> chat_template;
  std::string chat_template_error;
  try {
    chat_template = tokenizer::ChatTemplate::from_gguf(*file_, *tokenizer_, options.chat_template);
  } catch (const Error& e) {
    // A template the host asked for fails the open; the file's own only fails chat(), as raw
    // prompts still work.
    if (!options.chat_template.empty()) throw;
    chat_template_error = e.what();
  }

  progress.report(LoadPhase::tokenizer, 1.0f);

  context_length_ =
      options.context_length > 0
          ? options.context_length
          : std::min(config_.context_length > 0 ? config_.context_length : kDefaultMaxContext, kDefaultMaxContext);
  config_.use_context(context_length_);
  requests_ = std::make_unique<RequestBuilder>(options, *tokenizer_, config_.vocab, context_length_,
                                               std::move(chat_template), std::move(chat_template_error));

  backend::BackendOptions backend_options;
  backend_options.device = options.device;
  backend_options.precision = options.precision;
  backend_options.weight_format = options.weight_format;
  backend_options.max_batch_rows = options.max_batch_tokens;
  backend_options.tokenize = [this](std::string_view text) {
    return tokenizer_->encode(text, /*parse_special=*/true, tokenizer_->add_bos());
  };
  backend_options.threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend_options.progress = &progress;
  backend_options.weight_cache_dir = options.weight_cache_dir;
  // Through the logger: a host callback that throws loses its line and goes no further (the
  // weight cache's writer logs from noexcept code).
  if (options.log)
    backend_options.log = [this](LogLevel level, std::string_view line) { logger_.log(level, "{}", line); };
  backend_ = backend::make_backend(file_, config_, backend_options);
  adapters_ = std::make_unique<AdapterRegistry>(*file_, config_, *backend_);

  backend::KvGeometry geometry;
  geometry.layers = config_.layers;
  geometry.kv_heads = config_.kv_heads;
  geometry.head_dim = config_.head_dim;
  geometry.block_size = options.kv_block_size;
  geometry.dtype = options.kv_cache_type;
  geometry.block_count = backend::kv_blocks_for_bytes(geometry, options.kv_cache_bytes);
  if (geometry.block_count < 1)
    fail(ErrorCode::invalid_argument, "kv_cache_bytes = {} holds no KV block ({} bytes each)", options.kv_cache_bytes,
         geometry.bytes_per_block());
  kv_ = backend_->make_kv_cache(geometry);
  pool_ = std::make_unique<BlockPool>(geometry.block_count, geometry.block_size, options.prefix_cache);
  SchedulerLimits limits;
  limits.max_batch_tokens = options.max_batch_tokens;
  limits.max_sequences = options.max_sequences;
  limits.context_length = context_length_;
  limits.whole_embeddings = !config_.causal;
  scheduler_ = std::make_unique<Scheduler>(*pool_, limits);
  response_cache_ = std::make_unique<ResponseCache>(options.response_cache_bytes);
  output_ =
      std::make_unique<OutputStage>(*tokenizer_, *scheduler_, *response_cache_, lock_, config_.vocab, context_length_);
  stepper_ = std::make_unique<Stepper>(*backend_, *kv_, *scheduler_, *output_, logger_);

  if (!options.prefix_store_path.empty()) {
    const std::size_t blocks = load_state_file(options.prefix_store_path);
    logger_.log(LogLevel::info, "prefix store {}: {} blocks cached", options.prefix_store_path, blocks);
  }
  progress.finish();
  load_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  output_->set_load_ms(load_ms_);
  logger_.log(LogLevel::info, "loaded {} ({} layers, width {}) on {} in {:.0f} ms; KV cache {} blocks of {} tokens",
              config_.name, config_.layers, config_.embedding, backend_->name(), load_ms_, geometry.block_count,
              geometry.block_size);
  if (const std::int64_t holds = pool_->token_capacity(); holds < context_length_)
    logger_.log(LogLevel::warning,
                "the KV cache holds {} tokens, fewer than the context of {}: a sequence that outgrows it ends "
                "with `context` (raise kv_cache_bytes)",
                holds, context_length_);
  if (options.background_thread)
    driver_ = std::make_unique<BackgroundDriver>(lock_, *stepper_, logger_,
                                                 BatchWindow{options.batch_min_requests, options.batch_max_wait},
                                                 options.background_low_priority);
}

EngineCore::~EngineCore() { shutdown(); }

void EngineCore::shutdown() noexcept {
  if (lock_.in_callback()) return;
  if (driver_) driver_->stop();        // the step in progress finishes first
  auto lock = lock_.lock_unchecked();  // noexcept: no re-entry check to throw
  if (std::exchange(stopping_, true)) return;
  for (const auto& seq : scheduler_->sequences()) {
    seq->completion.finish_reason = FinishReason::cancelled;
    seq->completion.error = "the engine was destroyed";
    output_->finalize(seq);
  }
}

void EngineCore::submit(const std::shared_ptr<Sequence>& seq, bool allow_response_cache) {
  if (!config_.has_lm_head)
    fail(ErrorCode::unsupported, "'{}' is an embedding model (architecture {}, no lm_head): use embed()", config_.name,
         config_.architecture);
  auto lock = lock_.lock();
  if (stopping_) fail(ErrorCode::invalid_argument, "submit() on an engine that is shutting down");
  const int in_flight = scheduler_->running() + scheduler_->waiting();
  if (options_.max_requests > 0 && in_flight >= options_.max_requests)
    fail(ErrorCode::busy, "{} requests are in flight, EngineOptions::max_requests = {}: retry later", in_flight,
         options_.max_requests);
  for (const AdapterScale& a : seq->sampling.adapters)  // unloaded since make_sequence
    if (!adapters_->contains(a.id)) fail(ErrorCode::invalid_argument, "LoRA adapter {} was unloaded", a.id);
  seq->id = next_id_++;
  seq->submitted = Clock::now();
  ++requests_submitted_;
  if (seq->sampling.max_tokens == 0) {  // documented: nothing to generate, no inference
    seq->completion.finish_reason = FinishReason::length;
    output_->finalize(seq);
    return;
  }
  if (allow_response_cache && response_cache_->enabled()) {
    seq->response_key = ResponseCache::key(seq->tokens, seq->sampling, seq->shift_on_full, seq->context_keep);
    if (auto hit = response_cache_->find(seq->response_key)) {
      output_->serve_from_response_cache(seq, std::move(*hit));
      return;
    }
  }
  scheduler_->add(seq);
  if (driver_) driver_->queued();
}

StepResult EngineCore::run_for(std::chrono::microseconds budget) {
  StepResult result;
  if (driver_) {
    auto lock = lock_.lock();
    result.idle = scheduler_->idle();
    return result;
  }
  // Work is planned to end by a share of the budget: the rest absorbs what no estimate sees (on
  // a machine with as many busy threads as cores, another process that takes a core stalls the
  // team's next barrier for a scheduler tick, a few milliseconds).
  budget = std::min(budget, kLongestBudget);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(budget * kPlannedShareOfBudget);
  auto lock = lock_.lock();
  do {
    lock_.let_callers_in(lock);
    const int rows = stepper_->step(deadline);
    if (rows == Stepper::kPaused) {  // the budget is spent; the step continues next call
      result.step_paused = true;
      break;
    }
    if (rows == Stepper::kIdle) {
      result.idle = true;
      break;
    }
    ++result.steps;
    result.tokens += rows;
    // A new step runs at least one piece of its forward pass, sized to the time left.
  } while (Clock::now() < deadline);
  return result;
}

void EngineCore::wait(const std::shared_ptr<Sequence>& seq) {
  lock_.check_not_in_callback();  // its own request cannot finish while its callback runs
  if (driver_) {
    output_->wait_done(*seq);
    return;
  }
  auto lock = lock_.lock();
  while (seq->state != SequenceState::finished) {
    if (stepper_->step() == Stepper::kIdle && seq->state != SequenceState::finished)
      fail(ErrorCode::internal, "request {} is unfinished but the engine has no work", seq->id);
    lock_.let_callers_in(lock);
  }
}

void EngineCore::cancel(const std::shared_ptr<Sequence>& seq) {
  auto lock = lock_.lock();
  if (seq->state == SequenceState::finished) return;
  seq->cancel_requested = true;
  if (seq->state == SequenceState::waiting) {  // never started: end it now
    output_->finish(*seq, FinishReason::cancelled);
    output_->finalize(seq);
  } else {
    stepper_->cancel_at_next_step();
  }
}

void EngineCore::cancel_soon(const std::shared_ptr<Sequence>& seq) {
  stepper_->cancel_soon(*seq);
  if (driver_) driver_->wake();
}

RequestStatus EngineCore::status(const Sequence& seq) const {
  auto lock = lock_.lock();
  switch (seq.state) {
    case SequenceState::waiting: return RequestStatus::queued;
    case SequenceState::running: return RequestStatus::running;
    case SequenceState::finished: break;
  }
  return RequestStatus::finished;
}

EngineStats EngineCore::stats() const {
  auto lock = lock_.lock();
  EngineStats s;
  s.requests_submitted = requests_submitted_;
  s.steps = stepper_->steps();
  s.mixed_steps = stepper_->mixed_steps();
  output_->add_totals(s);
  const BlockPool::Stats p = pool_->stats();
  s.prefix_lookups = p.lookups;
  s.prefix_hit_blocks = p.hit_blocks;
  s.prefix_evictions = p.evictions;
  s.preemptions = scheduler_->preemptions();
  s.response_cache_hits = response_cache_->hits();
  s.running = scheduler_->running();
  s.queued = scheduler_->waiting();
  s.kv_blocks_total = pool_->block_count();
  s.kv_blocks_free = pool_->free_blocks();
  const backend::Backend::RoutingTotals routing = backend_->routing_totals();
  s.routed_layers = routing.layers;
  s.experts_run = routing.experts;
  return s;
}

void EngineCore::set_fault_hook(std::function<void(FaultPoint)> hook) {
  auto lock = lock_.lock();
  stepper_->set_fault_hook(std::move(hook));
}

void EngineCore::check_block_pool() const {
  auto lock = lock_.lock();
  pool_->check_invariants();
}

}  // namespace ember::runtime
