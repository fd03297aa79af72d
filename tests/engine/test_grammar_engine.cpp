// Constrained generation on the default model: outputs are strings of the grammar's language,
// an end token comes exactly when the grammar can end, max_tokens cuts finish with `length`,
// the tokens do not depend on the batch or on a prefix-cache hit, and top_logprobs and
// logit_bias do what they say.
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <memory>

namespace ember {
namespace {

const char* kNpcSchema = R"({"type": "object", "properties": {
  "say": {"type": "string", "maxLength": 40},
  "action": {"enum": ["give", "attack", "flee", "trade"]},
  "item": {"type": ["string", "null"]},
  "count": {"type": "integer", "minimum": 0, "maximum": 20}},
  "required": ["say", "action", "count"]})";

Engine& engine() {
  static Engine e = [] {
    EngineOptions o;
    o.threads = test::compute_threads(2);
    o.kv_cache_bytes = 64u << 20;
    return Engine::open(test::require_default_model(), o);
  }();
  return e;
}

Request npc_request(const std::string& who, float temperature, std::uint64_t seed) {
  Request r;
  r.messages = {{"system", "You are a game character. Answer in JSON."},
                {"user", who + " asks the blacksmith for a sword."}};
  r.sampling.json_schema = kNpcSchema;
  r.sampling.temperature = temperature;
  r.sampling.seed = seed;
  r.sampling.max_tokens = 120;
  return r;
}

bool in_language(const std::string& gbnf, const std::string& text) {
  grammar::Matcher m(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf)));
  return m.matches(text);
}

}  // namespace

TEST_CASE("a JSON schema constrains greedy and sampled output to valid documents") {
  const std::string gbnf = grammar::json_schema_to_gbnf(kNpcSchema);
  for (std::uint64_t seed : {0, 1, 2}) {
    const Completion c = engine().generate(npc_request("A knight", seed == 0 ? 0.0f : 0.9f, seed));
    CAPTURE(c.text);
    CHECK(c.finish_reason == FinishReason::stop);
    CHECK(in_language(gbnf, c.text));
    CHECK(c.text.find("\"action\"") != std::string::npos);
  }
}

TEST_CASE("GBNF grammars: the text is a whole string of the language") {
  Request r;
  r.prompt = "Pick a colour and a number:";
  r.sampling.grammar = R"(root ::= ("red" | "green" | "blue") " " [1-9] [0-9]?)";
  r.sampling.temperature = 0.7f;
  r.sampling.max_tokens = 20;
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    r.sampling.seed = seed;
    const Completion c = engine().generate(r);
    CAPTURE(c.text);
    CHECK(in_language(r.sampling.grammar, c.text));
    CHECK(c.finish_reason == FinishReason::stop);
  }
}

TEST_CASE("max_tokens cutting a value short finishes with length") {
  Request r = npc_request("A thief", 0.0f, 0);
  r.sampling.max_tokens = 5;
  // Below the schema's shortest document closing early cannot help: refused at submit, unless
  // the request accepts an unterminated text.
  CHECK_THROWS_WITH_AS(engine().submit(r), doctest::Contains("below the shortest document"), Error);
  r.sampling.close_at_limit = false;
  const Completion c = engine().generate(r);
  CHECK(c.finish_reason == FinishReason::length);
  CHECK(c.generated_tokens == 5);
  CHECK_FALSE(in_language(grammar::json_schema_to_gbnf(kNpcSchema), c.text));
  CHECK(c.text.rfind("{", 0) == 0);
}

TEST_CASE("constrained tokens are the same alone, batched with free requests, and after a prefix hit") {
  const Request constrained = npc_request("A wizard", 0.8f, 42);
  const Completion alone = engine().generate(constrained);
  // Batched: the constrained request shares steps with unconstrained ones.
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 3; ++i) {
    Request free_request;
    free_request.prompt = "Once upon a time, number " + std::to_string(i);
    free_request.sampling.max_tokens = 40;
    handles.push_back(engine().submit(free_request));
  }
  RequestHandle batched = engine().submit(constrained);
  Request second = npc_request("A bard", 0.8f, 7);
  RequestHandle other_constrained = engine().submit(second);
  const Completion together = batched.wait();
  for (auto& h : handles) h.wait();
  other_constrained.wait();
  CHECK(together.tokens == alone.tokens);
  // The same prompt again: its prefix comes from the cache.
  const Completion cached = engine().generate(constrained);
  CHECK(cached.cached_prompt_tokens > 0);
  CHECK(cached.tokens == alone.tokens);
}

TEST_CASE("invalid grammars and schemas are refused at submit") {
  Request r;
  r.prompt = "x";
  r.sampling.grammar = "root ::= (";
  CHECK_THROWS_WITH_AS(engine().submit(r), doctest::Contains("line 1, column 11"), Error);
  r.sampling.grammar.clear();
  // A schema that needs another document: refused, never relaxed in silence.
  r.sampling.json_schema = R"({"$ref": "https://example.com/other.json"})";
  CHECK_THROWS_WITH_AS(engine().submit(r), doctest::Contains("remote $ref"), Error);
  r.sampling.grammar = "root ::= \"a\"";
  CHECK_THROWS_WITH_AS(engine().submit(r), doctest::Contains("both set"), Error);
  r.sampling.grammar.clear();
  r.sampling.json_schema = "{}";
  r.sampling.ignore_eos = true;
  CHECK_THROWS_WITH_AS(engine().submit(r), doctest::Contains("ignore_eos"), Error);
}

TEST_CASE("top_logprobs and logit_bias") {
  Request r;
  r.prompt = "The capital of France is";
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 4;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 5;
  const Completion c = engine().generate(r);
  REQUIRE(c.top_logprobs.size() == c.tokens.size());
  for (std::size_t i = 0; i < c.tokens.size(); ++i) {
    const auto& top = c.top_logprobs[i];
    REQUIRE(top.size() == 5);
    CHECK(top[0].token == c.tokens[i]);  // greedy: the best alternative is the chosen token
    CHECK(top[0].logprob == doctest::Approx(c.logprobs[i]));
    double mass = 0;
    for (std::size_t k = 0; k < top.size(); ++k) {
      if (k > 0) CHECK(top[k].logprob <= top[k - 1].logprob);
      CHECK(top[k].logprob <= 0);
      mass += std::exp(top[k].logprob);
    }
    CHECK(mass <= 1.0 + 1e-5);
  }
  // Banning the greedy first token changes it to the runner-up.
  Request banned = r;
  banned.sampling.logit_bias = {{c.tokens[0], -INFINITY}};
  const Completion b = engine().generate(banned);
  CHECK(b.tokens[0] == c.top_logprobs[0][1].token);
  // A large positive bias forces a token.
  Request forced = r;
  const std::int32_t x = engine().tokenize(" banana")[0];
  forced.sampling.logit_bias = {{x, 100.0f}};
  CHECK(engine().generate(forced).tokens[0] == x);
  Request bad = r;
  bad.sampling.logit_bias = {{1 << 30, 1.0f}};
  CHECK_THROWS_WITH_AS(engine().generate(bad), doctest::Contains("outside the vocabulary"), Error);
  bad.sampling.logit_bias = {{1, NAN}};
  CHECK_THROWS_AS(engine().generate(bad), Error);
  bad.sampling.logit_bias.clear();
  bad.sampling.top_logprobs = 21;
  CHECK_THROWS_AS(engine().generate(bad), Error);
}

TEST_CASE("streamed chunks carry each token's logprobs") {
  Request r;
  r.prompt = "Hello";
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 3;
  r.sampling.logprobs = true;
  r.sampling.top_logprobs = 2;
  std::vector<float> streamed;
  std::size_t rows = 0;
  const Completion c = engine().generate(r, [&](const Chunk& chunk) {
    if (chunk.logprobs)
      for (std::size_t i = 0; i < chunk.token_count; ++i) streamed.push_back(chunk.logprobs[i]);
    if (chunk.top_logprobs) rows += chunk.token_count;
    return true;
  });
  CHECK(streamed == c.logprobs);
  CHECK(rows == c.tokens.size());
}

}  // namespace ember
