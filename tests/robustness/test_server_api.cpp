// ember-server's mapping of requests and of ember's errors to HTTP answers
// (examples/server/openai_api.cpp), without sockets: the limits' status codes and a few bad
// bodies. The whole server runs end to end in tests/examples/test_server.sh.
#include "examples/server/openai_api.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <string>

namespace server {
namespace {

TEST_CASE("ember errors map to HTTP: busy is 429, a long prompt 400, a failure 500") {
  const ApiError busy =
      api_error(ember::Error(ember::ErrorCode::busy, "4 requests are in flight"), Endpoint::completions);
  CHECK(busy.status == 429);
  CHECK(busy.type == "rate_limit_error");
  CHECK(busy.code == "rate_limit_exceeded");
  CHECK(busy.message == "4 requests are in flight");

  const ApiError prompt =
      api_error(ember::Error(ember::ErrorCode::context_overflow, "too long"), Endpoint::completions);
  CHECK(prompt.status == 400);
  CHECK(prompt.code == "context_length_exceeded");
  CHECK(prompt.param == "prompt");
  CHECK(api_error(ember::Error(ember::ErrorCode::context_overflow, "too long"), Endpoint::chat_completions).param ==
        "messages");

  const ApiError bad = api_error(ember::Error(ember::ErrorCode::invalid_argument, "max_tokens"), Endpoint::completions);
  CHECK(bad.status == 400);
  CHECK(bad.type == "invalid_request_error");

  const ApiError oom = api_error(ember::Error(ember::ErrorCode::out_of_memory, "no memory"), Endpoint::completions);
  CHECK(oom.status == 500);
  CHECK(oom.type == "server_error");
  CHECK(oom.code == "out_of_memory");

  const nlohmann::json body = error_body(busy);
  CHECK(body["error"]["code"] == "rate_limit_exceeded");
  CHECK(body["error"]["param"].is_null());
}

// The status and param of the ApiError parse_request throws for `body`.
std::pair<int, std::string> refusal(Endpoint endpoint, const std::string& body) {
  try {
    parse_request(endpoint, body, 1);
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {200, ""};
}

TEST_CASE("bad bodies are 400 naming the field; nothing else escapes parse_request") {
  using P = std::pair<int, std::string>;
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\",") == P{400, ""});
  CHECK(refusal(Endpoint::completions, std::string("{\"prompt\": \"a\0b\"}", 17)) == P{400, ""});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"max_tokens\": 1e300}") == P{400, "max_tokens"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"max_tokens\": 18446744073709551615}") ==
        P{400, "max_tokens"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"top_k\": -1}") == P{400, "top_k"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"seed\": 1.5}") == P{400, "seed"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"stop\": [\"a\",\"b\",\"c\",\"d\",\"e\"]}") ==
        P{400, "stop"});
  CHECK(refusal(Endpoint::chat_completions, "{\"messages\": []}") == P{400, "messages"});
  CHECK(refusal(Endpoint::chat_completions,
                "{\"messages\": [{\"role\": \"user\", \"content\": "
                "[{\"type\": \"image_url\"}]}]}") == P{400, "messages[0].content"});
  CHECK(refusal(Endpoint::chat_completions, "{\"messages\": [1]}") == P{400, "messages[0]"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"stream_options\": 3}") == P{400, "stream_options"});
  CHECK(refusal(Endpoint::completions,
                "{\"prompt\": \"hi\", \"stream\": true, \"stream_options\": "
                "{\"include_usage\": true, \"include_obfuscation\": false}}") ==
        P{400, "stream_options.include_obfuscation"});
  CHECK(refusal(Endpoint::completions,
                "{\"prompt\": \"hi\", \"stream\": true, \"stream_options\": "
                "{\"include_usage\": true}}") == P{200, ""});
  // Deeply nested JSON is refused before parsing (kMaxJsonDepth); brackets inside strings and
  // 64 levels are fine (then refused by shape here).
  CHECK(refusal(Endpoint::completions, std::string(5000, '[') + std::string(5000, ']')) == P{400, ""});
  CHECK(refusal(Endpoint::completions, std::string(65, '[') + std::string(65, ']')) == P{400, ""});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"" + std::string(500, '[') + "\"}") == P{200, ""});
  CHECK(refusal(Endpoint::completions,
                "{\"prompt\": \"hi\", \"user\": " + std::string(63, '[') + std::string(63, ']') + "}") == P{200, ""});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"max_tokens\": 7}") == P{200, ""});
}

// The speculative_tokens extension: mapped to SamplingParams, range-checked like the other
// numbers, and the drafts reported in usage under OpenAI's predicted-output names.
TEST_CASE("speculative_tokens: the extension field and its usage counts") {
  using P = std::pair<int, std::string>;
  CHECK(parse_request(Endpoint::completions, "{\"prompt\": \"hi\", \"speculative_tokens\": 8}", 1)
            .request.sampling.speculative_tokens == 8);
  CHECK(parse_request(Endpoint::chat_completions,
                      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"speculative_tokens\": 4}", 1)
            .request.sampling.speculative_tokens == 4);
  CHECK(parse_request(Endpoint::completions, "{\"prompt\": \"hi\"}", 1).request.sampling.speculative_tokens == 0);
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"speculative_tokens\": 17}") ==
        P{400, "speculative_tokens"});
  CHECK(refusal(Endpoint::completions, "{\"prompt\": \"hi\", \"speculative_tokens\": -1}") ==
        P{400, "speculative_tokens"});
  ember::Completion c;
  c.speculative_proposed = 10;
  c.speculative_accepted = 7;
  const nlohmann::json usage = usage_json(c);
  CHECK(usage["completion_tokens_details"]["accepted_prediction_tokens"] == 7);
  CHECK(usage["completion_tokens_details"]["rejected_prediction_tokens"] == 3);
}

}  // namespace
}  // namespace server
