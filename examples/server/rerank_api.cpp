#include "rerank_api.hpp"

#include <algorithm>
#include <numeric>

namespace server {

using nlohmann::json;

RerankRequest parse_rerank_request(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw bad_field("", "the body must be a JSON object");
  RerankRequest r;
  bool has_documents = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "query") {
      if (!value.is_string()) throw bad_field(key, "'query' must be a string");
      r.query = value.get<std::string>();
    } else if (key == "documents" || key == "texts") {
      if (has_documents) throw bad_field(key, "give the documents once, as 'documents' or as 'texts'");
      has_documents = true;
      r.tei = key == "texts";
      if (!value.is_array() || value.empty()) throw bad_field(key, "'" + key + "' must be a non-empty list of strings");
      for (const json& d : value) {
        if (!d.is_string()) throw bad_field(key, "'" + key + "' must be a non-empty list of strings");
        r.documents.push_back(d.get<std::string>());
      }
    } else if (key == "top_n") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1)
        throw bad_field(key, "'top_n' must be a positive integer");
      r.top_n = static_cast<int>(std::min<std::int64_t>(value.get<std::int64_t>(), 1 << 30));
    } else if (key == "return_text") {
      if (!value.is_boolean()) throw bad_field(key, "'return_text' must be true or false");
      r.return_text = value.get<bool>();
    } else if (key != "model") {
      throw bad_field(key, "'" + key + "' is not supported by ember-server's /v1/rerank");
    }
  }
  if (!j.contains("query")) throw bad_field("query", "'query' is required");
  if (!has_documents) throw bad_field("documents", "'documents' is required");
  return r;
}

json rerank_response(const RerankRequest& request, const std::vector<float>& scores,
                     const std::vector<int>& pair_tokens, const std::string& model) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] > scores[b]; });
  if (request.top_n >= 0 && order.size() > static_cast<std::size_t>(request.top_n))
    order.resize(static_cast<std::size_t>(request.top_n));
  json results = json::array();
  for (const std::size_t i : order) {
    json item = {{"index", i}, {request.tei ? "score" : "relevance_score", scores[i]}};
    if (request.tei && request.return_text) item["text"] = request.documents[i];
    results.push_back(std::move(item));
  }
  if (request.tei) return results;
  const std::int64_t tokens = std::accumulate(pair_tokens.begin(), pair_tokens.end(), std::int64_t{0});
  return {{"object", "list"},
          {"model", model},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
          {"results", std::move(results)}};
}

}  // namespace server
