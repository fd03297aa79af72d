#include "openai_api.hpp"

#include <algorithm>
#include <utility>

namespace server {
namespace {

using nlohmann::json;

ApiError bad_field(const std::string& param, const std::string& message) {
  ApiError e;
  e.message = message;
  e.param = param;
  return e;
}

// A present, non-null field, or nullptr.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

bool read_number(const json& body, const char* name, double lo, double hi, float& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_number())
    throw bad_field(name, std::string("'") + name + "' must be a number");
  const double d = v->get<double>();
  if (!(d >= lo && d <= hi))  // also rejects NaN
    throw bad_field(name, std::string("'") + name + "' must be between " + json(lo).dump() +
                              " and " + json(hi).dump());
  out = static_cast<float>(d);
  return true;
}

bool read_int(const json& body, const char* name, std::int64_t lo, std::int64_t hi, int& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_number_integer())
    throw bad_field(name, std::string("'") + name + "' must be an integer");
  const bool in_range = v->is_number_unsigned()
                            ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                  (lo <= 0 || v->get<std::uint64_t>() >= std::uint64_t(lo))
                            : v->get<std::int64_t>() >= lo && v->get<std::int64_t>() <= hi;
  if (!in_range)
    throw bad_field(name, std::string("'") + name + "' must be between " + std::to_string(lo) +
                              " and " + std::to_string(hi));
  const std::int64_t i = v->get<std::int64_t>();
  out = static_cast<int>(i);
  return true;
}

bool read_bool(const json& body, const char* name, bool& out) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_boolean()) throw bad_field(name, std::string("'") + name + "' must be a boolean");
  out = v->get<bool>();
  return true;
}

std::vector<std::string> read_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw bad_field("stop", "'stop' must be a string or an array of strings");
  std::vector<std::string> stops;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad_field("stop", "'stop' must be a string or an array of strings");
    if (!s.get_ref<const std::string&>().empty()) stops.push_back(s.get<std::string>());
  }
  if (stops.size() > 4) throw bad_field("stop", "'stop' takes at most 4 sequences");
  return stops;
}

// Message content is a string or, in newer clients, an array of {"type": "text", "text": ...}.
std::string read_content(const json& message, std::size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  const json* content = field(message, "content");
  if (!content) return "";
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) throw bad_field(param, "'" + param + "' must be a string or an array");
  std::string text;
  for (const json& part : *content) {
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!t || !t->is_string() || part.value("type", "") != "text")
      throw bad_field(param, "'" + param + "' supports only text parts");
    text += t->get<std::string>();
  }
  return text;
}

std::vector<ember::Message> read_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) throw bad_field("messages", "'messages' is required");
  if (!v->is_array() || v->empty())
    throw bad_field("messages", "'messages' must be a non-empty array");
  std::vector<ember::Message> messages;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(param, "'" + param + "' must be an object");
    const json* role = field(m, "role");
    if (!role || !role->is_string())
      throw bad_field(param + ".role", "'" + param + ".role' must be a string");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant")
      throw bad_field(param + ".role", "'" + param + ".role' must be system, user or assistant");
    messages.push_back({r, read_content(m, i)});
  }
  return messages;
}

void read_sampling(const json& body, Endpoint endpoint, ember::SamplingParams& s) {
  s.max_tokens = endpoint == Endpoint::completions ? 16 : 256;  // OpenAI's completions default
  int max_tokens = 0;
  if (read_int(body, "max_tokens", 0, 1 << 20, max_tokens) ||
      read_int(body, "max_completion_tokens", 0, 1 << 20, max_tokens))
    s.max_tokens = max_tokens;
  read_number(body, "temperature", 0.0, 2.0, s.temperature);
  read_number(body, "top_p", 0.0, 1.0, s.top_p);
  if (field(body, "top_p") && s.top_p == 0.0f) throw bad_field("top_p", "'top_p' must be > 0");
  read_number(body, "presence_penalty", -2.0, 2.0, s.presence_penalty);
  read_number(body, "frequency_penalty", -2.0, 2.0, s.frequency_penalty);
  read_number(body, "min_p", 0.0, 1.0, s.min_p);        // extension, as in llama.cpp's server
  read_int(body, "top_k", 0, 1 << 20, s.top_k);         // extension
  read_bool(body, "ignore_eos", s.ignore_eos);          // extension
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad_field("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<std::uint64_t>()
                                        : static_cast<std::uint64_t>(seed->get<std::int64_t>());
  }
  s.stop = read_stop(body);
  int n = 1;
  if (read_int(body, "n", 1, 1 << 20, n) && n != 1)
    throw bad_field("n", "'n' must be 1: one choice per request");
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiError api_error(const ember::Error& e, Endpoint endpoint) {
  ApiError api;
  api.message = e.what();
  switch (e.code()) {
    case ember::ErrorCode::invalid_argument:
    case ember::ErrorCode::unsupported: break;
    case ember::ErrorCode::context_overflow:
      api.code = "context_length_exceeded";
      api.param = endpoint == Endpoint::chat_completions ? "messages" : "prompt";
      break;
    case ember::ErrorCode::busy:  // OpenAI's answer to too many requests: retry later
      api.status = 429;
      api.type = "rate_limit_error";
      api.code = "rate_limit_exceeded";
      break;
    default:
      api.status = 500;
      api.type = "server_error";
      api.code = ember::to_string(e.code());
  }
  return api;
}

// The deepest nesting of arrays and objects in `text` (strings skipped), counted before parsing
// so that a body of a million '[' costs a scan, not a million parsed values.
static int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

ParsedRequest parse_request(Endpoint endpoint, const std::string& body_text,
                            std::uint64_t default_seed) {
  if (json_depth(body_text) > kMaxJsonDepth) {
    ApiError e;
    e.message = "the request body nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                " levels deep";
    e.code = "invalid_json";
    throw e;
  }
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    ApiError e;
    e.message = "the request body is not valid JSON";
    e.code = "invalid_json";
    throw e;
  }
  if (!body.is_object()) throw bad_field("", "the request body must be a JSON object");

  ParsedRequest out;
  out.request.sampling.seed = default_seed;
  read_sampling(body, endpoint, out.request.sampling);
  if (endpoint == Endpoint::completions) {
    const json* prompt = field(body, "prompt");
    if (!prompt) throw bad_field("prompt", "'prompt' is required");
    if (!prompt->is_string()) throw bad_field("prompt", "'prompt' must be a string");
    out.request.prompt = prompt->get<std::string>();
  } else {
    out.request.messages = read_messages(body);
  }
  read_bool(body, "stream", out.stream);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object())
      throw bad_field("stream_options", "'stream_options' must be an object");
    read_bool(*options, "include_usage", out.include_usage);
  }
  return out;
}

const char* finish_reason_name(ember::FinishReason reason) {
  switch (reason) {
    case ember::FinishReason::stop: return "stop";
    case ember::FinishReason::length:
    case ember::FinishReason::context: return "length";
    case ember::FinishReason::cancelled: return "cancelled";
    case ember::FinishReason::error: return "error";
  }
  return "stop";
}

json usage_json(const ember::Completion& c) {
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.generated_tokens},
          {"total_tokens", c.prompt_tokens + c.generated_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_prompt_tokens}}}};
}

namespace {

json envelope(const ResponseContext& ctx, bool chunk) {
  const bool chat = ctx.endpoint == Endpoint::chat_completions;
  return {{"id", ctx.id},
          {"object", chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", ctx.created},
          {"model", ctx.model},
          {"system_fingerprint", std::string("ember-") + ember::version()}};
}

}  // namespace

json response_body(const ResponseContext& ctx, const ember::Completion& c) {
  json body = envelope(ctx, false);
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason_name(c.finish_reason)}};
  if (ctx.endpoint == Endpoint::chat_completions)
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  else
    choice["text"] = c.text;
  body["choices"] = json::array({choice});
  body["usage"] = usage_json(c);
  return body;
}

json stream_chunk(const ResponseContext& ctx, const std::string& text,
                  const ember::Completion* finish) {
  json body = envelope(ctx, true);
  json choice = {{"index", 0}, {"logprobs", nullptr},
                 {"finish_reason", finish ? json(finish_reason_name(finish->finish_reason))
                                          : json(nullptr)}};
  if (ctx.endpoint == Endpoint::chat_completions)
    choice["delta"] = finish && text.empty() ? json::object() : json{{"content", text}};
  else
    choice["text"] = text;
  body["choices"] = json::array({choice});
  return body;
}

json stream_role_chunk(const ResponseContext& ctx) {
  json body = envelope(ctx, true);
  body["choices"] = json::array({{{"index", 0},
                                  {"delta", {{"role", "assistant"}, {"content", ""}}},
                                  {"logprobs", nullptr},
                                  {"finish_reason", nullptr}}});
  return body;
}

json stream_usage_chunk(const ResponseContext& ctx, const ember::Completion& c) {
  json body = envelope(ctx, true);
  body["choices"] = json::array();
  body["usage"] = usage_json(c);
  return body;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace server
