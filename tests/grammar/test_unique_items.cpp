// uniqueItems checked at decode time (grammar/unique_items.hpp): JSON equality as JSON Schema
// defines it, and a forced "model" that wants to repeat an item gets distinct items instead,
// without ever running out of allowed tokens.
#include "grammar/grammar.hpp"
#include "grammar/json_canonical.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/token_mask.hpp"

#include <doctest/doctest.h>

#include <ember/ember.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace ember::grammar;

namespace {

std::string canon(const char* text) { return canonical_json(parse_json(text)); }

// Every byte as a token, a few pieces that cross item boundaries, and an end token.
std::shared_ptr<const TokenTrie> byte_trie() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* w : {"\"]", "\",", "\"}", "},", "\"a\",\"a\"", "aa"}) pieces.push_back(w);
  pieces.push_back("<eos>");
  std::vector<bool> usable(pieces.size(), true);
  return std::make_shared<const TokenTrie>(pieces, usable,
                                           std::vector<std::int32_t>{static_cast<std::int32_t>(pieces.size() - 1)});
}

std::int32_t token(const TokenTrie& trie, const std::string& piece) {
  for (std::int32_t id = 0; id < trie.vocab_size(); ++id)
    if (trie.piece(id) == piece) return id;
  FAIL("no token ", piece);
  return -1;
}

std::shared_ptr<CompiledGrammar> compiled(const std::string& schema, const std::shared_ptr<const TokenTrie>& trie) {
  const SchemaGrammar g = compile_json_schema(schema);
  auto c = std::make_shared<CompiledGrammar>(std::make_shared<const Grammar>(parse_gbnf(g.gbnf)), trie);
  c->mark_unique_items(g.unique_rules);
  return c;
}

// A greedy "model" whose logits rank single bytes by their place in `order` (first is best; the
// end token next; every other token last): it closes strings and items as soon as it can, so it
// repeats items unless something stops it. The constraint's apply() masks each row.
std::string generate(const std::string& schema, const std::string& order) {
  const auto trie = byte_trie();
  TokenConstraint c(compiled(schema, trie));
  const auto vocab = static_cast<std::size_t>(trie->vocab_size());
  std::string out;
  for (int step = 0; step < 400 && !c.complete(); ++step) {
    std::vector<float> logits(vocab, -1.0f);
    for (std::size_t i = 0; i < order.size(); ++i)
      logits[static_cast<unsigned char>(order[i])] = 100.0f - static_cast<float>(i);
    logits[vocab - 1] = 0.5f;
    c.apply(logits.data());
    std::size_t best = 0;
    for (std::size_t id = 1; id < vocab; ++id)
      if (logits[id] > logits[best]) best = id;
    REQUIRE(std::isfinite(logits[best]));  // never a dead end
    if (best == vocab - 1) break;
    c.accept(static_cast<std::int32_t>(best));
    out += trie->piece(static_cast<std::int32_t>(best));
  }
  return out;
}

}  // namespace

TEST_CASE("canonical JSON: equal exactly when JSON Schema's equality says so") {
  CHECK(canon("1") == canon("1.0"));
  CHECK(canon("1") == canon("10e-1"));
  CHECK(canon("1") == canon("0.1e1"));
  CHECK(canon("100") == canon("1E2"));
  CHECK(canon("-0") == canon("0.000"));
  CHECK(canon("1") != canon("-1"));
  CHECK(canon("12") != canon("1.2"));
  CHECK(canon(R"("a")") == canon(R"("\u0061")"));
  CHECK(canon(R"("a")") != canon(R"("A")"));
  CHECK(canon(R"("é")") == canon(R"("\u00e9")"));
  CHECK(canon(R"({"a": 1, "b": [1.0, "x"]})") == canon(R"({"b": [1, "\u0078"], "a": 10e-1})"));
  CHECK(canon("[1, 2]") != canon("[2, 1]"));
  CHECK(canon(R"({"a": 1})") != canon(R"({"a": 1, "b": 1})"));
  CHECK(canon("true") != canon("1"));
  CHECK(canon("null") != canon("false"));
  CHECK(canonical_number("-12.50e1") == "-125e0");
}

TEST_CASE("may_become: a prefix that can still reach a value") {
  const JsonValue v = parse_json(R"({"name": "ab", "tags": [1, 2]})");
  CHECK(may_become("", v));
  CHECK(may_become(R"({"tags": [1)", v));
  CHECK(may_become(R"({"name": "a)", v));
  CHECK(may_become(R"({"na)", v));
  CHECK(may_become(R"({"name": "ab", "tags": [1.0, 2])", v));
  CHECK_FALSE(may_become(R"({"name": "b)", v));
  CHECK_FALSE(may_become(R"({"nome)", v));
  CHECK_FALSE(may_become(R"({"name": "ab"})", v));  // closed without tags
  CHECK_FALSE(may_become(R"({"name": "abc)", v));
  CHECK_FALSE(may_become(R"({"tags": [2)", v));
  CHECK(may_become(R"("\u00)", parse_json(R"("é")")));  // an escape cut short: maybe
  CHECK_FALSE(may_become("[", v));
}

TEST_CASE("schemas: uniqueItems is checked at decode time and no longer reported relaxed") {
  const SchemaGrammar strings =
      compile_json_schema(R"({"type": "array", "uniqueItems": true, "items": {"type": "string"}})");
  CHECK(strings.relaxed.empty());
  CHECK(strings.unique_rules.size() == 1);
  // A finite set stays in the grammar; a schema without uniqueItems has nothing to check.
  CHECK(compile_json_schema(R"({"type": "array", "uniqueItems": true, "items": {"enum": ["a", "b"]}})")
            .unique_rules.empty());
  CHECK(compile_json_schema(R"({"type": "array", "items": {"type": "string"}})").unique_rules.empty());
  // More distinct items asked for than exist: no document satisfies it.
  CHECK_THROWS_AS(compile_json_schema(R"({"type": "array", "uniqueItems": true, "minItems": 3,
                                          "items": {"enum": ["a", "b"]}})"),
                  ember::Error);
  CHECK_THROWS_AS(compile_json_schema(R"({"type": "array", "uniqueItems": true, "minItems": 8,
                                          "items": {"enum": [1, 2, 3, 4, 5, 6, 7]}})"),
                  ember::Error);
  CHECK_THROWS_AS(compile_json_schema(R"({"type": "array", "uniqueItems": true, "minItems": 3,
                                          "items": {"type": "boolean", "description": "x"}})"),
                  ember::Error);
}

TEST_CASE("a model that repeats string items writes distinct ones") {
  const std::string order = "\"a,[]";
  CHECK(generate(R"({"type": "array", "maxItems": 4, "items": {"type": "string"}})", order) == R"(["","","",""])");
  CHECK(generate(R"({"type": "array", "uniqueItems": true, "maxItems": 4, "items": {"type": "string"}})", order) ==
        R"(["","a","aa","aaa"])");
}

TEST_CASE("a closed object item is made distinct before its last value closes") {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "maxItems": 3, "items": {"type": "object",
      "properties": {"n": {"type": "string"}}, "required": ["n"], "additionalProperties": false}})";
  // At {"n":"" the closing quote would leave only a repeated item: it is refused there.
  CHECK(generate(schema, "\"a{,:}n[]") == R"([{"n":""},{"n":"a"},{"n":"aa"}])");
}

TEST_CASE("any-value items compare as JSON values: 1.0 repeats 1, member order does not count") {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "maxItems": 3})";
  const auto trie = byte_trie();
  TokenConstraint c(compiled(schema, trie));
  for (char ch : std::string("[1,1")) c.accept(static_cast<unsigned char>(ch));
  CHECK_FALSE(c.allows(','));
  CHECK_FALSE(c.allows(']'));
  CHECK(c.allows('0'));  // 10
  CHECK(c.allows('.'));  // 1.5
  c.accept('.');
  c.accept('0');
  CHECK_FALSE(c.allows(']'));
  CHECK(c.allows('5'));
  TokenConstraint d(compiled(schema, trie));
  for (char ch : std::string(R"([{"a":1,"b":2},{"b":2.0,"a":1)")) d.accept(static_cast<unsigned char>(ch));
  CHECK_FALSE(d.allows('}'));  // the same object, members in another order
  CHECK(d.allows(','));
  CHECK(d.allows('5'));
}

TEST_CASE("tokens that close an item mid-piece, or two at once, are refused like single bytes") {
  const auto trie = byte_trie();
  TokenConstraint c(compiled(R"({"type": "array", "uniqueItems": true, "items": {"type": "string"}})", trie));
  for (char ch : std::string(R"(["a","b)")) c.accept(static_cast<unsigned char>(ch));
  CHECK(c.allows(token(*trie, "\"]")));
  CHECK(c.allows(token(*trie, "aa")));
  for (char ch : std::string(R"(",")")) c.accept(static_cast<unsigned char>(ch));
  CHECK(c.allows('a'));
  c.accept('a');
  CHECK_FALSE(c.allows('"'));
  CHECK_FALSE(c.allows(token(*trie, "\"]")));
  CHECK_FALSE(c.allows(token(*trie, "\",")));
  CHECK(c.allows('b'));
  TokenConstraint d(compiled(R"({"type": "array", "uniqueItems": true, "items": {"type": "string"}})", trie));
  d.accept('[');
  CHECK_FALSE(d.allows(token(*trie, "\"a\",\"a\"")));
}
