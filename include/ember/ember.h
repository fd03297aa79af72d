/* ember: embeddable LLM inference. The C ABI (C11; also compiles as C++).
 *
 * A thin shell over the C++ API in ember.hpp, for C programs and for other languages' foreign
 * function interfaces. Everything declared here is the stable C surface: within a 0.x minor
 * version existing names, values and struct layouts only ever grow at their ends.
 *
 * Conventions
 *   * Every fallible function returns an ember_status; EMBER_OK (0) is success. Outputs are
 *     written through pointer parameters and only on success.
 *   * The message of a failure: ember_engine_last_error(engine) for calls made with an engine,
 *     and ember_last_error() (per thread) for every failing call, including those made before
 *     an engine exists (ember_engine_open) and those on requests and completions.
 *   * No exception or C++ type ever crosses this boundary; ember never prints, aborts or exits.
 *   * Strings are UTF-8 and NUL-terminated unless a length is passed with them.
 *
 * Growable structs: struct_size
 *   Structs the caller allocates and ember reads or fills (ember_engine_options, ember_sampling,
 *   ember_request_params, ember_stats, ember_step_result, ember_model_info) begin with
 *   `size_t struct_size`, set by the caller to sizeof the struct as its ember.h declares it.
 *   We chose a size rather than a version number because it needs no table of versions: new
 *   fields are only ever appended, so ember reads (or writes) exactly the first struct_size
 *   bytes, and gives fields the caller does not know their defaults. A program built against
 *   an older ember.h keeps working with a newer library; a struct_size larger than the library
 *   knows (a program built against a newer ember.h) is rejected with
 *   EMBER_ERROR_INVALID_ARGUMENT rather than silently ignoring settings. Initialise input structs
 *   with ember_engine_options_default() / ember_sampling_default() /
 *   ember_request_params_default(): they are inline, so struct_size is the caller's sizeof, and
 *   the default values come from the library. Structs that ember allocates (ember_completion,
 *   ember_chunk, ember_timings) grow at their ends too; never copy them by value into storage
 *   of your own that outlives the call, read them through the pointer.
 *
 * Handles and misuse
 *   ember_engine, ember_request and ember_completion are owned by the caller until
 *   ember_engine_close / ember_request_free / ember_completion_free, which take the address of
 *   the caller's pointer and set it to NULL, so calling them twice on the same variable is a
 *   harmless no-op. NULL handles and NULL required pointers give EMBER_ERROR_INVALID_ARGUMENT.
 *   Each handle carries a magic number that is cleared when it is freed: a freed handle whose
 *   memory has not been reused yet, or a pointer of the wrong kind, is reported as
 *   EMBER_ERROR_INVALID_ARGUMENT. That is a best-effort check only: once the allocator reuses
 *   the memory a stale pointer cannot be detected, so never use a handle after freeing it.
 *
 * Threads
 *   Every function may be called from any thread; calls on one engine from several threads are
 *   batched together (see ember.hpp). Closing an engine must not race with other calls on it.
 *   Callbacks run on the thread that runs the engine step with the engine's lock held: a
 *   callback must not call back into the same engine (such a call returns
 *   EMBER_ERROR_INVALID_ARGUMENT instead of deadlocking).
 */
#ifndef EMBER_EMBER_H
#define EMBER_EMBER_H

#include <stddef.h>
#include <stdint.h>

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version -------------------------------------------------------------------------------- */

#define EMBER_VERSION_MAJOR 0
#define EMBER_VERSION_MINOR 1
#define EMBER_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, comparable with ember_version_number(). */
#define EMBER_VERSION_NUMBER (EMBER_VERSION_MAJOR * 10000 + EMBER_VERSION_MINOR * 100 + EMBER_VERSION_PATCH)

/* The library's version, "MAJOR.MINOR.PATCH", and as EMBER_VERSION_NUMBER would spell it: a
 * program can check that the library it runs with matches the header it was built with. */
EMBER_API const char* ember_version(void);
EMBER_API int ember_version_number(void);

/* ---- status and errors ---------------------------------------------------------------------- */

/* The values are fixed: new codes are only ever added. EMBER_ERROR_INVALID_ARGUMENT through
 * EMBER_ERROR_INTERNAL, and EMBER_ERROR_BUSY, are ember::ErrorCode one to one. */
typedef enum ember_status {
  EMBER_OK = 0,
  EMBER_ERROR_INVALID_ARGUMENT = 1, /* a parameter out of range, a NULL or bad handle */
  EMBER_ERROR_IO = 2,               /* a file could not be opened, mapped or read */
  EMBER_ERROR_INVALID_MODEL = 3,    /* the model file is malformed or inconsistent */
  EMBER_ERROR_UNSUPPORTED = 4,      /* valid, but not supported (architecture, tensor type, ...) */
  EMBER_ERROR_OUT_OF_MEMORY = 5,    /* an allocation failed or a configured limit was reached */
  EMBER_ERROR_CONTEXT_OVERFLOW = 6, /* the prompt does not fit the context window */
  EMBER_ERROR_CANCELLED = 7,        /* the operation was cancelled */
  EMBER_ERROR_INTERNAL = 8,         /* a bug in ember: please report it */
  EMBER_ERROR_BUFFER_TOO_SMALL = 9, /* C only: an output buffer is too small; the size needed
                                       was written to the count/length output */
  EMBER_ERROR_BUSY = 10             /* max_requests are in flight: retry later (ErrorCode::busy) */
} ember_status;

/* A short name of a status ("ok", "invalid_argument", ...); never NULL. */
EMBER_API const char* ember_status_string(ember_status status);

/* The message of the last failing ember call on the calling thread ("" if none). Valid until
 * the next ember call on this thread. */
EMBER_API const char* ember_last_error(void);

typedef struct ember_engine ember_engine;
typedef struct ember_request ember_request;

/* The message of the last failing call made with `engine`, from any thread ("" if none); a
 * fixed message for a NULL or invalid engine. Valid until the next ember call on this thread. */
EMBER_API const char* ember_engine_last_error(const ember_engine* engine);

/* ---- engine options ------------------------------------------------------------------------- */

typedef enum ember_precision {
  EMBER_PRECISION_INT8 = 0, /* INT8 weights and activations (the fast default) */
  EMBER_PRECISION_FP32 = 1, /* FP32 weights and matrix products (CPU only) */
  EMBER_PRECISION_FP16 = 2  /* FP16 weights: the GPU baseline (CUDA only) */
} ember_precision;

/* As ember::WeightFormat: how the INT8 path keeps the matrices on the CPU. */
typedef enum ember_weight_format {
  EMBER_WEIGHTS_AUTOMATIC = 0, /* the file's own: 4-bit matrices (and a Q8_0 lm_head) keep their groups */
  EMBER_WEIGHTS_W8A8 = 1       /* every matrix requantized to INT8 */
} ember_weight_format;

typedef enum ember_device_type {
  EMBER_DEVICE_CPU = 0,
  EMBER_DEVICE_CUDA = 1 /* needs a library built with CUDA and an NVIDIA GPU */
} ember_device_type;

typedef enum ember_kv_cache_type {
  EMBER_KV_CACHE_F16 = 0, /* half-precision K/V (default) */
  EMBER_KV_CACHE_F32 = 1,
  EMBER_KV_CACHE_INT8 = 2 /* int8, a half scale per 32 values (q8_0); CPU only */
} ember_kv_cache_type;

/* As ember::ContextPolicy: what happens when a chat or a generation outgrows the context. */
typedef enum ember_context_policy {
  EMBER_CONTEXT_ERROR = 0,    /* too long a prompt fails; a full window ends the generation */
  EMBER_CONTEXT_TRUNCATE = 1, /* a chat drops its oldest turns after the system message */
  EMBER_CONTEXT_SHIFT = 2     /* truncate, and a full window keeps the start and drops half */
} ember_context_policy;

typedef enum ember_log_level {
  EMBER_LOG_DEBUG = 0,
  EMBER_LOG_INFO = 1,
  EMBER_LOG_WARNING = 2,
  EMBER_LOG_ERROR = 3
} ember_log_level;

/* Receives ember's log lines (from any thread that runs ember code); `message` is valid during
 * the call only. Nothing is logged, or printed, without it. */
typedef void (*ember_log_fn)(ember_log_level level, const char* message, void* user_data);

/* The stages of ember_engine_open(), as ember::LoadPhase. */
typedef enum ember_load_phase {
  EMBER_LOAD_READING = 0,      /* mapping and validating the model file */
  EMBER_LOAD_TOKENIZER = 1,    /* vocabulary, merges, chat template */
  EMBER_LOAD_WEIGHTS = 2,      /* preparing the matrices a layer at a time (dequantize;
                                  INT8: calibrate, smooth, quantize, pack) */
  EMBER_LOAD_CALIBRATION = 3,  /* not reported: part of EMBER_LOAD_WEIGHTS; kept for source */
  EMBER_LOAD_QUANTIZATION = 4, /* compatibility */
  EMBER_LOAD_CACHE = 5         /* reading (warm) or completing (cold) the weight cache */
} ember_load_phase;

/* A short name of a load phase ("reading", "weights", ...); never NULL. */
EMBER_API const char* ember_load_phase_string(ember_load_phase phase);

/* Load progress: `fraction` of the whole load is done, in [0, 1], non-decreasing, 1 on the last
 * call. Runs on the thread inside ember_engine_open(), a few times per layer. Return nonzero to
 * go on, 0 to cancel: the open then frees everything and fails with EMBER_ERROR_CANCELLED. */
typedef int (*ember_load_progress_fn)(ember_load_phase phase, float fraction, void* user_data);

/* The fields mirror ember::EngineOptions; see ember.hpp for each one's meaning. */
typedef struct ember_engine_options {
  size_t struct_size; /* sizeof(ember_engine_options) */
  ember_precision precision;
  int32_t threads;        /* at most 1024; 0 = all hardware threads */
  int32_t context_length; /* 0 = the model's, capped at 8192 */
  ember_kv_cache_type kv_cache_type;
  uint64_t kv_cache_bytes;       /* memory for the KV block pool */
  int32_t kv_block_size;         /* tokens per KV block */
  int32_t max_batch_tokens;      /* token budget of one engine step */
  int32_t max_sequences;         /* sequences decoded together in one step */
  int32_t prefix_cache;          /* nonzero: reuse the KV of prompt prefixes */
  uint64_t response_cache_bytes; /* exact cache of whole completions; 0 = off */
  int32_t background_thread;     /* nonzero: the engine steps itself on its own thread */
  ember_log_fn log;              /* NULL = no logging */
  void* log_user_data;
  const char* prefix_store_path;           /* prefix store loaded at open (see below); NULL = none */
  ember_device_type device_type;           /* where the model runs (default CPU) */
  int32_t device_index;                    /* CUDA device ordinal; 0 for the CPU */
  ember_load_progress_fn on_load_progress; /* NULL = none */
  void* load_progress_user_data;
  const char* weight_cache_dir; /* INT8: directory of the packed-weight cache; NULL or "" =
                                        off. Read during ember_engine_open() only. */
  int32_t max_prompt_tokens;    /* limits; 0 = none of its own (see ember.hpp) */
  int32_t max_generated_tokens;
  int32_t max_requests;                /* in flight at most; beyond: EMBER_ERROR_BUSY */
  const char* chat_template;           /* a Jinja chat template instead of the file's; NULL or
                                        "" = the file's own. Read during ember_engine_open(). */
  ember_context_policy context_policy; /* for requests that do not say (default ERROR) */
  ember_weight_format weight_format;   /* INT8 on the CPU (default AUTOMATIC) */
  int32_t background_low_priority;     /* nonzero, with background_thread: compute at a lower OS
                                        priority (Linux: nice +10) */
  int32_t batch_min_requests;          /* background_thread's batch window: an idle engine starts */
  int32_t batch_max_wait_ms;           /* once this many are queued or the first waited this long
                                        (default 1 and 0: at once; see ember.hpp) */
} ember_engine_options;

/* Fills the first `struct_size` bytes of `options` with the library's defaults and sets
 * options->struct_size. Prefer ember_engine_options_default(). */
EMBER_API ember_status ember_engine_options_init(ember_engine_options* options, size_t struct_size);

static inline ember_engine_options ember_engine_options_default(void) {
  ember_engine_options options;
  ember_engine_options_init(&options, sizeof options);
  return options;
}

/* ---- sampling and requests ------------------------------------------------------------------ */

/* An additive bias on one token's logit (ember::LogitBias). */
typedef struct ember_logit_bias {
  int32_t token;
  float bias; /* finite, or -INFINITY to ban the token */
} ember_logit_bias;

/* One alternative of a generated token (ember::TokenLogprob). */
typedef struct ember_token_logprob {
  int32_t token; /* -1 in the padding of a row with fewer alternatives */
  float logprob; /* -INFINITY in the padding */
} ember_token_logprob;

/* A LoRA adapter a request runs with (ember::AdapterScale): the id from ember_load_adapter and
 * its scale (0 = left out). */
typedef struct ember_adapter_scale {
  int32_t id;
  float scale;
} ember_adapter_scale;

/* The fields mirror ember::SamplingParams; see ember.hpp for each one's meaning. Values are
 * checked when a request is made (EMBER_ERROR_INVALID_ARGUMENT, e.g. a NaN temperature). */
typedef struct ember_sampling {
  size_t struct_size;       /* sizeof(ember_sampling) */
  int32_t max_tokens;       /* generated tokens at most */
  float temperature;        /* 0 = greedy */
  int32_t top_k;            /* 0 = off */
  float top_p;              /* 1 = off */
  float min_p;              /* 0 = off */
  float repetition_penalty; /* 1 = off */
  float presence_penalty;
  float frequency_penalty;
  int32_t penalty_last_n; /* -1 = all */
  uint64_t seed;
  const char* const* stop; /* stop strings (NUL-terminated), read during the call */
  size_t stop_count;
  int32_t ignore_eos;                 /* nonzero: keep generating past end-of-sequence */
  int32_t logprobs;                   /* nonzero: report each chosen token's log-probability */
  int32_t top_logprobs;               /* also the n most likely tokens per step (0-20) */
  const ember_logit_bias* logit_bias; /* read during the call */
  size_t logit_bias_count;
  const char* grammar;        /* GBNF text, or NULL; see SamplingParams::grammar */
  const char* json_schema;    /* JSON Schema text, or NULL; at most one of the two */
  int32_t speculative_tokens; /* draftless speculation: tokens proposed per step (0-16);
                                        0 = off (SamplingParams::speculative_tokens) */
  /* Thinking models (SamplingParams::reasoning_budget): reasoning tokens at most, then the
   * closing marker is forced and the answer follows; -1 (default) = no limit, 0 = no thinking.
   * The reasoning is ember_completion.reasoning, streamed in chunks of EMBER_STREAM_REASONING. */
  int32_t reasoning_budget;
  /* Nonzero (default): a grammar- or schema-constrained output that max_tokens or the context
   * would cut is steered to close its structure in the tokens left, so it parses (finish
   * reason stays EMBER_FINISH_LENGTH; ember_completion.closed_early says so); 0 = off
   * (SamplingParams::close_at_limit). */
  int32_t close_at_limit;
  /* LoRA adapters applied to the request, in order (SamplingParams::adapters); read during the
   * call. NULL/0 (default) = none. */
  const ember_adapter_scale* adapters;
  size_t adapter_count;
} ember_sampling;

EMBER_API ember_status ember_sampling_init(ember_sampling* sampling, size_t struct_size);

static inline ember_sampling ember_sampling_default(void) {
  ember_sampling sampling;
  ember_sampling_init(&sampling, sizeof sampling);
  return sampling;
}

typedef struct ember_message {
  const char* role; /* "system", "user" or "assistant" */
  const char* content;
} ember_message;

/* One request, as ember::Request. Pointed-to data is copied during the call. */
typedef struct ember_request_params {
  size_t struct_size;            /* sizeof(ember_request_params) */
  const char* prompt;            /* raw text; used when there are no messages and tokens */
  const ember_message* messages; /* a conversation rendered with the chat template */
  size_t message_count;
  const int32_t* prompt_tokens; /* a pre-tokenized prompt; takes precedence when given */
  size_t prompt_token_count;
  const ember_sampling* sampling; /* NULL = the defaults */
  int32_t parse_special_tokens;   /* nonzero: recognise special-token text in `prompt` */
  int32_t priority;               /* higher runs first when requests wait for room */
  int32_t context_policy;         /* an ember_context_policy; -1 (default) = the engine's */
  int32_t context_keep;           /* tokens a shift keeps at the start; -1 (default) = a
                                        chat's system message, else 0 */
} ember_request_params;

EMBER_API ember_status ember_request_params_init(ember_request_params* params, size_t struct_size);

static inline ember_request_params ember_request_params_default(void) {
  ember_request_params params;
  ember_request_params_init(&params, sizeof params);
  return params;
}

/* ---- completions and streaming -------------------------------------------------------------- */

typedef enum ember_finish_reason {
  EMBER_FINISH_STOP = 0,      /* end-of-sequence token or a stop string */
  EMBER_FINISH_LENGTH = 1,    /* max_tokens reached */
  EMBER_FINISH_CONTEXT = 2,   /* the context window is full */
  EMBER_FINISH_CANCELLED = 3, /* the stream callback returned 0 or the request was cancelled */
  EMBER_FINISH_ERROR = 4      /* the request failed; ember_completion.error says why */
} ember_finish_reason;

/* A short name of a finish reason ("stop", "length", ...); never NULL. */
EMBER_API const char* ember_finish_reason_string(ember_finish_reason reason);

/* Where a request's time went, in milliseconds (as ember::Timings). */
typedef struct ember_timings {
  double load_ms;
  double queue_ms;
  double prefill_ms;
  double time_to_first_token_ms;
  double decode_ms;
  double time_per_output_token_ms;
  double response_ms;
  double total_ms;
  double reasoning_ms; /* a thinking model's reasoning, first token to closing marker */
} ember_timings;

/* A finished request, owned by ember until ember_completion_free(). Read-only. */
typedef struct ember_completion {
  const char* text;      /* generated text, NUL-terminated */
  size_t text_length;    /* bytes, without the NUL */
  const int32_t* tokens; /* generated token ids */
  size_t token_count;
  const float* logprobs; /* per token when sampling.logprobs, else NULL */
  size_t logprob_count;
  ember_finish_reason finish_reason;
  int32_t prompt_tokens;
  int32_t cached_prompt_tokens; /* prompt tokens reused from the prefix cache */
  int32_t generated_tokens;
  int32_t from_response_cache;  /* nonzero: served by the exact response cache */
  const ember_timings* timings; /* never NULL */
  const char* error;            /* why it failed (EMBER_FINISH_ERROR) or was cancelled by ember
                                   (a throwing callback, the engine closed); else "" */
  int32_t dropped_messages;     /* messages EMBER_CONTEXT_TRUNCATE left out of the prompt */
  int32_t context_shifts;       /* times EMBER_CONTEXT_SHIFT made room in the window */
  /* When sampling.top_logprobs > 0: token_count rows of top_logprobs_per_token entries, best
   * first (row i for tokens[i]); else NULL and 0. */
  const ember_token_logprob* top_logprobs;
  size_t top_logprobs_per_token;
  int32_t speculative_proposed; /* tokens sampling.speculative_tokens proposed */
  int32_t speculative_accepted; /* of them, accepted */
  /* A thinking model's reasoning (sampling.reasoning_budget), without its markers and the
   * whitespace around it, NUL-terminated; "" for other models. `text` is the answer only. */
  const char* reasoning;
  size_t reasoning_length;  /* bytes, without the NUL */
  int32_t reasoning_tokens; /* generated tokens inside the reasoning (markers excluded) */
  int32_t closed_early;     /* nonzero: sampling.close_at_limit steered the output to close */
  /* What of sampling.json_schema the grammar does not enforce, one "what at /pointer" string
   * each (docs/api.md lists the rules); NULL and 0 when every keyword is enforced. */
  const char* const* schema_relaxed;
  size_t schema_relaxed_count;
} ember_completion;

/* Frees *completion and sets it to NULL; NULL or *completion == NULL does nothing. */
EMBER_API void ember_completion_free(ember_completion** completion);

/* Which text a streamed chunk belongs to (ember::ChunkStream). */
typedef enum ember_chunk_stream {
  EMBER_STREAM_ANSWER = 0,   /* ember_completion.text */
  EMBER_STREAM_REASONING = 1 /* ember_completion.reasoning; the markers' tokens come with no text */
} ember_chunk_stream;

/* One streamed piece of a completion; valid during the callback only. */
typedef struct ember_chunk {
  const char* text; /* complete UTF-8 characters only, NUL-terminated */
  size_t text_length;
  const int32_t* tokens; /* the token ids that produced this piece */
  size_t token_count;
  const ember_completion* completion;      /* on the last chunk only; do not free it */
  const float* logprobs;                   /* token_count entries when sampling.logprobs, else NULL */
  const ember_token_logprob* top_logprobs; /* token_count rows as in ember_completion, or NULL */
  size_t top_logprobs_per_token;
  ember_chunk_stream stream; /* the text this piece belongs to */
} ember_chunk;

/* Returns nonzero to go on, 0 to stop the request (finish reason EMBER_FINISH_CANCELLED). */
typedef int (*ember_stream_fn)(const ember_chunk* chunk, void* user_data);

/* ---- engine --------------------------------------------------------------------------------- */

/* Loads a GGUF model. `options` may be NULL (defaults). On failure *engine is set to NULL and
 * ember_last_error() says why (EMBER_ERROR_IO, _INVALID_MODEL, _UNSUPPORTED, ...). */
EMBER_API ember_status ember_engine_open(const char* path, const ember_engine_options* options, ember_engine** engine);

/* Releases the engine and sets *engine to NULL; NULL or *engine == NULL does nothing.
 * Unfinished requests end as EMBER_FINISH_CANCELLED (a thread waiting on one returns); their
 * handles stay valid. The step in progress finishes first, and no callback of the engine runs
 * after this returns. Never call it from inside one of the engine's own callbacks. */
EMBER_API void ember_engine_close(ember_engine** engine);

/* Runs one raw-text prompt to completion on the calling thread, streaming to `on_chunk` if it
 * is not NULL. `sampling` may be NULL (defaults); `completion` may be NULL when the caller only
 * streams. A cancelled or failed request still returns EMBER_OK: its completion's finish
 * reason says so. Bad parameters give EMBER_ERROR_INVALID_ARGUMENT, a prompt that cannot fit
 * the context EMBER_ERROR_CONTEXT_OVERFLOW. */
EMBER_API ember_status ember_generate(ember_engine* engine, const char* prompt, const ember_sampling* sampling,
                                      ember_stream_fn on_chunk, void* user_data, ember_completion** completion);

/* generate() over a conversation rendered with the model's chat template.
 * EMBER_ERROR_UNSUPPORTED when the model has no chat template ember can render. */
EMBER_API ember_status ember_chat(ember_engine* engine, const ember_message* messages, size_t message_count,
                                  const ember_sampling* sampling, ember_stream_fn on_chunk, void* user_data,
                                  ember_completion** completion);

/* Queues a request and returns at once. `on_chunk` (may be NULL) runs on the thread that runs
 * the step, so `user_data` must stay valid until the request has finished; a request answered
 * without a step (max_tokens 0, or a response-cache hit) streams inside ember_submit, on the
 * calling thread, before *request is set. */
EMBER_API ember_status ember_submit(ember_engine* engine, const ember_request_params* params, ember_stream_fn on_chunk,
                                    void* user_data, ember_request** request);

typedef struct ember_step_result {
  size_t struct_size;  /* sizeof(ember_step_result), set by the caller */
  int32_t steps;       /* engine steps run */
  int32_t tokens;      /* rows computed (prompt and generated tokens) */
  int32_t idle;        /* nonzero: nothing left to do */
  int32_t step_paused; /* nonzero: the budget ran out inside a step; the next call
                                        continues it */
} ember_step_result;

/* Runs engine steps on the calling thread until `budget_us` microseconds are spent or nothing
 * is left (a game calls it once per frame). A step that does not fit stops inside its forward
 * pass and the next call continues it (as ember::Engine::step; a budget above a day is taken as a
 * day). `result` may be NULL. */
EMBER_API ember_status ember_engine_step(ember_engine* engine, int64_t budget_us, ember_step_result* result);

/* Running totals since the engine opened (as ember::EngineStats). */
typedef struct ember_stats {
  size_t struct_size; /* sizeof(ember_stats), set by the caller */
  uint64_t requests_submitted;
  uint64_t requests_finished;
  uint64_t steps;
  uint64_t prompt_tokens;
  uint64_t prompt_tokens_reused;
  uint64_t generated_tokens;
  uint64_t preemptions;
  uint64_t prefix_lookups;
  uint64_t prefix_hit_blocks;
  uint64_t prefix_evictions;
  uint64_t response_cache_hits;
  int32_t running;
  int32_t queued;
  int32_t kv_blocks_total;
  int32_t kv_blocks_free;
  uint64_t speculative_proposed; /* draft tokens proposed (sampling.speculative_tokens) */
  uint64_t speculative_accepted; /* of them, accepted */
  uint64_t routed_layers;        /* mixture-of-experts models: routed layers run (per layer and step) */
  uint64_t experts_run;          /* the distinct experts they ran, summed */
  uint64_t embedding_sequences;  /* texts and rerank pairs embedded (ember_embed, ember_rerank) */
  uint64_t mixed_steps;          /* steps that carried generating and embedding rows both */
} ember_stats;

EMBER_API ember_status ember_engine_stats(const ember_engine* engine, ember_stats* stats);

/* The loaded model (as ember::ModelInfo); the strings live as long as the engine. */
typedef struct ember_model_info {
  size_t struct_size; /* sizeof(ember_model_info), set by the caller */
  const char* name;
  const char* architecture;
  int32_t layers;
  int32_t embedding;
  int32_t heads;
  int32_t kv_heads;
  int32_t vocab;
  int32_t context_length; /* the context the engine was opened with */
  uint64_t parameters;
  int32_t has_chat_template;
  double load_ms;
  const char* weight_format; /* "w4a8", "w8a8-g32", "w8a8" joined by '+' (as in
                                        ember::ModelInfo), "fp32" or "fp16" */
} ember_model_info;

EMBER_API ember_status ember_engine_info(const ember_engine* engine, ember_model_info* info);

/* Text to token ids (`text_length` bytes of `text`). *token_count receives the number of ids;
 * when `tokens` is NULL or `capacity` is smaller, nothing is written to `tokens` and the
 * result is EMBER_ERROR_BUFFER_TOO_SMALL, so a caller can ask for the size first. */
EMBER_API ember_status ember_tokenize(const ember_engine* engine, const char* text, size_t text_length,
                                      int parse_special, int32_t* tokens, size_t capacity, size_t* token_count);

/* Token ids to text. *text_length receives the length in bytes without the NUL; `text` gets
 * the text and a NUL when `capacity` > *text_length, else EMBER_ERROR_BUFFER_TOO_SMALL. */
EMBER_API ember_status ember_detokenize(const ember_engine* engine, const int32_t* tokens, size_t token_count,
                                        char* text, size_t capacity, size_t* text_length);

/* ---- embeddings ----------------------------------------------------------------------------- */

/* As ember::Pooling. */
typedef enum ember_pooling {
  EMBER_POOLING_MODEL_DEFAULT = 0, /* the file's pooling_type; mean (encoders) or last (decoders) */
  EMBER_POOLING_NONE = 1,          /* every token's hidden state */
  EMBER_POOLING_MEAN = 2,
  EMBER_POOLING_CLS = 3,
  EMBER_POOLING_LAST = 4,
  EMBER_POOLING_RANK = 5 /* a reranker's classification head: *dimension is its outputs */
} ember_pooling;

/* Flags of ember_embed, or-ed; 0 = the defaults of ember::EmbedOptions. */
#define EMBER_EMBED_NO_NORMALIZE 1u /* keep the raw pooled vectors (default: L2-normalised) */
#define EMBER_EMBED_NO_TRUNCATE \
  2u                              /* a text longer than the model's context fails
                                       (EMBER_ERROR_CONTEXT_OVERFLOW) instead of being cut */
#define EMBER_EMBED_NO_SPECIAL 4u /* no special tokens around the text ([CLS] ... [SEP], BOS) */

/* Embeds `text_count` NUL-terminated texts (Engine::embed). *embeddings receives a buffer that
 * ember allocated (free it with ember_embeddings_free): the texts' vectors one after another,
 * each *dimension floats, or with EMBER_POOLING_NONE (or MODEL_DEFAULT on a file whose
 * pooling_type is none) each text's token_counts[i] rows of *dimension floats. `token_counts`
 * (text_count entries; may be NULL except when rows come per token) receives the tokens each
 * text became. On failure nothing is written. */
EMBER_API ember_status ember_embed(ember_engine* engine, const char* const* texts, size_t text_count, int32_t pooling,
                                   uint32_t flags, float** embeddings, size_t* dimension, int32_t* token_counts);
/* Frees a buffer from ember_embed and sets *embeddings to NULL; NULL does nothing. */
EMBER_API void ember_embeddings_free(float** embeddings);

/* Scores `document_count` NUL-terminated documents against `query` with a reranker
 * (Engine::rerank): scores[i] (the caller's array of document_count floats) receives document
 * i's relevance, higher is more relevant (the classification head's raw output). On failure
 * nothing is written; EMBER_ERROR_UNSUPPORTED for a model without a classification head. */
EMBER_API ember_status ember_rerank(ember_engine* engine, const char* query, const char* const* documents,
                                    size_t document_count, float* scores);
/* ---- LoRA adapters (docs/api.md#lora) ------------------------------------------------------- */

/* Loads a LoRA adapter in llama.cpp's GGUF format (Engine::load_adapter); *id receives its id,
 * never reused. EMBER_ERROR_INVALID_MODEL for an adapter that is malformed or for another base
 * model, _UNSUPPORTED for tensors ember does not adapt or a device without adapters, _IO for a
 * file that cannot be read. */
EMBER_API ember_status ember_load_adapter(ember_engine* engine, const char* path, int32_t* id);
/* Unloads an adapter; EMBER_ERROR_BUSY while a queued or running request uses it,
 * _INVALID_ARGUMENT for an unknown id. */
EMBER_API ember_status ember_unload_adapter(ember_engine* engine, int32_t id);
/* The ids of the loaded adapters in increasing order: *count receives how many there are, and
 * `ids` the first min(count, capacity) of them (ids may be NULL when capacity is 0). */
EMBER_API ember_status ember_list_adapters(const ember_engine* engine, int32_t* ids, size_t capacity, size_t* count);

/* ---- KV state that outlives a request -------------------------------------------------------- */

/* As Engine::save_state / load_state in ember.hpp: a snapshot of the prefix cache's full KV
 * blocks of `tokens` (prompt ids, then generated ids), tied to this model file, ember version,
 * precision, KV cache type and block size. Loading validates everything first (a truncated,
 * corrupt or foreign snapshot is EMBER_ERROR_INVALID_ARGUMENT, or _UNSUPPORTED for another
 * ember version, and changes nothing), then adds the blocks to the prefix cache, so a later
 * request whose prompt starts with those tokens skips their prefill. */

/* *data receives a buffer that ember allocated (free it with ember_state_free), *size its
 * length in bytes; on failure both are left as they were. */
EMBER_API ember_status ember_engine_save_state(ember_engine* engine, const int32_t* tokens, size_t token_count,
                                               uint8_t** data, size_t* size);
/* Frees a buffer from ember_engine_save_state and sets *data to NULL; NULL does nothing. */
EMBER_API void ember_state_free(uint8_t** data);
/* `blocks_loaded` (may be NULL) receives the number of blocks now cached from the snapshot. */
EMBER_API ember_status ember_engine_load_state(ember_engine* engine, const uint8_t* data, size_t size,
                                               size_t* blocks_loaded);
/* The same through a file (written to a temporary, then renamed); EMBER_ERROR_IO when it cannot
 * be written or read. */
EMBER_API ember_status ember_engine_save_state_file(ember_engine* engine, const char* path, const int32_t* tokens,
                                                    size_t token_count);
EMBER_API ember_status ember_engine_load_state_file(ember_engine* engine, const char* path, size_t* blocks_loaded);
/* A prefix store for ember_engine_options.prefix_store_path: the full blocks of each raw-text
 * prompt (tokenized as ember_generate would). */
EMBER_API ember_status ember_engine_save_prefix_store(ember_engine* engine, const char* path,
                                                      const char* const* prompts, size_t prompt_count);

/* ---- requests ------------------------------------------------------------------------------- */

typedef enum ember_request_state {
  EMBER_REQUEST_QUEUED = 0,
  EMBER_REQUEST_RUNNING = 1,
  EMBER_REQUEST_FINISHED = 2
} ember_request_state;

/* Blocks until the request finishes and gives its completion (a new one per call). A request
 * that was cancelled still succeeds: its completion has EMBER_FINISH_CANCELLED and the text
 * generated until then. Without a background thread the caller runs engine steps itself. */
EMBER_API ember_status ember_request_wait(ember_request* request, ember_completion** completion);

/* Asks the request to stop (finish reason EMBER_FINISH_CANCELLED); no-op once finished. Waits
 * for the step in progress; from inside one of the engine's stream callbacks it fails with
 * EMBER_ERROR_INVALID_ARGUMENT. */
EMBER_API ember_status ember_request_cancel(ember_request* request);

/* ember_request_cancel that never waits (RequestHandle::cancel_soon): flags the request and
 * returns at once, also from a stream callback; the thread that steps the engine ends it before
 * its next step (the background thread, else the next ember_engine_step or ember_request_wait). */
EMBER_API ember_status ember_request_cancel_soon(ember_request* request);

EMBER_API ember_status ember_request_status(const ember_request* request, ember_request_state* state);

/* The request's id, unique within its engine. */
EMBER_API ember_status ember_request_id(const ember_request* request, uint64_t* id);

/* Frees the handle (the request itself goes on unless cancelled) and sets *request to NULL;
 * NULL or *request == NULL does nothing. A handle may outlive its engine. */
EMBER_API void ember_request_free(ember_request** request);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EMBER_EMBER_H */
