// The OpenAI wire format of ember-server: request bodies to ember::Request, completions to
// response bodies and stream chunks. No HTTP here, so the mapping can be read in one place.
#pragma once

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace server {

enum class Endpoint { completions, chat_completions };

// A request the server refuses, answered as {"error": {message, type, param, code}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field; empty is sent as null
  std::string code;   // empty is sent as null
};

nlohmann::json error_body(const ApiError& e);

// ember's typed errors as HTTP answers: the caller's mistakes are 400s (a prompt over the
// context or --max-prompt-tokens: code context_length_exceeded, param the prompt's field),
// ErrorCode::busy (--max-requests in flight) is 429, the rest 500s.
ApiError api_error(const ember::Error& e, Endpoint endpoint);

struct ParsedRequest {
  ember::Request request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with the usage
};

// Validates a request body and maps it to an ember::Request. Fields not given keep ember's
// SamplingParams defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05); `seed`, when not
// given, is `default_seed`. Unknown fields are ignored. Throws ApiError.
// Bodies nesting arrays and objects deeper than this are refused (400 invalid_json) before parsing.
constexpr int kMaxJsonDepth = 64;
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, std::uint64_t default_seed);

// What a response needs besides the completion.
struct ResponseContext {
  Endpoint endpoint = Endpoint::completions;
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  std::string model;  // the served model's name
  std::int64_t created = 0;  // Unix seconds
};

const char* finish_reason_name(ember::FinishReason reason);  // OpenAI's names
nlohmann::json usage_json(const ember::Completion& c);
nlohmann::json response_body(const ResponseContext& ctx, const ember::Completion& c);

// One streamed chunk object. `finish` null: a text delta; otherwise the last choice chunk.
nlohmann::json stream_chunk(const ResponseContext& ctx, const std::string& text,
                            const ember::Completion* finish);
// The chat stream's first chunk: the assistant role with empty content.
nlohmann::json stream_role_chunk(const ResponseContext& ctx);
// The chunk with no choices and the usage block (stream_options.include_usage).
nlohmann::json stream_usage_chunk(const ResponseContext& ctx, const ember::Completion& c);

// JSON text for the wire: invalid UTF-8 (which a model can produce) is replaced, never thrown.
std::string dump(const nlohmann::json& j);
// A server-sent event carrying `j`.
std::string sse_event(const nlohmann::json& j);

}  // namespace server
