/* KV state through the C ABI, compiled as C11: a conversation saved to a buffer and to a file,
 * loaded into a fresh engine and continued, gives the uninterrupted run's tokens and
 * log-probabilities; a corrupt or truncated buffer is refused with a message and changes
 * nothing; a prefix store named in the options makes a fresh engine's first request hit. */
#include "capi_check.h"

#include <stdio.h>
#include <stdlib.h>

#define PROMPT 41 /* with 32 generated ids: 73 tokens, 4 full blocks of 16 */

static const char* kStateFile = "capi-state.emberkv";
static const char* kStoreFile = "capi-store.emberkv";

static ember_completion* run_tokens(ember_engine* engine, const int32_t* ids, size_t count, int max_tokens) {
  ember_sampling s = capi_greedy(max_tokens);
  s.logprobs = 1;
  ember_request_params params = ember_request_params_default();
  params.prompt_tokens = ids;
  params.prompt_token_count = count;
  params.sampling = &s;
  ember_request* request = NULL;
  ember_completion* completion = NULL;
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &request));
  if (request != NULL) CHECK_OK(ember_request_wait(request, &completion));
  ember_request_free(&request);
  return completion;
}

/* `resumed` continues `full` after its first 32 tokens, with the same ids and logprobs. */
static int continues(const ember_completion* full, const ember_completion* resumed) {
  return resumed->token_count == 32 && resumed->logprob_count == 32 &&
         memcmp(resumed->tokens, full->tokens + 32, 32 * sizeof(int32_t)) == 0 &&
         memcmp(resumed->logprobs, full->logprobs + 32, 32 * sizeof(float)) == 0;
}

static void resume_from(ember_engine* engine, const ember_completion* full, const int32_t* ids) {
  ember_completion* resumed = run_tokens(engine, ids, PROMPT + 32, 32);
  if (resumed == NULL) return;
  CHECK(resumed->cached_prompt_tokens == 64);
  CHECK(continues(full, resumed));
  ember_completion_free(&resumed);
}

static void test_prefix_store(void) {
  ember_engine* writer = capi_open();
  if (writer == NULL) return;
  const char* personas[] = {"the long shared lore of the valley, told again and again. You are the smith.",
                            "the long shared lore of the valley, told again and again. You are the cook."};
  CHECK_OK(ember_engine_save_prefix_store(writer, kStoreFile, personas, 2));
  CHECK_FAILS(ember_engine_save_prefix_store(writer, kStoreFile, NULL, 1), EMBER_ERROR_INVALID_ARGUMENT,
              "prompts is NULL");
  ember_engine_close(&writer);

  ember_engine_options options = capi_options();
  options.prefix_store_path = kStoreFile;
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  if (engine == NULL) return;
  const ember_sampling greedy = capi_greedy(4);
  ember_completion* c = NULL;
  CHECK_OK(ember_generate(engine, "the long shared lore of the valley, told again and again. You are the cook. Hi!",
                          &greedy, NULL, NULL, &c));
  if (c != NULL) CHECK(c->cached_prompt_tokens >= 16);
  ember_completion_free(&c);
  ember_engine_close(&engine);

  options.prefix_store_path = "/nonexistent/store.emberkv";
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_IO, "/nonexistent/store.emberkv");
  CHECK(engine == NULL);
  remove(kStoreFile);
}

void test_state(void) {
  int32_t ids[PROMPT + 32];
  for (int i = 0; i < PROMPT; ++i) ids[i] = 1 + (i * 37) % 500;
  ember_engine* a = capi_open();
  if (a == NULL) return;
  ember_completion* full = run_tokens(a, ids, PROMPT, 64);
  if (full == NULL || full->token_count != 64) {
    CHECK(full != NULL && full->token_count == 64);
    ember_engine_close(&a);
    return;
  }
  memcpy(ids + PROMPT, full->tokens, 32 * sizeof(int32_t)); /* greedy: the first 32 of the 64 */
  uint8_t* data = NULL;
  size_t size = 0;
  CHECK_OK(ember_engine_save_state(a, ids, PROMPT + 32, &data, &size));
  CHECK_OK(ember_engine_save_state_file(a, kStateFile, ids, PROMPT + 32));
  CHECK_FAILS(ember_engine_save_state(a, NULL, 3, &data, &size), EMBER_ERROR_INVALID_ARGUMENT, "tokens is NULL");
  CHECK(data != NULL); /* the failed call above left the saved buffer alone */
  ember_engine_close(&a);
  if (data == NULL) {
    ember_completion_free(&full);
    return;
  }

  ember_engine* b = capi_open();
  size_t blocks = 99;
  data[size / 2] ^= 0x10;
  CHECK_FAILS(ember_engine_load_state(b, data, size, &blocks), EMBER_ERROR_INVALID_ARGUMENT, "checksum mismatch");
  CHECK(strstr(ember_engine_last_error(b), "checksum mismatch") != NULL);
  data[size / 2] ^= 0x10;
  CHECK_FAILS(ember_engine_load_state(b, data, size - 1, &blocks), EMBER_ERROR_INVALID_ARGUMENT, "truncated");
  CHECK_FAILS(ember_engine_load_state(b, NULL, size, &blocks), EMBER_ERROR_INVALID_ARGUMENT, "data is NULL");
  CHECK(blocks == 99); /* outputs are written only on success */
  CHECK_OK(ember_engine_load_state(b, data, size, &blocks));
  CHECK(blocks == 4);
  resume_from(b, full, ids);
  ember_engine_close(&b);

  ember_engine* c = capi_open();
  CHECK_OK(ember_engine_load_state_file(c, kStateFile, &blocks));
  CHECK(blocks == 4);
  resume_from(c, full, ids);
  CHECK_FAILS(ember_engine_load_state_file(c, "/nonexistent/state.emberkv", NULL), EMBER_ERROR_IO, "nonexistent");
  ember_engine_close(&c);

  ember_state_free(&data);
  CHECK(data == NULL);
  ember_state_free(&data); /* a second free of the same variable is a no-op */
  ember_completion_free(&full);
  remove(kStateFile);
  test_prefix_store();
}
