/* The C ABI end to end, compiled as C11: generate, streaming, submit/wait/cancel, the step
 * loop, stats, chat, tokenize; error paths are in test_capi_errors.c.
 * Usage: test_capi MODEL.gguf THINKING_MODEL.gguf (synthetic models made by make_capi_model). */
#include "capi_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int capi_passed = 0;
int capi_failed = 0;
const char* capi_model_path = NULL;

ember_engine_options capi_options(void) {
  ember_engine_options options = ember_engine_options_default();
  options.threads = 2;
  options.kv_cache_bytes = 4u << 20;
  return options;
}

ember_engine* capi_open(void) {
  ember_engine_options options = capi_options();
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  return engine;
}

ember_sampling capi_greedy(int max_tokens) {
  ember_sampling s = ember_sampling_default();
  s.temperature = 0.0f;
  s.max_tokens = max_tokens;
  s.ignore_eos = 1;
  return s;
}

typedef struct stream_state {
  char text[4096];
  size_t length;
  int chunks;
  int stop_after;  /* return 0 at this chunk; 0 = never */
  int last_chunks; /* chunks that carried the completion */
  ember_finish_reason last_reason;
  size_t last_token_count;
} stream_state;

static int on_chunk(const ember_chunk* chunk, void* user_data) {
  stream_state* s = (stream_state*)user_data;
  CHECK(chunk->text != NULL && strlen(chunk->text) == chunk->text_length);
  if (s->length + chunk->text_length < sizeof s->text) {
    memcpy(s->text + s->length, chunk->text, chunk->text_length + 1);
    s->length += chunk->text_length;
  }
  ++s->chunks;
  if (chunk->completion != NULL) {
    ++s->last_chunks;
    s->last_reason = chunk->completion->finish_reason;
    s->last_token_count = chunk->completion->token_count;
    /* A chunk's completion belongs to ember: freeing it is refused, not a crash. */
    ember_completion* borrowed = (ember_completion*)chunk->completion;
    ember_completion_free(&borrowed);
    CHECK(borrowed == NULL);
    CHECK(strstr(ember_last_error(), "belongs to ember") != NULL);
  }
  return s->stop_after == 0 || s->chunks < s->stop_after;
}

static int same_tokens(const ember_completion* a, const ember_completion* b) {
  return a->token_count == b->token_count && memcmp(a->tokens, b->tokens, a->token_count * sizeof(int32_t)) == 0;
}

static void test_generate_and_stream(ember_engine* engine) {
  const ember_sampling greedy = capi_greedy(16);
  ember_completion* a = NULL;
  CHECK_OK(ember_generate(engine, "the quick brown fox", &greedy, NULL, NULL, &a));
  if (a == NULL) return;
  CHECK(a->finish_reason == EMBER_FINISH_LENGTH);
  CHECK(a->generated_tokens == 16 && a->token_count == 16);
  CHECK(a->prompt_tokens > 0);
  CHECK(strlen(a->text) == a->text_length);
  CHECK(a->logprobs == NULL && a->logprob_count == 0);
  CHECK(a->timings != NULL && a->timings->total_ms >= a->timings->time_to_first_token_ms);
  CHECK(a->timings->time_to_first_token_ms > 0);
  CHECK(strcmp(a->error, "") == 0);

  stream_state s;
  memset(&s, 0, sizeof s);
  ember_completion* b = NULL;
  CHECK_OK(ember_generate(engine, "the quick brown fox", &greedy, on_chunk, &s, &b));
  if (b != NULL) {
    CHECK(same_tokens(a, b)); /* greedy is deterministic */
    CHECK(strcmp(a->text, b->text) == 0);
    CHECK(s.length == b->text_length && strcmp(s.text, b->text) == 0);
    CHECK(s.chunks == 17); /* one per token and the last one */
    CHECK(s.last_chunks == 1 && s.last_reason == EMBER_FINISH_LENGTH && s.last_token_count == 16);
  }
  ember_completion_free(&a);
  ember_completion_free(&b);
  CHECK(a == NULL && b == NULL);
  ember_completion_free(&b); /* a second free of the same variable is a no-op */

  /* A callback that returns 0 stops the request early. */
  const ember_sampling longer = capi_greedy(64);
  memset(&s, 0, sizeof s);
  s.stop_after = 3;
  CHECK_OK(ember_generate(engine, "the quick brown fox", &longer, on_chunk, &s, &b));
  if (b != NULL) {
    CHECK(b->finish_reason == EMBER_FINISH_CANCELLED);
    CHECK(b->generated_tokens >= 3 && b->generated_tokens < 64);
    CHECK(s.chunks >= 3 && s.chunks <= 4); /* at most the final chunk after the stop */
  }
  ember_completion_free(&b);

  /* Logprobs and a NULL completion output (stream only). */
  ember_sampling with_logprobs = capi_greedy(5);
  with_logprobs.logprobs = 1;
  CHECK_OK(ember_generate(engine, "abc", &with_logprobs, NULL, NULL, &b));
  if (b != NULL) {
    CHECK(b->logprob_count == 5 && b->logprobs != NULL && b->logprobs[0] <= 0.0f);
  }
  ember_completion_free(&b);
  CHECK_OK(ember_generate(engine, "abc", &with_logprobs, NULL, NULL, NULL));

  /* top_logprobs: rows of equal width, best first, the greedy choice first. */
  with_logprobs.top_logprobs = 3;
  CHECK_OK(ember_generate(engine, "abc", &with_logprobs, NULL, NULL, &b));
  if (b != NULL) {
    CHECK(b->top_logprobs != NULL && b->top_logprobs_per_token == 3);
    if (b->top_logprobs != NULL && b->token_count == 5) {
      CHECK(b->top_logprobs[0].token == b->tokens[0]);
      CHECK(b->top_logprobs[3].token == b->tokens[1]);
      CHECK(b->top_logprobs[1].logprob <= b->top_logprobs[0].logprob);
    }
  }
  ember_completion_free(&b);

  /* logit_bias: banning the greedy first token changes it. */
  ember_sampling plain = capi_greedy(2);
  CHECK_OK(ember_generate(engine, "abc", &plain, NULL, NULL, &a));
  ember_logit_bias ban = {0, -INFINITY};
  if (a != NULL && a->token_count > 0) ban.token = a->tokens[0];
  plain.logit_bias = &ban;
  plain.logit_bias_count = 1;
  CHECK_OK(ember_generate(engine, "abc", &plain, NULL, NULL, &b));
  if (a != NULL && b != NULL && b->token_count > 0) CHECK(b->tokens[0] != a->tokens[0]);
  ember_completion_free(&a);
  ember_completion_free(&b);

  /* A grammar: the text is one of its strings; a bad grammar is refused with its position. */
  ember_sampling constrained = capi_greedy(16);
  constrained.ignore_eos = 0;
  constrained.grammar = "root ::= (\"yes\" | \"no\") \".\"";
  CHECK_OK(ember_generate(engine, "abc", &constrained, NULL, NULL, &b));
  if (b != NULL) {
    CHECK(strcmp(b->text, "yes.") == 0 || strcmp(b->text, "no.") == 0);
    CHECK(b->finish_reason == EMBER_FINISH_STOP);
  }
  ember_completion_free(&b);
  constrained.grammar = "root ::= (";
  CHECK(ember_generate(engine, "abc", &constrained, NULL, NULL, &b) == EMBER_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(ember_last_error(), "column") != NULL);
  constrained.grammar = NULL;
  constrained.json_schema = "{\"enum\": [\"left\", \"right\"]}";
  CHECK_OK(ember_generate(engine, "abc", &constrained, NULL, NULL, &b));
  if (b != NULL) CHECK(strcmp(b->text, "\"left\"") == 0 || strcmp(b->text, "\"right\"") == 0);
  ember_completion_free(&b);
}

static ember_request* submit_prompt(ember_engine* engine, const char* prompt, const ember_sampling* s,
                                    stream_state* stream) {
  ember_request_params params = ember_request_params_default();
  params.prompt = prompt;
  params.sampling = s;
  ember_request* request = NULL;
  CHECK_OK(ember_submit(engine, &params, stream != NULL ? on_chunk : NULL, stream, &request));
  return request;
}

static void test_submit_wait_cancel(ember_engine* engine) {
  const ember_sampling greedy = capi_greedy(12);
  ember_completion* expected = NULL;
  CHECK_OK(ember_generate(engine, "once upon a time", &greedy, NULL, NULL, &expected));

  ember_request* r = submit_prompt(engine, "once upon a time", &greedy, NULL);
  ember_request* other = submit_prompt(engine, "a different prompt", &greedy, NULL);
  uint64_t id = 0, other_id = 0;
  CHECK_OK(ember_request_id(r, &id));
  CHECK_OK(ember_request_id(other, &other_id));
  CHECK(id != other_id);
  ember_completion* c = NULL;
  CHECK_OK(ember_request_wait(r, &c));
  if (c != NULL && expected != NULL) {
    CHECK(c->finish_reason == EMBER_FINISH_LENGTH);
    CHECK(same_tokens(c, expected)); /* batched with `other`, same result as alone */
  }
  ember_request_state state = EMBER_REQUEST_QUEUED;
  CHECK_OK(ember_request_status(r, &state));
  CHECK(state == EMBER_REQUEST_FINISHED);
  ember_completion_free(&c);
  ember_request_free(&r);
  ember_request_free(&r); /* no-op: r is NULL now */
  CHECK(r == NULL);
  ember_request_free(&other); /* freeing an unfinished handle leaves its request running */

  /* Cancel before any step: waiting still succeeds and reports the cancellation. */
  const ember_sampling many = capi_greedy(200);
  r = submit_prompt(engine, "cancel me", &many, NULL);
  CHECK_OK(ember_request_status(r, &state));
  CHECK(state == EMBER_REQUEST_QUEUED);
  CHECK_OK(ember_request_cancel(r));
  CHECK_OK(ember_request_wait(r, &c));
  if (c != NULL) {
    CHECK(c->finish_reason == EMBER_FINISH_CANCELLED);
    CHECK(c->generated_tokens < 200);
  }
  ember_completion_free(&c);
  CHECK_OK(ember_request_wait(r, &c)); /* waiting again gives the same answer */
  if (c != NULL) CHECK(c->finish_reason == EMBER_FINISH_CANCELLED);
  ember_completion_free(&c);
  CHECK_OK(ember_request_cancel(r)); /* cancelling a finished request does nothing */
  ember_request_free(&r);

  /* cancel_soon only flags the request: it stays queued until a step ends it (here the wait's). */
  r = submit_prompt(engine, "cancel me soon", &many, NULL);
  CHECK_OK(ember_request_cancel_soon(r));
  CHECK_OK(ember_request_status(r, &state));
  CHECK(state == EMBER_REQUEST_QUEUED);
  CHECK_OK(ember_request_wait(r, &c));
  if (c != NULL) CHECK(c->finish_reason == EMBER_FINISH_CANCELLED && c->generated_tokens == 0);
  ember_completion_free(&c);
  CHECK_OK(ember_request_cancel_soon(r)); /* finished: nothing happens */
  ember_request_free(&r);
  ember_completion_free(&expected);
}

static void test_step_loop_and_stats(ember_engine* engine) {
  ember_step_result step = {.struct_size = sizeof(ember_step_result)};
  do { /* finish what earlier tests left running, so the totals below are this test's */
    CHECK_OK(ember_engine_step(engine, 100000, &step));
  } while (!step.idle);
  ember_stats before = {.struct_size = sizeof(ember_stats)};
  CHECK_OK(ember_engine_stats(engine, &before));
  const ember_sampling greedy = capi_greedy(8);
  stream_state streams[3];
  ember_request* requests[3];
  const char* prompts[3] = {"alpha beta", "gamma delta epsilon", "zeta"};
  for (int i = 0; i < 3; ++i) {
    memset(&streams[i], 0, sizeof streams[i]);
    requests[i] = submit_prompt(engine, prompts[i], &greedy, &streams[i]);
  }
  /* The host loop of a game: one small time budget per frame until the engine is idle. */
  int frames = 0, steps = 0;
  do {
    CHECK_OK(ember_engine_step(engine, 1000, &step));
    steps += step.steps;
  } while (!step.idle && ++frames < 10000);
  CHECK(step.idle);
  CHECK(steps >= 8); /* 8 tokens each need 8 decode steps at least */
  for (int i = 0; i < 3; ++i) {
    ember_request_state state = EMBER_REQUEST_QUEUED;
    CHECK_OK(ember_request_status(requests[i], &state));
    CHECK(state == EMBER_REQUEST_FINISHED);
    CHECK(streams[i].chunks == 9 && streams[i].last_reason == EMBER_FINISH_LENGTH);
    ember_completion* c = NULL;
    CHECK_OK(ember_request_wait(requests[i], &c)); /* finished: returns at once */
    if (c != NULL) CHECK(c->generated_tokens == 8 && strcmp(c->text, streams[i].text) == 0);
    ember_completion_free(&c);
    ember_request_free(&requests[i]);
  }
  ember_stats after = {.struct_size = sizeof(ember_stats)};
  CHECK_OK(ember_engine_stats(engine, &after));
  CHECK(after.requests_submitted - before.requests_submitted == 3);
  CHECK(after.requests_finished - before.requests_finished == 3);
  CHECK(after.generated_tokens - before.generated_tokens == 24);
  CHECK(after.steps - before.steps == (uint64_t)steps);
  CHECK(after.running == 0 && after.queued == 0);
  CHECK(after.kv_blocks_total > 0 && after.kv_blocks_free <= after.kv_blocks_total);
  CHECK_OK(ember_engine_step(engine, 0, NULL)); /* no result wanted */
}

static void test_chat_tokenize_info(ember_engine* engine) {
  const ember_message messages[2] = {{"system", "You are terse."}, {"user", "hello"}};
  const ember_sampling greedy = capi_greedy(6);
  stream_state s;
  memset(&s, 0, sizeof s);
  ember_completion* c = NULL;
  CHECK_OK(ember_chat(engine, messages, 2, &greedy, on_chunk, &s, &c));
  if (c != NULL) {
    /* The template wraps both messages in <|im_start|>role ... <|im_end|> markers. */
    CHECK(c->prompt_tokens > (int32_t)(strlen("You are terse.") / 4 + 6));
    CHECK(c->generated_tokens == 6 && strcmp(s.text, c->text) == 0);
  }
  ember_completion_free(&c);

  size_t count = 0;
  const char* text = "hello world";
  CHECK(ember_tokenize(engine, text, strlen(text), 0, NULL, 0, &count) == EMBER_ERROR_BUFFER_TOO_SMALL);
  CHECK(count > 0 && count <= strlen(text));
  int32_t ids[64];
  size_t count2 = 0;
  CHECK_OK(ember_tokenize(engine, text, strlen(text), 0, ids, 64, &count2));
  CHECK(count2 == count);
  char back[64];
  size_t length = 0;
  CHECK(ember_detokenize(engine, ids, count, back, 4, &length) == EMBER_ERROR_BUFFER_TOO_SMALL);
  CHECK(length == strlen(text));
  CHECK_OK(ember_detokenize(engine, ids, count, back, sizeof back, &length));
  CHECK(length == strlen(text) && strcmp(back, text) == 0);
  /* The special-token text is one id only when parsing specials. */
  const char* special = "<|im_end|>";
  CHECK_OK(ember_tokenize(engine, special, strlen(special), 1, ids, 64, &count));
  CHECK(count == 1 && ids[0] == 2);
  CHECK_OK(ember_tokenize(engine, special, strlen(special), 0, ids, 64, &count));
  CHECK(count > 1);

  ember_model_info info = {.struct_size = sizeof(ember_model_info)};
  CHECK_OK(ember_engine_info(engine, &info));
  CHECK(info.layers == 2 && info.embedding == 64 && info.heads == 4 && info.kv_heads == 2);
  CHECK(info.vocab == 512 && info.context_length == 256 && info.has_chat_template == 1);
  CHECK(info.architecture != NULL && strcmp(info.architecture, "llama") == 0);
  CHECK(info.parameters > 0 && info.load_ms > 0);
}

/* An int8 KV cache (EMBER_KV_CACHE_INT8) and draftless speculation (speculative_tokens): the
 * greedy tokens with speculation are those without; the completion and the stats count the
 * drafts. */
static void test_int8_kv_and_speculation(void) {
  ember_engine_options options = capi_options();
  options.kv_cache_type = EMBER_KV_CACHE_INT8;
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(capi_model_path, &options, &engine));
  if (engine == NULL) return;
  ember_sampling plain = capi_greedy(40);
  ember_sampling fast = plain;
  fast.speculative_tokens = 8;
  CHECK(ember_sampling_default().speculative_tokens == 0);
  const char* prompt = "one two three one two three one two three one two three";
  ember_completion* a = NULL;
  ember_completion* b = NULL;
  CHECK_OK(ember_generate(engine, prompt, &plain, NULL, NULL, &a));
  CHECK_OK(ember_generate(engine, prompt, &fast, NULL, NULL, &b));
  if (a != NULL && b != NULL) {
    CHECK(same_tokens(a, b));
    CHECK(a->speculative_proposed == 0 && a->speculative_accepted == 0);
    CHECK(b->speculative_accepted <= b->speculative_proposed);
    ember_stats stats;
    stats.struct_size = sizeof stats;
    CHECK_OK(ember_engine_stats(engine, &stats));
    CHECK(stats.speculative_proposed == (uint64_t)b->speculative_proposed);
    CHECK(stats.speculative_accepted == (uint64_t)b->speculative_accepted);
  }
  ember_completion_free(&a);
  ember_completion_free(&b);
  fast.speculative_tokens = 17;
  CHECK_FAILS(ember_generate(engine, prompt, &fast, NULL, NULL, &b), EMBER_ERROR_INVALID_ARGUMENT,
              "speculative_tokens");
  ember_engine_close(&engine);
  options.kv_cache_type = (ember_kv_cache_type)7;
  CHECK_FAILS(ember_engine_open(capi_model_path, &options, &engine), EMBER_ERROR_INVALID_ARGUMENT, "kv_cache_type");
}

/* A request handle outlives its engine: the request ends as cancelled. */
static void test_request_outlives_engine(void) {
  ember_engine* engine = capi_open();
  if (engine == NULL) return;
  const ember_sampling many = capi_greedy(100);
  ember_request* r = submit_prompt(engine, "left behind", &many, NULL);
  ember_engine_close(&engine);
  CHECK(engine == NULL);
  ember_engine_close(&engine); /* no-op */
  ember_request_state state = EMBER_REQUEST_QUEUED;
  CHECK_OK(ember_request_status(r, &state));
  CHECK(state == EMBER_REQUEST_FINISHED);
  ember_completion* c = NULL;
  CHECK_OK(ember_request_wait(r, &c));
  if (c != NULL) CHECK(c->finish_reason == EMBER_FINISH_CANCELLED && c->generated_tokens == 0);
  ember_completion_free(&c);
  ember_request_free(&r);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test_capi MODEL.gguf THINKING_MODEL.gguf\n");
    return 2;
  }
  capi_model_path = argv[1];
  test_version_and_defaults();
  test_open_errors();
  test_handle_misuse();
  test_limits();
  ember_engine* engine = capi_open();
  if (engine != NULL) {
    test_generate_and_stream(engine);
    test_submit_wait_cancel(engine);
    test_step_loop_and_stats(engine);
    test_chat_tokenize_info(engine);
    test_argument_errors(engine);
    test_older_struct_sizes(engine);
    test_structured_output(engine);
    test_embed(engine);
    test_lora(engine);
    ember_engine_close(&engine);
  }
  test_request_outlives_engine();
  test_int8_kv_and_speculation();
  test_state();
  test_load();
  test_reasoning(argv[2]);
  printf("%d passed, %d failed\n", capi_passed, capi_failed);
  return capi_failed == 0 ? 0 : 1;
}
