/* Loading through the C ABI, compiled as C11: progress, cancellation from the progress callback,
 * and the packed-weight cache. */
#include "capi_check.h"

#include <stdlib.h>

typedef struct progress_state {
  int calls;
  int cancel_at; /* return 0 at this call (1-based); 0 = never */
  float last;
  int monotone;    /* stays 1 while every fraction is >= the one before and in [0, 1] */
  int phases_seen; /* bit per ember_load_phase */
} progress_state;

static int on_progress(ember_load_phase phase, float fraction, void* user_data) {
  progress_state* s = (progress_state*)user_data;
  ++s->calls;
  if (fraction < s->last || fraction < 0.0f || fraction > 1.0f) s->monotone = 0;
  s->last = fraction;
  s->phases_seen |= 1 << (int)phase;
  return s->cancel_at == 0 || s->calls < s->cancel_at;
}

static ember_engine_options load_options(progress_state* progress) {
  ember_engine_options options = ember_engine_options_default();
  options.threads = 2;
  options.kv_cache_bytes = 4u << 20;
  options.on_load_progress = on_progress;
  options.load_progress_user_data = progress;
  return options;
}

static void test_progress_and_cancel(void) {
  progress_state full = {0, 0, 0.0f, 1, 0};
  ember_engine_options options = load_options(&full);
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  CHECK(engine != NULL);
  ember_engine_close(&engine);
  CHECK(full.monotone && full.last == 1.0f);
  CHECK(full.calls >= 6); /* per layer of the 2-layer model, not once */
  CHECK((full.phases_seen & (1 << EMBER_LOAD_READING)) && (full.phases_seen & (1 << EMBER_LOAD_WEIGHTS)) &&
        (full.phases_seen & (1 << EMBER_LOAD_CACHE)));
  /* Weights are prepared a layer at a time, within EMBER_LOAD_WEIGHTS. */
  CHECK(!(full.phases_seen & (1 << EMBER_LOAD_CALIBRATION)) && !(full.phases_seen & (1 << EMBER_LOAD_QUANTIZATION)));
  CHECK(strcmp(ember_load_phase_string(EMBER_LOAD_CALIBRATION), "calibration") == 0);
  CHECK(strcmp(ember_load_phase_string((ember_load_phase)42), "unknown") == 0);

  /* Cancelling at the first call, in the middle and at the very last call (the ASan run of the
   * suite checks that each leaves nothing behind). */
  const int points[] = {1, full.calls / 2, full.calls};
  for (size_t i = 0; i < sizeof points / sizeof points[0]; ++i) {
    progress_state cancel = {0, points[i], 0.0f, 1, 0};
    ember_engine_options o = load_options(&cancel);
    engine = (ember_engine*)&cancel; /* set to NULL on failure */
    CHECK_FAILS(ember_engine_open(capi_model_path, &o, &engine), EMBER_ERROR_CANCELLED, "cancelled");
    CHECK(engine == NULL);
    CHECK(cancel.calls == points[i]);
  }
}

typedef struct log_state {
  char written[1024]; /* path of the cache file the engine wrote */
  int read_from_cache;
} log_state;

static void on_log(ember_log_level level, const char* message, void* user_data) {
  log_state* s = (log_state*)user_data;
  const char* written = "weight cache written: ";
  (void)level;
  if (strncmp(message, written, strlen(written)) == 0) {
    const char* path = message + strlen(written);
    const size_t n = strcspn(path, " ");
    if (n < sizeof s->written) {
      memcpy(s->written, path, n);
      s->written[n] = '\0';
    }
  }
  if (strstr(message, "weights read from the cache") != NULL) s->read_from_cache = 1;
}

static ember_completion* generate_with_cache(const char* dir, log_state* log) {
  ember_engine_options options = ember_engine_options_default();
  options.threads = 2;
  options.kv_cache_bytes = 4u << 20;
  options.weight_cache_dir = dir;
  options.weight_format = EMBER_WEIGHTS_W8A8; /* the cache holds w8a8 matrices only */
  options.log = on_log;
  options.log_user_data = log;
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  if (engine == NULL) return NULL;
  const ember_sampling greedy = capi_greedy(12);
  ember_completion* c = NULL;
  CHECK_OK(ember_generate(engine, "The weight cache", &greedy, NULL, NULL, &c));
  ember_engine_close(&engine);
  return c;
}

static void test_weight_cache(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s.weight-cache", capi_model_path);
  log_state cold = {{0}, 0}, warm = {{0}, 0};
  ember_completion* a = generate_with_cache(dir, &cold);
  ember_completion* b = generate_with_cache(dir, &warm);
  CHECK(warm.read_from_cache);
  CHECK(a != NULL && b != NULL && a->token_count == 12 && b->token_count == 12);
  if (a != NULL && b != NULL) CHECK(memcmp(a->tokens, b->tokens, 12 * sizeof(int32_t)) == 0);
  ember_completion_free(&a);
  ember_completion_free(&b);
  if (cold.written[0] != '\0') CHECK(remove(cold.written) == 0);
  remove(dir); /* the directory, now empty (POSIX remove() takes directories) */
}

void test_load(void) {
  test_progress_and_cancel();
  test_weight_cache();
}
