#include "embeddings_api.hpp"

#include <cstring>

namespace server {
namespace {

using nlohmann::json;

bool is_token_list(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& t : v)
    if (!t.is_number_integer()) return false;
  return true;
}

std::vector<std::int32_t> token_list(const json& v) {
  std::vector<std::int32_t> out;
  for (const json& t : v) {
    const auto id = t.get<std::int64_t>();
    if (id < 0 || id > INT32_MAX) throw bad_field("input", "token id " + std::to_string(id) + " is out of range");
    out.push_back(static_cast<std::int32_t>(id));
  }
  return out;
}

void parse_input(const json& input, EmbeddingsRequest& r) {
  if (input.is_string()) {
    r.texts.push_back(input.get<std::string>());
  } else if (is_token_list(input)) {
    r.tokens.push_back(token_list(input));
  } else if (input.is_array() && !input.empty() && input[0].is_string()) {
    for (const json& s : input) {
      if (!s.is_string()) throw bad_field("input", "'input' mixes strings with other values");
      r.texts.push_back(s.get<std::string>());
    }
  } else if (input.is_array() && !input.empty() && input[0].is_array()) {
    for (const json& list : input) {
      if (!is_token_list(list))
        throw bad_field("input", "'input' lists of token ids must be non-empty lists of integers");
      r.tokens.push_back(token_list(list));
    }
  } else {
    throw bad_field("input",
                    "'input' must be a string, a list of strings, or token ids (a list or a list of lists), "
                    "and not empty");
  }
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(const std::string& body) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) throw bad_field("", "the body must be a JSON object");
  EmbeddingsRequest r;
  for (const auto& [key, value] : j.items()) {
    if (key == "input") {
      parse_input(value, r);
    } else if (key == "encoding_format") {
      if (!value.is_string() || (value != "float" && value != "base64"))
        throw bad_field(key, "'encoding_format' must be \"float\" or \"base64\"");
      r.base64 = value == "base64";
    } else if (key != "model" && key != "user") {
      throw bad_field(key, "'" + key + "' is not supported by ember-server's /v1/embeddings");
    }
  }
  if (!j.contains("input")) throw bad_field("input", "'input' is required");
  return r;
}

std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(values.size() * 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t u = 0;
    std::memcpy(&u, &values[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<std::size_t>(b)] = static_cast<unsigned char>(u >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = std::uint32_t{bytes[i]} << 16;
    if (n > 1) v |= std::uint32_t{bytes[i + 1]} << 8;
    if (n > 2) v |= bytes[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += n > 1 ? kAlphabet[(v >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[v & 63] : '=';
  }
  return out;
}

json embeddings_response(const std::vector<ember::Embedding>& embeddings, bool base64, const std::string& model) {
  json data = json::array();
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < embeddings.size(); ++i) {
    const ember::Embedding& e = embeddings[i];
    tokens += e.tokens;
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64)
      item["embedding"] = base64_floats(e.values);
    else
      item["embedding"] = e.values;
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

}  // namespace server
