// The JSON Schema -> GBNF converter behind json_schema_to_gbnf() (json_schema.hpp): one per
// conversion. Each schema is normalised (schema_normalize.hpp) and then written as rules:
// scalars and the walk in json_schema.cpp, objects and arrays in schema_containers.cpp.
#pragma once

#include "grammar/json_value.hpp"
#include "grammar/schema_normalize.hpp"

#include <ember/ember.hpp>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ember::grammar {

// A schema (or part of one) that no value satisfies: a union leaves such a branch out, an
// optional property or extra members are then not written; elsewhere it is the request's error.
class Unsatisfiable : public Error {
 public:
  using Error::Error;
};

class SchemaConverter {
 public:
  // A recursive $ref is unrolled: each level of recursion gets its own copy of the rules, and
  // past kMaxRefDepth levels (re-entries of all refs together) the reference matches nothing,
  // so generated documents nest at most that deep through them (narrower than the schema; a
  // model that keeps recursing must stop).
  SchemaConverter(const JsonValue& root, std::string root_rule);
  std::string run();
  const SchemaNotes& notes() const { return notes_; }
  // The array rules whose items must be distinct, checked at decode time (SchemaGrammar).
  const std::vector<std::string>& unique_rules() const { return unique_rules_; }

  // The GBNF expression for `s`, found at JSON pointer `path`.
  std::string visit(const JsonValue& s, const std::string& path, const std::string& hint);

 private:
  [[noreturn]] static void unsupported(const std::string& path, const std::string& what);
  [[noreturn]] static void unsatisfiable(const std::string& path, const std::string& what);
  [[noreturn]] static void invalid(const std::string& path, const std::string& what);
  static std::optional<int> count_of(const JsonValue& s, const std::string& path, const char* key);
  static std::vector<std::string> types_of(const JsonValue& s, const std::string& path);
  static bool value_has_type(const JsonValue& v, const std::vector<std::string>& types);

  std::string use(const char* primitive);
  std::string rule_name(const std::string& hint);
  std::string add_rule(const std::string& hint, const std::string& body);
  void note(const std::string& path, const std::string& what);

  std::string values(const JsonValue& s, const std::vector<JsonValue>& list, const std::string& path);
  std::string typed(const JsonValue& s, const std::string& t, const std::string& path, const std::string& hint);
  std::string number(const JsonValue& s, bool integer, const std::string& path);
  std::string string(const JsonValue& s, const std::string& path, const std::string& hint);
  // `pattern`'s content at min..max code points, as rules (pattern_length_rules): the entry rule's
  // name, "" when no string fits, nullopt when over kMaxLengthProduct.
  std::optional<std::string> bounded_pattern(const std::string& pattern, int min, std::optional<int> max,
                                             const std::string& hint);
  std::string array(const JsonValue& s, const std::string& path, const std::string& hint);
  std::string unique_array(const std::vector<JsonValue>& items, int lo, std::optional<int> hi, const std::string& hint);
  std::string object(const JsonValue& s, const std::string& path, const std::string& hint);
  std::string extra_members(const JsonValue& s, const std::vector<std::string>& names, const std::string& path,
                            const std::string& hint, bool& any);
  std::string other_key(const std::vector<std::string>& names, const std::string& hint);
  std::string resolve(const std::string& ref, const std::string& path);

  const JsonValue& root_;
  std::string root_rule_;  // the document's rule
  std::string prefix_;     // of rules not named after a property path ($defs), unless root_rule_ is root
  SchemaNotes notes_;
  std::vector<std::string> unique_rules_;
  SchemaNormalizer normalizer_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;  // "ref@level" -> rule
  std::map<std::string, int> active_;        // refs being expanded, with their depth
  static constexpr int kMaxRefDepth = 6;
  // Rule alternatives a pattern times its length bound may take; past it the lengths are relaxed
  // (reported). The SchemaStore schemas' bounds fit (docs/benchmarks.md#pattern-lengths).
  static constexpr std::size_t kMaxLengthProduct = 20000;
  // Past this many schemas visited, a recursive $ref is not entered again (narrower), so a
  // large recursive schema (SchemaStore has several) stays a grammar of manageable size.
  static constexpr int kRecursionBudget = 20000;
  int visits_ = 0;
  bool recursion_allowed() const {
    // (An inlined $ref copies its target: those are counted as well.)
    return recursion_ < kMaxRefDepth - 1 && visits_ < kRecursionBudget && rules_.size() < kRecursionBudget &&
           normalizer_.inline_count() < kRecursionBudget / 100;
  }
  int recursion_ = 0;  // of them, re-entries of a ref already being expanded
  int depth_ = 0;
};

}  // namespace ember::grammar
