/* The C ABI's error paths, compiled as C11: versions and defaults, failed opens, bad
 * arguments, and misused handles. Every failure must be a status and a message, never a crash. */
#include "capi_check.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

static int log_lines = 0;
static int log_saw_loaded = 0;

static void on_log(ember_log_level level, const char* message, void* user_data) {
  CHECK(user_data == &log_lines);
  ++*(int*)user_data;
  if (level == EMBER_LOG_INFO && strstr(message, "loaded") != NULL) log_saw_loaded = 1;
}

void test_version_and_defaults(void) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", EMBER_VERSION_MAJOR, EMBER_VERSION_MINOR, EMBER_VERSION_PATCH);
  CHECK(strcmp(ember_version(), expected) == 0);
  CHECK(ember_version_number() == EMBER_VERSION_NUMBER);
  CHECK(strcmp(ember_status_string(EMBER_OK), "ok") == 0);
  CHECK(strcmp(ember_status_string(EMBER_ERROR_IO), "io") == 0);
  CHECK(strcmp(ember_status_string(EMBER_ERROR_CONTEXT_OVERFLOW), "context_overflow") == 0);
  CHECK(strcmp(ember_status_string(EMBER_ERROR_BUSY), "busy") == 0);
  CHECK(strcmp(ember_status_string((ember_status)1234), "unknown") == 0);

  /* The defaults are the C++ API's (ember.hpp). */
  const ember_engine_options o = ember_engine_options_default();
  CHECK(o.struct_size == sizeof(ember_engine_options));
  CHECK(o.precision == EMBER_PRECISION_INT8 && o.kv_cache_type == EMBER_KV_CACHE_F16);
  CHECK(o.kv_cache_bytes == (256u << 20) && o.kv_block_size == 16);
  CHECK(o.max_batch_tokens == 512 && o.max_sequences == 16 && o.prefix_cache == 1);
  CHECK(o.background_thread == 0 && o.log == NULL && o.threads == 0);
  CHECK(o.max_prompt_tokens == 0 && o.max_generated_tokens == 0 && o.max_requests == 0);
  CHECK(o.batch_min_requests == 1 && o.batch_max_wait_ms == 0);
  const ember_sampling s = ember_sampling_default();
  CHECK(s.struct_size == sizeof(ember_sampling));
  CHECK(s.max_tokens == 256 && s.temperature == 0.8f && s.top_k == 40 && s.top_p == 0.95f);
  CHECK(s.min_p == 0.05f && s.repetition_penalty == 1.0f && s.penalty_last_n == 64);
  CHECK(s.stop == NULL && s.stop_count == 0 && s.ignore_eos == 0 && s.logprobs == 0);
  const ember_request_params p = ember_request_params_default();
  CHECK(p.struct_size == sizeof(ember_request_params) && p.prompt == NULL && p.sampling == NULL);
  CHECK(p.context_policy == -1 && p.context_keep == -1 && o.context_policy == EMBER_CONTEXT_ERROR);

  /* A struct from a newer header (larger) or a truncated one is refused, not guessed at. */
  ember_sampling big;
  CHECK_FAILS(ember_sampling_init(&big, sizeof big + 8), EMBER_ERROR_INVALID_ARGUMENT, "struct_size");
  CHECK_FAILS(ember_sampling_init(&big, 4), EMBER_ERROR_INVALID_ARGUMENT, "struct_size");
  CHECK_FAILS(ember_engine_options_init(NULL, sizeof o), EMBER_ERROR_INVALID_ARGUMENT, "NULL");
}

void test_open_errors(void) {
  ember_engine* engine = (ember_engine*)&engine; /* must be reset to NULL on failure */
  CHECK_FAILS(ember_engine_open("/nonexistent/dir/model.gguf", NULL, &engine), EMBER_ERROR_IO,
              "/nonexistent/dir/model.gguf");
  CHECK(engine == NULL);
  CHECK_FAILS(ember_engine_open(NULL, NULL, &engine), EMBER_ERROR_INVALID_ARGUMENT, "path");
  CHECK_FAILS(ember_engine_open(capi_model_path, NULL, NULL), EMBER_ERROR_INVALID_ARGUMENT, "NULL");

  /* Not a GGUF file: a text file beside the model (not __FILE__, which Ninja makes relative to
   * the build directory, where ctest does not run the test). */
  char not_gguf[4096];
  snprintf(not_gguf, sizeof not_gguf, "%s.not-gguf", capi_model_path);
  FILE* f = fopen(not_gguf, "wb");
  CHECK(f != NULL);
  if (f != NULL) {
    fputs("this text is not a GGUF model, only long enough to be read as one", f);
    fclose(f);
  }
  CHECK(ember_engine_open(not_gguf, NULL, &engine) == EMBER_ERROR_INVALID_MODEL);
  CHECK(engine == NULL && strlen(ember_last_error()) > 0);
  remove(not_gguf);

  ember_engine_options options = ember_engine_options_default();
  options.struct_size = 0;
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT,
              "ember_engine_options.struct_size");
  options = ember_engine_options_default();
  options.precision = (ember_precision)7;
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT, "precision");
  options = ember_engine_options_default();
  options.kv_block_size = 0;
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT, "kv_block_size");
  options = ember_engine_options_default();
  options.batch_min_requests = 2;
  options.batch_max_wait_ms = 50; /* a batch window without background_thread */
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT,
              "needs background_thread");
  options.background_thread = 1;
  options.batch_max_wait_ms = -1;
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT, "batch_max_wait");

  /* The log callback receives the load line with its user data. */
  options = ember_engine_options_default();
  options.threads = 1;
  options.kv_cache_bytes = 1u << 20;
  options.log = on_log;
  options.log_user_data = &log_lines;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  CHECK(log_lines > 0 && log_saw_loaded);
  ember_engine_close(&engine);
  CHECK(engine == NULL);
}

void test_argument_errors(ember_engine* engine) {
  ember_completion* c = (ember_completion*)&c; /* reset to NULL on failure */
  ember_sampling bad = capi_greedy(4);
  bad.temperature = NAN;
  CHECK_FAILS(ember_generate(engine, "hi", &bad, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "temperature");
  CHECK(c == NULL);
  CHECK(strstr(ember_engine_last_error(engine), "temperature") != NULL);
  bad = capi_greedy(4);
  bad.top_p = 0.0f;
  CHECK_FAILS(ember_generate(engine, "hi", &bad, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "top_p");
  bad = capi_greedy(4);
  bad.stop_count = 2; /* with stop == NULL */
  CHECK_FAILS(ember_generate(engine, "hi", &bad, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "stop");
  const char* stops[2] = {"x", NULL};
  bad.stop = stops;
  CHECK_FAILS(ember_generate(engine, "hi", &bad, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "stop[1]");
  bad = capi_greedy(4);
  bad.struct_size = sizeof bad + 16;
  CHECK_FAILS(ember_generate(engine, "hi", &bad, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "newer ember.h");

  const ember_sampling ok = capi_greedy(4);
  CHECK_FAILS(ember_generate(NULL, "hi", &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "NULL");
  CHECK(strlen(ember_engine_last_error(NULL)) > 0);
  CHECK_FAILS(ember_generate(engine, NULL, &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "prompt");
  CHECK_FAILS(ember_generate(engine, "", &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "empty");

  /* A prompt longer than the 256-token context. */
  char longer[2048];
  for (size_t i = 0; i + 1 < sizeof longer; ++i) longer[i] = (char)('a' + (i * 7) % 26);
  longer[sizeof longer - 1] = '\0';
  CHECK_FAILS(ember_generate(engine, longer, &ok, NULL, NULL, &c), EMBER_ERROR_CONTEXT_OVERFLOW, "context");

  const ember_message no_role[1] = {{NULL, "hi"}};
  CHECK_FAILS(ember_chat(engine, no_role, 1, &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "role");
  CHECK_FAILS(ember_chat(engine, NULL, 1, &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "messages");
  CHECK_FAILS(ember_chat(engine, NULL, 0, &ok, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "message");

  ember_request* r = (ember_request*)&r;
  ember_request_params params = ember_request_params_default();
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "no prompt");
  CHECK(r == NULL);
  params.prompt = "hi";
  params.sampling = &bad;
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "struct_size");
  const int32_t out_of_vocab[2] = {5, 100000};
  params = ember_request_params_default();
  params.prompt_tokens = out_of_vocab;
  params.prompt_token_count = 2;
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "100000");
  params = ember_request_params_default();
  params.prompt = "hi";
  params.context_policy = 7;
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "context_policy");
  params.context_policy = EMBER_CONTEXT_SHIFT;
  params.context_keep = -5;
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "context_keep");
  CHECK_FAILS(ember_submit(engine, NULL, NULL, NULL, &r), EMBER_ERROR_INVALID_ARGUMENT, "params");

  CHECK_FAILS(ember_engine_step(engine, -1, NULL), EMBER_ERROR_INVALID_ARGUMENT, "budget_us");
  CHECK_FAILS(ember_engine_stats(engine, NULL), EMBER_ERROR_INVALID_ARGUMENT, "stats");
  ember_stats stats = {0}; /* struct_size not set */
  CHECK_FAILS(ember_engine_stats(engine, &stats), EMBER_ERROR_INVALID_ARGUMENT, "ember_stats.struct_size");
  size_t count = 0;
  CHECK_FAILS(ember_tokenize(engine, NULL, 3, 0, NULL, 0, &count), EMBER_ERROR_INVALID_ARGUMENT, "text");
  const int32_t bad_ids[1] = {-3};
  char text[16];
  CHECK(ember_detokenize(engine, bad_ids, 1, text, sizeof text, &count) == EMBER_ERROR_INVALID_ARGUMENT);
  CHECK(strlen(ember_engine_last_error(engine)) > 0);
}

/* Handles of the wrong kind, or not live, are reported, never used. */
/* A program built against ember 0.1's ember.h passes that header's (smaller) sizes: each struct's
 * first appended field is where its 0.1 form ended. Inputs read only what it knows (the rest
 * keeps its default); outputs are written only that far. */
void test_older_struct_sizes(ember_engine* engine) {
  ember_sampling s = capi_greedy(3);
  s.struct_size = offsetof(ember_sampling, top_logprobs);
  ember_request_params p = ember_request_params_default();
  p.struct_size = offsetof(ember_request_params, context_policy);
  p.prompt = "hi";
  p.sampling = &s;
  ember_request* r = NULL;
  CHECK_OK(ember_submit(engine, &p, NULL, NULL, &r));
  ember_completion* c = NULL;
  if (r != NULL) CHECK_OK(ember_request_wait(r, &c));
  if (c != NULL) CHECK(c->generated_tokens == 3);
  ember_completion_free(&c);
  ember_request_free(&r);

  _Alignas(16) unsigned char canary[sizeof(ember_stats) + sizeof(ember_model_info) + sizeof(ember_step_result)];
  memset(canary, 0xA5, sizeof canary);
  ember_stats* stats = (ember_stats*)canary;
  stats->struct_size = offsetof(ember_stats, speculative_proposed);
  CHECK_OK(ember_engine_stats(engine, stats));
  CHECK(stats->requests_finished >= 1);
  CHECK(canary[offsetof(ember_stats, speculative_proposed)] == 0xA5); /* not written past its size */
  ember_model_info* info = (ember_model_info*)canary;
  info->struct_size = offsetof(ember_model_info, weight_format);
  CHECK_OK(ember_engine_info(engine, info));
  CHECK(info->layers > 0);
  ember_step_result* step = (ember_step_result*)canary;
  step->struct_size = offsetof(ember_step_result, step_paused);
  CHECK_OK(ember_engine_step(engine, 1000, step));
  CHECK(step->idle == 1);

  /* Smaller than any ember.h declared: refused before the step runs. */
  step->struct_size = sizeof(size_t);
  CHECK_FAILS(ember_engine_step(engine, 1000, step), EMBER_ERROR_INVALID_ARGUMENT, "ember_step_result");
  s.struct_size = offsetof(ember_sampling, logprobs);
  CHECK_FAILS(ember_generate(engine, "hi", &s, NULL, NULL, NULL), EMBER_ERROR_INVALID_ARGUMENT, "ember_sampling");
}

void test_handle_misuse(void) {
  CHECK_FAILS(ember_request_wait(NULL, NULL), EMBER_ERROR_INVALID_ARGUMENT, "NULL");
  ember_completion* c = NULL;
  CHECK_FAILS(ember_request_wait(NULL, &c), EMBER_ERROR_INVALID_ARGUMENT, "request is NULL");
  CHECK_FAILS(ember_request_cancel(NULL), EMBER_ERROR_INVALID_ARGUMENT, "NULL");
  CHECK_FAILS(ember_request_cancel_soon(NULL), EMBER_ERROR_INVALID_ARGUMENT, "NULL");
  ember_request_state state;
  CHECK_FAILS(ember_request_status(NULL, &state), EMBER_ERROR_INVALID_ARGUMENT, "NULL");

  /* Zeroed memory (as a handle whose magic was cleared looks) is not a live engine or request. */
  uint64_t zeros[64];
  memset(zeros, 0, sizeof zeros);
  const ember_sampling s = capi_greedy(2);
  CHECK_FAILS(ember_generate((ember_engine*)zeros, "hi", &s, NULL, NULL, &c), EMBER_ERROR_INVALID_ARGUMENT,
              "not a live engine");
  CHECK(strstr(ember_engine_last_error((ember_engine*)zeros), "not a live engine") != NULL);
  CHECK_FAILS(ember_request_cancel((ember_request*)zeros), EMBER_ERROR_INVALID_ARGUMENT, "not a live request");

  /* A live request passed where an engine is expected (a cast in C) is caught by its magic. */
  ember_engine* engine = capi_open();
  if (engine == NULL) return;
  ember_request_params params = ember_request_params_default();
  params.prompt = "hi";
  params.sampling = &s;
  ember_request* r = NULL;
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &r));
  CHECK_FAILS(ember_engine_step((ember_engine*)r, 0, NULL), EMBER_ERROR_INVALID_ARGUMENT, "not a live engine");
  CHECK_FAILS(ember_request_wait((ember_request*)engine, &c), EMBER_ERROR_INVALID_ARGUMENT, "not a live request");
  ember_completion_free((ember_completion**)&zeros[0]); /* *ptr is NULL: nothing happens */
  ember_request_free(&r);
  ember_engine_close(&engine);
}

/* The limits of ember_engine_options: a request past max_requests is EMBER_ERROR_BUSY, one past
 * max_generated_tokens EMBER_ERROR_INVALID_ARGUMENT; options from before the limits existed
 * (a struct_size without them) keep the defaults, no limits. */
void test_limits(void) {
  ember_engine_options options = ember_engine_options_default();
  options.threads = 1;
  options.kv_cache_bytes = 4u << 20;
  options.max_requests = 1;
  options.max_generated_tokens = 4;
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  if (engine == NULL) return;
  const ember_sampling s = capi_greedy(4);
  ember_request_params params = ember_request_params_default();
  params.prompt = "hi";
  params.sampling = &s;
  ember_request* first = NULL;
  ember_request* second = NULL;
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &first)); /* queued: no background thread */
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &second), EMBER_ERROR_BUSY, "max_requests");
  CHECK(second == NULL);
  ember_completion* c = NULL;
  CHECK_OK(ember_request_wait(first, &c));
  ember_completion_free(&c);
  ember_request_free(&first);
  const ember_sampling too_long = capi_greedy(5);
  params.sampling = &too_long;
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &second), EMBER_ERROR_INVALID_ARGUMENT, "max_generated_tokens");
  ember_engine_close(&engine);

  options = ember_engine_options_default();
  options.struct_size = offsetof(ember_engine_options, max_prompt_tokens);
  options.threads = 1;
  options.kv_cache_bytes = 4u << 20;
  options.max_requests = 1; /* beyond struct_size: not read */
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  if (engine == NULL) return;
  params.sampling = &s;
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &first));
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &second));
  ember_request_free(&first);
  ember_request_free(&second);
  ember_engine_close(&engine);
}
