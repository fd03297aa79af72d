// ember: embeddable LLM inference. The whole C++ API is this header (C++17).
//
// Stability: every name in namespace `ember` declared here is the public API; `ember::runtime`
// is only forward-declared here and, like everything outside include/ember/, internal and free
// to change in any release. Within a 0.x minor version the API stays source compatible.
//
// Thread-safety contract:
//   * An Engine's model weights are immutable after open(); its mutable state (KV cache,
//     scheduler, per-request sampler state) is owned by the engine and guarded by one mutex.
//   * Every Engine member function may be called from any thread, concurrently. generate(),
//     chat() and RequestHandle::wait() run engine steps on the calling thread when there is no
//     background thread; concurrent requests are batched together whichever thread steps.
//     A call made while another thread is stepping waits at most for the step in progress:
//     the stepping thread lets waiting callers in between two steps, so a request submitted
//     mid-generation joins the next step.
//   * Callbacks run on the thread that runs the engine step, with the engine's lock held: a
//     callback must not call back into the same Engine (such a call throws
//     Error(invalid_argument) instead of deadlocking); RequestHandle::cancel_soon() is the one
//     call that takes no lock and works from a callback. An exception thrown by a callback stops
//     its request (finish reason `cancelled`, Completion::error says why) and goes no further;
//     one thrown by the log callback loses its line. Nothing escapes into ember's own thread.
//   * Moving or destroying an Engine must not race with calls on it, nor happen inside one of its
//     callbacks. Destroying it stops it on the destroying thread: the step in progress finishes,
//     unfinished requests end `cancelled` (their waiters return), and no callback of it runs
//     after ~Engine returns, whatever other threads do with RequestHandles meanwhile.
//   * ember never prints to stdout/stderr; install EngineOptions::log to see its log lines.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "export.h"

namespace ember {

// ---- errors ----------------------------------------------------------------------------------

enum class ErrorCode {
  invalid_argument,  // a parameter out of range, a bad handle, a malformed request
  io,                // a file could not be opened, mapped, read or written
  invalid_model,     // the model file is malformed or inconsistent
  unsupported,       // a valid file that ember does not support (architecture, tensor type)
  out_of_memory,     // an allocation failed or a configured limit was reached
  context_overflow,  // the prompt does not fit the context window
  cancelled,         // the caller cancelled the operation
  internal,          // a bug in ember: please report it
  busy,              // EngineOptions::max_requests are in flight: retry later (HTTP 429)
};

EMBER_API const char* to_string(ErrorCode code) noexcept;

// Every recoverable failure in ember is thrown as an Error; ember never aborts on bad input.
class EMBER_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

// ---- options -----------------------------------------------------------------------------------

enum class Precision {
  int8,  // INT8 weights and activations, INT32 accumulation (the fast default, CPU and CUDA)
  fp32,  // FP32 weights and matrix products: the CPU speed baseline (CPU only)
  fp16,  // FP16 weights and activations, FP32 accumulation: the CUDA baseline (CUDA only)
};

// How Precision::int8 keeps a model's matrices on the CPU.
enum class WeightFormat {
  automatic,  // the file's own: 4-bit matrices (Q4_0, Q4_1, Q4_K) stay 4-bit and multiply INT8
              // activations quantized per group of 32 (w4a8, about half the memory and the
              // bytes per token of w8a8), a Q8_0 lm_head keeps its groups of 32 too (w8a8-g32,
              // activations in two INT8 terms), the others become w8a8. Grouped
              // weights need AVX-512 VNNI; without it every matrix is w8a8
  w8a8,       // every matrix requantized to INT8 per output channel, INT8 activations per row,
              // smoothed on a calibration text (the only form of 8-bit and wider matrices),
              // but for a Q8_0 lm_head, which keeps its groups (w8a8-g32) in both formats
};

EMBER_API const char* to_string(WeightFormat format) noexcept;

enum class DeviceType { cpu, cuda };

// Where the engine computes. Device::cuda() needs a library built with CUDA (EMBER_CUDA) and an
// NVIDIA GPU; otherwise Engine::open throws Error(unsupported).
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // the CUDA device ordinal (cudaSetDevice numbering); 0 for the CPU

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
};

enum class KvCacheType {
  f16,   // half-precision K/V (default): half the memory of f32, no measurable quality loss
  f32,   // full precision K/V
  int8,  // K/V as int8 with a half-precision scale per 32 values of a token's KV head
         // (llama.cpp's q8_0): 0.53x the memory of f16 at head_dim 64, so the pool holds
         // ~1.9x the tokens. CPU only (the CUDA backend refuses it at open with
         // Error(unsupported))
};

enum class LogLevel { debug, info, warning, error };
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;

// The stages of Engine::open(), in the order they run. A warm weight cache replaces `weights`
// by `cache` (reading the prepared weights back).
enum class LoadPhase {
  reading,       // mapping and validating the model file
  tokenizer,     // the vocabulary, merges and chat template
  weights,       // preparing the matrices one layer at a time: dequantize; INT8: calibrate on a
                 // short text, smooth, quantize and pack. Reported once per layer
  calibration,   // not reported since 0.1 prepares a layer at a time (within `weights`); kept
  quantization,  // so that code naming them still compiles
  cache,         // reading the weight cache (warm) or completing its file (cold)
};

EMBER_API const char* to_string(LoadPhase phase) noexcept;

// Load progress: `fraction` is the whole load's share done, in [0, 1], non-decreasing, and 1
// on the last call (the engine is then ready). Called on the thread inside open(), a few times
// per layer. Return false to cancel: open() releases everything and throws Error(cancelled).
using LoadProgressCallback = std::function<bool(LoadPhase phase, float fraction)>;

// The JSON text of the document a schema's remote $ref names (absolute URI without fragment, or
// relative without `$id`); nullopt: unavailable. ember never fetches one; called while compiling.
using SchemaResolver = std::function<std::optional<std::string>(const std::string& uri)>;

// What happens when a conversation or a generation outgrows the context window.
enum class ContextPolicy {
  error,     // a prompt that does not fit is Error(context_overflow); a generation that fills
             // the window ends with FinishReason::context
  truncate,  // a chat (Request::messages) that does not fit with max_tokens drops its oldest
             // turns after the system message until it does (Completion::dropped_messages), in
             // steps of several turns so that the next turns reuse the cut's prefix; the system
             // message's KV still comes from the prefix cache
  shift,     // truncate, and a generation that fills the window keeps its first context_keep
             // tokens, drops the oldest half of the rest and goes on: the kept tokens are
             // recomputed, so the rest equals a fresh prefill of them (Completion::context_shifts)
};

EMBER_API const char* to_string(ContextPolicy policy) noexcept;

struct EngineOptions {
  Device device = Device::cpu();                         // where the model runs (weights and KV cache live)
  Precision precision = Precision::int8;                 // numeric path of the matrix products
  WeightFormat weight_format = WeightFormat::automatic;  // INT8 on the CPU: 4-bit or INT8 matrices
  int threads = 0;                                       // compute threads (<= 1024); 0 = all hardware threads
  int context_length = 0;                                // tokens per sequence; 0 = the model's, capped at 8192
  KvCacheType kv_cache_type = KvCacheType::f16;          // storage type of the paged KV cache
  std::size_t kv_cache_bytes = 256u << 20;               // memory for the KV block pool (device
                                                         // memory on a GPU)
  int kv_block_size = 16;                                // tokens per KV block
  int max_batch_tokens = 512;                            // token budget of one engine step (prefill chunks + decodes)
  int max_sequences = 16;                                // sequences decoded together in one step
  ContextPolicy context_policy = ContextPolicy::error;   // requests that do not say otherwise
  bool prefix_cache = true;                              // reuse the KV of prompt prefixes already computed
  std::size_t response_cache_bytes = 0;                  // exact cache of whole completions for repeated
                                                         // requests (same prompt and parameters); 0 = off
  bool background_low_priority = false;                  // background_thread only: its compute threads run at a
                                                         // lower OS priority (Linux: nice +10), so a host's
                                                         // render or UI thread keeps its core under load
  bool background_thread = false;                        // the engine steps itself on a thread it owns; otherwise
                                                         // the host drives it (step(), wait(), generate())
  // The batch window of background_thread (throughput for latency): an idle engine starts its
  // next batch once batch_min_requests requests are queued, or once the first of them has waited
  // batch_max_wait, so that requests arriving close together share their steps from the first.
  // 1 and 0 (the default): at once. Requests that arrive while the engine is busy join the next
  // step whatever the window. Checked at open: min >= 1, wait in [0 ms, 1 h], a window needs
  // background_thread, and min > 1 needs a wait > 0 (Error(invalid_argument) otherwise).
  int batch_min_requests = 1;                   // requests that start a batch at once
  std::chrono::milliseconds batch_max_wait{0};  // the longest the first request waits for them
  // Limits, checked by submit()/generate() before a request is queued; 0 = no limit of its own.
  int max_prompt_tokens = 0;              // prompt tokens at most; over it: Error(context_overflow).
                                          // The context window always applies (prompt < context_length)
  int max_generated_tokens = 0;           // SamplingParams::max_tokens at most; over it:
                                          // Error(invalid_argument). 0: the context window ends generation
  int max_requests = 0;                   // requests in flight (queued + running) at most; beyond it
                                          // submit() throws Error(busy) at once, never blocks. Requests
                                          // past max_sequences wait in the queue; max_requests =
                                          // max_sequences refuses instead of queueing
  LogCallback log;                        // receives log lines; nothing is printed without it
  std::string prefix_store_path;          // a prefix store (Engine::save_prefix_store) loaded into the
                                          // prefix cache at open; "" = none. A corrupt, truncated or
                                          // foreign store makes open() throw, naming the problem
  LoadProgressCallback on_load_progress;  // loading bar and cancellation of open(); may be empty
  std::string chat_template;              // a Jinja chat template instead of the file's (none, or a
                                          // wrong one), recognised as the file's would be (ChatML,
                                          // Llama 3, Gemma, Llama 2, Mistral); one ember does not
                                          // render: open() throws Error(unsupported). "" = the file's
  std::string weight_cache_dir;           // INT8 only: where open() keeps the prepared INT8 weights
                                          // (a file per model, ember version and CPU weight range): the
                                          // next open skips dequantize, calibration and quantization;
                                          // created if missing; a damaged or foreign file is logged,
                                          // ignored and rewritten. "" = off
  SchemaResolver schema_resolver;         // documents for json_schema's remote $refs (docs/api.md)
};

// ---- requests ------------------------------------------------------------------------------

// An additive bias on one token's raw logit, before anything else (OpenAI's logit_bias: -100 in
// practice bans a token, +100 forces it among the allowed ones).
struct LogitBias {
  std::int32_t token = 0;  // must be inside the vocabulary
  float bias = 0;          // finite, or -infinity to ban the token
};

// One alternative of a generated token (SamplingParams::top_logprobs).
struct TokenLogprob {
  std::int32_t token = 0;
  float logprob = 0;  // log-probability under the same distribution as Completion::logprobs
};

// A LoRA adapter a request runs with (Engine::load_adapter's id) and its scale: the adapter's
// update to each matrix it carries is scale * alpha / rank * B (A x), as in llama.cpp.
struct AdapterScale {
  std::int32_t id = -1;
  float scale = 1.0f;  // 0: the adapter is left out
};

struct SamplingParams {
  int max_tokens = 256;             // generated tokens at most; 0 returns at once (no decode)
  float temperature = 0.8f;         // 0 = greedy (argmax); must be >= 0
  int top_k = 40;                   // keep the k most likely tokens; 0 = off
  float top_p = 0.95f;              // nucleus: smallest set with this probability mass; 1 = off
  float min_p = 0.05f;              // drop tokens below min_p * p(best); 0 = off
  float repetition_penalty = 1.0f;  // > 1 discourages tokens seen in the last penalty_last_n
  float presence_penalty = 0.0f;    // subtracted once from the logit of any seen token
  float frequency_penalty = 0.0f;   // subtracted per occurrence of a seen token
  int penalty_last_n = 64;          // window of recent tokens the penalties look at; -1 = all
  std::uint64_t seed = 0;           // same seed, same prompt, same options: same output
  std::vector<std::string> stop;    // stop strings: generation ends before them, never emitted
  bool ignore_eos = false;          // keep generating past end-of-sequence tokens
  bool logprobs = false;            // report the log-probability of every chosen token
  int top_logprobs = 0;             // also report the n most likely tokens at each step (0-20)
  std::vector<LogitBias>
      logit_bias;  // added to the raw logits before the penalties (the grammar's mask applies either way)
  // Constrained generation (at most one of the two). Generated text is a prefix of a string of
  // the grammar's language, and an end-of-generation token is allowed exactly when the text so
  // far is a whole string of it; the request then finishes with `stop` (or `length` when
  // max_tokens cut it short). An invalid grammar or schema makes submit() throw
  // Error(invalid_argument) naming the problem and its position. Cannot be combined with
  // ignore_eos. See docs/api.md for the supported notation and JSON Schema keywords.
  std::string grammar;      // a GBNF grammar (llama.cpp's notation), start rule `root`
  std::string json_schema;  // a JSON Schema as JSON text; "{}" = any JSON value
  // With a grammar or json_schema: when the tokens left (max_tokens, the context) come down to
  // the shortest text that closes the structure, generation is steered to close it, so a
  // length-cut output still parses (finish reason stays `length`, Completion::closed_early).
  bool close_at_limit = true;
  // Draftless (prompt-lookup) speculative decoding: each step proposes up to this many next
  // tokens by finding the latest n-gram of the prompt and output earlier in them and copying
  // what followed it, and verifies them in the same forward pass (one row each). Greedy output
  // is the same token for token as without it, sampled output follows the same distribution
  // and a seed still reproduces it. It pays on text that copies its input (edits, summaries,
  // code); it backs off in steps already full of other sequences' decodes. 0 = off (0-16)
  int speculative_tokens = 0;
  // Thinking models (a chat template that marks reasoning, e.g. Qwen3's and DeepSeek-R1's
  // <think>...</think>, gpt-oss's analysis and final channels): the reasoning goes to
  // Completion::reasoning and to chunks of ChunkStream::reasoning, apart from the answer. At
  // most this many reasoning tokens, then the closing marker (and gpt-oss's final-channel
  // header) is forced and the answer follows; 0 = no thinking (the chat is rendered with
  // enable_thinking=false where the template allows it, and the opening marker is banned;
  // gpt-oss gets an empty analysis channel); -1 = no limit. Grammars, JSON schemas and stop
  // strings apply to the answer only.
  int reasoning_budget = -1;
  // LoRA adapters (Engine::load_adapter) applied to this request, in this order; requests with
  // different adapters share steps. Unknown ids throw Error(invalid_argument) at submit.
  std::vector<AdapterScale> adapters;
};

// The GBNF grammar that SamplingParams::json_schema stands for, to build a larger grammar around
// a schema (a tool call between its chat format's markers). The document is the rule
// `root_rule`; every other rule it defines is named `root_rule-...`, `ws` or `json-...`, names
// the surrounding grammar must not reuse. Throws Error(invalid_argument) as json_schema would.
EMBER_API std::string json_schema_to_gbnf(std::string_view schema, std::string_view root_rule = "root");

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct Request {
  std::string prompt;                       // raw text; used when `messages` and `prompt_tokens` are empty
  std::vector<Message> messages;            // a conversation rendered through the model's chat template
  std::vector<std::int32_t> prompt_tokens;  // pre-tokenized prompt; takes precedence when given
  SamplingParams sampling;
  bool parse_special_tokens = false;            // recognise special-token text (e.g. "<|im_end|>") in prompt
  int priority = 0;                             // higher runs first when requests wait for room
  std::optional<ContextPolicy> context_policy;  // empty: EngineOptions::context_policy
  int context_keep = -1;                        // tokens a shift keeps at the start (at most half the context);
                                                // -1: a chat's system message (with what precedes it), else 0
};

enum class FinishReason {
  stop,       // end-of-sequence token or a stop string
  length,     // max_tokens reached
  context,    // the context window is full, or the KV cache is (Completion::error then says so)
  cancelled,  // the stream callback returned false or the request was cancelled
  error,      // the request failed; Completion::error says why
};

EMBER_API const char* to_string(FinishReason reason) noexcept;

// Where a request's time went, in milliseconds. The response time a user sees is
// queue + prefill + decode + response.
struct Timings {
  double load_ms = 0;                   // engine load time (the same for every request of an engine)
  double queue_ms = 0;                  // submit to the first scheduled step
  double prefill_ms = 0;                // prompt processing
  double time_to_first_token_ms = 0;    // submit to the first generated token
  double decode_ms = 0;                 // generating tokens after the first
  double time_per_output_token_ms = 0;  // decode_ms / (generated tokens - 1)
  double response_ms = 0;               // detokenizing, stop checks and callbacks
  double total_ms = 0;                  // submit to completion (in the last chunk: to its delivery)
  double reasoning_ms = 0;              // from the first reasoning token to the end of the reasoning
};

struct Completion {
  std::string text;  // generated text (stop strings excluded); the answer only
  // A thinking model's reasoning (SamplingParams::reasoning_budget), without its markers and the
  // whitespace around it; empty for other models.
  std::string reasoning;
  int reasoning_tokens = 0;          // generated tokens inside the reasoning (markers excluded)
  std::vector<std::int32_t> tokens;  // generated token ids
  std::vector<float> logprobs;       // per generated token, when SamplingParams::logprobs
  // Per generated token, the SamplingParams::top_logprobs most likely tokens, best first.
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  FinishReason finish_reason = FinishReason::stop;
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;      // prompt tokens reused from the prefix cache
  bool from_response_cache = false;  // returned by the exact response cache, no inference
  int dropped_messages = 0;          // messages ContextPolicy::truncate left out of the prompt
  int context_shifts = 0;            // times ContextPolicy::shift made room in the window
  int generated_tokens = 0;
  int speculative_proposed = 0;  // tokens SamplingParams::speculative_tokens proposed
  int speculative_accepted = 0;  // of them, accepted (each one a forward pass saved)
  bool closed_early = false;     // SamplingParams::close_at_limit steered the text to close
  // What of SamplingParams::json_schema the grammar does not enforce, one "what at /pointer"
  // each (docs/api.md lists the rules); empty when every keyword is enforced.
  std::vector<std::string> schema_relaxed;
  Timings timings;
  std::string error;  // why it failed (`error`), ember cancelled it (a throwing callback, the engine destroyed)
                      // or it ended with `context` before the window was full (the KV cache holds fewer tokens)
};

// Which part of a thinking model's output a chunk belongs to.
enum class ChunkStream { answer, reasoning };

// One streamed piece of a completion. `text` holds only complete UTF-8 characters.
struct Chunk {
  std::string_view text;
  ChunkStream stream = ChunkStream::answer;  // reasoning: text of Completion::reasoning
  const std::int32_t* tokens = nullptr;      // the token ids that produced this piece
  std::size_t token_count = 0;
  const Completion* completion = nullptr;  // set on the last chunk only
  // For each of the chunk's tokens, when requested (SamplingParams::logprobs / top_logprobs):
  const float* logprobs = nullptr;                          // token_count entries, or null
  const std::vector<TokenLogprob>* top_logprobs = nullptr;  // token_count entries, or null
};

// Returns false to stop the request (finish reason `cancelled`).
using StreamCallback = std::function<bool(const Chunk&)>;

enum class RequestStatus { queued, running, finished };

namespace runtime {  // internal types, opaque here
class EngineCore;
struct Sequence;
}  // namespace runtime

// A submitted request. Copies refer to the same request; a handle stays valid after its engine
// is destroyed (the request then reports `cancelled`). All members are thread-safe.
class EMBER_API RequestHandle {
 public:
  RequestHandle() = default;
  bool valid() const noexcept { return sequence_ != nullptr; }
  std::uint64_t id() const;
  RequestStatus status() const;
  // Blocks until the request finishes and returns its completion. Without a background thread
  // the waiting thread runs engine steps itself (serving every queued request meanwhile).
  Completion wait();
  // Asks the request to stop; it finishes with `cancelled` and frees its KV blocks at the next
  // step (at once when still queued). Cancelling a finished request does nothing. Takes the
  // engine's lock, so it waits for the step in progress and throws Error(invalid_argument) from
  // inside one of the engine's callbacks.
  void cancel();
  // cancel() that never waits: it flags the request and returns at once, without the engine's
  // lock, so it suits a thread that must not block (a server's I/O thread whose client left) and
  // a stream callback (its own request or another). The thread that steps the engine ends the
  // request before its next step, `cancelled`, and frees its blocks: the background thread
  // (at once while its batch window holds the queue), else the next step(), wait() or
  // generate() on the engine; a stream callback's own request ends after that chunk. Until then
  // status() still reports it queued or running. A finished request is left as it is.
  void cancel_soon();

 private:
  friend class Engine;
  RequestHandle(std::shared_ptr<runtime::Sequence> sequence, std::weak_ptr<runtime::EngineCore> core)
      : sequence_(std::move(sequence)), core_(std::move(core)) {}
  std::shared_ptr<runtime::Sequence> sequence_;
  std::weak_ptr<runtime::EngineCore> core_;
};

// Running totals since the engine opened.
struct EngineStats {
  std::uint64_t requests_submitted = 0;
  std::uint64_t requests_finished = 0;
  std::uint64_t steps = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t prompt_tokens_reused = 0;  // served from the prefix cache
  std::uint64_t generated_tokens = 0;
  std::uint64_t preemptions = 0;  // sequences requeued for recompute to free KV blocks
  std::uint64_t prefix_lookups = 0;
  std::uint64_t prefix_hit_blocks = 0;
  std::uint64_t prefix_evictions = 0;
  std::uint64_t response_cache_hits = 0;
  std::uint64_t speculative_proposed = 0;  // draft tokens proposed (SamplingParams::speculative_tokens)
  std::uint64_t speculative_accepted = 0;  // of them, accepted
  int running = 0;                         // sequences now running
  int queued = 0;                          // requests now waiting
  int kv_blocks_total = 0;
  int kv_blocks_free = 0;
  // Mixture of experts (dense: zeros): routed layers run (per layer and step) and the distinct
  // experts they ran; experts_run / routed_layers: experts whose weights a layer read on average.
  std::uint64_t routed_layers = 0;
  std::uint64_t experts_run = 0;
  std::uint64_t embedding_sequences = 0;  // texts and pairs embed() and rerank() computed
  std::uint64_t mixed_steps = 0;          // steps carrying generating and embedding rows both
};

struct StepResult {
  int steps = 0;             // engine steps finished
  int tokens = 0;            // rows computed in the finished steps (prompt and generated tokens)
  bool idle = false;         // nothing left to do
  bool step_paused = false;  // the budget ran out inside a step: the next call continues it
};

struct ModelInfo {
  std::string name;
  std::string architecture;
  int layers = 0, embedding = 0, heads = 0, kv_heads = 0, vocab = 0;
  int context_length = 0;  // the context the engine was opened with
  // A mixture-of-experts model's experts per layer and the ones each token runs; 0 when dense.
  int experts = 0, experts_used = 0;
  std::uint64_t parameters = 0;
  bool has_chat_template = false;
  // How the matrices are held: the forms present joined by '+', from "w4a8" (4-bit weights in
  // the file's groups, INT8 activations), "w8a8-g32" (a Q8_0 lm_head in the file's groups) and
  // "w8a8" (INT8 per output channel), e.g. "w4a8+w8a8-g32" for a Q4 file with a Q8_0 lm_head;
  // or "fp32", "fp16".
  std::string weight_format;
  // Bytes of prepared matrices a decode step reads (its weight stream, the embedding row not
  // counted); 0 where the backend does not say (CUDA).
  std::uint64_t decode_weight_bytes = 0;
  // The x86 instruction-set tier the CPU kernels run at: "scalar", "avx2", "avx_vnni",
  // "avx512_vnni" or "amx" (the hardware's, capped by the EMBER_CPU_ISA environment variable);
  // empty for a model on a GPU.
  std::string cpu_tier;
  // How embed() pools by default (EmbedOptions::pooling = model_default), from the file's
  // pooling_type: "none", "mean", "cls", "last" or "rank"; "" when the file says nothing.
  std::string pooling;
  bool embedding_only = false;  // an encoder without an lm_head (BERT): embed() only, no generation
  int classifier_outputs = 0;   // a reranker's classification head: its scores per text
                                // (Pooling::rank's values); 0 without a head
};

// ---- embeddings --------------------------------------------------------------------------------

// How the hidden states of a text's tokens become its embedding.
enum class Pooling {
  model_default,  // the file's pooling_type; mean for an encoder and last for a decoder without one
  none,           // every token's hidden state ([tokens, embedding])
  mean,           // their average
  cls,            // the first token's ([CLS] for BERT)
  last,           // the last token's (decoder embedding models: Qwen3-Embedding)
  rank,           // a reranker's classification head over the first token's (llama.cpp's rank
                  // pooling): the head's raw scores, not normalised (see Engine::rerank)
};

struct EmbedOptions {
  Pooling pooling = Pooling::model_default;
  bool normalize = true;    // divide each embedding (each row for Pooling::none) by its L2 norm
  bool truncate = true;     // cut a text longer than the model's context to fit; false: such a
                            // text throws Error(context_overflow)
  bool add_special = true;  // the model's special tokens around the text ([CLS] ... [SEP], BOS)
};

struct Embedding {
  std::vector<float> values;  // [embedding], or [tokens, embedding] for Pooling::none
  int tokens = 0;             // tokens the model read (after truncation, special tokens included)
};

// ---- LoRA adapters -----------------------------------------------------------------------------

// A loaded adapter (Engine::adapters).
struct AdapterInfo {
  std::int32_t id = -1;
  std::string path;
  float alpha = 0.0f;  // adapter.lora.alpha (0: the scale is used as given)
  int tensors = 0;     // base matrices it adapts
  int rank = 0;        // the largest rank of its pairs
};

// ---- the engine --------------------------------------------------------------------------------

// An Engine owns one model's weights, the compute backend, the paged KV cache and the
// scheduler. It is move-only; destroying it releases everything.
class EMBER_API Engine {
 public:
  // Loads a GGUF model. Throws Error (io, invalid_model, unsupported, out_of_memory).
  static Engine open(const std::string& path, const EngineOptions& options = {});

  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Runs one request to completion, streaming to `on_chunk` if given. Concurrent calls from
  // several threads are batched together.
  // Bad parameters throw Error(invalid_argument); a prompt that cannot fit the context or
  // max_prompt_tokens throws Error(context_overflow); with max_requests in flight, Error(busy).
  // Everything else ends in a Completion with its finish reason (`error` if the engine failed).
  Completion generate(const Request& request, const StreamCallback& on_chunk = {});

  // generate() over a conversation rendered with the model's chat template, generation prompt
  // appended. Throws Error(unsupported) when the model has no chat template ember can render.
  Completion chat(const std::vector<Message>& messages, const SamplingParams& sampling = {},
                  const StreamCallback& on_chunk = {});

  // Queues a request and returns at once (at most after the step in progress); thread-safe.
  // Chunks stream to `on_chunk` on the thread that runs the step; a request answered without a
  // step (max_tokens = 0, or a response-cache hit) streams its chunks inside submit(), on the
  // calling thread, before it returns. Validation errors throw here, as in generate().
  RequestHandle submit(const Request& request, StreamCallback on_chunk = {});

  // Runs engine steps on the calling thread until `budget` is spent or nothing is left (a game
  // calls this once per frame). A step is the one unbudgeted stepping would run (the same rows);
  // its forward pass runs in pieces (a stage of a layer, or a part of a matrix product or of
  // attention) sized from what such pieces just cost to end by three quarters of the budget, and
  // the next call continues where this one stopped (StepResult::step_paused). The last quarter
  // absorbs what no estimate sees (another process taking a core for a moment). Until a paused
  // step is finished nothing observes it (its requests get no token, stats() does not count it),
  // and its results are bit-identical to unbudgeted stepping. Other calls (generate, wait) finish
  // a paused step first. With a background thread this returns at once. A budget above a day is
  // taken as a day.
  StepResult step(std::chrono::microseconds budget);

  EngineStats stats() const;

  // The chat template applied to `messages` (with the assistant generation prompt).
  std::string apply_chat_template(const std::vector<Message>& messages) const;
  // The chat template applied to a conversation given as JSON: OpenAI-style messages (with tool
  // calls, tool results and content parts), `tools_json` a JSON array of tools (empty: none),
  // `extra_json` a JSON object of further template arguments ({"enable_thinking": false};
  // empty: none). What ember-server's POST /apply-template answers. Throws
  // Error(invalid_argument) for JSON that does not parse or a conversation the template rejects.
  std::string apply_chat_template_json(std::string_view messages_json, std::string_view tools_json = {},
                                       std::string_view extra_json = {}, bool add_generation_prompt = true) const;
  // The text of the chat template in use (the file's, EngineOptions::chat_template's, or the
  // architecture's default); empty when the model has none.
  std::string chat_template_source() const;

  // Embeddings of `texts` (one per text, in order). Each text is a sequence in the engine's
  // scheduler that is prefilled and never sampled: it shares steps (one forward pass) with
  // generation requests and other threads' embed calls, under the same token budget
  // (docs/api.md#embeddings); the call waits as RequestHandle::wait() does. Encoders (BERT) and
  // decoders (the final norm's output) both work. Throws Error(invalid_argument) for a text that
  // gives no tokens (an empty one, unless add_special adds some: BERT's [CLS] [SEP] is embedded),
  // (context_overflow) when truncate is off and a text does not fit,
  // (out_of_memory) when a text needs more KV blocks than the pool has, (unsupported) for rank
  // pooling without a classification head or on a decoder, or a device without embeddings (CUDA).
  std::vector<Embedding> embed(const std::vector<std::string>& texts, const EmbedOptions& options = {});
  // The same from token ids (EmbedOptions::add_special ignored: the ids are used as given).
  std::vector<Embedding> embed_tokens(const std::vector<std::vector<std::int32_t>>& token_lists,
                                      const EmbedOptions& options = {});

  // Reranking (a cross-encoder with a classification head: pooling_type rank, cls.output):
  // one relevance score per document, in the order given, higher is more relevant. Each
  // (query, document) pair is one sequence, [CLS] query [SEP] document [SEP] for BERT (llama.cpp's
  // format_prompt_rerank: BOS, query, EOS, SEP, document, EOS as the vocabulary adds them), and
  // its score is the head's first output over the pair's first token, unnormalised (a logit, as
  // llama-server's relevance_score). The pairs run batched, as embed() runs texts. Throws Error(unsupported) for a model without a
  // classification head or one that is not an encoder, (context_overflow) for a pair longer
  // than the model embeds at once; no documents give no scores. `pair_tokens`, when given,
  // receives the tokens each pair became (a server's usage).
  std::vector<float> rerank(std::string_view query, const std::vector<std::string>& documents,
                            std::vector<int>* pair_tokens = nullptr);
  // ---- LoRA adapters (docs/api.md#lora) ---------------------------------------------------
  // Loads a LoRA adapter in llama.cpp's GGUF format for this model and returns its id (never
  // reused). Throws Error(io) for a file that cannot be read, (invalid_model) for a malformed
  // adapter or one for another base model (named tensor and shapes), (unsupported) for tensors
  // ember does not adapt or a device without adapters (CUDA). Thread-safe; requests keep
  // running while it loads.
  std::int32_t load_adapter(const std::string& path);
  // Unloads an adapter. Throws Error(busy) while a queued or running request uses it, and
  // Error(invalid_argument) for an unknown id. Thread-safe.
  void unload_adapter(std::int32_t id);
  // The loaded adapters, by id.
  std::vector<AdapterInfo> adapters() const;

  std::vector<std::int32_t> tokenize(std::string_view text, bool parse_special = false) const;
  std::string detokenize(const std::vector<std::int32_t>& tokens) const;

  ModelInfo info() const;
  double load_ms() const;

  // ---- KV state that outlives a request (a save game, a chat resumed tomorrow) --------------
  // A snapshot holds the prefix cache's full KV blocks of some token sequences. It is tied to
  // the model file, the ember version, the precision, the KV cache type and the block size of
  // the engine that wrote it; any other engine refuses it. Loading validates everything first
  // (a truncated, corrupt or foreign snapshot throws Error and changes nothing), then adds the
  // blocks to the prefix cache, so a later request whose prompt starts with those tokens skips
  // their prefill (Completion::cached_prompt_tokens). Restoring and continuing with greedy or
  // seeded sampling gives the tokens an uninterrupted run would have. Each call is thread-safe
  // and may run while other requests are served; a save runs a prefill request (counted in
  // stats()) for the tokens not cached yet. Saving or loading needs EngineOptions::prefix_cache.

  // The KV state of `tokens` (the prompt ids, as in Request::prompt_tokens, then the generated
  // Completion::tokens). Only whole blocks are saved; the last partial block is recomputed on
  // restore. Throws Error(invalid_argument) for bad ids, (context_overflow) when `tokens`
  // does not fit the context, (out_of_memory) when the KV cache cannot hold them.
  std::vector<std::uint8_t> save_state(const std::vector<std::int32_t>& tokens);
  // Adds a snapshot's blocks to the prefix cache; returns how many blocks it now holds from it
  // (fewer than saved when the cache is full of running requests' blocks). Throws
  // Error(invalid_argument | unsupported | out_of_memory) naming what is wrong with it.
  std::size_t load_state(const std::vector<std::uint8_t>& snapshot);
  // The same through a file (written to a temporary and renamed, so never half-written);
  // Error(io) when it cannot be written or read.
  void save_state_file(const std::string& path, const std::vector<std::int32_t>& tokens);
  std::size_t load_state_file(const std::string& path);
  // Writes a prefix store: the full blocks of every prompt (tokenized as generate() would, chat
  // template included; blocks shared by several prompts stored once), for
  // EngineOptions::prefix_store_path. Only the prompts are used, not their sampling.
  void save_prefix_store(const std::string& path, const std::vector<Request>& prompts);

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  runtime::EngineCore& core(const char* caller) const;  // throws on a moved-from Engine
  std::unique_ptr<Impl> impl_;
};

// The library's version, "MAJOR.MINOR.PATCH".
EMBER_API const char* version() noexcept;

}  // namespace ember
