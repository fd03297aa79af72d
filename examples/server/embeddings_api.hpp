// POST /v1/embeddings in OpenAI's wire format: the request body to texts or token lists, the
// engine's embeddings to the response body. No HTTP here (routes.cpp answers with it).
#pragma once

#include "openai_api.hpp"

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace server {

struct EmbeddingsRequest {
  std::vector<std::string> texts;                 // `input` as a string or a list of strings
  std::vector<std::vector<std::int32_t>> tokens;  // or as token ids (a list, or a list of lists)
  bool base64 = false;                            // encoding_format "base64": float32 bytes, little-endian
};

// Validates a body: `input` (required; a string, a list of strings, a list of token ids or a
// list of such lists; never empty), `encoding_format` ("float" or "base64"), `model` and `user`
// (accepted, changing nothing). Any other field is a 400 naming it. Throws ApiError.
EmbeddingsRequest parse_embeddings_request(const std::string& body);

// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}], "model",
// "usage": {"prompt_tokens", "total_tokens"}}.
nlohmann::json embeddings_response(const std::vector<ember::Embedding>& embeddings, bool base64,
                                   const std::string& model);

// Little-endian float32 bytes in standard base64 (what the openai client decodes).
std::string base64_floats(const std::vector<float>& values);

}  // namespace server
