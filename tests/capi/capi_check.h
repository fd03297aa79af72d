/* A minimal check harness for the C tests (doctest is C++): counts checks, prints failures. */
#ifndef EMBER_TESTS_CAPI_CHECK_H
#define EMBER_TESTS_CAPI_CHECK_H

#include <ember/ember.h>

#include <stdio.h>
#include <string.h>

extern int capi_passed;
extern int capi_failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (cond) {                                                                \
      ++capi_passed;                                                           \
    } else {                                                                   \
      ++capi_failed;                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* A call that must succeed; prints ember's message when it does not. */
#define CHECK_OK(call)                                                                                              \
  do {                                                                                                              \
    ember_status check_status_ = (call);                                                                            \
    if (check_status_ == EMBER_OK) {                                                                                \
      ++capi_passed;                                                                                                \
    } else {                                                                                                        \
      ++capi_failed;                                                                                                \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, ember_status_string(check_status_), \
              ember_last_error());                                                                                  \
    }                                                                                                               \
  } while (0)

/* A call that must fail with `expected` and leave a message containing `needle`. */
#define CHECK_FAILS(call, expected, needle)                                                                          \
  do {                                                                                                               \
    ember_status check_status_ = (call);                                                                             \
    CHECK(check_status_ == (expected));                                                                              \
    if (check_status_ != (expected)) {                                                                               \
      fprintf(stderr, "  got %s, expected %s\n", ember_status_string(check_status_), ember_status_string(expected)); \
    }                                                                                                                \
    CHECK(strstr(ember_last_error(), (needle)) != NULL);                                                             \
    if (strstr(ember_last_error(), (needle)) == NULL) {                                                              \
      fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ember_last_error(), needle);                                \
    }                                                                                                                \
  } while (0)

/* The shared test model and the small options every test opens it with. */
extern const char* capi_model_path;
ember_engine_options capi_options(void); /* 2 threads, a 4 MiB KV pool */
ember_engine* capi_open(void);
ember_sampling capi_greedy(int max_tokens);

void test_version_and_defaults(void);
void test_open_errors(void);
void test_argument_errors(ember_engine* engine);
void test_older_struct_sizes(ember_engine* engine);
void test_handle_misuse(void);
void test_state(void);
void test_load(void);
void test_limits(void);
void test_reasoning(const char* thinking_model_path);
void test_structured_output(ember_engine* engine);
void test_embed(ember_engine* engine);
void test_lora(ember_engine* engine);

#endif
