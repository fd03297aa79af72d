/* Reranking through the C ABI, compiled as C11, on the synthetic BERT reranker: ember_rerank's
 * scores in order (the same document scoring the same alone and among others), EMBER_POOLING_RANK
 * through ember_embed giving the same score with a dimension of the head's one output, and bad
 * arguments refused with a message.
 * Usage: test_capi_rerank RERANKER.gguf (made by make_capi_rerank_model). */
#include "capi_check.h"

#include <stdlib.h>

int capi_passed = 0;
int capi_failed = 0;

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_capi_rerank RERANKER.gguf\n");
    return 2;
  }
  ember_engine_options options = ember_engine_options_default();
  options.threads = 2;
  ember_engine* engine = NULL;
  CHECK_OK(ember_engine_open(argv[1], &options, &engine));
  if (engine == NULL) return 1;

  const char* documents[] = {"The dragon sleeps beneath the mountain.", "the river is cold", "the dragon"};
  float scores[3] = {0, 0, 0};
  CHECK_OK(ember_rerank(engine, "where is the dragon?", documents, 3, scores));
  CHECK(scores[0] != scores[1] && scores[1] != scores[2]);
  float alone = 0;
  CHECK_OK(ember_rerank(engine, "where is the dragon?", documents + 2, 1, &alone));
  CHECK(alone == scores[2]);
  CHECK_OK(ember_rerank(engine, "where is the dragon?", NULL, 0, NULL));

  /* The head's scores through ember_embed: one float, not normalised. */
  float* values = NULL;
  size_t dim = 0;
  CHECK_OK(ember_embed(engine, documents, 1, EMBER_POOLING_RANK, 0, &values, &dim, NULL));
  CHECK(dim == 1);
  ember_embeddings_free(&values);
  CHECK_OK(ember_embed(engine, documents, 1, EMBER_POOLING_MODEL_DEFAULT, 0, &values, &dim, NULL));
  CHECK(dim == 1);
  ember_embeddings_free(&values);

  CHECK_FAILS(ember_rerank(engine, NULL, documents, 1, scores), EMBER_ERROR_INVALID_ARGUMENT, "query");
  CHECK_FAILS(ember_rerank(engine, "q", NULL, 1, scores), EMBER_ERROR_INVALID_ARGUMENT, "documents");
  CHECK_FAILS(ember_rerank(engine, "q", documents, 1, NULL), EMBER_ERROR_INVALID_ARGUMENT, "scores");
  const char* with_null[] = {"a", NULL};
  CHECK_FAILS(ember_rerank(engine, "q", with_null, 2, scores), EMBER_ERROR_INVALID_ARGUMENT, "documents[1]");
  ember_engine_close(&engine);
  printf("%d passed, %d failed\n", capi_passed, capi_failed);
  return capi_failed == 0 ? 0 : 1;
}
