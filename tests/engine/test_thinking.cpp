// Thinking models on a Qwen3-shaped synthetic file whose chat template is Qwen3's and whose
// vocabulary has <think> and </think> as tokens: the reasoning is kept apart from the answer
// (Completion::reasoning, chunks of ChunkStream::reasoning), SamplingParams::reasoning_budget
// forces the closing marker, 0 turns thinking off through the template's enable_thinking, and a
// grammar constrains the answer only.
#include "model_writer/gguf_writer.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>
#include <ember/ember.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

using namespace ember;

namespace {

const std::string& qwen3_thinking_model() {
  static const std::string path = [] {
    model::SyntheticModelSpec spec;
    spec.config = model::SyntheticModelSpec::architecture_config("qwen3");
    spec.reasoning_tokens = true;
    spec.chat_template = test::read_file(test::data_path("tokenizer/templates/qwen3.jinja"));
    spec.seed = 41;
    const std::string p = (std::filesystem::temp_directory_path() / "ember_qwen3_thinking_test.gguf").string();
    model::write_synthetic_model(spec, p);
    return p;
  }();
  return path;
}

Engine open_engine(const std::string& chat_template = {}) {
  EngineOptions o;
  o.threads = 1;
  o.chat_template = chat_template;
  return Engine::open(qwen3_thinking_model(), o);
}

struct Streams {
  std::string reasoning, answer;
  int reasoning_chunks = 0;
};

Completion run(Engine& engine, Request r, Streams* streams = nullptr) {
  if (streams == nullptr) return engine.generate(r);
  return engine
      .submit(r,
              [streams](const Chunk& c) {
                if (c.stream == ChunkStream::reasoning) {
                  streams->reasoning += c.text;
                  ++streams->reasoning_chunks;
                } else {
                  streams->answer += c.text;
                }
                return true;
              })
      .wait();
}

Request thinking_prompt(int budget, int max_tokens) {
  Request r;
  r.prompt =
      "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n<think>\n";  // opened, as DeepSeek-R1's prompt does
  r.parse_special_tokens = true;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.reasoning_budget = budget;
  return r;
}

}  // namespace

TEST_CASE("a budget of 16: at most 16 reasoning tokens, the closing marker, then the answer") {
  Engine engine = open_engine();
  const auto think = engine.tokenize("<think>", true), close = engine.tokenize("</think>", true);
  REQUIRE(think.size() == 1);
  REQUIRE(close.size() == 1);
  Streams s;
  const Completion c = run(engine, thinking_prompt(16, 40), &s);
  CHECK(c.reasoning_tokens <= 16);
  CHECK(c.reasoning_tokens > 0);
  // The closing marker follows the reasoning tokens (forced at 16 unless the model closed first).
  const auto at = std::find(c.tokens.begin(), c.tokens.end(), close[0]);
  REQUIRE(at != c.tokens.end());
  CHECK(at - c.tokens.begin() == c.reasoning_tokens);
  CHECK(c.tokens.end() - at - 1 == 40 - c.reasoning_tokens - 1);  // the answer's tokens
  CHECK(c.generated_tokens == 40);
  CHECK(c.timings.reasoning_ms > 0);
  // The streams carry the two texts apart; the completion's reasoning is the streamed one,
  // without the whitespace around it, and neither has a marker.
  CHECK(s.reasoning_chunks >= c.reasoning_tokens);
  CHECK(s.reasoning.rfind(c.reasoning, 0) == 0);
  CHECK(s.answer == c.text);
  CHECK(c.text.find("</think>") == std::string::npos);
  CHECK(c.reasoning.find("<think>") == std::string::npos);
}

TEST_CASE("a smaller budget cuts the same reasoning shorter, the same way every time") {
  Engine engine = open_engine();
  const Completion full = run(engine, thinking_prompt(16, 40));
  const Completion cut = run(engine, thinking_prompt(4, 40));
  CHECK(cut.reasoning_tokens == std::min(4, full.reasoning_tokens));
  // Greedy: the first reasoning tokens are the same ones.
  CHECK(std::equal(cut.tokens.begin(), cut.tokens.begin() + cut.reasoning_tokens, full.tokens.begin()));
  CHECK(run(engine, thinking_prompt(4, 40)).text == cut.text);
}

TEST_CASE("a model that opens <think> itself: the reasoning cannot start again in the answer") {
  Engine engine = open_engine();
  const std::int32_t think = engine.tokenize("<think>", true)[0], close = engine.tokenize("</think>", true)[0];
  Request r;
  r.messages = {{"user", "Hi"}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 20;
  r.sampling.ignore_eos = true;
  r.sampling.reasoning_budget = 8;
  r.sampling.logit_bias = {{think, 50.0f}};  // this random model must be pushed to think
  const Completion c = run(engine, r);
  REQUIRE(c.tokens.size() == 20u);
  CHECK(c.tokens[0] == think);
  CHECK(c.reasoning_tokens == 8);
  CHECK(c.tokens[9] == close);
  CHECK(std::count(c.tokens.begin(), c.tokens.end(), close) == 1);
}

TEST_CASE("a budget of 0 renders enable_thinking=false and bans <think>: no reasoning") {
  Engine engine = open_engine();
  const std::int32_t think = engine.tokenize("<think>", true)[0];
  Request r;
  r.messages = {{"user", "Hi"}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 12;
  r.sampling.ignore_eos = true;
  r.sampling.logit_bias = {{think, 50.0f}};
  r.sampling.reasoning_budget = 0;
  Streams s;
  const Completion c = run(engine, r, &s);
  CHECK(c.reasoning.empty());
  CHECK(c.reasoning_tokens == 0);
  CHECK(std::count(c.tokens.begin(), c.tokens.end(), think) == 0);
  CHECK(s.reasoning_chunks == 0);
  CHECK(c.timings.reasoning_ms == 0);
  // The template's own way of turning thinking off is in the prompt: an empty block.
  const int prompt_with_block = c.prompt_tokens;
  r.sampling.reasoning_budget = -1;
  r.sampling.max_tokens = 1;
  CHECK(run(engine, r).prompt_tokens < prompt_with_block);
  CHECK(engine.apply_chat_template_json(R"([{"role": "user", "content": "Hi"}])", {}, R"({"enable_thinking": false})")
            .find("<|im_start|>assistant\n<think>\n\n</think>\n\n") != std::string::npos);
}

TEST_CASE("a grammar constrains the answer, not the reasoning") {
  Engine engine = open_engine();
  Request r = thinking_prompt(6, 30);
  r.sampling.ignore_eos = false;
  r.sampling.json_schema = R"({"type": "boolean"})";
  const Completion c = run(engine, r);
  CHECK(c.reasoning_tokens == 6);
  CHECK((c.text == "true" || c.text == "false"));
  CHECK(c.finish_reason == FinishReason::stop);
}

TEST_CASE("models without reasoning markers are unchanged; the chat template is visible") {
  EngineOptions o;
  o.threads = 1;
  Engine plain = Engine::open(test::synthetic_model_file(1), o);
  Request r;
  r.prompt = "<think>\nhello";
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 8;
  const Completion c = plain.generate(r);
  CHECK(c.reasoning.empty());
  CHECK(c.reasoning_tokens == 0);
  CHECK(plain.chat_template_source() == model::kSmolLmChatTemplate);
  CHECK(open_engine().chat_template_source() == test::read_file(test::data_path("tokenizer/templates/qwen3.jinja")));
  // A conversation with tool calls, through the JSON entry point.
  const std::string rendered = open_engine().apply_chat_template_json(
      R"([{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]}, {"role": "tool", "content": "sunny"}])",
      R"([{"type": "function", "function": {"name": "get_weather"}}])");
  CHECK(rendered.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>") !=
        std::string::npos);
  CHECK(rendered.find("<tool_response>\nsunny\n</tool_response>") != std::string::npos);
  CHECK(rendered.find("# Tools") != std::string::npos);
  CHECK_THROWS_AS(open_engine().apply_chat_template_json("[{"), Error);
}
