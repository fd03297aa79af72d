/* Embeddings through the C ABI, compiled as C11, on the synthetic decoder (last-token pooling by
 * default): one vector per text, L2-normalised unless asked not to, the same text giving the
 * same vector alone and in a batch, EMBER_POOLING_NONE giving every token's row with the last
 * row equal to the last-token pooled vector, and bad arguments refused with a message. */
#include "capi_check.h"

#include <math.h>
#include <stdlib.h>

static double norm_of(const float* v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += (double)v[i] * v[i];
  return sqrt(s);
}

void test_embed(ember_engine* engine) {
  const char* texts[] = {"The knight found a golden key.", "Hello", "The knight found a golden key."};
  float* values = NULL;
  size_t dim = 0;
  int32_t counts[3] = {0, 0, 0};
  CHECK_OK(ember_embed(engine, texts, 3, EMBER_POOLING_MODEL_DEFAULT, 0, &values, &dim, counts));
  if (values == NULL) return;
  ember_model_info info;
  info.struct_size = sizeof info;
  CHECK_OK(ember_engine_info(engine, &info));
  CHECK(dim == (size_t)info.embedding);
  CHECK(counts[0] > counts[1] && counts[1] > 0 && counts[0] == counts[2]);
  CHECK(fabs(norm_of(values, dim) - 1.0) < 1e-4);
  CHECK(memcmp(values, values + 2 * dim, dim * sizeof(float)) == 0);

  float* alone = NULL;
  size_t dim2 = 0;
  CHECK_OK(ember_embed(engine, texts + 1, 1, EMBER_POOLING_LAST, 0, &alone, &dim2, NULL));
  if (alone != NULL) CHECK(memcmp(alone, values + dim, dim * sizeof(float)) == 0);
  ember_embeddings_free(&alone);

  float* rows = NULL;
  int32_t n = 0;
  CHECK_OK(ember_embed(engine, texts + 1, 1, EMBER_POOLING_NONE, EMBER_EMBED_NO_NORMALIZE, &rows, &dim2, &n));
  float* raw_last = NULL;
  CHECK_OK(ember_embed(engine, texts + 1, 1, EMBER_POOLING_LAST, EMBER_EMBED_NO_NORMALIZE, &raw_last, &dim2, NULL));
  if (rows != NULL && raw_last != NULL) {
    CHECK(n == counts[1]);
    CHECK(memcmp(rows + (size_t)(n - 1) * dim, raw_last, dim * sizeof(float)) == 0);
    CHECK(fabs(norm_of(raw_last, dim) - 1.0) > 1e-3); /* not normalised */
  }
  ember_embeddings_free(&rows);
  ember_embeddings_free(&raw_last);
  CHECK(rows == NULL);
  ember_embeddings_free(NULL);

  CHECK_FAILS(ember_embed(engine, texts, 1, 99, 0, &rows, &dim2, NULL), EMBER_ERROR_INVALID_ARGUMENT, "pooling");
  CHECK_FAILS(ember_embed(engine, texts, 1, EMBER_POOLING_NONE, 0, &rows, &dim2, NULL), EMBER_ERROR_INVALID_ARGUMENT,
              "token_counts");
  CHECK_FAILS(ember_embed(engine, texts, 1, EMBER_POOLING_MEAN, 64u, &rows, &dim2, NULL), EMBER_ERROR_INVALID_ARGUMENT,
              "flags");
  CHECK_FAILS(ember_embed(engine, NULL, 1, EMBER_POOLING_MEAN, 0, &rows, &dim2, NULL), EMBER_ERROR_INVALID_ARGUMENT,
              "texts");
  CHECK(rows == NULL);
  ember_embeddings_free(&values);
}
