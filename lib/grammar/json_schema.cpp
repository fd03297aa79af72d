#include "grammar/json_schema.hpp"

#include "grammar/grammar.hpp"
#include "grammar/json_value.hpp"
#include "grammar/schema_overlap.hpp"
#include "grammar/schema_regex.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>

namespace ember::grammar {
namespace {

constexpr ErrorCode kBadSchema = ErrorCode::invalid_argument;
using Type = JsonValue::Type;

// The building blocks every schema grammar may use (only the referenced ones are emitted).
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> uses;
};
const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> p = {
      {"ws", R"(| " " | "\n" [ \t]{0,20})", {}},
      {"json-hex", R"([0-9a-fA-F])", {}},
      // \u escapes of surrogates are left out: validators count a pair as one character.
      {"json-char", R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex)))", {"json-hex"}},
      {"json-string", R"("\"" json-char* "\"")", {"json-char"}},
      {"json-int", R"("-"? ("0" | [1-9] [0-9]{0,15}))", {}},
      {"json-number", R"("-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?)", {}},
      {"json-bool", R"("true" | "false")", {}},
      {"json-null", R"("null")", {}},
      // Any JSON value, at most 6 containers deep (json-value-1 .. -6 are the nested levels;
      // the deepest holds only scalars): narrower than JSON, and a model that keeps opening
      // containers must close them.
      {"json-scalar", R"(json-string | json-number | json-bool | json-null)",
       {"json-string", "json-number", "json-bool", "json-null"}},
      {"json-value", R"(json-object | json-array | json-scalar)", {"json-object", "json-array", "json-scalar"}},
      {"json-object", R"("{" ws (json-string ws ":" ws json-value-1 (ws "," ws json-string ws ":" ws json-value-1)*)? ws "}")",
       {"ws", "json-string", "json-value-1"}},
      {"json-array", R"("[" ws (json-value-1 (ws "," ws json-value-1)*)? ws "]")", {"ws", "json-value-1"}},
      {"json-value-1", R"("{" ws (json-string ws ":" ws json-value-2 (ws "," ws json-string ws ":" ws json-value-2)*)? ws "}" | "[" ws (json-value-2 (ws "," ws json-value-2)*)? ws "]" | json-scalar)", {"ws", "json-scalar", "json-value-2"}},
      {"json-value-2", R"("{" ws (json-string ws ":" ws json-value-3 (ws "," ws json-string ws ":" ws json-value-3)*)? ws "}" | "[" ws (json-value-3 (ws "," ws json-value-3)*)? ws "]" | json-scalar)", {"ws", "json-scalar", "json-value-3"}},
      {"json-value-3", R"("{" ws (json-string ws ":" ws json-value-4 (ws "," ws json-string ws ":" ws json-value-4)*)? ws "}" | "[" ws (json-value-4 (ws "," ws json-value-4)*)? ws "]" | json-scalar)", {"ws", "json-scalar", "json-value-4"}},
      {"json-value-4", R"("{" ws (json-string ws ":" ws json-value-5 (ws "," ws json-string ws ":" ws json-value-5)*)? ws "}" | "[" ws (json-value-5 (ws "," ws json-value-5)*)? ws "]" | json-scalar)", {"ws", "json-scalar", "json-value-5"}},
      {"json-value-5", R"("{" ws (json-string ws ":" ws json-value-6 (ws "," ws json-string ws ":" ws json-value-6)*)? ws "}" | "[" ws (json-value-6 (ws "," ws json-value-6)*)? ws "]" | json-scalar)", {"ws", "json-scalar", "json-value-6"}},
      {"json-value-6", R"(json-scalar)", {"json-scalar"}},
      {"json-date", R"([1-9] [0-9]{3} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))", {}},
      {"json-time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))", {}},
      // Matches nothing: what a recursive $ref becomes past kMaxRefDepth levels.
      {"json-never", R"([^\x00-\U0010FFFF])", {}},
      {"json-uuid", R"(json-hex{8} "-" json-hex{4} "-" json-hex{4} "-" json-hex{4} "-" json-hex{12})", {"json-hex"}},
  };
  return p;
}

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "examples", "default", "$schema", "$id", "$comment",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
    "discriminator"};  // OpenAPI's (Pydantic's) tag of a oneOf: the branches say it already

std::string pointer_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// Integers in [lo, hi] written without leading zeros, for digit strings of one length n.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const std::size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return gbnf_literal(lo);
  const auto all = [](const std::string& s, char c) { return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; }); };
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const auto digits = [](std::size_t k) { return k == 0 ? std::string() : k == 1 ? std::string(" [0-9]") : fmt::format(" [0-9]{{{}}}", k); };
  if (lo[0] == hi[0]) return "\"" + std::string(1, lo[0]) + "\" (" + same_length_range(lo_rest, hi_rest) + ")";
  std::vector<std::string> alts;
  char first_full = lo[0], last_full = hi[0];
  if (!all(lo_rest, '0')) {
    alts.push_back("\"" + std::string(1, lo[0]) + "\" (" + same_length_range(lo_rest, std::string(n - 1, '9')) + ")");
    ++first_full;
  }
  if (!all(hi_rest, '9')) --last_full;
  if (first_full <= last_full)
    alts.push_back(fmt::format("[{}-{}]{}", first_full, last_full, digits(n - 1)));
  if (!all(hi_rest, '9'))
    alts.push_back("\"" + std::string(1, hi[0]) + "\" (" + same_length_range(std::string(n - 1, '0'), hi_rest) + ")");
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Non-negative integers in [lo, hi]; hi absent: up to 19 digits (narrower than unbounded, and a
// model cannot write digits forever).
std::string natural_range(std::uint64_t lo, std::optional<std::uint64_t> hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo);
  const std::size_t max_len = hi ? std::to_string(*hi).size() : 19;
  for (std::size_t len = a.size(); len <= max_len; ++len) {
    const std::string first = len == a.size() ? a : "1" + std::string(len - 1, '0');
    std::string last = std::string(len, '9');
    if (hi && len == max_len) last = std::to_string(*hi);
    if (len == 1 && first == "0" && last == "0") {
      alts.push_back("\"0\"");
      continue;
    }
    alts.push_back("(" + same_length_range(first, last) + ")");
  }
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return "(" + out + ")";
}

std::string int_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  std::vector<std::string> alts;
  // Negative part: -m for m in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const std::uint64_t from = hi && *hi < 0 ? static_cast<std::uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<std::uint64_t> to;
    if (lo) to = static_cast<std::uint64_t>(-(*lo + 1)) + 1;
    alts.push_back("\"-\" " + natural_range(from, to));
  }
  if (!hi || *hi >= 0) {
    const std::uint64_t from = lo && *lo > 0 ? static_cast<std::uint64_t>(*lo) : 0;
    std::optional<std::uint64_t> to;
    if (hi) to = static_cast<std::uint64_t>(*hi);
    alts.push_back(natural_range(from, to));
  }
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return "(" + out + ")";
}

class Converter {
 public:
  Converter(const JsonValue& root, std::string root_rule)
      : root_(root), root_rule_(std::move(root_rule)),
        prefix_(root_rule_ == "root" ? std::string() : root_rule_ + "-") {}

  std::string run() {
    const std::string body = visit(root_, "", root_rule_);
    rules_.insert(rules_.begin(), {root_rule_, body});
    std::string out;
    for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
    // Primitives in a fixed order, with what they use.
    std::set<std::string> need = used_;
    for (bool grew = true; grew;) {
      grew = false;
      for (const Primitive& p : primitives())
        if (need.count(p.name))
          for (const char* u : p.uses) grew |= need.insert(u).second;
    }
    for (const Primitive& p : primitives())
      if (need.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
    return out;
  }

 private:
  [[noreturn]] static void unsupported(const std::string& path, const std::string& what) {
    fail(kBadSchema, "json_schema: {} at {} is not supported", what, path.empty() ? "/" : path);
  }
  [[noreturn]] static void invalid(const std::string& path, const std::string& what) {
    fail(kBadSchema, "json_schema: {} at {}", what, path.empty() ? "/" : path);
  }

  std::string use(const char* primitive) {
    used_.insert(primitive);
    return primitive;
  }
  std::string rule_name(const std::string& hint) {
    std::string base;
    for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
    if (base.empty()) base = "r";
    std::string name = base;
    for (int i = 2; names_.count(name) || name.rfind("json-", 0) == 0 || name == "ws" || name == root_rule_; ++i)
      name = fmt::format("{}-{}", base, i);
    names_.insert(name);
    return name;
  }
  std::string add_rule(const std::string& hint, const std::string& body) {
    const std::string name = rule_name(hint);
    rules_.emplace_back(name, body);
    return name;
  }

  static std::optional<std::int64_t> integer_of(const JsonValue* v, const std::string& path, const char* key) {
    if (!v) return std::nullopt;
    if (v->type != Type::number) invalid(path, fmt::format("'{}' must be a number", key));
    if (!v->is_integer()) unsupported(path, fmt::format("a non-integer '{}' ({})", key, v->text));
    std::int64_t out = 0;
    const auto r = std::from_chars(v->text.data(), v->text.data() + v->text.size(), out);
    if (r.ec != std::errc() || out < -(std::int64_t{1} << 62) || out > (std::int64_t{1} << 62))
      unsupported(path, fmt::format("'{}' = {} (beyond +-2^62)", key, v->text));
    return out;
  }
  static std::optional<int> count_of(const JsonValue& s, const std::string& path, const char* key) {
    const JsonValue* v = s.find(key);
    if (!v) return std::nullopt;
    if (v->type != Type::number || !v->is_integer() || v->text[0] == '-')
      invalid(path, fmt::format("'{}' must be a non-negative integer", key));
    if (v->text.size() > 5 || std::stol(v->text) > kMaxRepetition)
      unsupported(path, fmt::format("'{}' = {} (at most {})", key, v->text, kMaxRepetition));
    return static_cast<int>(std::stol(v->text));
  }

  // The GBNF expression for `s`, found at JSON pointer `path`.
  std::string visit(const JsonValue& s, const std::string& path, const std::string& hint) {
    if (++depth_ > 256) unsupported(path, "a schema nested deeper than 256");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (s.type == Type::boolean) {
      if (!s.boolean) unsupported(path, "the schema 'false' (nothing validates)");
      return use("json-value");
    }
    if (s.type != Type::object) invalid(path, "a schema must be an object or a boolean");

    static const std::set<std::string, std::less<>> known = {
        "type", "properties", "required", "additionalProperties", "items", "prefixItems",
        "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "$ref", "minLength",
        "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern",
        "format", "minProperties", "maxProperties"};
    std::vector<std::string> assertions;
    for (const auto& [key, value] : s.members) {
      if (kAnnotations.count(key)) continue;
      if (!known.count(key)) unsupported(path, fmt::format("the keyword '{}'", key));
      assertions.push_back(key);
    }
    const auto only = [&](std::initializer_list<const char*> allowed, const char* what) {
      for (const std::string& a : assertions)
        if (std::none_of(allowed.begin(), allowed.end(), [&](const char* x) { return a == x; }))
          unsupported(path, fmt::format("'{}' beside '{}'", a, what));
    };

    if (const JsonValue* ref = s.find("$ref")) {
      only({"$ref"}, "$ref");
      if (ref->type != Type::string) invalid(path, "'$ref' must be a string");
      return resolve(ref->text, path);
    }
    if (const JsonValue* c = s.find("const")) {
      only({"const", "type"}, "const");
      const std::vector<std::string> types = types_of(s, path);
      if (!types.empty() && !value_has_type(*c, types))  // nothing validates: no grammar can honour it
        unsupported(path, "a 'const' whose value fails its 'type'");
      return gbnf_literal(c->dump());
    }
    if (const JsonValue* e = s.find("enum")) {
      only({"enum", "type"}, "enum");
      if (e->type != Type::array || e->items.empty()) invalid(path + "/enum", "'enum' must be a non-empty array");
      std::vector<std::string> types = types_of(s, path);
      std::string out;
      for (const JsonValue& v : e->items) {
        if (!types.empty() && !value_has_type(v, types)) continue;
        out += (out.empty() ? "" : " | ") + gbnf_literal(v.dump());
      }
      if (out.empty()) unsupported(path, "an 'enum' whose values all fail its 'type'");
      return "(" + out + ")";
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (const JsonValue* list = s.find(key)) {
        only({key}, key);
        if (list->type != Type::array || list->items.empty())
          invalid(path + "/" + key, fmt::format("'{}' must be a non-empty array", key));
        if (std::string_view(key) == "oneOf")  // exactly one: only branches that cannot overlap
          for (std::size_t i = 0; i < list->items.size(); ++i)
            for (std::size_t j = i + 1; j < list->items.size(); ++j)
              if (may_overlap(list->items[i], list->items[j], root_))
                unsupported(path, fmt::format("'oneOf' whose branches {} and {} may both match a value (ember honours "
                                              "oneOf when its branches differ in type, in const/enum values, or in the "
                                              "const/enum of a property both require; use anyOf if a value may match "
                                              "several)", i, j));
        std::string out;
        for (std::size_t i = 0; i < list->items.size(); ++i)
          out += (i ? " | " : "") +
                 visit(list->items[i], fmt::format("{}/{}/{}", path, key, i), fmt::format("{}-{}", hint, i));
        return add_rule(hint, out);
      }

    std::vector<std::string> types = types_of(s, path);
    if (types.empty()) {  // no type: what the keywords are about
      const auto has = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.find(k) != nullptr; });
      };
      if (has({"properties", "required", "additionalProperties", "minProperties", "maxProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
      if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) types.push_back("integer");
      if (types.empty()) return use("json-value");
      if (types.size() > 1) unsupported(path, "keywords of several types without a 'type'");
    }
    std::string out;
    for (const std::string& t : types) out += (out.empty() ? "" : " | ") + typed(s, t, path, hint);
    return types.size() == 1 ? out : "(" + out + ")";
  }

  static std::vector<std::string> types_of(const JsonValue& s, const std::string& path) {
    const JsonValue* t = s.find("type");
    if (!t) return {};
    std::vector<std::string> out;
    const auto add = [&](const JsonValue& v) {
      static const std::set<std::string, std::less<>> names = {"string", "number", "integer", "boolean", "null", "object", "array"};
      if (v.type != Type::string || !names.count(v.text)) invalid(path + "/type", "an unknown 'type'");
      if (std::find(out.begin(), out.end(), v.text) == out.end()) out.push_back(v.text);
    };
    if (t->type == Type::array) {
      for (const JsonValue& v : t->items) add(v);
      if (out.empty()) invalid(path + "/type", "an empty 'type' list");
    } else {
      add(*t);
    }
    // "integer" is inside "number": one grammar alternative is enough.
    if (std::find(out.begin(), out.end(), "number") != out.end())
      out.erase(std::remove(out.begin(), out.end(), "integer"), out.end());
    return out;
  }

  static bool value_has_type(const JsonValue& v, const std::vector<std::string>& types) {
    const auto has = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
    switch (v.type) {
      case Type::null: return has("null");
      case Type::boolean: return has("boolean");
      case Type::number: return has("number") || (has("integer") && v.is_integer());
      case Type::string: return has("string");
      case Type::array: return has("array");
      case Type::object: return has("object");
    }
    return false;
  }

  // The keywords that belong to another type than `t` are ignored for it, as validators do.
  std::string typed(const JsonValue& s, const std::string& t, const std::string& path, const std::string& hint) {
    if (t == "null") return use("json-null");
    if (t == "boolean") return use("json-bool");
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.find(k)) unsupported(path, fmt::format("'{}' on a number (supported on integers)", k));
      return use("json-number");
    }
    if (t == "integer") return integer(s, path);
    if (t == "string") return string(s, path, hint);
    if (t == "array") return array(s, path, hint);
    return object(s, path, hint);
  }

  std::string integer(const JsonValue& s, const std::string& path) {
    std::optional<std::int64_t> lo = integer_of(s.find("minimum"), path, "minimum");
    std::optional<std::int64_t> hi = integer_of(s.find("maximum"), path, "maximum");
    if (auto x = integer_of(s.find("exclusiveMinimum"), path, "exclusiveMinimum")) lo = lo ? std::max(*lo, *x + 1) : *x + 1;
    if (auto x = integer_of(s.find("exclusiveMaximum"), path, "exclusiveMaximum")) hi = hi ? std::min(*hi, *x - 1) : *x - 1;
    if (!lo && !hi) return use("json-int");
    if (lo && hi && *lo > *hi) unsupported(path, "an integer range with no value in it");
    return int_range(lo, hi);
  }

  std::string string(const JsonValue& s, const std::string& path, const std::string& hint) {
    const std::optional<int> min = count_of(s, path, "minLength"), max = count_of(s, path, "maxLength");
    const JsonValue* pattern = s.find("pattern");
    const JsonValue* format = s.find("format");
    if ((pattern || format) && (min || max)) unsupported(path, "'minLength'/'maxLength' with 'pattern' or 'format'");
    if (pattern && format) unsupported(path, "'pattern' with 'format'");
    if (pattern) {
      if (pattern->type != Type::string) invalid(path, "'pattern' must be a string");
      return add_rule(hint, "\"\\\"\" " + pattern_to_gbnf(pattern->text) + " \"\\\"\"");
    }
    if (format) {
      if (format->type != Type::string) invalid(path, "'format' must be a string");
      const std::string& f = format->text;
      std::string body;
      if (f == "date") body = use("json-date");
      else if (f == "time") body = use("json-time");
      else if (f == "date-time") body = use("json-date") + " \"T\" " + use("json-time");
      else if (f == "uuid") body = use("json-uuid");
      else unsupported(path, fmt::format("the string format '{}'", f));
      return "\"\\\"\" " + body + " \"\\\"\"";
    }
    if (!min && !max) return use("json-string");
    if (min && max && *min > *max) unsupported(path, "'minLength' > 'maxLength'");
    const std::string reps = max ? fmt::format("{{{},{}}}", min.value_or(0), *max) : fmt::format("{{{},}}", *min);
    return "\"\\\"\" " + use("json-char") + reps + " \"\\\"\"";
  }

  std::string array(const JsonValue& s, const std::string& path, const std::string& hint) {
    std::vector<std::string> prefix;
    if (const JsonValue* p = s.find("prefixItems")) {
      if (p->type != Type::array) invalid(path, "'prefixItems' must be an array");
      for (std::size_t i = 0; i < p->items.size(); ++i)
        prefix.push_back(visit(p->items[i], fmt::format("{}/prefixItems/{}", path, i), fmt::format("{}-{}", hint, i)));
    }
    const JsonValue* items = s.find("items");
    std::optional<std::string> rest;  // the schema after the prefix; none: no more items
    if (items && items->type == Type::boolean && !items->boolean) rest = std::nullopt;
    else if (items) rest = visit(*items, path + "/items", hint + "-item");
    else if (prefix.empty()) rest = use("json-value");
    const std::size_t k = prefix.size();
    int lo = count_of(s, path, "minItems").value_or(0);
    std::optional<int> hi = count_of(s, path, "maxItems");
    // A tuple without `items`: exactly its prefix (any more would be unconstrained values).
    if (!items && k > 0) hi = hi ? std::min(*hi, std::max<int>(lo, static_cast<int>(k))) : std::max<int>(lo, static_cast<int>(k));
    if (!rest) hi = hi ? std::min(*hi, static_cast<int>(k)) : static_cast<int>(k);
    if (hi && lo > *hi) unsupported(path, "'minItems' that the other array keywords cannot reach");
    lo = std::max(lo, std::min(static_cast<int>(k), hi.value_or(static_cast<int>(k))));
    const std::string sep = use("ws") + " \",\" ws ";
    const auto item_at = [&](int i) { return i < static_cast<int>(k) ? prefix[static_cast<std::size_t>(i)] : rest.value_or(""); };
    // tail(i): the items from position i on, each after a comma.
    std::string tail;
    const int fixed = std::max<int>(static_cast<int>(k), 1);  // positions written one by one
    if (!hi || *hi > fixed) {
      if (rest && (!hi || *hi > static_cast<int>(k))) {
        const int from = fixed;
        const int need = std::max(0, lo - from);
        const std::string reps = hi ? fmt::format("{{{},{}}}", need, *hi - from) : fmt::format("{{{},}}", need);
        if (!hi || *hi - from > 0) tail = "(" + sep + *rest + ")" + reps;
      }
    }
    for (int i = fixed - 1; i >= 1; --i) {
      if (hi && i >= *hi) continue;
      const std::string step = sep + item_at(i) + (tail.empty() ? "" : " " + tail);
      tail = i < lo ? "(" + step + ")" : "(" + step + ")?";
    }
    std::string body;
    if (!hi || *hi >= 1) {
      const std::string first = item_at(0) + (tail.empty() ? "" : " " + tail);
      body = lo >= 1 ? first : "(" + first + ")?";
    }
    return add_rule(hint, "\"[\" ws " + (body.empty() ? "" : body + " ") + "ws \"]\"");
  }

  std::string object(const JsonValue& s, const std::string& path, const std::string& hint) {
    const JsonValue* props = s.find("properties");
    if (props && props->type != Type::object) invalid(path, "'properties' must be an object");
    std::set<std::string> required;
    if (const JsonValue* r = s.find("required")) {
      if (r->type != Type::array) invalid(path, "'required' must be an array");
      for (const JsonValue& v : r->items) {
        if (v.type != Type::string) invalid(path, "'required' must list strings");
        required.insert(v.text);
      }
    }
    for (const std::string& name : required)
      if (!props || !props->find(name))
        unsupported(path, fmt::format("'required' naming '{}', which 'properties' does not define", name));
    const JsonValue* additional = s.find("additionalProperties");
    std::optional<std::string> extra;  // the schema of extra members, if any are allowed
    if (additional && additional->type == Type::boolean) {
      if (additional->boolean) extra = use("json-value");
    } else if (additional) {
      extra = visit(*additional, path + "/additionalProperties", hint + "-extra");
    } else if (!props) {
      extra = use("json-value");
    }
    // minProperties only where the required ones meet it; maxProperties bounds the extra
    // members so that even with every listed property present the object stays within it.
    if (auto minp = count_of(s, path, "minProperties"); minp && static_cast<std::size_t>(*minp) > required.size())
      unsupported(path, "'minProperties' above the number of required properties");
    const std::size_t listed = props ? props->members.size() : 0;
    std::optional<int> max_extra;
    if (auto maxp = count_of(s, path, "maxProperties")) {
      if (static_cast<std::size_t>(*maxp) < listed)
        unsupported(path, "'maxProperties' below the number of listed properties");
      max_extra = *maxp - static_cast<int>(listed);
      if (*max_extra == 0) extra.reset();
    }
    use("ws");
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> list;
    std::vector<std::string> names;
    if (props)
      for (const auto& [name, schema] : props->members) {
        const std::string value = visit(schema, path + "/properties/" + pointer_escape(name), hint + "-" + name);
        list.push_back({add_rule(hint + "-" + name + "-kv", gbnf_literal(json_quote(name)) + " ws \":\" ws " + value),
                        required.count(name) > 0});
        names.push_back(name);
      }
    std::string extra_kv;
    if (extra) extra_kv = add_rule(hint + "-extra-kv", other_key(names, hint) + " ws \":\" ws " + *extra);
    const std::string sep = "ws \",\" ws ";
    // after[i]: members from i on when one was already written (each after a comma).
    std::vector<std::string> after(list.size() + 1);
    const std::string more = max_extra ? fmt::format("{{0,{}}}", *max_extra - 1) : "*";
    after[list.size()] = extra ? "(" + sep + extra_kv + ")" + (max_extra ? fmt::format("{{0,{}}}", *max_extra) : "*") : "";
    for (std::size_t i = list.size(); i-- > 0;) {
      const std::string rest = after[i + 1].empty() ? "" : " " + after[i + 1];
      std::string body = list[i].required ? sep + list[i].kv + rest : "(" + sep + list[i].kv + ")?" + rest;
      after[i] = add_rule(hint + "-after", body);
    }
    // first(i): members from i on when none was written yet.
    // With no listed member written, the first extra one has no comma, and one fewer may follow.
    std::string first = extra ? "(" + extra_kv + " (" + sep + extra_kv + ")" + more + ")?" : "";
    for (std::size_t i = list.size(); i-- > 0;) {
      const std::string with = list[i].kv + (after[i + 1].empty() ? "" : " " + after[i + 1]);
      if (list[i].required) first = with;
      else first = "(" + with + (first.empty() ? ")?" : " | " + first + ")");
    }
    return add_rule(hint, "\"{\" ws " + (first.empty() ? "" : first + " ") + "ws \"}\"");
  }

  // A member name that is none of `names`: a trie of the names over code points, leaving it
  // at some character (then anything), or ending where no name ends. Names that need JSON
  // escapes cannot be spelled with plain characters, so they need no exclusion.
  std::string other_key(const std::vector<std::string>& names, const std::string& hint) {
    if (names.empty()) return use("json-string");
    struct TrieNode {
      std::map<std::string, int> next;  // UTF-8 character -> node
      bool terminal = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& n : names) {
      if (std::any_of(n.begin(), n.end(), [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; })) continue;
      int at = 0;
      for (std::size_t i = 0; i < n.size();) {
        std::size_t len = 1;
        while (i + len < n.size() && (static_cast<unsigned char>(n[i + len]) & 0xC0) == 0x80) ++len;
        const std::string ch = n.substr(i, len);
        auto it = trie[static_cast<std::size_t>(at)].next.find(ch);
        if (it == trie[static_cast<std::size_t>(at)].next.end()) {
          trie.emplace_back();
          it = trie[static_cast<std::size_t>(at)].next.emplace(ch, static_cast<int>(trie.size() - 1)).first;
        }
        at = it->second;
        i += len;
      }
      trie[static_cast<std::size_t>(at)].terminal = true;
    }
    const std::string rest = add_rule(hint + "-other-rest", "[^\"\\\\\\x00-\\x1F]* \"\\\"\"");
    std::vector<std::string> rule(trie.size());
    for (std::size_t i = 0; i < trie.size(); ++i) rule[i] = rule_name(hint + "-other");
    for (std::size_t i = 0; i < trie.size(); ++i) {
      std::vector<std::string> alts;
      if (!trie[i].terminal) alts.push_back("\"\\\"\"");
      std::string cls = "[^\"\\\\\\x00-\\x1F";
      for (const auto& [ch, child] : trie[i].next) {
        alts.push_back(gbnf_literal(ch) + " " + rule[static_cast<std::size_t>(child)]);
        cls += ch == "]" || ch == "-" || ch == "^" ? "\\" + ch : ch;
      }
      alts.push_back(cls + "] " + rest);
      std::string body;
      for (std::size_t a = 0; a < alts.size(); ++a) body += (a ? " | " : "") + alts[a];
      rules_.emplace_back(rule[i], body);
    }
    return "\"\\\"\" " + rule[0];
  }

  // A recursive $ref is unrolled: each level of recursion gets its own copy of the rules, and
  // past kMaxRefDepth levels the reference matches nothing, so generated documents nest at
  // most that deep through it (narrower than the schema; a model that keeps recursing must
  // stop). Non-recursive uses of a definition share one copy.
  static constexpr int kMaxRefDepth = 6;
  std::string resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') unsupported(path, fmt::format("the remote $ref \"{}\"", ref));
    const int level = active_[ref];
    if (level >= kMaxRefDepth) return use("json-never");
    const std::string key = fmt::format("{}@{}", ref, level);
    if (auto it = refs_.find(key); it != refs_.end()) return it->second;
    const std::string p = ref.substr(1);
    if (!p.empty() && p[0] != '/') unsupported(path, fmt::format("the $ref \"{}\" (anchors)", ref));
    std::string hint;
    const JsonValue* target = resolve_pointer(root_, ref, &hint);
    if (!target) invalid(path, fmt::format("the $ref \"{}\" points at nothing", ref));
    if (hint.empty()) hint = "ref";
    // The rule is named before its body is built, so recursive references find it.
    const std::string name = rule_name(prefix_ + (ref == "#" ? "schema" : hint));
    refs_.emplace(key, name);
    const std::size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    ++active_[ref];
    std::string body = visit(*target, p, name);
    --active_[ref];
    rules_[slot].second = std::move(body);
    return name;
  }

  const JsonValue& root_;
  std::string root_rule_;  // the document's rule
  std::string prefix_;     // of rules not named after a property path ($defs), unless root_rule_ is root
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::set<std::string> used_;
  std::map<std::string, std::string> refs_;  // "ref@level" -> rule
  std::map<std::string, int> active_;         // refs being expanded, with their depth
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema_json, std::string_view root_rule) {
  const JsonValue schema = parse_json(schema_json, "json_schema");
  if (root_rule.empty() || root_rule.rfind("json-", 0) == 0 || root_rule == "ws" ||
      !std::all_of(root_rule.begin(), root_rule.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }))
    fail(kBadSchema, "json_schema: the root rule name '{}' must be letters, digits and '-', and not ws or json-*", root_rule);
  return Converter(schema, std::string(root_rule)).run();
}

std::string any_json_gbnf() { return json_schema_to_gbnf("{}"); }

}  // namespace ember::grammar
