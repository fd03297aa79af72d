// Fuzz target: ember-server's request parsing (examples/server/openai_api.cpp), without sockets.
//
// Input: the first byte picks the endpoint (even: /v1/completions, odd: /v1/chat/completions);
// the rest is the HTTP body. Checked: parse_request either returns a request or throws ApiError
// (status 400, a message, an OpenAI error body that serialises); nothing else escapes. A parsed
// request obeys the documented ranges, and its response body and stream chunks, carrying the
// prompt as text (possibly invalid UTF-8), serialise without throwing.
#include "fuzz_support.hpp"

#include "examples/server/openai_api.hpp"

#include <cmath>
#include <string>

namespace {

void check_ranges(const ember::SamplingParams& s) {
  FUZZ_CHECK(s.max_tokens >= 0 && s.max_tokens <= (1 << 20));
  FUZZ_CHECK(s.temperature >= 0.0f && s.temperature <= 2.0f);
  FUZZ_CHECK(s.top_p > 0.0f && s.top_p <= 1.0f);
  FUZZ_CHECK(s.min_p >= 0.0f && s.min_p <= 1.0f);
  FUZZ_CHECK(s.top_k >= 0);
  FUZZ_CHECK(std::isfinite(s.presence_penalty) && std::isfinite(s.frequency_penalty));
  FUZZ_CHECK(s.stop.size() <= 4);
  for (const std::string& stop : s.stop) FUZZ_CHECK(!stop.empty());
}

// The responses a parsed request leads to, with its own text echoed back as the completion.
void serialise_responses(server::Endpoint endpoint, const server::ParsedRequest& parsed) {
  const server::ResponseContext ctx{.endpoint = endpoint,
                                    .id = "cmpl-1",
                                    .model = "model",
                                    .created = 0,
                                    .tools = {},
                                    .token_text = {},
                                    .logprobs = false};
  ember::Completion c;
  c.text = parsed.request.prompt;
  for (const ember::Message& m : parsed.request.messages) c.text += m.content;
  const std::string body = server::dump(server::response_body(ctx, c));
  FUZZ_CHECK(!body.empty());
  FUZZ_CHECK(!server::sse_event(server::stream_chunk(ctx, c.text, nullptr)).empty());
  FUZZ_CHECK(!server::sse_event(server::stream_chunk(ctx, "", &c)).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember::fuzz::InputReader in(data, size);
  const auto endpoint = in.byte() % 2 == 0 ? server::Endpoint::completions : server::Endpoint::chat_completions;
  const std::string body(in.rest());
  try {
    const server::ParsedRequest parsed = server::parse_request(endpoint, body, 42);
    check_ranges(parsed.request.sampling);
    if (endpoint == server::Endpoint::chat_completions) {
      FUZZ_CHECK(!parsed.request.messages.empty());
      for (const ember::Message& m : parsed.request.messages)
        FUZZ_CHECK(m.role == "system" || m.role == "user" || m.role == "assistant");
    }
    serialise_responses(endpoint, parsed);
  } catch (const server::ApiError& e) {
    FUZZ_CHECK(e.status == 400);
    FUZZ_CHECK(!e.message.empty());
    FUZZ_CHECK(!server::dump(server::error_body(e)).empty());
  }
  return 0;
}
