// The C ABI's structs: struct_size handling, defaults, conversion to the C++ types, and the
// library-owned ember_completion.
#include "capi/capi.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>

namespace ember::capi {
namespace {

// The size each growable struct had in ember 0.1, the smallest struct_size a caller can pass.
// When fields are appended, these stay as they are and sizeof grows.
template <class T>
constexpr std::size_t kFirstSize = sizeof(T);
// ember 0.1's options ended at log_user_data; the fields after it were appended since.
template <>
constexpr std::size_t kFirstSize<ember_engine_options> = offsetof(ember_engine_options, prefix_store_path);
// ember 0.1's sampling ended at logprobs.
template <>
constexpr std::size_t kFirstSize<ember_sampling> = offsetof(ember_sampling, top_logprobs);
// ember 0.1's request parameters ended at priority.
template <>
constexpr std::size_t kFirstSize<ember_request_params> = offsetof(ember_request_params, context_policy);
// ember 0.1's step result ended at idle.
template <>
constexpr std::size_t kFirstSize<ember_step_result> = offsetof(ember_step_result, step_paused);
// ember 0.1's stats ended at kv_blocks_free.
template <>
constexpr std::size_t kFirstSize<ember_stats> = offsetof(ember_stats, speculative_proposed);
// ember 0.1's model info ended at load_ms.
template <>
constexpr std::size_t kFirstSize<ember_model_info> = offsetof(ember_model_info, weight_format);

template <class T>
void check_struct_size(std::size_t size, const char* type) {
  if (size < kFirstSize<T> || size > sizeof(T)) {
    fail(ErrorCode::invalid_argument,
         "{}.struct_size is {} but this library knows sizes {}..{} (set it to sizeof({}); a larger "
         "one means the program was built against a newer ember.h)",
         type, size, kFirstSize<T>, sizeof(T), type);
  }
}

// The caller's struct over the defaults, so fields an older caller does not know keep them.
template <class T>
T read_sized(const T& in, const T& defaults, const char* type) {
  check_struct_size<T>(in.struct_size, type);
  T out = defaults;
  std::memcpy(static_cast<void*>(&out), &in, in.struct_size);
  return out;
}

// Writes the first `out->struct_size` bytes of `value`, keeping the caller's struct_size.
template <class T>
void write_sized(T* out, T value, const char* type) {
  if (out == nullptr) fail(ErrorCode::invalid_argument, "the {} output is NULL", type);
  check_struct_size<T>(out->struct_size, type);
  value.struct_size = out->struct_size;
  std::memcpy(static_cast<void*>(out), &value, out->struct_size);
}

template <class T>
void init_sized(T* out, std::size_t size, const T& defaults, const char* type) {
  if (out == nullptr) fail(ErrorCode::invalid_argument, "{} to initialise is NULL", type);
  check_struct_size<T>(size, type);
  std::memcpy(static_cast<void*>(out), &defaults, size);
  out->struct_size = size;
}

ContextPolicy context_policy_of(long long value, const char* field) {
  switch (value) {
    case EMBER_CONTEXT_ERROR: return ContextPolicy::error;
    case EMBER_CONTEXT_TRUNCATE: return ContextPolicy::truncate;
    case EMBER_CONTEXT_SHIFT: return ContextPolicy::shift;
  }
  fail(ErrorCode::invalid_argument, "{} = {} is not an ember_context_policy", field, value);
}

ember_engine_options default_options() {
  const EngineOptions d;
  ember_engine_options o{};
  o.struct_size = sizeof o;
  o.precision = d.precision == Precision::fp32 ? EMBER_PRECISION_FP32 : EMBER_PRECISION_INT8;
  o.device_type = d.device.type == DeviceType::cuda ? EMBER_DEVICE_CUDA : EMBER_DEVICE_CPU;
  o.device_index = d.device.index;
  o.threads = d.threads;
  o.context_length = d.context_length;
  o.kv_cache_type = d.kv_cache_type == KvCacheType::f32    ? EMBER_KV_CACHE_F32
                    : d.kv_cache_type == KvCacheType::int8 ? EMBER_KV_CACHE_INT8
                                                           : EMBER_KV_CACHE_F16;
  o.kv_cache_bytes = d.kv_cache_bytes;
  o.kv_block_size = d.kv_block_size;
  o.max_batch_tokens = d.max_batch_tokens;
  o.max_sequences = d.max_sequences;
  o.prefix_cache = d.prefix_cache ? 1 : 0;
  o.response_cache_bytes = d.response_cache_bytes;
  o.background_thread = d.background_thread ? 1 : 0;
  o.max_prompt_tokens = d.max_prompt_tokens;
  o.max_generated_tokens = d.max_generated_tokens;
  o.max_requests = d.max_requests;
  o.context_policy = static_cast<ember_context_policy>(d.context_policy);
  o.weight_format = d.weight_format == WeightFormat::w8a8 ? EMBER_WEIGHTS_W8A8 : EMBER_WEIGHTS_AUTOMATIC;
  o.background_low_priority = d.background_low_priority ? 1 : 0;
  o.batch_min_requests = d.batch_min_requests;
  o.batch_max_wait_ms = static_cast<std::int32_t>(d.batch_max_wait.count());
  return o;
}

// Rows of equal width (the widest row's), padded with {-1, -infinity}; returns the width.
std::size_t flatten_top_logprobs(const std::vector<TokenLogprob>* rows, std::size_t count,
                                 std::vector<ember_token_logprob>& out) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < count; ++i) width = std::max(width, rows[i].size());
  out.assign(count * width, ember_token_logprob{-1, -std::numeric_limits<float>::infinity()});
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t k = 0; k < rows[i].size(); ++k) out[i * width + k] = {rows[i][k].token, rows[i][k].logprob};
  return width;
}

ember_sampling default_sampling() {
  const SamplingParams d;
  ember_sampling s{};
  s.struct_size = sizeof s;
  s.max_tokens = d.max_tokens;
  s.temperature = d.temperature;
  s.top_k = d.top_k;
  s.top_p = d.top_p;
  s.min_p = d.min_p;
  s.repetition_penalty = d.repetition_penalty;
  s.presence_penalty = d.presence_penalty;
  s.frequency_penalty = d.frequency_penalty;
  s.penalty_last_n = d.penalty_last_n;
  s.seed = d.seed;
  s.ignore_eos = d.ignore_eos ? 1 : 0;
  s.logprobs = d.logprobs ? 1 : 0;
  s.speculative_tokens = d.speculative_tokens;
  s.reasoning_budget = d.reasoning_budget;
  s.close_at_limit = d.close_at_limit ? 1 : 0;
  return s;
}

ember_request_params default_params() {
  const Request d;
  ember_request_params p{};
  p.struct_size = sizeof p;
  p.parse_special_tokens = d.parse_special_tokens ? 1 : 0;
  p.priority = d.priority;
  p.context_policy = -1;
  p.context_keep = d.context_keep;
  return p;
}

std::size_t to_size(std::uint64_t bytes, const char* field) {
  if (bytes > std::numeric_limits<std::size_t>::max()) {
    fail(ErrorCode::invalid_argument, "ember_engine_options.{} = {} does not fit in size_t", field, bytes);
  }
  return static_cast<std::size_t>(bytes);
}

LoadProgressCallback to_cpp(ember_load_progress_fn progress, void* user_data) {
  if (progress == nullptr) return {};
  return [progress, user_data](LoadPhase phase, float fraction) {
    return progress(static_cast<ember_load_phase>(phase), fraction, user_data) != 0;
  };
}

LogCallback to_cpp(ember_log_fn log, void* user_data) {
  if (log == nullptr) return {};
  return [log, user_data](LogLevel level, std::string_view message) {
    const std::string text(message);  // the C side wants a NUL-terminated string
    log(static_cast<ember_log_level>(level), text.c_str(), user_data);
  };
}

}  // namespace

EngineOptions to_cpp(const ember_engine_options& in) {
  const ember_engine_options o = read_sized(in, default_options(), "ember_engine_options");
  EngineOptions out;
  switch (raw_enum(o.precision)) {
    case EMBER_PRECISION_INT8: out.precision = Precision::int8; break;
    case EMBER_PRECISION_FP32: out.precision = Precision::fp32; break;
    case EMBER_PRECISION_FP16: out.precision = Precision::fp16; break;
    default:
      fail(ErrorCode::invalid_argument, "ember_engine_options.precision = {} is not an ember_precision",
           raw_enum(o.precision));
  }
  switch (raw_enum(o.kv_cache_type)) {
    case EMBER_KV_CACHE_F16: out.kv_cache_type = KvCacheType::f16; break;
    case EMBER_KV_CACHE_F32: out.kv_cache_type = KvCacheType::f32; break;
    case EMBER_KV_CACHE_INT8: out.kv_cache_type = KvCacheType::int8; break;
    default:
      fail(ErrorCode::invalid_argument, "ember_engine_options.kv_cache_type = {} is not an ember_kv_cache_type",
           raw_enum(o.kv_cache_type));
  }
  switch (raw_enum(o.weight_format)) {
    case EMBER_WEIGHTS_AUTOMATIC: out.weight_format = WeightFormat::automatic; break;
    case EMBER_WEIGHTS_W8A8: out.weight_format = WeightFormat::w8a8; break;
    default:
      fail(ErrorCode::invalid_argument, "ember_engine_options.weight_format = {} is not an ember_weight_format",
           raw_enum(o.weight_format));
  }
  switch (raw_enum(o.device_type)) {
    case EMBER_DEVICE_CPU: out.device = Device::cpu(); break;
    case EMBER_DEVICE_CUDA: out.device = Device::cuda(o.device_index); break;
    default:
      fail(ErrorCode::invalid_argument, "ember_engine_options.device_type = {} is not an ember_device_type",
           raw_enum(o.device_type));
  }
  out.threads = o.threads;
  out.context_length = o.context_length;
  out.kv_cache_bytes = to_size(o.kv_cache_bytes, "kv_cache_bytes");
  out.kv_block_size = o.kv_block_size;
  out.max_batch_tokens = o.max_batch_tokens;
  out.max_sequences = o.max_sequences;
  out.prefix_cache = o.prefix_cache != 0;
  out.response_cache_bytes = to_size(o.response_cache_bytes, "response_cache_bytes");
  out.background_thread = o.background_thread != 0;
  out.background_low_priority = o.background_low_priority != 0;
  out.batch_min_requests = o.batch_min_requests;
  out.batch_max_wait = std::chrono::milliseconds(o.batch_max_wait_ms);
  out.log = to_cpp(o.log, o.log_user_data);
  if (o.prefix_store_path != nullptr) out.prefix_store_path = o.prefix_store_path;
  out.on_load_progress = to_cpp(o.on_load_progress, o.load_progress_user_data);
  if (o.weight_cache_dir != nullptr) out.weight_cache_dir = o.weight_cache_dir;
  if (o.chat_template != nullptr) out.chat_template = o.chat_template;
  out.max_prompt_tokens = o.max_prompt_tokens;
  out.max_generated_tokens = o.max_generated_tokens;
  out.max_requests = o.max_requests;
  out.context_policy = context_policy_of(raw_enum(o.context_policy), "ember_engine_options.context_policy");
  return out;
}

// Range checks (NaN temperature, ...) are the engine's, the same for C and C++ callers.
SamplingParams to_cpp(const ember_sampling* in) {
  SamplingParams out;
  if (in == nullptr) return out;
  const ember_sampling s = read_sized(*in, default_sampling(), "ember_sampling");
  out.max_tokens = s.max_tokens;
  out.temperature = s.temperature;
  out.top_k = s.top_k;
  out.top_p = s.top_p;
  out.min_p = s.min_p;
  out.repetition_penalty = s.repetition_penalty;
  out.presence_penalty = s.presence_penalty;
  out.frequency_penalty = s.frequency_penalty;
  out.penalty_last_n = s.penalty_last_n;
  out.seed = s.seed;
  out.ignore_eos = s.ignore_eos != 0;
  out.logprobs = s.logprobs != 0;
  out.top_logprobs = s.top_logprobs;
  out.speculative_tokens = s.speculative_tokens;
  out.reasoning_budget = s.reasoning_budget;
  out.close_at_limit = s.close_at_limit != 0;
  if (s.adapter_count > 0 && s.adapters == nullptr)
    fail(ErrorCode::invalid_argument, "ember_sampling.adapters is NULL but adapter_count is {}", s.adapter_count);
  for (std::size_t i = 0; i < s.adapter_count; ++i) out.adapters.push_back({s.adapters[i].id, s.adapters[i].scale});
  if (s.logit_bias_count > 0 && s.logit_bias == nullptr)
    fail(ErrorCode::invalid_argument, "ember_sampling.logit_bias is NULL but logit_bias_count is {}",
         s.logit_bias_count);
  for (std::size_t i = 0; i < s.logit_bias_count; ++i)
    out.logit_bias.push_back({s.logit_bias[i].token, s.logit_bias[i].bias});
  if (s.grammar != nullptr) out.grammar = s.grammar;
  if (s.json_schema != nullptr) out.json_schema = s.json_schema;
  if (s.stop_count > 0 && s.stop == nullptr) {
    fail(ErrorCode::invalid_argument, "ember_sampling.stop is NULL but stop_count is {}", s.stop_count);
  }
  for (std::size_t i = 0; i < s.stop_count; ++i) {
    if (s.stop[i] == nullptr) fail(ErrorCode::invalid_argument, "ember_sampling.stop[{}] is NULL", i);
    out.stop.emplace_back(s.stop[i]);
  }
  return out;
}

std::vector<Message> to_cpp(const ember_message* messages, std::size_t count) {
  if (count > 0 && messages == nullptr) {
    fail(ErrorCode::invalid_argument, "messages is NULL but message_count is {}", count);
  }
  std::vector<Message> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (messages[i].role == nullptr || messages[i].content == nullptr) {
      fail(ErrorCode::invalid_argument, "messages[{}] has a NULL {}", i,
           messages[i].role == nullptr ? "role" : "content");
    }
    out.push_back(Message{messages[i].role, messages[i].content});
  }
  return out;
}

Request to_cpp(const ember_request_params& in) {
  const ember_request_params p = read_sized(in, default_params(), "ember_request_params");
  Request out;
  if (p.prompt != nullptr) out.prompt = p.prompt;
  out.messages = to_cpp(p.messages, p.message_count);
  if (p.prompt_token_count > 0 && p.prompt_tokens == nullptr) {
    fail(ErrorCode::invalid_argument, "ember_request_params.prompt_tokens is NULL but prompt_token_count is {}",
         p.prompt_token_count);
  }
  out.prompt_tokens.assign(p.prompt_tokens, p.prompt_tokens + p.prompt_token_count);
  if (p.prompt == nullptr && out.messages.empty() && out.prompt_tokens.empty()) {
    fail(ErrorCode::invalid_argument, "ember_request_params has no prompt, messages or prompt_tokens");
  }
  out.sampling = to_cpp(p.sampling);
  out.parse_special_tokens = p.parse_special_tokens != 0;
  out.priority = p.priority;
  if (p.context_policy != -1)
    out.context_policy = context_policy_of(p.context_policy, "ember_request_params.context_policy");
  out.context_keep = p.context_keep;
  return out;
}

StreamCallback to_cpp(ember_stream_fn on_chunk, void* user_data) {
  if (on_chunk == nullptr) return {};
  return [on_chunk, user_data](const Chunk& c) {
    const std::string text(c.text);  // NUL-terminated for C
    ember_chunk chunk{};
    chunk.text = text.c_str();
    chunk.text_length = text.size();
    chunk.tokens = c.tokens;
    chunk.token_count = c.token_count;
    chunk.logprobs = c.logprobs;
    chunk.stream = static_cast<ember_chunk_stream>(c.stream);
    std::vector<ember_token_logprob> top;
    if (c.top_logprobs != nullptr) {
      chunk.top_logprobs_per_token = flatten_top_logprobs(c.top_logprobs, c.token_count, top);
      chunk.top_logprobs = top.data();
    }
    CompletionBox last{};
    if (c.completion != nullptr) {
      point_at(last, *c.completion, kBorrowedMagic);
      chunk.completion = &last.pub;
    }
    return on_chunk(&chunk, user_data) != 0;
  };
}

void point_at(CompletionBox& box, const Completion& c, std::uint32_t magic) {
  const Timings& t = c.timings;
  box.timings = ember_timings{
      t.load_ms,     t.queue_ms, t.prefill_ms,  t.time_to_first_token_ms, t.decode_ms, t.time_per_output_token_ms,
      t.response_ms, t.total_ms, t.reasoning_ms};
  ember_completion& p = box.pub;
  p.text = c.text.c_str();
  p.text_length = c.text.size();
  p.tokens = c.tokens.empty() ? nullptr : c.tokens.data();
  p.token_count = c.tokens.size();
  p.logprobs = c.logprobs.empty() ? nullptr : c.logprobs.data();
  p.logprob_count = c.logprobs.size();
  box.top_logprobs.clear();
  p.top_logprobs_per_token = flatten_top_logprobs(c.top_logprobs.data(), c.top_logprobs.size(), box.top_logprobs);
  p.top_logprobs = box.top_logprobs.empty() ? nullptr : box.top_logprobs.data();
  p.finish_reason = static_cast<ember_finish_reason>(c.finish_reason);
  p.prompt_tokens = c.prompt_tokens;
  p.cached_prompt_tokens = c.cached_prompt_tokens;
  p.generated_tokens = c.generated_tokens;
  p.from_response_cache = c.from_response_cache ? 1 : 0;
  p.dropped_messages = c.dropped_messages;
  p.context_shifts = c.context_shifts;
  p.speculative_proposed = c.speculative_proposed;
  p.speculative_accepted = c.speculative_accepted;
  p.timings = &box.timings;
  p.error = c.error.c_str();
  p.reasoning = c.reasoning.c_str();
  p.reasoning_length = c.reasoning.size();
  p.reasoning_tokens = c.reasoning_tokens;
  p.closed_early = c.closed_early ? 1 : 0;
  box.schema_relaxed.clear();
  for (const std::string& what : c.schema_relaxed) box.schema_relaxed.push_back(what.c_str());
  p.schema_relaxed = box.schema_relaxed.empty() ? nullptr : box.schema_relaxed.data();
  p.schema_relaxed_count = box.schema_relaxed.size();
  box.magic = magic;
}

ember_completion* new_completion(Completion&& completion) {
  auto owned = std::make_unique<Completion>(std::move(completion));
  auto box = std::make_unique<CompletionBox>();
  point_at(*box, *owned, kCompletionMagic);
  box->owned = owned.release();
  return &box.release()->pub;
}

void write_stats(ember_stats* out, const EngineStats& s) {
  ember_stats v{};
  v.requests_submitted = s.requests_submitted;
  v.requests_finished = s.requests_finished;
  v.steps = s.steps;
  v.prompt_tokens = s.prompt_tokens;
  v.prompt_tokens_reused = s.prompt_tokens_reused;
  v.generated_tokens = s.generated_tokens;
  v.preemptions = s.preemptions;
  v.prefix_lookups = s.prefix_lookups;
  v.prefix_hit_blocks = s.prefix_hit_blocks;
  v.prefix_evictions = s.prefix_evictions;
  v.response_cache_hits = s.response_cache_hits;
  v.running = s.running;
  v.queued = s.queued;
  v.kv_blocks_total = s.kv_blocks_total;
  v.kv_blocks_free = s.kv_blocks_free;
  v.speculative_proposed = s.speculative_proposed;
  v.speculative_accepted = s.speculative_accepted;
  v.routed_layers = s.routed_layers;
  v.experts_run = s.experts_run;
  v.embedding_sequences = s.embedding_sequences;
  v.mixed_steps = s.mixed_steps;
  write_sized(out, v, "ember_stats");
}

void check_step_result(const ember_step_result& out) {
  check_struct_size<ember_step_result>(out.struct_size, "ember_step_result");
}

void write_step(ember_step_result* out, const StepResult& r) {
  ember_step_result v{};
  v.steps = r.steps;
  v.tokens = r.tokens;
  v.idle = r.idle ? 1 : 0;
  v.step_paused = r.step_paused ? 1 : 0;
  write_sized(out, v, "ember_step_result");
}

void write_info(ember_model_info* out, const ember_engine& engine, const ModelInfo& i) {
  ember_model_info v{};
  v.name = engine.model_name.c_str();
  v.architecture = engine.model_architecture.c_str();
  v.layers = i.layers;
  v.embedding = i.embedding;
  v.heads = i.heads;
  v.kv_heads = i.kv_heads;
  v.vocab = i.vocab;
  v.context_length = i.context_length;
  v.parameters = i.parameters;
  v.has_chat_template = i.has_chat_template ? 1 : 0;
  v.load_ms = engine.engine.load_ms();
  v.weight_format = engine.weight_format.c_str();
  write_sized(out, v, "ember_model_info");
}

}  // namespace ember::capi

using namespace ember::capi;

extern "C" {

EMBER_API ember_status ember_engine_options_init(ember_engine_options* options, size_t struct_size) {
  return guarded(nullptr, [&] { init_sized(options, struct_size, default_options(), "ember_engine_options"); });
}

EMBER_API ember_status ember_sampling_init(ember_sampling* sampling, size_t struct_size) {
  return guarded(nullptr, [&] { init_sized(sampling, struct_size, default_sampling(), "ember_sampling"); });
}

EMBER_API ember_status ember_request_params_init(ember_request_params* params, size_t struct_size) {
  return guarded(nullptr, [&] { init_sized(params, struct_size, default_params(), "ember_request_params"); });
}

}  // extern "C"
