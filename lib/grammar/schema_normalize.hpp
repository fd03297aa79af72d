// JSON Schema normalisation: what the converter (json_schema.cpp) sees is a schema of one of
// four shapes, each built only from the keywords it turns into grammar:
//   * a boolean;
//   * {"$ref": ...} alone (a definition's rule is shared and may recurse);
//   * {"anyOf": [flat...]};
//   * a flat schema: type, enum, const, properties, required, additionalProperties,
//     patternProperties, propertyNames, min/maxProperties, items, prefixItems, min/maxItems,
//     uniqueItems, contains, min/maxLength, pattern, format, minimum, maximum, exclusive*,
//     multipleOf, and x-ember-not (the values a negation excludes).
// To get there:
//   * annotations and unknown keywords are dropped: JSON Schema gives a keyword it does not
//     define no validation meaning (id, x-*, markdownDescription, fileMatch, ...);
//   * draft forms are rewritten: items as an array -> prefixItems and additionalItems -> items;
//     draft-04 boolean exclusiveMinimum/Maximum; dependencies -> dependentRequired/Schemas;
//   * allOf, and $ref, anyOf or oneOf beside other keywords, are intersected: two flat schemas
//     merge keyword by keyword (types, enums and required sets intersect or join, bounds take
//     the tighter, properties merge by name, and a property one side lists but the other does
//     not must also satisfy the other's additionalProperties), and a union distributes
//     (A and (B or C) = (A and B) or (A and C)), at most kMaxBranches branches (past that only
//     the first are kept: narrower);
//   * if/then/else becomes (if and then) or (not-if and else) where not-if can be written
//     (const/enum and type tests, required names, properties of those), else (if and then);
//     dependentRequired/dependentSchemas become (trigger absent) or (trigger and its needs);
//     not S becomes the negation of S where it can be written;
//   * oneOf whose branches cannot be shown disjoint (schema_overlap.hpp) is generated as anyOf.
// Keywords the merge cannot intersect exactly (two different patterns or formats) keep the first,
// and every such relaxation is recorded in `notes` (the response reports them).
#pragma once

#include "grammar/json_value.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ember::grammar {

// The relaxations of one schema, each "what at where", in the order found, without repeats.
struct SchemaNotes {
  std::vector<std::string> list;
  void add(const std::string& note) {
    if (std::find(list.begin(), list.end(), note) == list.end()) list.push_back(note);
  }
};

// What a refusal for a remote $ref whose document nobody supplied adds.
inline constexpr const char* kFetchesNothing =
    " (ember fetches nothing: EngineOptions::schema_resolver supplies documents, and has none for it)";

class SchemaNormalizer {
 public:
  static constexpr std::size_t kMaxBranches = 64;
  // Schemas visited while resolving $refs, allOf and the rest, for one schema: a bound on the
  // work (and memory) a request's schema can ask for, since a recursive schema inlined level by
  // level grows without end. Chosen against SchemaStore's schemas (docs/benchmarks.md#schema-steps).
  static constexpr std::size_t kMaxSteps = 150'000;

  SchemaNormalizer(const JsonValue& root, SchemaNotes& notes) : root_(root), notes_(notes) {}

  // `s` (found at `path`) in one of the four shapes. Throws Error(invalid_argument) for a
  // malformed schema, a remote $ref in a negation or a $ref cycle without a value in between.
  JsonValue normalize(const JsonValue& s, const std::string& path);
  std::size_t inline_count() const { return inline_count_; }  // $refs inlined so far
  // The first remote $ref reached whose document was not supplied ("" if none), read as false.
  const std::string& unavailable() const { return unavailable_; }
  // The same for a schema inside the root document, computed once (with the $refs it inlined).
  struct Normalized {
    JsonValue value;
    std::vector<std::string> inlined;
  };
  const Normalized& normalize_once(const JsonValue& s, const std::string& path);
  // The schema a local $ref names: "#", a JSON pointer, an $anchor ("#name", or a draft-07
  // "$id": "#name"), with the root's $id in front allowed. nullptr when it names nothing; a
  // remote one (its document not supplied) is `false`, noted, and refused inside a negation
  // (not, if), where false would loosen the schema. `last` receives a name for its rule.
  const JsonValue* resolve(const std::string& ref, const std::string& path, std::string* last = nullptr);

  // The $refs inlined (merged with siblings) since the caller last cleared it: the converter
  // counts them as entered, so a ref that recurses through inlining is unrolled like one that
  // recurses through its rule.
  std::vector<std::string> inlined;

 private:
  JsonValue conj(const JsonValue& a, const JsonValue& b, const std::string& path);
  JsonValue merge_flat(const JsonValue& a, const JsonValue& b, const std::string& path);
  std::optional<JsonValue> negate(const JsonValue& s, const std::string& path, int depth = 0);
  JsonValue conditional(const JsonValue& s, const std::string& path);
  JsonValue inline_ref(const JsonValue& ref, const std::string& path);
  void find_anchors(const JsonValue& s);

  const JsonValue& root_;
  SchemaNotes& notes_;
  std::map<std::string, const JsonValue*> anchors_;
  bool anchors_found_ = false;
  std::set<std::string> inlining_;  // $refs being inlined (a cycle without a value between)
  int depth_ = 0;
  int eager_ = 0;
  std::size_t inline_count_ = 0;
  std::size_t steps_ = 0;  // normalize() calls so far, against kMaxSteps
  int negating_ = 0;       // inside not, if or negate(): a remote $ref is refused
  std::string unavailable_;
  std::set<const JsonValue*> in_root_;  // every value of the root document
  std::map<const JsonValue*, Normalized> cache_;
  std::deque<Normalized>
      scratch_;  // the uncached ones (the converter keeps references)  // properties being merged at once (see merge_flat)
};

}  // namespace ember::grammar
