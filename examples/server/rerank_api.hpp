// POST /v1/rerank (and /rerank) in llama-server's wire format: the request body to a query and
// documents, the engine's scores to the response body. No HTTP here (routes.cpp answers).
#pragma once

#include "openai_api.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace server {

struct RerankRequest {
  std::string query;
  std::vector<std::string> documents;
  int top_n = -1;            // -1: every document
  bool tei = false;          // the documents came as `texts`: Text Embeddings Inference's shape
  bool return_text = false;  // TEI: each result carries its document's text
};

// Validates a body as llama-server reads it: `query` (a string, required), `documents` (a
// non-empty list of strings; or `texts`, which asks for TEI's response shape as llama-server
// does), `top_n` (a positive integer, default all), `return_text` (a bool, TEI only), `model`
// (accepted, changing nothing). Any other field is a 400 naming it. Throws ApiError.
RerankRequest parse_rerank_request(const std::string& body);

// {"object": "list", "model", "usage": {"prompt_tokens", "total_tokens"}, "results": [{"index",
// "relevance_score"}]} (Jina's shape), or for a TEI request the bare list of {"index", "score"
// [, "text"]}: the results sorted by score, highest first (ties by index), the first top_n.
nlohmann::json rerank_response(const RerankRequest& request, const std::vector<float>& scores,
                               const std::vector<int>& pair_tokens, const std::string& model);

}  // namespace server
