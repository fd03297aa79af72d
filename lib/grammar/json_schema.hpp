// JSON Schema -> GBNF. The grammar accepts only JSON texts that validate against the schema:
// where the schema language is wider than a context-free grammar can say, the grammar is
// narrower (never looser), and a keyword it cannot honour is refused by name.
//
// Supported: type (one or a list), properties, required, additionalProperties (false, true or
// a schema), minProperties (up to the required count), maxProperties (bounding the extra
// members), items, prefixItems, minItems/maxItems, uniqueItems (in the grammar over up to 6
// values, otherwise checked while decoding: SchemaGrammar::unique_rules), enum, const, anyOf, oneOf (exactly one: only
// branches shown disjoint, see schema_overlap.hpp), $ref to "#", "#/$defs/..." or any local JSON pointer, to
// embedded resources ($id) and anchors, or to other documents (a SchemaResolver: schema_bundle.hpp), $defs /
// definitions, minLength/maxLength, minimum/maximum/exclusiveMinimum/exclusiveMaximum on
// integers, pattern (the subset in schema_regex.hpp), format date, time, date-time and uuid,
// and the annotations (title, description, examples, default, $schema, $id, $comment,
// deprecated, readOnly, writeOnly), which change nothing. `{}` and `true` mean any JSON value.
//
// Choices that keep the output valid:
//   * properties are generated in the schema's order; optional ones may be left out;
//   * with `properties` and no `additionalProperties`, only the listed properties are
//     generated (an object schema without `properties` allows any members);
//   * extra members' names (additionalProperties) never repeat a listed property's name;
//   * a string is at most what JSON allows without surrogate \u escapes (so lengths count as
//     validators count them); numbers have at most 16 integer and 16 fraction digits;
//   * "any JSON value" nests at most 6 containers deep;
//   * a recursive $ref is unrolled: documents nest at most 6 levels deep through it;
//   * whitespace between tokens is "", " ", or a newline and up to 20 spaces or tabs.
#pragma once

#include <ember/ember.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

// A schema's grammar and what of the schema it does not enforce (schema_normalize.hpp and the
// rules above): one line per relaxation, "what at /json/pointer", empty when it is exact
// (narrowing needs no line: every document the grammar accepts still validates).
struct SchemaGrammar {
  std::string gbnf;
  std::vector<std::string> relaxed;
  // Rules of arrays whose items must be distinct (uniqueItems over more than a small finite
  // set): the grammar cannot say it, the decoder checks it (CompiledGrammar::mark_unique_items).
  std::vector<std::string> unique_rules;
};
// `resolver` supplies the documents of remote $refs (schema_bundle.hpp); what needs one it lacks
// is never generated (noted in `relaxed`), and refused where every value needs it.
SchemaGrammar compile_json_schema(std::string_view schema_json, std::string_view root_rule = "root",
                                  const SchemaResolver& resolver = {});

// Translates a schema (JSON text) to a GBNF grammar whose rule `root_rule` is the document; its
// other rules are named `root_rule-...` (or, for root, after the property paths), `ws` and
// `json-...`. Throws Error(invalid_argument): malformed JSON names its line and column; an unsupported
// keyword, format or combination names itself and where it is in the schema (a JSON pointer).
std::string json_schema_to_gbnf(std::string_view schema_json, std::string_view root_rule = "root");

// The GBNF of "any JSON value" (response_format json_object uses `{"type": "object"}`).
std::string any_json_gbnf();

}  // namespace ember::grammar
