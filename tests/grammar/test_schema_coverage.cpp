// JSON Schema coverage: each keyword ember enforces accepts the texts that validate and refuses
// ones that do not; annotations and unknown keywords change nothing; a keyword that is relaxed
// says so in SchemaGrammar::relaxed, and one that is enforced exactly adds no line there.
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/schema_numbers.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>

using namespace ember::grammar;

namespace {

struct Schema {
  explicit Schema(const std::string& schema)
      : compiled(compile_json_schema(schema)), m(std::make_shared<const Grammar>(parse_gbnf(compiled.gbnf))) {}
  bool operator()(const std::string& text) { return m.matches(text); }
  bool exact() const { return compiled.relaxed.empty(); }
  std::string relaxed() const {
    std::string out;
    for (const std::string& r : compiled.relaxed) out += r + "\n";
    return out;
  }
  SchemaGrammar compiled;
  Matcher m;
};

}  // namespace

TEST_CASE("annotations and unknown keywords are ignored") {
  Schema s(R"({"type": "string", "id": "x", "markdownDescription": "m", "x-taplo-info": {"a": 1},
               "fileMatch": ["*.toml"], "deprecationMessage": "d", "$anchor": "s", "examples": ["a"]})");
  CHECK(s.exact());
  CHECK(s(R"("a")"));
  CHECK_FALSE(s("1"));
}

TEST_CASE("allOf merges, with additionalProperties applied across branches") {
  Schema s(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})");
  CHECK(s.exact());
  CHECK(s(R"({"a": 1, "b": "x"})"));
  CHECK_FALSE(s(R"({"a": 1})"));
  CHECK_FALSE(s(R"({"a": "1", "b": "x"})"));
  Schema closed(R"({"allOf": [{"properties": {"a": {}}, "additionalProperties": false}, {"properties": {"b": {}}}]})");
  CHECK(closed(R"({"a": 1})"));
  CHECK_FALSE(closed(R"({"a": 1, "b": 2})"));
  Schema bounds(R"({"allOf": [{"type": "integer", "minimum": 3}, {"maximum": 5}, {"minimum": 4}]})");
  CHECK(bounds("4"));
  CHECK(bounds("5"));
  CHECK_FALSE(bounds("3"));
  CHECK_FALSE(bounds("6"));
  Schema enums(R"({"allOf": [{"enum": ["a", "b", "c"]}, {"enum": ["b", "c", "d"]}, {"not": {"const": "c"}}]})");
  CHECK(enums(R"("b")"));
  CHECK_FALSE(enums(R"("a")"));
  CHECK_FALSE(enums(R"("c")"));
  Schema two_patterns(R"({"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "b$"}]})");
  CHECK(two_patterns.relaxed().find("'pattern' at /: two different values meet in allOf") != std::string::npos);
}

TEST_CASE("type beside anyOf, oneOf and $ref is intersected") {
  Schema any(R"({"type": "string", "anyOf": [{"maxLength": 2}, {"pattern": "^x+$"}]})");
  CHECK(any.exact());
  CHECK(any(R"("ab")"));
  CHECK(any(R"("xxxx")"));
  CHECK_FALSE(any(R"("abc")"));
  CHECK_FALSE(any("5"));
  Schema one(R"({"type": ["string", "null"], "oneOf": [{"type": "string"}, {"type": "integer"}]})");
  CHECK(one(R"("a")"));
  CHECK_FALSE(one("1"));
  CHECK_FALSE(one("null"));
  Schema ref(R"({"type": "object", "required": ["m"], "properties": {"m": {"type": "boolean"}}, "$ref": "#/$defs/p",
                 "$defs": {"p": {"properties": {"n": {"type": "integer"}}, "required": ["n"]}}})");
  CHECK(ref(R"({"m": true, "n": 1})"));
  CHECK_FALSE(ref(R"({"m": true})"));
  CHECK_FALSE(ref(R"({"n": 1})"));
}

TEST_CASE("patternProperties and propertyNames") {
  Schema p(
      R"({"type": "object", "patternProperties": {"^x-[a-z]+$": {"type": "integer"}}, "additionalProperties": false})");
  CHECK(p(R"({"x-ab": 1, "x-c": 2})"));
  CHECK_FALSE(p(R"({"x-ab": "s"})"));
  CHECK_FALSE(p(R"({"y": 1})"));
  Schema names(
      R"({"type": "object", "propertyNames": {"pattern": "^[a-z]{1,3}$"}, "additionalProperties": {"type": "boolean"}})");
  CHECK(names(R"({"ab": true})"));
  CHECK_FALSE(names(R"({"abcd": true})"));
  CHECK_FALSE(names(R"({"ab": 1})"));
  Schema listed(R"({"type": "object", "properties": {"a": {"type": "string"}}, "propertyNames": {"enum": ["a", "b"]},
                    "additionalProperties": true})");
  CHECK(listed(R"({"a": "s", "b": 1})"));
  CHECK_FALSE(listed(R"({"a": "s", "a": 1})"));
  CHECK_FALSE(listed(R"({"c": 1})"));
}

TEST_CASE("items, prefixItems, additionalItems and contains") {
  Schema tuple(
      R"({"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": {"type": "boolean"}})");
  CHECK(tuple(R"(["a", 1, true, false])"));
  CHECK_FALSE(tuple(R"(["a", 1, 2])"));
  Schema closed(R"({"type": "array", "items": [{"type": "string"}], "additionalItems": false})");
  CHECK(closed(R"(["a"])"));
  CHECK_FALSE(closed(R"(["a", "b"])"));
  Schema modern(R"({"type": "array", "prefixItems": [{"const": 0}], "items": {"type": "string"}, "maxItems": 2})");
  CHECK(modern(R"([0, "x"])"));
  CHECK_FALSE(modern(R"([0, "x", "y"])"));
  // contains: the first item satisfies it (narrower than "some item").
  Schema contains(R"({"type": "array", "items": {"type": "integer"}, "contains": {"const": 7}})");
  CHECK(contains("[7, 1]"));
  CHECK_FALSE(contains("[]"));
  CHECK_FALSE(contains("[1]"));
}

TEST_CASE("uniqueItems: in the grammar over a small finite item set, otherwise checked while decoding") {
  Schema colours(R"({"type": "array", "items": {"enum": ["r", "g", "b"]}, "uniqueItems": true, "maxItems": 2})");
  CHECK(colours.exact());
  CHECK(colours(R"(["r", "b"])"));
  CHECK(colours("[]"));
  CHECK_FALSE(colours(R"(["r", "r"])"));
  CHECK_FALSE(colours(R"(["r", "g", "b"])"));
  Schema strings(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})");
  CHECK(strings.exact());  // not a relaxation: the decoder refuses a repeated item
  CHECK(strings.compiled.unique_rules.size() == 1);
  CHECK(strings(R"(["a", "a"])"));  // the grammar alone cannot say it (test_unique_items.cpp)
}

TEST_CASE("oneOf over required lists: exactly one of the name sets present, exactly") {
  Schema either(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "oneOf": [{"required": ["a"]}, {"required": ["b"], "description": "d"}]})");
  CHECK(either.exact());
  CHECK(either(R"({"a": 1})"));
  CHECK(either(R"({"b": 2})"));
  CHECK_FALSE(either(R"({"a": 1, "b": 2})"));
  CHECK_FALSE(either("{}"));
  // A branch whose names include another's always matches both: it is left out.
  Schema nested(R"({"oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}]})");
  CHECK(nested.exact());
  CHECK(nested(R"({"a": 1})"));
  CHECK_FALSE(nested(R"({"a": 1, "b": 2})"));
  CHECK_FALSE(nested("1"));  // not an object: every branch matches it
  // Anything besides `required` in a branch: still shown disjoint or relaxed as before.
  Schema other(R"({"oneOf": [{"required": ["a"]}, {"required": ["b"], "minProperties": 1}]})");
  CHECK(other.relaxed().find("'oneOf' at /: branches 0 and 1 may both match a value") != std::string::npos);
}

TEST_CASE("dependencies, dependentRequired, dependentSchemas") {
  for (
      const char* schema :
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependentRequired": {"a": ["b"]}})",
       R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependencies": {"a": ["b"]}})",
       R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "dependentSchemas": {"a": {"required": ["b"]}}})"}) {
    CAPTURE(schema);
    Schema s(schema);
    CHECK(s.exact());
    CHECK(s(R"({"a": 1, "b": 2})"));
    CHECK(s(R"({"b": 2})"));
    CHECK(s("{}"));
    CHECK_FALSE(s(R"({"a": 1})"));
  }
}

TEST_CASE("if/then/else and not where the negation can be written") {
  Schema s(
      R"({"type": "object", "properties": {"kind": {"enum": ["a", "b"]}, "x": {"type": "integer"}, "y": {"type": "string"}},
               "required": ["kind"], "if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]},
               "else": {"required": ["y"]}})");
  CHECK(s.exact());
  CHECK(s(R"({"kind": "a", "x": 1})"));
  CHECK(s(R"({"kind": "b", "y": "s"})"));
  CHECK_FALSE(s(R"({"kind": "a", "y": "s"})"));
  CHECK_FALSE(s(R"({"kind": "b", "x": 1})"));
  Schema strings(
      R"({"type": "object", "properties": {"t": {"type": "string"}, "n": {"type": "integer"}}, "required": ["t"],
                     "if": {"properties": {"t": {"const": "num"}}}, "then": {"required": ["n"]}, "else": {"properties": {"n": false}}})");
  CHECK(strings(R"({"t": "num", "n": 1})"));
  CHECK(strings(R"({"t": "nu"})"));
  CHECK(strings(R"({"t": "numb"})"));
  CHECK_FALSE(strings(R"({"t": "num"})"));
  CHECK_FALSE(strings(R"({"t": "other", "n": 1})"));
  Schema not_both(R"({"type": "object", "properties": {"a": {}, "b": {}}, "not": {"required": ["a", "b"]}})");
  CHECK(not_both(R"({"a": 1})"));
  CHECK_FALSE(not_both(R"({"a": 1, "b": 2})"));
  Schema not_string(R"({"not": {"type": "string"}})");
  CHECK(not_string("1"));
  CHECK_FALSE(not_string(R"("a")"));
  Schema unwritable(R"({"type": "integer", "not": {"multipleOf": 3}})");
  CHECK(unwritable.relaxed().find("'not' at / is not enforced") != std::string::npos);
}

TEST_CASE("numbers: exact decimal ranges, multipleOf, draft-04 exclusive flags") {
  Schema r(R"({"type": "number", "minimum": 0.5, "exclusiveMaximum": 2.25})");
  CHECK(r.exact());
  for (const char* ok : {"0.5", "0.50", "1", "2.2499", "2.24", "0.51"}) CHECK_MESSAGE(r(ok), ok);
  for (const char* bad : {"0.49", "2.25", "2.250", "2.3", "-1", "0", "3"}) CHECK_MESSAGE(!r(bad), bad);
  Schema neg(R"({"type": "number", "exclusiveMinimum": -1.5, "maximum": 0})");
  for (const char* ok : {"-1.4999", "-1", "0", "-0.5"}) CHECK_MESSAGE(neg(ok), ok);
  for (const char* bad : {"-1.5", "0.1", "-2", "-1.50"}) CHECK_MESSAGE(!neg(bad), bad);
  Schema cents(R"({"type": "number", "multipleOf": 0.01, "minimum": 0})");
  CHECK(cents("1.25"));
  CHECK_FALSE(cents("1.255"));
  Schema fives(R"({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 20})");
  CHECK(fives("15"));
  CHECK_FALSE(fives("12"));
  CHECK_FALSE(fives("25"));
  Schema draft4(R"({"type": "number", "minimum": 0, "exclusiveMinimum": true})");
  CHECK_FALSE(draft4("0"));
  CHECK(draft4("0.1"));
  Schema int_frac(R"({"type": "integer", "minimum": 0.5, "maximum": 3.5})");
  CHECK(int_frac("1"));
  CHECK(int_frac("3"));
  CHECK_FALSE(int_frac("0"));
  CHECK_FALSE(int_frac("4"));
}

TEST_CASE("decimal_range agrees with arithmetic on a grid") {
  const double bounds[] = {-2.5, -1, -0.25, 0, 0.05, 1, 1.75, 10};
  for (double lo : bounds)
    for (double hi : bounds)
      for (int flags = 0; flags < 4; ++flags) {
        const bool lo_ex = flags & 1, hi_ex = flags & 2;
        const auto text = [](double v) { return fmt::format("{}", v); };
        const auto range =
            decimal_range(Bound{*parse_decimal(text(lo)), lo_ex}, Bound{*parse_decimal(text(hi)), hi_ex}, 3);
        bool any = false;
        std::shared_ptr<Matcher> m;
        if (range) m = std::make_shared<Matcher>(std::make_shared<const Grammar>(parse_gbnf("root ::= " + *range)));
        for (int i = -1200; i <= 1200; ++i) {
          const double v = i / 100.0;
          const bool want = (lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi);
          const std::string t = fmt::format("{}", v);
          any |= want;
          if (m && m->matches(t) != want)
            FAIL_CHECK(fmt::format("{} in [{}, {}] flags {}: grammar says {}", t, lo, hi, flags, !want));
        }
        CHECK(range.has_value() == any);
      }
}

TEST_CASE("string formats") {
  const struct {
    const char* format;
    const char* good;
    const char* bad;
  } cases[] = {
      {"email", "a.b@example.com", "ab"},
      {"ipv4", "192.168.0.1", "256.1.1.1"},
      {"ipv6", "2001:db8:0:0:0:0:2:1", "2001:db8"},
      {"hostname", "api.example-1.com", "-bad"},
      {"uri", "https://example.com/a/b?q=1#f", "example.com"},
      {"uri-reference", "/a/b?x=1", "a b"},
      {"duration", "P1Y2M3DT4H5M6S", "P"},
      {"date-time", "2024-02-28T12:30:00Z", "2024-02-30T12:30:00Z"},
      {"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.format));
    Schema s(fmt::format(R"({{"type": "string", "format": "{}"}})", c.format));
    CHECK(s.exact());
    CHECK(s(fmt::format("\"{}\"", c.good)));
    CHECK_FALSE(s(fmt::format("\"{}\"", c.bad)));
  }
  Schema unknown(R"({"type": "string", "format": "color"})");
  CHECK(unknown.relaxed().find("the string format 'color' is not enforced at /") != std::string::npos);
  CHECK(unknown(R"("anything")"));
  Schema alternatives(R"({"type": "string", "pattern": "^(\\d\\.)(\\d)$|^(\\d)$"})");  // anchors per alternative
  CHECK(alternatives.exact());
  CHECK(alternatives(R"("1.2")"));
  CHECK(alternatives(R"("7")"));
  CHECK_FALSE(alternatives(R"("12")"));
}

TEST_CASE("minLength/maxLength beside pattern: the pattern's strings of those lengths, exactly") {
  Schema lengths(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})");
  CHECK(lengths.exact());
  CHECK(lengths(R"("a")"));
  CHECK(lengths(R"("abc")"));
  CHECK_FALSE(lengths(R"("abcd")"));
  CHECK_FALSE(lengths(R"("")"));
  CHECK_FALSE(lengths(R"("ab1")"));
  // Lengths count code points, whatever JSON's escaping: \" is one, é is one.
  Schema escaped(R"({"type": "string", "pattern": "^[a-z\"é]*$", "minLength": 2, "maxLength": 2})");
  CHECK(escaped.exact());
  CHECK(escaped(R"("\"a")"));
  CHECK(escaped(R"("éé")"));
  CHECK_FALSE(escaped(R"("a")"));
  CHECK_FALSE(escaped(R"("abc")"));
  // An unanchored pattern with a minimum only, and alternatives of different lengths.
  Schema at_least(R"({"type": "string", "pattern": "(ab|c)(x[0-9])*", "minLength": 4})");
  CHECK(at_least.exact());
  CHECK(at_least(R"("abx1")"));
  CHECK(at_least(R"("cx1x2x3")"));
  CHECK_FALSE(at_least(R"("cx1")"));
  CHECK_FALSE(at_least(R"("ab")"));
  CHECK_FALSE(at_least(R"("abx")"));
  // Counted repeats inside: {2,3} of "ab" between 5 and 6 code points leaves "ababab" only.
  Schema counted(R"({"type": "string", "pattern": "^(ab){2,3}$", "minLength": 5, "maxLength": 6})");
  CHECK(counted(R"("ababab")"));
  CHECK_FALSE(counted(R"("abab")"));
  // No string fits: the schema is unsatisfiable (refused as a document, dropped as a branch).
  CHECK_THROWS_AS(Schema(R"({"type": "string", "pattern": "^[0-9]{4}$", "maxLength": 3})"), ember::Error);
  Schema branch(R"({"anyOf": [{"type": "string", "pattern": "^[0-9]{4}$", "maxLength": 3}, {"type": "integer"}]})");
  CHECK(branch("12"));
  CHECK_FALSE(branch(R"("123")"));
  // Past the size bound (a pattern of many positions times a wide length range) the lengths are
  // relaxed and reported, the pattern still enforced.
  Schema wide(R"({"type": "string", "pattern": "^(.{1,50}|[a-z]{1,50}|[0-9]{1,50})*$", "maxLength": 9000})");
  CHECK(wide.relaxed().find("'minLength'/'maxLength' beside 'pattern' are not enforced") != std::string::npos);
}

TEST_CASE("$anchor, $id-qualified and recursive local $refs") {
  Schema anchor(R"({"$defs": {"n": {"$anchor": "node", "type": "integer"}}, "$ref": "#node"})");
  CHECK(anchor("1"));
  CHECK_FALSE(anchor(R"("a")"));
  Schema draft7(R"({"definitions": {"n": {"$id": "#num", "type": "integer"}}, "properties": {"a": {"$ref": "#num"}}})");
  CHECK(draft7(R"({"a": 1})"));
  Schema qualified(
      R"({"$id": "https://x.org/s.json", "$defs": {"a": {"type": "string"}}, "$ref": "https://x.org/s.json#/$defs/a"})");
  CHECK(qualified(R"("s")"));
  Schema tree(
      R"({"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                                  "additionalProperties": false}}, "$ref": "#/$defs/t", "description": "a tree"})");
  CHECK(tree(R"({"kids": [{"kids": []}, {}]})"));
  CHECK_FALSE(tree(R"({"kids": [{"x": 1}]})"));
}

TEST_CASE("a counted repeat beside lengths stays small: winget's PackageIdentifier") {
  // {1,32} four times and maxLength 128: enforced (the optional copies are nested, not chained).
  Schema id(R"({"type": "string", "maxLength": 12,
                "pattern": "^[^\\.\\s\\\\/:\\*\\?\"<>\\|\\x01-\\x1f]{1,32}(\\.[^\\.\\s\\\\/:\\*\\?\"<>\\|\\x01-\\x1f]{1,32}){1,3}$"})");
  CHECK(id.exact());
  CHECK(id(R"("Vendor.App")"));
  CHECK(id(R"("a.b.c.d")"));
  CHECK_FALSE(id(R"("Vendor.Application")"));  // 18 > 12
  CHECK_FALSE(id(R"("Vendor")"));              // the pattern wants a dot
  CHECK_FALSE(id(R"("a.b.c.d.e")"));
  Schema full(R"({"type": "string", "maxLength": 128,
                  "pattern": "^[^\\.\\s\\\\/:\\*\\?\"<>\\|\\x01-\\x1f]{1,32}(\\.[^\\.\\s\\\\/:\\*\\?\"<>\\|\\x01-\\x1f]{1,32}){1,3}$"})");
  CHECK(full.exact());
  CHECK(full(R"("Microsoft.VisualStudioCode")"));
}

TEST_CASE("a listed or required name takes the schemas of the patternProperties patterns it matches") {
  Schema s(R"({"type": "object", "properties": {"x-a": {"type": "integer"}}, "required": ["y-b"],
               "patternProperties": {"^x-": {"minimum": 3}, "^y-": {"type": "string"}},
               "additionalProperties": false})");
  CHECK(s(R"({"y-b": "s"})"));
  CHECK(s(R"({"x-a": 4, "y-b": "s"})"));
  CHECK_FALSE(s(R"({"x-a": 2, "y-b": "s"})"));  // x-a matches ^x-: at least 3
  CHECK_FALSE(s(R"({"y-b": 1})"));              // y-b matches ^y-: a string
  CHECK(s.exact());
  // A required name no pattern matches, with additionalProperties false: nothing validates.
  CHECK_THROWS_WITH_AS(compile_json_schema(R"({"required": ["z"], "patternProperties": {"^x-": {}},
                                               "additionalProperties": false})"),
                       doctest::Contains("'required' naming 'z'"), ember::Error);
  // allOf: a name one side lists must satisfy the other's pattern it matches.
  Schema merged(R"({"allOf": [{"properties": {"x-n": {"type": "integer"}}, "required": ["x-n"]},
                              {"patternProperties": {"^x-": {"maximum": 5}}}]})");
  CHECK(merged(R"({"x-n": 5})"));
  CHECK_FALSE(merged(R"({"x-n": 6})"));
}
