// The C ABI's KV state functions (ember.h, "KV state that outlives a request"): thin shells
// over Engine::save_state / load_state / save_prefix_store, inside guarded() like every entry.
#include "capi/capi.hpp"

#include <algorithm>
#include <cstdlib>

using namespace ember::capi;
using ember::ErrorCode;
using ember::fail;

namespace {

std::vector<std::int32_t> token_vector(const int32_t* tokens, size_t count) {
  if (tokens == nullptr && count > 0) fail(ErrorCode::invalid_argument, "tokens is NULL but token_count is {}", count);
  return std::vector<std::int32_t>(tokens, tokens + count);
}

}  // namespace

extern "C" {

EMBER_API ember_status ember_engine_save_state(ember_engine* engine, const int32_t* tokens, size_t token_count,
                                               uint8_t** data, size_t* size) {
  return guarded(engine, [&] {
    require(data, "the data output");  // written only on success, like every output
    require(size, "the size output");
    ember_engine& e = live(engine);
    const std::vector<std::uint8_t> bytes = e.engine.save_state(token_vector(tokens, token_count));
    // malloc, not new[]: the buffer is the caller's until ember_state_free, a plain C object.
    auto* out = static_cast<uint8_t*>(std::malloc(bytes.empty() ? 1 : bytes.size()));
    if (out == nullptr) fail(ErrorCode::out_of_memory, "cannot allocate {} bytes for the KV state", bytes.size());
    std::copy(bytes.begin(), bytes.end(), out);
    *data = out;
    *size = bytes.size();
  });
}

EMBER_API void ember_state_free(uint8_t** data) {
  if (data == nullptr) return;
  std::free(*data);
  *data = nullptr;
}

EMBER_API ember_status ember_engine_load_state(ember_engine* engine, const uint8_t* data, size_t size,
                                               size_t* blocks_loaded) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(data, "data");
    const std::size_t blocks = e.engine.load_state(std::vector<std::uint8_t>(data, data + size));
    if (blocks_loaded != nullptr) *blocks_loaded = blocks;
  });
}

EMBER_API ember_status ember_engine_save_state_file(ember_engine* engine, const char* path, const int32_t* tokens,
                                                    size_t token_count) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(path, "path");
    e.engine.save_state_file(path, token_vector(tokens, token_count));
  });
}

EMBER_API ember_status ember_engine_load_state_file(ember_engine* engine, const char* path, size_t* blocks_loaded) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(path, "path");
    const std::size_t blocks = e.engine.load_state_file(path);
    if (blocks_loaded != nullptr) *blocks_loaded = blocks;
  });
}

EMBER_API ember_status ember_engine_save_prefix_store(ember_engine* engine, const char* path,
                                                      const char* const* prompts, size_t prompt_count) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(path, "path");
    if (prompts == nullptr && prompt_count > 0)
      fail(ErrorCode::invalid_argument, "prompts is NULL but prompt_count is {}", prompt_count);
    std::vector<ember::Request> requests(prompt_count);
    for (size_t i = 0; i < prompt_count; ++i) {
      if (prompts[i] == nullptr) fail(ErrorCode::invalid_argument, "prompts[{}] is NULL", i);
      requests[i].prompt = prompts[i];
    }
    e.engine.save_prefix_store(path, requests);
  });
}

}  // extern "C"
