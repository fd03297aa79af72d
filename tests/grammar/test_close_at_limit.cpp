// JSON that always parses: the matcher's shortest closing completion, and generation cut by
// max_tokens on the default model closing its structure (SamplingParams::close_at_limit).
// The model part is skipped (exit 77) without the default model.
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace ember;

namespace {

grammar::Matcher schema_matcher(const std::string& schema) {
  return grammar::Matcher(
      std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_schema_to_gbnf(schema))));
}

const char* const kSchemas[] = {
    R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age", "tags"]})",
    R"({"type": "array", "items": {"type": "object", "properties": {"city": {"type": "string"},
        "country": {"type": "string"}}, "required": ["city", "country"]}, "minItems": 1})",
    R"({"type": "object", "properties": {"summary": {"type": "string", "minLength": 3}, "score": {"type": "number",
        "minimum": 0, "maximum": 10}}, "required": ["summary", "score"]})",
};

}  // namespace

TEST_CASE("closing_cost: the fewest bytes that close the structure") {
  grammar::Matcher m =
      schema_matcher(R"({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})");
  CHECK(m.closing_cost(m.start()) == 8);  // {"a":""}
  CHECK(m.closing_cost(m.advance(m.start(), R"({"a":"xy)")) == 2);
  CHECK(m.closing_cost(m.advance(m.start(), R"({"a":"xy"})")) == 0);
  grammar::Matcher arr = schema_matcher(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2})");
  CHECK(arr.closing_cost(arr.advance(arr.start(), "[1")) == 3);  // ,0]
  CHECK(arr.closing_cost(grammar::Matcher::kDead) == grammar::Matcher::kUnreachable);
}

TEST_CASE("real model: output cut by max_tokens still parses, and says it was closed early") {
  const std::string path = test::require_default_model();
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 32u << 20;
  Engine engine = Engine::open(path, o);
  int cut = 0, closed = 0, unclosed_without = 0, runs = 0;
  for (const char* schema : kSchemas)
    for (int max_tokens : {24, 40, 64}) {
      for (std::uint64_t seed : {0, 1, 2}) {
        Request r;
        r.messages = {{"user", "Describe a person, a place or a film as JSON."}};
        r.sampling.json_schema = schema;
        r.sampling.max_tokens = max_tokens;
        r.sampling.temperature = seed == 0 ? 0.0f : 0.8f;
        r.sampling.seed = seed;
        const Completion c = engine.generate(r);
        CAPTURE(schema);
        CAPTURE(max_tokens);
        CAPTURE(c.text);
        grammar::Matcher m = schema_matcher(schema);
        CHECK(m.matches(c.text));
        CHECK(static_cast<int>(c.tokens.size()) <= max_tokens);
        ++runs;
        if (c.finish_reason == FinishReason::length) ++cut, closed += c.closed_early;
        if (c.closed_early) CHECK(c.finish_reason == FinishReason::length);
        // The same request without closing: cut inside the structure, it does not parse.
        r.sampling.close_at_limit = false;
        const Completion plain = engine.generate(r);
        CHECK_FALSE(plain.closed_early);
        CHECK(plain.tokens.size() <= c.tokens.size() + static_cast<std::size_t>(max_tokens));
        grammar::Matcher m2 = schema_matcher(schema);
        unclosed_without += !m2.matches(plain.text);
      }
    }
  MESSAGE(runs << " runs, " << cut << " cut at max_tokens, " << closed << " closed early; " << unclosed_without
               << " of the same runs without closing do not parse");
  CHECK(cut > 0);
  CHECK(closed > 0);
  CHECK(unclosed_without > 0);
}
