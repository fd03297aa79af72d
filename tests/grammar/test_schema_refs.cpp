// $refs outside a schema's own root: embedded resources ($id, resolved against the enclosing
// base URI), anchors, and other documents supplied by a SchemaResolver (never fetched).
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/schema_bundle.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

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

TEST_CASE("a remote $ref nobody supplies is refused naming its absolute URI, only where it is reached") {
  const std::string schema = R"({"$id": "https://example.com/s/main.json",
      "properties": {"a": {"$ref": "other.json#/x"}}})";
  const std::string e = error_of(schema);
  CHECK(e.find("remote $ref \"https://example.com/s/other.json#/x\"") != std::string::npos);
  CHECK(e.find("/properties/a") != std::string::npos);
  Documents empty;
  CHECK(error_of(schema, empty.resolver()).find("https://example.com/s/other.json#/x") != std::string::npos);
  // An unused definition's remote $ref refuses nothing.
  Matcher m =
      matcher_of(R"({"definitions": {"unused": {"$ref": "https://nowhere.example/x.json"}}, "type": "integer"})");
  CHECK(m.matches("12"));
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
