// gpt-oss-style reasoning channels on a synthetic file whose chat template is gpt-oss's and whose
// vocabulary has the harmony format's control tokens: the turn opens on the analysis channel
// (<|channel|>analysis<|message|>, several tokens, forced), the reasoning ends at <|end|> (the
// model's or forced by SamplingParams::reasoning_budget), the final channel's header
// (<|start|>assistant<|channel|>final<|message|>) is forced, and only what follows it is the
// answer.
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

const std::string& gpt_oss_model() {
  static const std::string path = [] {
    model::SyntheticModelSpec spec;
    spec.config = model::SyntheticModelSpec::architecture_config("qwen3");
    spec.control_tokens = {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>"};
    spec.chat_template = test::read_file(test::data_path("tokenizer/templates/gpt_oss.jinja"));
    spec.seed = 40;
    const std::string p = (std::filesystem::temp_directory_path() / "ember_gpt_oss_channels_test.gguf").string();
    model::write_synthetic_model(spec, p);
    return p;
  }();
  return path;
}

Engine open_engine() {
  EngineOptions o;
  o.threads = 1;
  return Engine::open(gpt_oss_model(), o);
}

struct Markers {
  std::vector<std::int32_t> open, answer;
  std::int32_t close = -1;
};

Markers markers(const Engine& engine) {
  Markers m;
  m.open = engine.tokenize("<|channel|>analysis<|message|>", true);
  m.answer = engine.tokenize("<|start|>assistant<|channel|>final<|message|>", true);
  const auto end = engine.tokenize("<|end|>", true);
  REQUIRE(end.size() == 1u);
  m.close = end[0];
  REQUIRE(m.open.size() > 2u);  // "analysis" is ordinary text between two control tokens
  REQUIRE(m.answer.size() > 3u);
  return m;
}

bool has_at(const std::vector<std::int32_t>& tokens, std::size_t at, const std::vector<std::int32_t>& part) {
  return at + part.size() <= tokens.size() &&
         std::equal(part.begin(), part.end(), tokens.begin() + static_cast<std::ptrdiff_t>(at));
}

struct Streams {
  std::string reasoning, answer;
};

Completion run(Engine& engine, const Request& r, Streams* s = nullptr) {
  if (s == nullptr) return engine.generate(r);
  return engine
      .submit(r,
              [s](const Chunk& c) {
                (c.stream == ChunkStream::reasoning ? s->reasoning : s->answer) += c.text;
                return true;
              })
      .wait();
}

Request chat(int budget, int max_tokens) {
  Request r;
  r.messages = {{"user", "What is 6*7?"}};
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.reasoning_budget = budget;
  return r;
}

}  // namespace

TEST_CASE("gpt-oss channels: the analysis channel is reasoning, the final channel is the answer") {
  Engine engine = open_engine();
  const Markers m = markers(engine);
  Request r = chat(16, 48);
  // The budget closes the reasoning; and this random model must not write the harmony tokens
  // that are always rendered as text (<|channel|>, <|start|>, <|message|>) on its own.
  constexpr float ban = -std::numeric_limits<float>::infinity();
  r.sampling.logit_bias = {{m.close, ban}, {m.open[0], ban}, {m.open.back(), ban}, {m.answer[0], ban}};
  Streams s;
  const Completion c = run(engine, r, &s);
  REQUIRE(c.tokens.size() == 48u);
  CHECK(has_at(c.tokens, 0, m.open));
  CHECK(c.reasoning_tokens == 16);
  const std::size_t close_at = m.open.size() + 16;
  CHECK(c.tokens[close_at] == m.close);
  CHECK(has_at(c.tokens, close_at + 1, m.answer));
  CHECK(std::count(c.tokens.begin(), c.tokens.end(), m.close) == 1);
  CHECK(!c.reasoning.empty());
  CHECK(s.answer == c.text);
  CHECK(s.reasoning.find(c.reasoning) != std::string::npos);
  CHECK(c.timings.reasoning_ms > 0);
  // No marker text in either stream, and the answer is what follows the final channel's header.
  for (const char* marker : {"<|channel|>", "<|message|>", "<|end|>", "<|start|>", "analysis", "final"}) {
    CHECK(c.text.find(marker) == std::string::npos);
    CHECK(c.reasoning.find(marker) == std::string::npos);
  }
  const std::size_t answer_at = close_at + 1 + m.answer.size();
  const std::vector<std::int32_t> answer_tokens(c.tokens.begin() + static_cast<std::ptrdiff_t>(answer_at),
                                                c.tokens.end());
  std::string expected = engine.detokenize(answer_tokens);
  expected.erase(0, expected.find_first_not_of(" \t\r\n"));
  CHECK(c.text == expected);
}

TEST_CASE("gpt-oss channels: the model's own <|end|> closes the reasoning and the final header follows") {
  Engine engine = open_engine();
  const Markers m = markers(engine);
  Request r = chat(8, 24);
  r.sampling.logit_bias = {{m.close, 50.0f}};  // this random model must be pushed to close
  const Completion c = run(engine, r);
  CHECK(has_at(c.tokens, 0, m.open));
  CHECK(c.reasoning_tokens == 0);
  CHECK(c.reasoning.empty());
  CHECK(c.tokens[m.open.size()] == m.close);
  CHECK(has_at(c.tokens, m.open.size() + 1, m.answer));
  // <|end|> in the answer is the answer's: the reasoning cannot start again.
  CHECK(std::count(c.tokens.begin(), c.tokens.end(), m.close) ==
        static_cast<long>(c.tokens.size() - m.open.size() - m.answer.size()));
}

TEST_CASE("gpt-oss channels: a budget of 0 gives an empty analysis channel, then the answer") {
  Engine engine = open_engine();
  const Markers m = markers(engine);
  Streams s;
  const Completion c = run(engine, chat(0, 32), &s);
  CHECK(has_at(c.tokens, 0, m.open));
  CHECK(c.tokens[m.open.size()] == m.close);
  CHECK(has_at(c.tokens, m.open.size() + 1, m.answer));
  CHECK(c.reasoning_tokens == 0);
  CHECK(c.reasoning.empty());
  CHECK(s.reasoning.empty());
  CHECK(c.timings.reasoning_ms == 0);
  CHECK(s.answer == c.text);
}

TEST_CASE("gpt-oss channels: a prompt that opens the analysis channel, or the final one, is continued there") {
  Engine engine = open_engine();
  const Markers m = markers(engine);
  const std::string head = engine.apply_chat_template({{"user", "Hi"}});
  Request r;
  r.parse_special_tokens = true;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 24;
  r.sampling.ignore_eos = true;
  r.sampling.reasoning_budget = 4;
  r.sampling.logit_bias = {{m.close, -std::numeric_limits<float>::infinity()}};
  r.prompt = head + "<|channel|>analysis<|message|>";
  const Completion inside = run(engine, r);
  CHECK(inside.reasoning_tokens == 4);
  CHECK(inside.tokens[4] == m.close);  // nothing forced before the reasoning
  CHECK(has_at(inside.tokens, 5, m.answer));
  r.prompt = head + "<|channel|>final<|message|>";
  const Completion answer = run(engine, r);
  CHECK(answer.reasoning_tokens == 0);
  CHECK(answer.reasoning.empty());
  CHECK(std::find(answer.tokens.begin(), answer.tokens.end(), m.open[0]) == answer.tokens.end());
  CHECK(answer.text == [&] {
    std::string t = engine.detokenize(answer.tokens);
    t.erase(0, t.find_first_not_of(" \t\r\n"));
    return t;
  }());
}

TEST_CASE("gpt-oss channels: a grammar constrains the final channel, not the analysis") {
  Engine engine = open_engine();
  const Markers m = markers(engine);
  Request r = chat(6, 40);
  r.sampling.ignore_eos = false;
  r.sampling.logit_bias = {{m.close, -std::numeric_limits<float>::infinity()}};
  r.sampling.json_schema = R"({"type": "boolean"})";
  const Completion c = run(engine, r);
  CHECK(c.reasoning_tokens == 6);
  CHECK((c.text == "true" || c.text == "false"));
  CHECK(c.finish_reason == FinishReason::stop);
}
