/* The C ABI's reasoning and structured-output fields: ember_sampling.reasoning_budget and
 * close_at_limit, ember_completion.reasoning / reasoning_tokens / closed_early /
 * schema_relaxed, ember_timings.reasoning_ms and ember_chunk.stream; and a caller built against
 * the ember.h before them (a smaller struct_size) keeps the defaults. */
#include "capi_check.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

typedef struct streams {
  char reasoning[4096], answer[4096];
  size_t reasoning_length, answer_length;
  int reasoning_chunks, answer_chunks;
} streams;

static void append(char* buffer, size_t* length, const ember_chunk* chunk) {
  if (*length + chunk->text_length < 4096) {
    memcpy(buffer + *length, chunk->text, chunk->text_length + 1);
    *length += chunk->text_length;
  }
}

static int on_stream(const ember_chunk* chunk, void* user_data) {
  streams* s = (streams*)user_data;
  CHECK(chunk->stream == EMBER_STREAM_ANSWER || chunk->stream == EMBER_STREAM_REASONING);
  if (chunk->stream == EMBER_STREAM_REASONING) {
    append(s->reasoning, &s->reasoning_length, chunk);
    ++s->reasoning_chunks;
  } else {
    append(s->answer, &s->answer_length, chunk);
    ++s->answer_chunks;
  }
  return 1;
}

static int32_t one_token(ember_engine* engine, const char* text) {
  int32_t id = -1;
  size_t count = 0;
  CHECK_OK(ember_tokenize(engine, text, strlen(text), 1, &id, 1, &count));
  CHECK(count == 1);
  return id;
}

void test_reasoning(const char* thinking_model_path) {
  ember_engine_options options = capi_options();
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(thinking_model_path, &options, &engine));
  if (engine == NULL) return;
  const int32_t open = one_token(engine, "<think>"), close = one_token(engine, "</think>");
  const ember_message chat[] = {{"user", "What is 6*7?"}};
  /* The generation prompt opens <think>; </think> is banned so that the budget closes it (and
   * <think>, which this random model writes, without text, when left free). */
  const ember_logit_bias no_close[] = {{close, -INFINITY}, {open, -INFINITY}};
  ember_sampling s = capi_greedy(24);
  s.logit_bias = no_close;
  s.logit_bias_count = 2;
  s.reasoning_budget = 6;
  streams st;
  memset(&st, 0, sizeof st);
  ember_completion* c = NULL;
  CHECK_OK(ember_chat(engine, chat, 1, &s, on_stream, &st, &c));
  if (c != NULL) {
    CHECK(c->reasoning_tokens == 6);
    CHECK(c->token_count == 24 && c->tokens[6] == close);
    CHECK(c->reasoning != NULL && strlen(c->reasoning) == c->reasoning_length && c->reasoning_length > 0);
    CHECK(strstr(c->reasoning, "</think>") == NULL && strstr(c->text, "</think>") == NULL);
    CHECK(st.reasoning_chunks >= 7); /* six reasoning tokens and the closing marker */
    CHECK(strstr(st.reasoning, c->reasoning) != NULL);
    CHECK(st.answer_length == c->text_length && strcmp(st.answer, c->text) == 0);
    CHECK(c->timings->reasoning_ms > 0);
  }
  ember_completion_free(&c);

  /* 0: the template's enable_thinking=false (an empty block) and no reasoning. */
  s.reasoning_budget = 0;
  memset(&st, 0, sizeof st);
  CHECK_OK(ember_chat(engine, chat, 1, &s, on_stream, &st, &c));
  if (c != NULL) {
    CHECK(c->reasoning_tokens == 0 && c->reasoning_length == 0 && strcmp(c->reasoning, "") == 0);
    CHECK(st.reasoning_chunks == 0);
    CHECK(c->timings->reasoning_ms == 0);
    CHECK(strcmp(st.answer, c->text) == 0);
  }
  ember_completion_free(&c);

  /* A caller built before reasoning_budget existed: the field is not read, the default (no
   * limit) holds, and every token is reasoning while </think> is banned. */
  CHECK_OK(ember_sampling_init(&s, offsetof(ember_sampling, reasoning_budget)));
  CHECK(s.struct_size == offsetof(ember_sampling, reasoning_budget));
  s.temperature = 0.0f;
  s.max_tokens = 12;
  s.ignore_eos = 1;
  s.logit_bias = no_close;
  s.logit_bias_count = 2;
  s.reasoning_budget = 2; /* beyond struct_size: not read */
  CHECK_OK(ember_chat(engine, chat, 1, &s, NULL, NULL, &c));
  if (c != NULL) CHECK(c->reasoning_tokens == 12 && c->text_length == 0);
  ember_completion_free(&c);

  ember_sampling defaults = ember_sampling_default();
  CHECK(defaults.reasoning_budget == -1 && defaults.close_at_limit == 1);
  ember_engine_close(&engine);
}

static int ends_with_brace(const ember_completion* c) {
  return c->text_length > 0 && c->text[c->text_length - 1] == '}';
}

void test_structured_output(ember_engine* engine) {
  /* A relaxation is reported, one string per relaxed keyword. */
  ember_sampling s = capi_greedy(8);
  s.ignore_eos = 0;
  s.json_schema = "{\"type\": \"array\", \"items\": {\"type\": \"string\", \"format\": \"color\"}}";
  ember_completion* c = NULL;
  CHECK_OK(ember_generate(engine, "List:", &s, NULL, NULL, &c));
  if (c != NULL) {
    CHECK(c->schema_relaxed_count == 1 && c->schema_relaxed != NULL);
    if (c->schema_relaxed_count == 1) CHECK(strstr(c->schema_relaxed[0], "'color'") != NULL);
  }
  ember_completion_free(&c);

  /* Cut at max_tokens inside the string: steered to close (close_at_limit, the default), the
   * output parses and says so; without it, it ends open. */
  s = capi_greedy(10);
  s.ignore_eos = 0;
  s.json_schema =
      "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"]}";
  CHECK_OK(ember_generate(engine, "JSON:", &s, NULL, NULL, &c));
  if (c != NULL) {
    CHECK(c->finish_reason == EMBER_FINISH_LENGTH && c->closed_early == 1 && ends_with_brace(c));
    CHECK(c->schema_relaxed == NULL && c->schema_relaxed_count == 0);
  }
  ember_completion_free(&c);
  s.close_at_limit = 0;
  CHECK_OK(ember_generate(engine, "JSON:", &s, NULL, NULL, &c));
  if (c != NULL) CHECK(c->finish_reason == EMBER_FINISH_LENGTH && c->closed_early == 0 && !ends_with_brace(c));
  ember_completion_free(&c);
}
