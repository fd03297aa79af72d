// JSON Schema -> grammar: each construct accepts the texts that validate and refuses the ones
// that do not; unsupported constructs and malformed schemas are errors that name them.
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/json_value.hpp"
#include "grammar/matcher.hpp"
#include "grammar/schema_regex.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>

using namespace ember::grammar;

namespace {

struct SchemaMatcher {
  explicit SchemaMatcher(const std::string& schema)
      : gbnf(json_schema_to_gbnf(schema)), m(std::make_shared<const Grammar>(parse_gbnf(gbnf))) {}
  bool operator()(const std::string& text) { return m.matches(text); }
  std::string gbnf;
  Matcher m;
};

std::string error_of(const std::string& schema) {
  try {
    json_schema_to_gbnf(schema);
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("primitive types") {
  SchemaMatcher s(R"({"type": "string"})");
  CHECK(s(R"("hello")"));
  CHECK(s(R"("esc \" \\ \n \u00e9 ü")"));
  CHECK_FALSE(s(R"("bad \ud800")"));  // a lone surrogate escape
  CHECK_FALSE(s("\"raw\nnewline\""));
  CHECK_FALSE(s("42"));
  SchemaMatcher n(R"({"type": "number"})");
  CHECK(n("0"));
  CHECK(n("-12.5e3"));
  CHECK_FALSE(n("01"));
  CHECK_FALSE(n("1."));
  SchemaMatcher i(R"({"type": "integer"})");
  CHECK(i("-7"));
  CHECK_FALSE(i("7.0"));
  SchemaMatcher b(R"({"type": ["boolean", "null"]})");
  CHECK(b("true"));
  CHECK(b("null"));
  CHECK_FALSE(b("0"));
  SchemaMatcher any(R"({})");
  CHECK(any(R"({"a": [1, {"b": null}], "c": "d"})"));
  CHECK(any("[ ]"));
  CHECK_FALSE(any("{"));
}

TEST_CASE("objects: properties in order, required, optional, additionalProperties") {
  SchemaMatcher s(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                      "tag": {"type": "string"}}, "required": ["age"]})");
  CHECK(s(R"({"name": "a", "age": 3, "tag": "x"})"));
  CHECK(s(R"({"age": 3})"));
  CHECK(s(R"({"name": "a", "age": 3})"));
  CHECK(s(R"({"age":3,"tag":"x"})"));
  CHECK(s("{\n  \"age\": 3\n}"));
  CHECK_FALSE(s(R"({"name": "a"})"));            // age is required
  CHECK_FALSE(s(R"({"age": 3, "name": "a"})"));  // schema order
  CHECK_FALSE(s(R"({"age": 3, "age": 4})"));     // no repeats
  CHECK_FALSE(s(R"({"age": 3, "other": 1})"));   // no additional properties unless allowed
  CHECK_FALSE(s(R"({, "age": 3})"));
  SchemaMatcher extra(R"({"properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}})");
  CHECK(extra(R"({"id": 1, "x": true, "y": false})"));
  CHECK(extra(R"({"x": true})"));
  CHECK(extra(R"({"idx": true})"));
  CHECK(extra(R"({"i": true})"));
  CHECK_FALSE(extra(R"({"id": 1, "id": true})"));  // an extra member never takes a listed name
  CHECK_FALSE(extra(R"({"x": 1})"));
  SchemaMatcher bounded(
      R"({"properties": {"id": {"type": "integer"}}, "additionalProperties": true, "maxProperties": 3})");
  CHECK(bounded(R"({"id": 1, "a": 2, "b": 3})"));
  CHECK_FALSE(bounded(R"({"id": 1, "a": 2, "b": 3, "c": 4})"));
  CHECK(bounded(R"({"a": 2, "b": 3})"));
  CHECK_FALSE(bounded(R"({"a": 2, "b": 3, "c": 4})"));  // the listed one counts as if present
  SchemaMatcher open(R"({"type": "object"})");
  CHECK(open(R"({"anything": [1, 2]})"));
  SchemaMatcher closed(R"({"type": "object", "additionalProperties": false})");
  CHECK(closed("{}"));
  CHECK_FALSE(closed(R"({"a": 1})"));
}

TEST_CASE("arrays: items, prefixItems, minItems, maxItems") {
  SchemaMatcher s(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  CHECK_FALSE(s("[1]"));
  CHECK(s("[1, 2]"));
  CHECK(s("[1,2,3]"));
  CHECK_FALSE(s("[1, 2, 3, 4]"));
  CHECK_FALSE(s(R"([1, "a"])"));
  SchemaMatcher any(R"({"type": "array"})");
  CHECK(any("[]"));
  CHECK(any(R"([1, "a", null])"));
  SchemaMatcher tuple(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})");
  CHECK(tuple(R"(["a", 1])"));
  CHECK_FALSE(tuple(R"(["a"])"));
  CHECK_FALSE(tuple(R"([1, "a"])"));
  CHECK_FALSE(tuple(R"(["a", 1, 2])"));
  SchemaMatcher tail(R"({"prefixItems": [{"const": "op"}], "items": {"type": "number"}, "maxItems": 3})");
  CHECK(tail(R"(["op"])"));
  CHECK(tail(R"(["op", 1, 2.5])"));
  CHECK_FALSE(tail(R"(["op", 1, 2, 3])"));
  SchemaMatcher none(R"({"type": "array", "maxItems": 0})");
  CHECK(none("[]"));
  CHECK_FALSE(none("[1]"));
}

TEST_CASE("enum, const, anyOf, oneOf") {
  SchemaMatcher e(R"({"enum": ["give", "attack", 3, null, {"a": [1]}]})");
  CHECK(e(R"("give")"));
  CHECK(e("3"));
  CHECK(e("null"));
  CHECK(e(R"({"a":[1]})"));
  CHECK_FALSE(e(R"("run")"));
  SchemaMatcher typed(R"({"type": "string", "enum": ["a", 1, "b"]})");
  CHECK(typed(R"("b")"));
  CHECK_FALSE(typed("1"));
  SchemaMatcher c(R"({"const": "fixed"})");
  CHECK(c(R"("fixed")"));
  CHECK_FALSE(c(R"("fixes")"));
  SchemaMatcher typed_const(R"({"type": ["integer", "null"], "const": 3})");
  CHECK(typed_const("3"));
  CHECK_FALSE(typed_const("null"));
  SchemaMatcher a(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 2}]})");
  CHECK(a("12"));
  CHECK(a(R"("ab")"));
  CHECK_FALSE(a(R"("abc")"));
  SchemaMatcher o(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})");
  CHECK(o("false"));
  CHECK_FALSE(o("0"));
}

TEST_CASE("$ref and $defs, recursive") {
  SchemaMatcher s(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}},
                      "$ref": "#/$defs/node"})");
  CHECK(s(R"({"v": 1})"));
  CHECK(s(R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": [{"v": 4}]}]})"));
  CHECK_FALSE(s(R"({"v": 1, "kids": [{"w": 2}]})"));
  // Recursion is unrolled to 6 levels: deeper documents are not generated.
  std::string deep = R"({"v": 0})";
  for (int depth = 2; depth <= 7; ++depth) {
    deep = R"({"v": 0, "kids": [)" + deep + "]}";
    CAPTURE(depth);
    CHECK(s(deep) == (depth <= 6));
  }
  SchemaMatcher legacy(
      R"({"definitions": {"x": {"type": "boolean"}}, "type": "array", "items": {"$ref": "#/definitions/x"}})");
  CHECK(legacy("[true, false]"));
  SchemaMatcher self(R"({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#"}]}})");
  CHECK(self("[1, [2, [3]], []]"));
  CHECK_FALSE(self(R"([1, "a"])"));
}

TEST_CASE("string lengths and formats") {
  SchemaMatcher s(R"({"type": "string", "minLength": 2, "maxLength": 4})");
  CHECK_FALSE(s(R"("a")"));
  CHECK(s(R"("ab")"));
  CHECK(s(R"("a\nüc")"));  // four characters: a, \n, ü, c
  CHECK_FALSE(s(R"("abcde")"));
  SchemaMatcher date(R"({"type": "string", "format": "date"})");
  CHECK(date(R"("2024-02-28")"));
  CHECK(date(R"("1999-12-31")"));
  CHECK_FALSE(date(R"("2024-02-30")"));
  CHECK_FALSE(date(R"("2024-13-01")"));
  CHECK_FALSE(date(R"("2024-04-31")"));
  SchemaMatcher time(R"({"type": "string", "format": "time"})");
  CHECK(time(R"("23:59:59Z")"));
  CHECK(time(R"("08:30:00.125+02:00")"));
  CHECK_FALSE(time(R"("24:00:00Z")"));
  CHECK_FALSE(time(R"("12:00:00")"));
  SchemaMatcher uuid(R"({"type": "string", "format": "uuid"})");
  CHECK(uuid(R"("123e4567-e89b-12d3-a456-426614174000")"));
  CHECK_FALSE(uuid(R"("123e4567e89b12d3a456426614174000")"));
  SchemaMatcher dt(R"({"format": "date-time"})");
  CHECK(dt(R"("2024-01-05T10:00:00Z")"));
}

TEST_CASE("integer ranges") {
  SchemaMatcher s(R"({"type": "integer", "minimum": -15, "maximum": 230})");
  for (int v = -40; v <= 300; ++v) {
    CAPTURE(v);
    CHECK(s(std::to_string(v)) == (v >= -15 && v <= 230));
  }
  CHECK_FALSE(s("-0"));
  CHECK_FALSE(s("007"));
  SchemaMatcher lo(R"({"type": "integer", "exclusiveMinimum": 99})");
  CHECK_FALSE(lo("99"));
  CHECK(lo("100"));
  CHECK(lo("123456789012"));
  CHECK_FALSE(lo("-5"));
  SchemaMatcher hi(R"({"type": "integer", "maximum": -10})");
  CHECK(hi("-10"));
  CHECK(hi("-99999"));
  CHECK_FALSE(hi("-9"));
  CHECK_FALSE(hi("0"));
  SchemaMatcher wide(R"({"type": "integer", "minimum": 1000, "maximum": 1000000})");
  for (int v : {999, 1000, 1001, 9999, 10000, 99999, 543210, 1000000, 1000001}) {
    CAPTURE(v);
    CHECK(wide(std::to_string(v)) == (v >= 1000 && v <= 1000000));
  }
}

TEST_CASE("pattern: the documented regex subset") {
  SchemaMatcher s(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,4}$"})");
  CHECK(s(R"("AB-123")"));
  CHECK(s(R"("XY-9876")"));
  CHECK_FALSE(s(R"("ab-123")"));
  CHECK_FALSE(s(R"("AB-12")"));
  SchemaMatcher alt(R"({"pattern": "(cat|dog)s?( [a-z]+)*"})");
  CHECK(alt(R"("cats")"));
  CHECK(alt(R"("dog runs fast")"));
  CHECK_FALSE(alt(R"("cow")"));
  SchemaMatcher quote(R"({"pattern": "^say \"[^\"]*\"\\.$"})");
  CHECK(quote(R"("say \"hi\".")"));
  CHECK_FALSE(quote(R"("say "hi".")"));
  CHECK(pattern_to_gbnf("a.b").find("[") != std::string::npos);
}

TEST_CASE("refusals: only malformed, unsatisfiable or remote schemas") {
  CHECK(error_of(R"({"$ref": "http://example.com/s.json"})").find("remote $ref") != std::string::npos);
  CHECK(error_of(R"({"$ref": "#/$defs/missing"})").find("points at nothing") != std::string::npos);
  CHECK(error_of(R"({"type": "blob"})").find("unknown 'type' at /type") != std::string::npos);
  CHECK(error_of(R"({"type": "string", "const": 1})").find("whose values all fail its 'type' at /") !=
        std::string::npos);
  CHECK(error_of(R"({"type": "string", "enum": [1, 2]})").find("whose values all fail its 'type'") !=
        std::string::npos);
  CHECK(error_of("false").find("a schema that no value satisfies at /") != std::string::npos);
  CHECK(error_of(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})").find("no value satisfies") !=
        std::string::npos);
  CHECK(error_of(R"({"type": "object", "properties": {"a": false}, "required": ["a"]})").find("no value satisfies") !=
        std::string::npos);
  CHECK(error_of(R"({"type": "object", "required": ["x"], "additionalProperties": false})")
            .find("'required' naming 'x'") != std::string::npos);
  CHECK(error_of(R"({"properties": {"a": {}, "b": {}}, "required": ["a", "b"], "maxProperties": 1})")
            .find("'maxProperties' below") != std::string::npos);
}

TEST_CASE("malformed schema JSON names the position") {
  CHECK(error_of("{\"type\": \"string\",\n  \"maxLength\": }").find("expected a value at line 2, column 16") !=
        std::string::npos);
  CHECK(error_of("{\"type\": \"str").find("unterminated string") != std::string::npos);
  CHECK(error_of("{} x").find("unexpected text after the value at line 1, column 4") != std::string::npos);
  CHECK(error_of("").find("unexpected end") != std::string::npos);
  CHECK(error_of("{\"properties\": {\"a\x99\": {}}}").find("invalid UTF-8 in a string at line 1, column 19") !=
        std::string::npos);
}

TEST_CASE("the JSON reader") {
  const JsonValue v = parse_json(R"({"b": [1, 2.50, -3e2], "a": "x\u00e9\ud83d\ude00", "c": {"t": true, "n": null}})");
  REQUIRE(v.type == JsonValue::Type::object);
  CHECK(v.members[0].first == "b");  // source order
  CHECK(v.find("b")->items[1].text == "2.50");
  CHECK(v.find("a")->text == "x\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(v.dump() == R"({"b":[1,2.50,-3e2],"a":"xé😀","c":{"t":true,"n":null}})");
  CHECK(json_quote("a\"\\\n\x01") == R"("a\"\\\n\u0001")");
}

TEST_CASE("oneOf is exactly one: disjoint branches are accepted, overlapping ones refused by name") {
  // Types that cannot meet, values that differ, and a tagged union through $refs (Pydantic's
  // discriminated union, with its `discriminator` annotation).
  SchemaMatcher types(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})");
  CHECK(types("12"));
  CHECK(types(R"("a")"));
  SchemaMatcher values(R"({"oneOf": [{"const": "a"}, {"enum": ["b", 3]}, {"type": "boolean"}]})");
  CHECK(values("3"));
  CHECK_FALSE(values(R"("c")"));
  SchemaMatcher tagged(R"({"$defs": {
      "Cat": {"type": "object", "properties": {"pet": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}}, "required": ["pet"]},
      "Dog": {"type": "object", "properties": {"pet": {"const": "dog", "type": "string"}, "good": {"type": "boolean"}}, "required": ["pet"]}},
    "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
    "discriminator": {"propertyName": "pet", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}})");
  CHECK(tagged(R"({"pet":"dog","good":true})"));
  CHECK_FALSE(tagged(R"({"pet":"cow"})"));
  SchemaMatcher nested(R"({"oneOf": [{"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "array"}]})");
  CHECK(nested("[]"));

  // A value could match two branches: anyOf would accept it, oneOf must not: generated as anyOf,
  // and the response says so.
  for (const char* schema :
       {R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})",
        R"({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^a"}]})",
        R"({"oneOf": [{"const": 1}, {"enum": [2, 1.0]}]})", R"({"oneOf": [{"type": "boolean"}, {}]})"}) {
    CAPTURE(schema);
    const SchemaGrammar g = compile_json_schema(schema);
    REQUIRE(g.relaxed.size() == 1);
    CHECK(g.relaxed[0].find("may both match a value; generated as anyOf") != std::string::npos);
  }
  CHECK(compile_json_schema(R"({"oneOf": [{"type": "null"}, {"type": "string"}, {"type": "string", "maxLength": 2}]})")
            .relaxed.at(0)
            .find("branches 1 and 2") != std::string::npos);
  CHECK(compile_json_schema(R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})").relaxed.empty());
}

TEST_CASE("oneOf of objects: a required name the other branch closes out, or required values that cannot meet") {
  // SchemaStore's shape: each branch a closed object with its own required property.
  const char* closed = R"({"oneOf": [
      {"type": "object", "properties": {"run": {"type": "string"}}, "required": ["run"], "additionalProperties": false},
      {"type": "object", "properties": {"uses": {"type": "string"}}, "required": ["uses"], "additionalProperties": false}]})";
  CHECK(compile_json_schema(closed).relaxed.empty());
  SchemaMatcher m(closed);
  CHECK(m(R"({"run":"x"})"));
  CHECK_FALSE(m(R"({"run":"x","uses":"y"})"));
  // The same required name whose schemas are disjoint (types that cannot meet).
  CHECK(compile_json_schema(R"({"oneOf": [
      {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]},
      {"type": "object", "properties": {"v": {"type": "array"}}, "required": ["v"]}]})")
            .relaxed.empty());
  // Still may overlap: one branch open (it allows "run" as an extra member), or untyped branches
  // (a string satisfies both, as `required` applies to objects only).
  for (const char* schema : {R"({"oneOf": [
      {"type": "object", "properties": {"run": {"type": "string"}}, "required": ["run"]},
      {"type": "object", "properties": {"uses": {"type": "string"}}, "required": ["uses"]}]})",
                             R"({"oneOf": [
      {"type": ["object", "string"], "properties": {"a": {}}, "required": ["a"], "additionalProperties": false},
      {"type": ["object", "string"], "properties": {"b": {}}, "required": ["b"], "additionalProperties": false}]})"}) {
    CAPTURE(schema);
    CHECK(compile_json_schema(schema).relaxed.size() == 1);
  }
}

TEST_CASE("a schema whose $refs expand without end is refused by its step bound, not computed") {
  // d0 = d1 and d1, d1 = d2 and d2, ...: 2^24 visits if every reference were inlined.
  std::string defs;
  for (int i = 0; i < 24; ++i)
    defs += "\"d" + std::to_string(i) + "\": {\"type\": \"object\", \"allOf\": [{\"$ref\": \"#/$defs/d" +
            std::to_string(i + 1) + "\"}, {\"$ref\": \"#/$defs/d" + std::to_string(i + 1) + "\"}]},";
  defs += "\"d24\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\"}}}";
  const std::string schema = "{\"$defs\": {" + defs + "}, \"$ref\": \"#/$defs/d0\"}";
  try {
    compile_json_schema(schema);
    FAIL("an exponential schema compiled");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("too large to enforce") != std::string::npos);
  }
}
