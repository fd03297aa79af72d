// $refs outside a schema's own root: embedded resources ($id, resolved against the enclosing
// base URI), anchors, and other documents supplied by a SchemaResolver (never fetched).
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/schema_bundle.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace ember::grammar;

namespace {

Matcher matcher_of(const std::string& schema, const ember::SchemaResolver& resolver = {}) {
  return Matcher(std::make_shared<const Grammar>(parse_gbnf(compile_json_schema(schema, "root", resolver).gbnf)));
}

// A resolver over a map, recording what it was asked.
struct Documents {
  std::map<std::string, std::string> texts;
  std::vector<std::string> asked;
  ember::SchemaResolver resolver() {
    return [this](const std::string& uri) -> std::optional<std::string> {
      asked.push_back(uri);
      const auto it = texts.find(uri);
      return it == texts.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  }
};

std::string error_of(const std::string& schema, const ember::SchemaResolver& resolver = {}) {
  try {
    compile_json_schema(schema, "root", resolver);
  } catch (const ember::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("URI references resolve against a base as RFC 3986 says") {
  CHECK(resolve_uri("https://a.org/x/y.json", "z.json#/d") == "https://a.org/x/z.json#/d");
  CHECK(resolve_uri("https://a.org/x/y.json", "../z.json") == "https://a.org/z.json");
  CHECK(resolve_uri("https://a.org/x/y.json", "/z") == "https://a.org/z");
  CHECK(resolve_uri("https://a.org/x/y.json", "#/d") == "https://a.org/x/y.json#/d");
  CHECK(resolve_uri("https://a.org/x/y.json", "//b.org/w") == "https://b.org/w");
  CHECK(resolve_uri("https://a.org/x/y.json", "urn:u:v") == "urn:u:v");
  CHECK(resolve_uri("https://a.org", "z") == "https://a.org/z");
  CHECK(resolve_uri("", "common.json#/d") == "common.json#/d");
  CHECK(resolve_uri("", "#a") == "#a");
}

TEST_CASE("a remote $ref resolves through the resolver, relative to the document's $id") {
  Documents docs;
  docs.texts["https://example.com/schemas/common.json"] =
      R"({"definitions": {"size": {"type": "integer", "minimum": 1, "maximum": 9}, "named": {"$ref": "#/definitions/name"},
          "name": {"enum": ["a", "b"]}}})";
  const std::string schema = R"({"$id": "https://example.com/schemas/main.json", "type": "object",
      "properties": {"n": {"$ref": "common.json#/definitions/size"}, "m": {"$ref": "common.json#/definitions/named"}},
      "required": ["n", "m"], "additionalProperties": false})";
  Matcher m = matcher_of(schema, docs.resolver());
  CHECK(m.matches(R"({"n": 3, "m": "b"})"));
  CHECK_FALSE(m.matches(R"({"n": 0, "m": "b"})"));
  CHECK_FALSE(m.matches(R"({"n": 3, "m": "c"})"));  // common.json's own "#/..." is common.json's
  CHECK(docs.asked == std::vector<std::string>{"https://example.com/schemas/common.json"});
}

TEST_CASE("a remote $ref nobody supplies is refused naming its absolute URI where every value needs it") {
  const std::string schema = R"({"$id": "https://example.com/s/main.json",
      "properties": {"a": {"$ref": "other.json#/x"}}, "required": ["a"]})";
  const std::string e = error_of(schema);
  CHECK(e.find("remote $ref \"https://example.com/s/other.json#/x\"") != std::string::npos);
  CHECK(e.find("/properties/a") != std::string::npos);
  Documents empty;
  CHECK(error_of(schema, empty.resolver()).find("https://example.com/s/other.json#/x") != std::string::npos);
  CHECK(error_of(R"({"$ref": "https://nowhere.example/x.json"})").find("is not available") != std::string::npos);
  // An unused definition's remote $ref refuses nothing.
  Matcher m =
      matcher_of(R"({"definitions": {"unused": {"$ref": "https://nowhere.example/x.json"}}, "type": "integer"})");
  CHECK(m.matches("12"));
}

TEST_CASE("what needs an unsupplied document is never generated, and says so; inside not or if it is refused") {
  // An optional property: left out, so every document generated still validates.
  const std::string optional = R"({"type": "object", "properties": {"a": {"$ref": "https://nowhere.example/a.json"},
      "b": {"type": "integer"}}, "additionalProperties": false})";
  const SchemaGrammar g = compile_json_schema(optional, "root", {});
  REQUIRE(g.relaxed.size() == 1);
  CHECK(g.relaxed[0].find("\"https://nowhere.example/a.json\" at /properties/a is not available: what needs it is "
                          "never generated") != std::string::npos);
  Matcher m = matcher_of(optional);
  CHECK(m.matches(R"({"b": 1})"));
  CHECK_FALSE(m.matches(R"({"a": 1, "b": 1})"));
  CHECK_FALSE(m.matches(R"({"a": {}})"));
  // A union keeps the branches it knows; an oneOf with an unknown branch is reported as anyOf
  // (a value of the known branch might also match the unknown one).
  Matcher u = matcher_of(R"({"anyOf": [{"$ref": "https://nowhere.example/u.json"}, {"type": "boolean"}]})");
  CHECK(u.matches("true"));
  CHECK_FALSE(u.matches("1"));
  const SchemaGrammar one = compile_json_schema(
      R"({"oneOf": [{"$ref": "https://nowhere.example/u.json"}, {"type": "boolean"}]})", "root", {});
  CHECK(std::any_of(one.relaxed.begin(), one.relaxed.end(),
                    [](const std::string& n) { return n.find("generated as anyOf") != std::string::npos; }));
  // A `then` that needs it: only values that fail the `if` are generated.
  Matcher t = matcher_of(R"({"type": "object", "properties": {"v": {"enum": [1, 2]}}, "required": ["v"],
      "if": {"properties": {"v": {"const": 1}}}, "then": {"$ref": "https://nowhere.example/t.json"}})");
  CHECK(t.matches(R"({"v": 2})"));
  CHECK_FALSE(t.matches(R"({"v": 1})"));
  // Read as false inside a negation it would loosen the schema: refused.
  CHECK(error_of(R"({"not": {"$ref": "https://nowhere.example/n.json"}})").find("https://nowhere.example/n.json") !=
        std::string::npos);
  CHECK(error_of(R"({"if": {"$ref": "https://nowhere.example/i.json"}, "then": {"type": "string"}})")
            .find("https://nowhere.example/i.json") != std::string::npos);
  CHECK(error_of(R"({"type": "object", "properties": {"k": {"not": {"properties": {"z":
      {"$ref": "https://nowhere.example/z.json"}}, "required": ["z"]}}}})")
            .find("https://nowhere.example/z.json") != std::string::npos);
}

TEST_CASE("a property named like a data keyword (default, enum) has its remote $refs resolved") {
  Documents docs;
  docs.texts["https://example.com/meta.json"] = R"({"definitions": {"small": {"type": "integer", "maximum": 3}}})";
  const std::string schema = R"({"type": "object", "additionalProperties": false, "required": ["default", "enum"],
      "properties": {"default": {"$ref": "https://example.com/meta.json#/definitions/small"},
                     "enum": {"$ref": "https://example.com/meta.json#/definitions/small"}}})";
  Matcher m = matcher_of(schema, docs.resolver());
  CHECK(m.matches(R"({"default": 2, "enum": 3})"));
  CHECK_FALSE(m.matches(R"({"default": 4, "enum": 3})"));
  CHECK_FALSE(m.matches(R"({"default": 2, "enum": 4})"));
}

TEST_CASE("embedded resources: a $ref resolves against the enclosing $id, and $anchor names a schema") {
  const std::string schema = R"({"$id": "https://example.com/root.json", "type": "object",
      "properties": {"a": {"$ref": "https://example.com/item.json"}, "b": {"$ref": "#flag"}},
      "$defs": {
        "item": {"$id": "item.json", "type": "object", "properties": {"v": {"$ref": "#/$defs/value"}},
                 "required": ["v"], "additionalProperties": false,
                 "$defs": {"value": {"type": "integer", "maximum": 5}}},
        "value": {"type": "string"},
        "flag": {"$anchor": "flag", "type": "boolean"}}})";
  Matcher m = matcher_of(schema);
  CHECK(m.matches(R"({"a": {"v": 4}, "b": true})"));
  CHECK_FALSE(m.matches(R"({"a": {"v": "s"}})"));  // item.json's "#/$defs/value" is its own
  CHECK_FALSE(m.matches(R"({"a": {"v": 6}})"));
  CHECK_FALSE(m.matches(R"({"b": 1})"));
}

TEST_CASE("documents that refer to each other, and a document that is not JSON") {
  Documents docs;
  docs.texts["a.json"] = R"({"type": "array", "items": {"$ref": "b.json"}, "maxItems": 2})";
  docs.texts["b.json"] = R"({"anyOf": [{"type": "null"}, {"$ref": "a.json"}]})";
  Matcher m = matcher_of(R"({"$ref": "a.json"})", docs.resolver());
  CHECK(m.matches("[null, [null]]"));
  CHECK_FALSE(m.matches("[1]"));
  CHECK(docs.asked == std::vector<std::string>{"a.json", "b.json"});
  Documents bad;
  bad.texts["x.json"] = "{not json";
  CHECK(error_of(R"({"$ref": "x.json"})", bad.resolver()).find("x.json") != std::string::npos);
}
