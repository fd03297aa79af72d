#include "runtime/engine_core.hpp"


#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ember::runtime {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

constexpr int kDefaultMaxContext = 8192;
constexpr int kMaxSpeculativeTokens = 16;  // SamplingParams::speculative_tokens at most

// EngineOptions::background_low_priority: the calling thread's nice value goes up by 10. Linux
// keeps nice per thread and a new thread starts with its creator's, so the OpenMP team this
// thread starts for its first parallel region inherits it (libgomp keeps a pool per master).
// Returns false where the OS has no such per-thread setting or refuses it.
bool lower_this_thread_priority() {
#if defined(__linux__)
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  errno = 0;
  const int nice_now = ::getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return false;
  return ::setpriority(PRIO_PROCESS, tid, std::min(nice_now + 10, 19)) == 0;
#else
  return false;
#endif
}

}  // namespace

EngineCore::EngineCore(const std::string& path, const EngineOptions& options) : options_(options) {
  const auto start = Clock::now();
  if (options.threads < 0) fail(ErrorCode::invalid_argument, "threads must be >= 0, got {}", options.threads);
  if (options.context_length < 0)
    fail(ErrorCode::invalid_argument, "context_length must be >= 0, got {}", options.context_length);
  if (options.kv_block_size <= 0 || options.kv_block_size > 1024)
    fail(ErrorCode::invalid_argument, "kv_block_size must be in [1, 1024], got {}", options.kv_block_size);
  if (options.max_batch_tokens <= 0)
    fail(ErrorCode::invalid_argument, "max_batch_tokens must be > 0, got {}", options.max_batch_tokens);
  if (options.max_sequences <= 0)
    fail(ErrorCode::invalid_argument, "max_sequences must be > 0, got {}", options.max_sequences);
  if (options.max_prompt_tokens < 0 || options.max_generated_tokens < 0 || options.max_requests < 0)
    fail(ErrorCode::invalid_argument,
         "max_prompt_tokens, max_generated_tokens and max_requests must be >= 0 (0 = no limit), got {}, {}, {}",
         options.max_prompt_tokens, options.max_generated_tokens, options.max_requests);

  if (options.background_low_priority && !options.background_thread)
    fail(ErrorCode::invalid_argument, "background_low_priority needs background_thread (it lowers the engine's own thread)");

  backend::LoadProgress progress(options.on_load_progress);
  progress.report(LoadPhase::reading, 0.0f);
  file_ = model::GgufFile::open(path);
  config_ = model::read_model_config(*file_);
  progress.report(LoadPhase::tokenizer, 0.0f);
  tokenizer_ = tokenizer::Tokenizer::from_gguf(*file_);
  try {
    chat_template_ = tokenizer::ChatTemplate::from_gguf(*file_, *tokenizer_, options.chat_template);
  } catch (const Error& e) {
    // A template the host asked for fails the open; the file's own only fails chat(), as raw
    // prompts still work.
    if (!options.chat_template.empty()) throw;
    chat_template_error_ = e.what();
  }

  progress.report(LoadPhase::tokenizer, 1.0f);

  context_length_ = options.context_length > 0
                        ? options.context_length
                        : std::min(config_.context_length > 0 ? config_.context_length : kDefaultMaxContext,
                                   kDefaultMaxContext);
  config_.use_context(context_length_);

  backend::BackendOptions backend_options;
  backend_options.device = options.device;
  backend_options.precision = options.precision;
  backend_options.weight_format = options.weight_format;
  backend_options.max_batch_rows = options.max_batch_tokens;
  backend_options.tokenize = [this](std::string_view text) {
    return tokenizer_->encode(text, /*parse_special=*/true, tokenizer_->add_bos());
  };
  backend_options.threads = options.threads > 0 ? options.threads
                                                : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  backend_options.progress = &progress;
  backend_options.weight_cache_dir = options.weight_cache_dir;
  backend_options.log = options.log;
  backend_ = backend::make_backend(file_, config_, backend_options);

  backend::KvGeometry geometry;
  geometry.layers = config_.layers;
  geometry.kv_heads = config_.kv_heads;
  geometry.head_dim = config_.head_dim;
  geometry.block_size = options.kv_block_size;
  geometry.type = options.kv_cache_type;
  geometry.block_count = backend::kv_blocks_for_bytes(geometry, options.kv_cache_bytes);
  if (geometry.block_count < 1)
    fail(ErrorCode::invalid_argument, "kv_cache_bytes = {} holds no KV block ({} bytes each)",
         options.kv_cache_bytes, geometry.bytes_per_block());
  kv_ = backend_->make_kv_cache(geometry);
  pool_ = std::make_unique<BlockPool>(geometry.block_count, geometry.block_size, options.prefix_cache);
  SchedulerLimits limits;
  limits.max_batch_tokens = options.max_batch_tokens;
  limits.max_sequences = options.max_sequences;
  limits.context_length = context_length_;
  scheduler_ = std::make_unique<Scheduler>(*pool_, limits);
  response_cache_ = std::make_unique<ResponseCache>(options.response_cache_bytes);

  stats_.kv_blocks_total = geometry.block_count;
  if (!options.prefix_store_path.empty()) {
    const std::size_t blocks = load_state_file(options.prefix_store_path);
    log(LogLevel::info, "prefix store {}: {} blocks cached", options.prefix_store_path, blocks);
  }
  progress.finish();
  load_ms_ = ms_between(start, Clock::now());
  log(LogLevel::info, "loaded {} ({} layers, width {}) on {} in {:.0f} ms; KV cache {} blocks of {} tokens",
      config_.name, config_.layers, config_.embedding, backend_->name(), load_ms_,
      geometry.block_count, geometry.block_size);
  if (options.background_thread) background_ = std::thread([this] { background_loop(); });
}

EngineCore::~EngineCore() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  if (background_.joinable()) background_.join();
  std::lock_guard lock(mutex_);
  for (const auto& seq : scheduler_->sequences()) {
    seq->completion.finish_reason = FinishReason::cancelled;
    seq->completion.error = "the engine was destroyed";
    finalize(seq);
  }
}

namespace {
// The engine whose callback (a stream callback, the log) runs on this thread, if any: a call
// from it back into the same engine would wait for the lock the step holds, forever.
thread_local const EngineCore* callback_engine = nullptr;

class InCallback {
 public:
  explicit InCallback(const EngineCore* engine) : previous_(std::exchange(callback_engine, engine)) {}
  ~InCallback() { callback_engine = previous_; }
  InCallback(const InCallback&) = delete;
  InCallback& operator=(const InCallback&) = delete;

 private:
  const EngineCore* previous_;
};
}  // namespace

void EngineCore::run_callback(const std::function<void()>& call) const {
  const InCallback guard(this);
  call();
}

void EngineCore::check_not_in_callback() const {
  if (callback_engine == this)
    fail(ErrorCode::invalid_argument,
         "a callback of this engine (stream or log) called back into the same engine, which "
         "runs that callback with its lock held; call it after the callback returns, or from "
         "another thread that does not wait for the callback");
}

std::unique_lock<std::mutex> EngineCore::lock_as_caller() const {
  check_not_in_callback();
  ++callers_waiting_;
  std::unique_lock lock(mutex_);
  --callers_waiting_;
  callers_cv_.notify_all();
  return lock;
}

void EngineCore::let_callers_in(std::unique_lock<std::mutex>& lock) const {
  callers_cv_.wait(lock, [&] { return callers_waiting_.load() == 0; });
}

void EngineCore::background_loop() {
  if (options_.background_low_priority && !lower_this_thread_priority())
    log(LogLevel::warning, "background_low_priority: the OS refused a lower priority; computing at the normal one");
  std::unique_lock lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [&] { return stopping_ || !scheduler_->idle(); });
    if (stopping_) return;
    step_locked();
    let_callers_in(lock);
  }
}

std::string EngineCore::render_chat(const std::vector<Message>& messages) const {
  if (!chat_template_) fail(ErrorCode::unsupported, "cannot render a chat: {}", chat_template_error_);
  return chat_template_->render(messages, /*add_generation_prompt=*/true);
}

std::shared_ptr<const grammar::TokenTrie> EngineCore::token_trie() const {
  std::call_once(token_trie_once_, [&] {
    const tokenizer::Tokenizer& tok = *tokenizer_;
    std::vector<std::string> pieces(static_cast<std::size_t>(config_.vocab));
    std::vector<bool> usable(pieces.size(), false);
    for (std::int32_t id = 0; id < config_.vocab && id < tok.vocab_size(); ++id) {
      // Control, unknown and unused tokens never appear in constrained text.
      const tokenizer::TokenType t = tok.token_type(id);
      if (t != tokenizer::TokenType::normal && t != tokenizer::TokenType::byte &&
          t != tokenizer::TokenType::user_defined && t != tokenizer::TokenType::undefined)
        continue;
      pieces[static_cast<std::size_t>(id)] = tok.token_to_piece(id);
      usable[static_cast<std::size_t>(id)] = true;
    }
    token_trie_ = std::make_shared<const grammar::TokenTrie>(pieces, usable, tok.end_of_generation_tokens());
  });
  return token_trie_;
}

std::shared_ptr<grammar::CompiledGrammar> EngineCore::compiled_grammar(const SamplingParams& sp) const {
  if (sp.grammar.empty() && sp.json_schema.empty()) return nullptr;
  // One key space for both sources: a schema's key cannot equal a grammar's (a NUL starts it).
  const std::string key = sp.grammar.empty() ? std::string(1, '\0') + sp.json_schema : sp.grammar;
  {
    std::lock_guard lock(grammars_mutex_);
    if (const auto it = grammars_.find(key); it != grammars_.end())
      if (auto shared = it->second.lock()) return shared;
  }
  // Compiled without the lock (a large schema takes a while); two requests racing here each
  // compile, and the later one's is kept for the next.
  auto g = std::make_shared<const grammar::Grammar>(
      grammar::parse_gbnf(sp.grammar.empty() ? grammar::json_schema_to_gbnf(sp.json_schema) : sp.grammar));
  auto compiled = std::make_shared<grammar::CompiledGrammar>(std::move(g), token_trie());
  std::lock_guard lock(grammars_mutex_);
  std::erase_if(grammars_, [](const auto& entry) { return entry.second.expired(); });
  grammars_[key] = compiled;
  return compiled;
}

std::shared_ptr<Sequence> EngineCore::make_sequence(const Request& request, StreamCallback on_chunk) const {
  validate(request.sampling, config_.vocab);
  if (request.sampling.speculative_tokens < 0 || request.sampling.speculative_tokens > kMaxSpeculativeTokens)
    fail(ErrorCode::invalid_argument, "sampling.speculative_tokens must be in [0, {}], got {}", kMaxSpeculativeTokens,
         request.sampling.speculative_tokens);
  if (options_.max_generated_tokens > 0 && request.sampling.max_tokens > options_.max_generated_tokens)
    fail(ErrorCode::invalid_argument, "max_tokens = {} is over this engine's limit, EngineOptions::max_generated_tokens = {}",
         request.sampling.max_tokens, options_.max_generated_tokens);
  const ContextPolicy policy = request.context_policy.value_or(options_.context_policy);
  if (request.context_keep < -1)
    fail(ErrorCode::invalid_argument, "context_keep = {} (it must be -1 or at least 0)", request.context_keep);
  int dropped_messages = 0, keep = 0;
  std::vector<std::int32_t> prompt;
  if (!request.prompt_tokens.empty()) {
    prompt = request.prompt_tokens;
    for (std::int32_t id : prompt)
      if (id < 0 || id >= config_.vocab)
        fail(ErrorCode::invalid_argument, "prompt token {} is outside the vocabulary [0, {})", id, config_.vocab);
  } else if (!request.messages.empty()) {
    prompt = encode_chat(request, policy != ContextPolicy::error, dropped_messages, keep);
  } else {
    prompt = tokenizer_->encode(request.prompt, request.parse_special_tokens, tokenizer_->add_bos());
  }
  if (prompt.empty()) fail(ErrorCode::invalid_argument, "the prompt is empty (0 tokens)");
  if (options_.max_prompt_tokens > 0 && static_cast<int>(prompt.size()) > options_.max_prompt_tokens)
    fail(ErrorCode::context_overflow, "the prompt has {} tokens, over this engine's limit, EngineOptions::max_prompt_tokens = {}",
         prompt.size(), options_.max_prompt_tokens);
  if (static_cast<int>(prompt.size()) >= context_length_)
    fail(ErrorCode::context_overflow, "the prompt has {} tokens but the context holds {} (one more is needed to generate)",
         prompt.size(), context_length_);

  auto seq = std::make_shared<Sequence>(0, request.sampling, config_.vocab, *tokenizer_, std::move(on_chunk));
  if (auto compiled = compiled_grammar(request.sampling))
    seq->constraint = std::make_unique<grammar::TokenConstraint>(std::move(compiled));
  seq->priority = request.priority;
  seq->tokens = std::move(prompt);
  seq->prompt_tokens = static_cast<int>(seq->tokens.size());
  seq->completion.prompt_tokens = seq->prompt_tokens;
  seq->completion.dropped_messages = dropped_messages;
  seq->shift_on_full = policy == ContextPolicy::shift;
  seq->context_keep = std::min(request.context_keep >= 0 ? request.context_keep : keep, context_length_ / 2);
  return seq;
}

std::vector<std::int32_t> EngineCore::encode_rendered(const std::string& text) const {
  const auto& tok = *tokenizer_;
  // Templates that write the BOS text themselves (Llama 3) must not get a second BOS.
  const bool has_bos_text = tok.bos() >= 0 && text.rfind(tok.token_text(tok.bos()), 0) == 0;
  return tok.encode(text, /*parse_special=*/true, tok.add_bos() && !has_bos_text);
}

std::vector<std::int32_t> EngineCore::encode_chat(const Request& request, bool truncate, int& dropped,
                                                  int& system_tokens) const {
  const std::vector<Message>& messages = request.messages;
  const std::size_t first = messages[0].role == "system" ? 1 : 0;
  if (first == 1 && chat_template_) {
    // The system message's tokens: what the prompt shares with the system turn rendered alone.
    const std::vector<std::int32_t> prompt = encode_rendered(render_chat(messages));
    const std::vector<std::int32_t> alone = encode_rendered(chat_template_->render({messages[0]}, false));
    system_tokens = static_cast<int>(std::mismatch(prompt.begin(), prompt.end(), alone.begin(), alone.end()).first -
                                     prompt.begin());
    if (!truncate) return prompt;
  }
  // Where the conversation may start after the system message: at its first turn, or at a later
  // user message (a turn is a user message and the replies that follow it).
  std::vector<std::size_t> starts{first};
  for (std::size_t i = first + 1; i < messages.size(); ++i)
    if (messages[i].role == "user") starts.push_back(i);
  const auto encode_from = [&](std::size_t start) {
    std::vector<Message> kept(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(first));
    kept.insert(kept.end(), messages.begin() + static_cast<std::ptrdiff_t>(start), messages.end());
    return encode_rendered(render_chat(kept));
  };
  const auto fits = [&](const std::vector<std::int32_t>& p) {
    return static_cast<long long>(p.size()) + request.sampling.max_tokens <= context_length_;
  };
  std::vector<std::int32_t> prompt = encode_from(starts[0]);
  if (!truncate || fits(prompt)) return prompt;
  // The fewest dropped turns that fit (a later start is never longer): a binary search, so a
  // long conversation is rendered a few times, not once per turn. When even the last turn
  // alone does not fit it is the prompt, and the context window decides.
  std::size_t lo = 1, hi = starts.size() - 1;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (fits(encode_from(starts[mid]))) hi = mid;
    else lo = mid + 1;
  }
  // Then the cut moves in steps of half the turns that fit, not one turn at a time: the next
  // turns of the conversation keep the same start, so their prompts extend this one and the
  // prefix cache serves it instead of a whole window being prefilled again every turn.
  const std::size_t step = std::max<std::size_t>(1, (starts.size() - lo) / 2);
  lo = std::min(starts.size() - 1, (lo + step - 1) / step * step);
  if (starts.size() > 1) {
    prompt = encode_from(starts[lo]);
    dropped = static_cast<int>(starts[lo] - first);
  }
  return prompt;
}

void EngineCore::submit(const std::shared_ptr<Sequence>& seq, bool allow_response_cache) {
  {
    auto lock = lock_as_caller();
    if (stopping_) fail(ErrorCode::invalid_argument, "submit() on an engine that is shutting down");
    const int in_flight = scheduler_->running() + scheduler_->waiting();
    if (options_.max_requests > 0 && in_flight >= options_.max_requests)
      fail(ErrorCode::busy, "{} requests are in flight, EngineOptions::max_requests = {}: retry later",
           in_flight, options_.max_requests);
    seq->id = next_id_++;
    seq->submitted = Clock::now();
    ++stats_.requests_submitted;
    if (seq->sampling.max_tokens == 0) {  // documented: nothing to generate, no inference
      seq->completion.finish_reason = FinishReason::length;
      finalize(seq);
      return;
    }
    if (allow_response_cache && response_cache_->enabled()) {
      seq->response_key = ResponseCache::key(seq->tokens, seq->sampling);
      if (auto hit = response_cache_->find(seq->response_key)) {
        serve_from_response_cache(seq, std::move(*hit));
        return;
      }
    }
    scheduler_->add(seq);
  }
  work_cv_.notify_one();
}

StepResult EngineCore::run_for(std::chrono::microseconds budget) {
  StepResult result;
  if (background_.joinable()) {
    auto lock = lock_as_caller();
    result.idle = scheduler_->idle();
    return result;
  }
  const auto deadline = Clock::now() + budget;
  auto lock = lock_as_caller();
  const int max_rows = rows_for_budget(budget);
  do {
    let_callers_in(lock);
    const int rows = step_locked(deadline, max_rows);
    if (rows == kStepPaused) {  // the budget is spent; the step continues next call
      result.step_paused = true;
      break;
    }
    if (rows < 0) {
      result.idle = true;
      break;
    }
    ++result.steps;
    result.tokens += rows;
    // A new step runs at least one layer: start one only when a layer like the last step's fits.
  } while (Clock::now() + last_layer_time_ < deadline);
  return result;
}

void EngineCore::wait(const std::shared_ptr<Sequence>& seq) {
  check_not_in_callback();  // its own request cannot finish while its callback runs
  if (background_.joinable()) {
    std::unique_lock lock(finished_mutex_);
    finished_cv_.wait(lock, [&] { return seq->done.load(std::memory_order_acquire); });
    return;
  }
  auto lock = lock_as_caller();
  while (seq->state != SequenceState::finished) {
    if (step_locked() < 0 && seq->state != SequenceState::finished) {
      fail(ErrorCode::internal, "request {} is unfinished but the engine has no work", seq->id);
    } else {
      let_callers_in(lock);
    }
  }
}

void EngineCore::cancel(const std::shared_ptr<Sequence>& seq) {
  auto lock = lock_as_caller();
  if (seq->state == SequenceState::finished) return;
  seq->cancel_requested = true;
  if (seq->state == SequenceState::waiting) {  // never started: end it now
    finish(*seq, FinishReason::cancelled);
    finalize(seq);
  } else {
    cancel_pending_ = true;  // a running one ends at the start of the next step
  }
}

RequestStatus EngineCore::status(const Sequence& seq) const {
  auto lock = lock_as_caller();
  switch (seq.state) {
    case SequenceState::waiting: return RequestStatus::queued;
    case SequenceState::running: return RequestStatus::running;
    case SequenceState::finished: break;
  }
  return RequestStatus::finished;
}

EngineStats EngineCore::stats() const {
  auto lock = lock_as_caller();
  EngineStats s = stats_;
  const BlockPool::Stats p = pool_->stats();
  s.prefix_lookups = p.lookups;
  s.prefix_hit_blocks = p.hit_blocks;
  s.prefix_evictions = p.evictions;
  s.preemptions = scheduler_->preemptions();
  s.response_cache_hits = response_cache_->hits();
  s.running = scheduler_->running();
  s.queued = scheduler_->waiting();
  s.kv_blocks_free = pool_->free_blocks();
  return s;
}

void EngineCore::set_fault_hook(std::function<void(FaultPoint)> hook) {
  auto lock = lock_as_caller();
  fault_hook_ = std::move(hook);
}

void EngineCore::check_block_pool() const {
  auto lock = lock_as_caller();
  pool_->check_invariants();
}

int EngineCore::rows_for_budget(std::chrono::microseconds budget) const {
  if (row_layer_seconds_ <= 0 || budget.count() <= 0) return 0;
  // At least a step of decodes: the running sequences are never starved by the cap.
  const double rows = 0.5 * std::chrono::duration<double>(budget).count() / row_layer_seconds_;
  const double floor = std::max(rows, static_cast<double>(options_.max_sequences));
  return static_cast<int>(std::min(floor, static_cast<double>(options_.max_batch_tokens)));
}

int EngineCore::step_locked(Clock::time_point deadline, int max_rows) {
  // Nothing may escape a step: on the background thread it would end the host's process.
  // Failures of the forward pass or of sampling end the step's requests (run_step); anything
  // else ends every unfinished request, so no waiter hangs and the blocks all come back.
  try {
    return run_step(deadline, max_rows);
  } catch (const std::exception& e) {
    abort_all(e.what());
  } catch (...) {
    abort_all("an unknown exception");
  }
  return 0;
}

void EngineCore::sweep_cancelled() {
  // Requests cancelled while running end before the step, freeing their blocks for it. The
  // sweep runs only when cancel() flagged one, not on every step.
  if (!cancel_pending_) return;
  cancel_pending_ = false;
  for (const auto& seq : scheduler_->sequences())
    if (seq->cancel_requested) {
      finish(*seq, FinishReason::cancelled);
      finalize(seq);
    }
}

int EngineCore::run_step(Clock::time_point deadline, int max_rows) {
  if (!step_paused_) {
    sweep_cancelled();
    inject(FaultPoint::schedule);
    std::vector<std::shared_ptr<Sequence>> finished;
    step_ = scheduler_->schedule(batch_, finished, max_rows);
    for (const auto& seq : finished) finalize(seq);
    if (step_.empty()) return finished.empty() ? -1 : 0;
  }
  // Two failure points, one rollback: until commit() nothing of the step is published, and
  // finalize() returns every block the step's sequences hold, so the pool stays whole.
  try {
    if (!step_paused_) {
      inject(FaultPoint::forward);
      step_forward_time_ = {};
      backend_->begin_forward(batch_, *kv_, logits_);
    }
    const auto start = Clock::now();
    step_paused_ = !backend_->advance_forward(deadline);
    step_forward_time_ += Clock::now() - start;
    if (step_paused_) return kStepPaused;
  } catch (const std::exception& e) {
    step_paused_ = false;
    ++stats_.steps;
    fail_step(std::exchange(step_, {}), e.what());
    return 0;
  }
  return finish_step();
}

int EngineCore::finish_step() {
  const std::vector<ScheduledSequence> step = std::exchange(step_, {});
  ++stats_.steps;
  last_layer_time_ = step_forward_time_ / std::max(1, config_.layers);
  if (const int rows = batch_.rows(); rows >= 32) {
    const double seconds = std::chrono::duration<double>(step_forward_time_).count() / (rows * config_.layers);
    row_layer_seconds_ = row_layer_seconds_ > 0 ? 0.7 * row_layer_seconds_ + 0.3 * seconds : seconds;
  }
  try {
    inject(FaultPoint::sample);
    scheduler_->commit(step);
    for (const ScheduledSequence& s : step) {
      if (s.logit_index < 0) continue;
      sample_rows(s);
      if (s.sequence->state == SequenceState::running && static_cast<int>(s.sequence->tokens.size()) >= context_length_)
        shift(s.sequence);
    }
  } catch (const std::exception& e) {
    fail_step(step, e.what());
    return 0;
  }
  for (const ScheduledSequence& s : step)
    if (s.sequence->state == SequenceState::finished) finalize(s.sequence);
  return batch_.rows();
}

void EngineCore::fail_step(const std::vector<ScheduledSequence>& step, const std::string& why) {
  log(LogLevel::error, "engine step failed: {}", why);
  // Sequences that finished in this step before the failure keep their finish reason.
  for (const ScheduledSequence& s : step) {
    Sequence& seq = *s.sequence;
    if (seq.state != SequenceState::finished) {
      seq.completion.error = "the engine step failed: " + why;
      seq.completion.finish_reason = FinishReason::error;
    }
    finalize(s.sequence);
  }
}

void EngineCore::abort_all(const std::string& why) {
  log(LogLevel::error, "engine failed outside a step's computation: {}; ending every request", why);
  for (const auto& seq : scheduler_->sequences()) {
    seq->completion.error = "the engine failed: " + why;
    seq->completion.finish_reason = FinishReason::error;
    finalize(seq);
  }
}

void EngineCore::on_token(Sequence& seq, float* logits) {
  const auto now = Clock::now();
  if (!seq.first_token) seq.first_token = now;
  seq.last_token = now;
  float logprob = 0;
  std::vector<TokenLogprob> top;
  const bool want_top = seq.sampling.top_logprobs > 0;
  // A grammar restricts the choice to the tokens it allows (the sampler masks the row, or asks
  // about its best candidates only).
  const std::int32_t id = seq.sampler.sample(logits, seq.tokens, seq.sampling.logprobs ? &logprob : nullptr,
                                             want_top ? &top : nullptr, seq.constraint.get());

  const auto t0 = Clock::now();
  if (tokenizer_->is_end_of_generation(id) && !seq.sampling.ignore_eos) {
    finish(seq, FinishReason::stop);
  } else {
    if (seq.constraint) seq.constraint->accept(id);
    seq.tokens.push_back(id);
    seq.completion.tokens.push_back(id);
    if (seq.sampling.logprobs) seq.completion.logprobs.push_back(logprob);
    if (want_top) seq.completion.top_logprobs.push_back(std::move(top));
    const float* lp = seq.sampling.logprobs ? &seq.completion.logprobs.back() : nullptr;
    const std::vector<TokenLogprob>* tp = want_top ? &seq.completion.top_logprobs.back() : nullptr;
    const StopMatcher::Result r = seq.stops.push(seq.decoder.push(id));
    seq.completion.text += r.text;
    if (r.stopped) {
      emit(seq, r.text, &id, 1, false, lp, tp);
      finish(seq, FinishReason::stop, /*discard_held_text=*/true);
    } else {
      emit(seq, r.text, &id, 1, false, lp, tp);
      if (seq.cancel_requested) finish(seq, FinishReason::cancelled);
      // A complete grammar allows only an end token next: finish without computing it.
      else if (seq.constraint && seq.constraint->complete()) finish(seq, FinishReason::stop);
      else if (seq.generated() >= seq.sampling.max_tokens) finish(seq, FinishReason::length);
      else if (static_cast<int>(seq.tokens.size()) >= context_length_ && !seq.shift_on_full)
        finish(seq, FinishReason::context);
    }
  }
  seq.response_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
}

void EngineCore::sample_rows(const ScheduledSequence& s) {
  Sequence& seq = *s.sequence;
  const auto row = [&](std::size_t i) {
    return logits_.data() + (static_cast<std::size_t>(s.logit_index) + i) * static_cast<std::size_t>(config_.vocab);
  };
  on_token(seq, row(0));
  // Draft token i is accepted when the token sampled at its place, from the logits of the row
  // before it, is that token; then its row's K/V is the token's own and its logits give the next
  // token. This is the standard acceptance rule for a draft that proposes one token with
  // certainty (accepted with probability p(token); otherwise the sample is drawn from p without
  // it), and as every row is sampled in order with the sequence's own sampler and RNG, the
  // output is token for token the one without speculation, greedy or seeded.
  std::size_t accepted = 0;
  while (accepted < s.draft.size() && seq.state == SequenceState::running &&
         seq.tokens.back() == s.draft[accepted]) {
    scheduler_->advance(seq, 1);
    ++accepted;
    on_token(seq, row(accepted));
  }
  if (!s.draft.empty()) {
    const int proposed = static_cast<int>(s.draft.size()), kept = static_cast<int>(accepted);
    seq.draft_length = kept == proposed ? std::min(seq.sampling.speculative_tokens, seq.draft_length + 2)
                                        : std::max(1, kept + 1);
  }
  seq.completion.speculative_proposed += static_cast<int>(s.draft.size());
  seq.completion.speculative_accepted += static_cast<int>(accepted);
}

void EngineCore::shift(const std::shared_ptr<Sequence>& seq) {
  // Keep the first context_keep tokens and the newer half of the rest; the kept tokens are
  // computed again from the start (their blocks at the front are likely still cached).
  const int keep = seq->context_keep;
  const int drop = (static_cast<int>(seq->tokens.size()) - keep) / 2;
  seq->tokens.erase(seq->tokens.begin() + keep, seq->tokens.begin() + keep + drop);
  seq->shifted_tokens += drop;
  ++seq->completion.context_shifts;
  scheduler_->recompute(seq);
}

void EngineCore::emit(Sequence& seq, const std::string& text, const std::int32_t* tokens,
                      std::size_t token_count, bool last, const float* logprobs,
                      const std::vector<TokenLogprob>* top_logprobs) {
  if (!seq.on_chunk) return;
  Chunk chunk;
  chunk.text = text;
  chunk.tokens = tokens;
  chunk.token_count = token_count;
  chunk.logprobs = logprobs;
  chunk.top_logprobs = top_logprobs;
  chunk.completion = last ? &seq.completion : nullptr;
  bool go_on = true;
  try {
    run_callback([&] { go_on = seq.on_chunk(chunk); });
  } catch (const std::exception& e) {
    // A throwing callback must not unwind through the engine step; it stops its request.
    seq.completion.error = std::string("the stream callback threw an exception: ") + e.what();
    go_on = false;
  } catch (...) {
    seq.completion.error = "the stream callback threw an exception";
    go_on = false;
  }
  if (!go_on && !last) seq.cancel_requested = true;
}

void EngineCore::finish(Sequence& seq, FinishReason reason, bool discard_held_text) {
  if (!discard_held_text) {
    // Release the text held back for incomplete UTF-8 or a possible stop string.
    std::string tail = seq.stops.push(seq.decoder.flush()).text;
    tail += seq.stops.flush();
    seq.completion.text += tail;
    seq.pending_tail = std::move(tail);
  }
  seq.completion.finish_reason = reason;
  seq.state = SequenceState::finished;
}

void EngineCore::serve_from_response_cache(const std::shared_ptr<Sequence>& seq, Completion hit) {
  const int prompt_tokens = seq->completion.prompt_tokens;
  seq->completion = std::move(hit);
  seq->completion.prompt_tokens = prompt_tokens;
  seq->completion.cached_prompt_tokens = prompt_tokens;
  seq->completion.from_response_cache = true;
  seq->completion.speculative_proposed = seq->completion.speculative_accepted = 0;  // nothing computed
  seq->completion.timings = {};
  seq->first_scheduled = seq->first_token = seq->last_token = Clock::now();
  const Completion& c = seq->completion;
  emit(*seq, c.text, c.tokens.data(), c.tokens.size(), false, c.logprobs.empty() ? nullptr : c.logprobs.data(),
       c.top_logprobs.empty() ? nullptr : c.top_logprobs.data());
  seq->state = SequenceState::finished;
  finalize(seq);
}

void EngineCore::finalize(const std::shared_ptr<Sequence>& seq) {
  scheduler_->remove(seq);  // releases its blocks; published ones stay in the prefix cache
  Completion& c = seq->completion;
  ++stats_.requests_finished;
  stats_.prompt_tokens += static_cast<std::uint64_t>(c.prompt_tokens);
  stats_.prompt_tokens_reused += static_cast<std::uint64_t>(c.cached_prompt_tokens);
  stats_.generated_tokens += c.tokens.size();
  stats_.speculative_proposed += static_cast<std::uint64_t>(c.speculative_proposed);
  stats_.speculative_accepted += static_cast<std::uint64_t>(c.speculative_accepted);
  if (!seq->response_key.empty() && !c.from_response_cache) response_cache_->insert(seq->response_key, c);
  const auto end = Clock::now();
  c.generated_tokens = static_cast<int>(c.tokens.size());
  Timings& t = c.timings;
  t.load_ms = load_ms_;
  if (seq->first_scheduled) t.queue_ms = ms_between(seq->submitted, *seq->first_scheduled);
  else t.queue_ms = ms_between(seq->submitted, end);
  if (seq->first_token) {
    t.prefill_ms = ms_between(*seq->first_scheduled, *seq->first_token);
    t.time_to_first_token_ms = ms_between(seq->submitted, *seq->first_token);
    t.decode_ms = ms_between(*seq->first_token, *seq->last_token);
    if (c.generated_tokens > 1) t.time_per_output_token_ms = t.decode_ms / (c.generated_tokens - 1);
  }
  t.response_ms = seq->response_seconds * 1000.0;
  const auto t0 = Clock::now();
  emit(*seq, seq->pending_tail, nullptr, 0, /*last=*/true);
  // The callback is done: dropping it now breaks the cycle a host creates when the callback
  // captures the request's own handle (handle -> sequence -> callback -> handle).
  seq->on_chunk = nullptr;
  t.response_ms += ms_between(t0, Clock::now());
  t.total_ms = std::max(ms_between(seq->submitted, Clock::now()), 1e-6);
  {
    std::lock_guard lock(finished_mutex_);  // a waiter between its check and its sleep misses no wake-up
    seq->done.store(true, std::memory_order_release);
  }
  finished_cv_.notify_all();
}

}  // namespace ember::runtime
