// The OpenAI wire format of ember-server: request bodies to ember::Request, completions to
// response bodies and stream chunks. No HTTP here, so the mapping can be read in one place.
#pragma once

#include "tool_format.hpp"

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// A 400 naming the offending field.
ApiError bad_field(const std::string& param, const std::string& message);

nlohmann::json error_body(const ApiError& e);

// ember's typed errors as HTTP answers: the caller's mistakes are 400s (a prompt over the
// context or --max-prompt-tokens: code context_length_exceeded, param the prompt's field),
// ErrorCode::busy (--max-requests in flight) is 429, the rest 500s.
ApiError api_error(const ember::Error& e, Endpoint endpoint);

struct ParsedRequest {
  ember::Request request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a final chunk with the usage
  bool lora_given = false;     // the body had `lora` (lora_endpoints.hpp)
  ToolSpec tools;
};

// Validates a request body and maps it to an ember::Request. Fields not given keep ember's
// SamplingParams defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05); `seed`, when not
// given, is `default_seed`. A field the server does not implement is a 400 naming it (`model`
// and `user` are accepted and change nothing). Throws ApiError.
//
// Structured output: `response_format` json_object constrains the reply to a JSON object,
// json_schema (strict or not: ember always enforces the schema) to its `schema`. `tools` are
// described to the model, and calls and results rendered, in the chat family's own format
// (`tool_format`, see tool_format.hpp); tool_choice `required` or a named function constrains
// the reply to one call of them, `auto` (the default with tools) leaves the reply free until
// the family's call opener appears and constrains the call from there (with a response_format
// as well, the reply follows the response_format and a call is only detected), `none` ignores
// the tools.
// Bodies nesting arrays and objects deeper than this are refused (400 invalid_json) before parsing.
constexpr int kMaxJsonDepth = 64;
ParsedRequest parse_request(Endpoint endpoint, const std::string& body, std::uint64_t default_seed,
                            ToolFormat tool_format = ToolFormat::generic);

// What a response needs besides the completion.
struct ResponseContext {
  Endpoint endpoint = Endpoint::completions;
  std::string id;            // "cmpl-..." or "chatcmpl-..."
  std::string model;         // the served model's name
  std::int64_t created = 0;  // Unix seconds
  ToolSpec tools;            // the request's tools: a reply that is a call becomes `tool_calls`
  // The text of one token (logprobs); empty: logprobs are not reported.
  std::function<std::string(std::int32_t)> token_text;
  bool logprobs = false;  // the request asked for logprobs
};

const char* finish_reason_name(ember::FinishReason reason);  // OpenAI's names
nlohmann::json usage_json(const ember::Completion& c);
nlohmann::json response_body(const ResponseContext& ctx, const ember::Completion& c);

// One streamed chunk object. `finish` null: a text delta; otherwise the last choice chunk.
nlohmann::json stream_chunk(const ResponseContext& ctx, const std::string& text, const ember::Completion* finish);
// The chat stream's first chunk: the assistant role with empty content.
nlohmann::json stream_role_chunk(const ResponseContext& ctx);

// The stream of one request as chunk objects: text deltas, or with tools a reply that is a call
// as tool_calls deltas (the function's name first, then its arguments piece by piece), and the
// logprobs of each chunk's tokens. One per request, called on the engine's thread.
class StreamMapper {
 public:
  explicit StreamMapper(ResponseContext ctx);
  std::vector<nlohmann::json> on_chunk(const ember::Chunk& chunk);
  // The closing chunks (text still held back, then the finish reason).
  std::vector<nlohmann::json> finish(const ember::Completion& c);

 private:
  std::vector<nlohmann::json> advance(bool final);
  std::vector<nlohmann::json> flush_call(bool final);
  ResponseContext ctx_;
  // undecided: a bare format before the first character; scanning: a marked format's text,
  // watched for the opener; plain: text only from here; call: inside a call; done: after it.
  enum class Mode { undecided, scanning, plain, call, done } mode_ = Mode::undecided;
  std::string buffer_;                          // text not yet sent (held back, or a call being parsed)
  std::size_t args_sent_ = 0;                   // bytes of the arguments already sent (call)
  std::size_t args_start_ = std::string::npos;  // where the arguments begin in buffer_
  bool header_sent_ = false;
  std::size_t logprob_offset_ = 0;  // text offset of the next token (completions logprobs)
};
// The chunk with no choices and the usage block (stream_options.include_usage).
nlohmann::json stream_usage_chunk(const ResponseContext& ctx, const ember::Completion& c);

// JSON text for the wire: invalid UTF-8 (which a model can produce) is replaced, never thrown.
std::string dump(const nlohmann::json& j);
// A server-sent event carrying `j`.
std::string sse_event(const nlohmann::json& j);

}  // namespace server
