/* LoRA adapters through the C ABI, compiled as C11: the adapter make_capi_model writes beside
 * the model (MODEL.gguf.lora.gguf) is loaded, listed, used by a request through
 * ember_sampling.adapters, refused for unloading while a request uses it (EMBER_ERROR_BUSY),
 * unloaded afterwards; bad ids and files are errors with a message. */
#include "capi_check.h"

#include <stdlib.h>

void test_lora(ember_engine* engine) {
  char path[4096];
  snprintf(path, sizeof path, "%s.lora.gguf", capi_model_path);
  int32_t id = -1;
  CHECK_OK(ember_load_adapter(engine, path, &id));
  CHECK(id >= 0);
  int32_t ids[4] = {-1, -1, -1, -1};
  size_t count = 0;
  CHECK_OK(ember_list_adapters(engine, ids, 4, &count));
  CHECK(count == 1 && ids[0] == id);

  ember_sampling sampling = capi_greedy(4);
  const ember_adapter_scale use = {id, 1.0f};
  sampling.adapters = &use;
  sampling.adapter_count = 1;
  ember_request_params params = ember_request_params_default();
  params.prompt = "the adapter speaks";
  params.sampling = &sampling;
  ember_request* request = NULL;
  CHECK_OK(ember_submit(engine, &params, NULL, NULL, &request));
  CHECK_FAILS(ember_unload_adapter(engine, id), EMBER_ERROR_BUSY, "in use");
  ember_completion* c = NULL;
  CHECK_OK(ember_request_wait(request, &c));
  if (c != NULL) CHECK(c->token_count == 4);
  ember_completion_free(&c);
  ember_request_free(&request);
  CHECK_OK(ember_unload_adapter(engine, id));
  CHECK_OK(ember_list_adapters(engine, NULL, 0, &count));
  CHECK(count == 0);
  CHECK_FAILS(ember_unload_adapter(engine, id), EMBER_ERROR_INVALID_ARGUMENT, "no LoRA adapter");
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &request), EMBER_ERROR_INVALID_ARGUMENT, "no LoRA adapter");
  CHECK_FAILS(ember_load_adapter(engine, capi_model_path, &id), EMBER_ERROR_INVALID_MODEL, "not an adapter");
  CHECK_FAILS(ember_load_adapter(engine, NULL, &id), EMBER_ERROR_INVALID_ARGUMENT, "path");
  sampling.adapters = NULL; /* a count without the array */
  CHECK_FAILS(ember_submit(engine, &params, NULL, NULL, &request), EMBER_ERROR_INVALID_ARGUMENT, "adapters is NULL");
}
