/* ember-c-api: the C ABI in one page. Opens a model, streams a chat answer, prints where the
 * time went, closes.     ember-c-api MODEL.gguf [QUESTION] */
#include <ember/ember.h>

#include <stdio.h>

static int print_chunk(const ember_chunk* chunk, void* user_data) {
  (void)user_data;
  fwrite(chunk->text, 1, chunk->text_length, stdout);
  fflush(stdout);
  return 1; /* nonzero: go on */
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [QUESTION]\n", argv[0]);
    return 2;
  }
  ember_engine* engine = NULL;
  ember_engine_options options = ember_engine_options_default();
  if (ember_engine_open(argv[1], &options, &engine) != EMBER_OK) {
    fprintf(stderr, "error: %s\n", ember_last_error());
    return 1;
  }
  ember_message messages[1] = {{"user", argc > 2 ? argv[2] : "Write a haiku about the sea."}};
  ember_sampling sampling = ember_sampling_default();
  sampling.max_tokens = 64;
  ember_completion* answer = NULL;
  ember_status status = ember_chat(engine, messages, 1, &sampling, print_chunk, NULL, &answer);
  if (status == EMBER_OK) {
    const ember_timings* t = answer->timings;
    printf("\n\nfinish: %s, %d prompt + %d generated tokens\n", ember_finish_reason_string(answer->finish_reason),
           answer->prompt_tokens, answer->generated_tokens);
    printf("first token %.1f ms, %.2f ms/token, total %.1f ms\n", t->time_to_first_token_ms,
           t->time_per_output_token_ms, t->total_ms);
  } else {
    fprintf(stderr, "error (%s): %s\n", ember_status_string(status), ember_engine_last_error(engine));
  }
  ember_completion_free(&answer);
  ember_engine_close(&engine);
  return status == EMBER_OK ? 0 : 1;
}
