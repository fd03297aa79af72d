#include "grammar/json_schema.hpp"

#include "grammar/grammar.hpp"
#include "grammar/schema_bundle.hpp"
#include "grammar/schema_converter.hpp"
#include "grammar/schema_formats.hpp"
#include "grammar/schema_numbers.hpp"
#include "grammar/schema_regex.hpp"
#include "util/check.hpp"

#include <algorithm>

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;
constexpr ErrorCode kBadSchema = ErrorCode::invalid_argument;

std::string join_alts(const std::vector<std::string>& alts) {
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

}  // namespace

SchemaConverter::SchemaConverter(const JsonValue& root, std::string root_rule)
    : root_(root),
      root_rule_(std::move(root_rule)),
      prefix_(root_rule_ == "root" ? std::string() : root_rule_ + "-"),
      normalizer_(root, notes_) {}

std::string SchemaConverter::run() {
  std::string body;
  try {
    body = visit(root_, "", root_rule_);
  } catch (const Unsatisfiable&) {  // every value would need a document nobody supplied
    if (normalizer_.unavailable().empty()) throw;
    fail(kBadSchema, "json_schema: {} is not available{}", normalizer_.unavailable(), kFetchesNothing);
  }
  rules_.insert(rules_.begin(), {root_rule_, body});
  std::string out;
  for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
  // Primitives in a fixed order, with what they use.
  std::set<std::string> need = used_;
  for (bool grew = true; grew;) {
    grew = false;
    for (const Primitive& p : schema_primitives())
      if (need.count(p.name))
        for (const char* u : p.uses) grew |= need.insert(u).second;
  }
  for (const Primitive& p : schema_primitives())
    if (need.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
  return out;
}

void SchemaConverter::unsupported(const std::string& path, const std::string& what) {
  fail(kBadSchema, "json_schema: {} at {} is not supported", what, path.empty() ? "/" : path);
}
void SchemaConverter::unsatisfiable(const std::string& path, const std::string& what) {
  throw Unsatisfiable(kBadSchema,
                      fmt::format("json_schema: {} at {}: no value satisfies it", what, path.empty() ? "/" : path));
}
void SchemaConverter::invalid(const std::string& path, const std::string& what) {
  fail(kBadSchema, "json_schema: {} at {}", what, path.empty() ? "/" : path);
}
void SchemaConverter::note(const std::string& path, const std::string& what) {
  notes_.add(fmt::format("{} at {}", what, path.empty() ? "/" : path));
}

std::string SchemaConverter::use(const char* primitive) {
  used_.insert(primitive);
  return primitive;
}
std::string SchemaConverter::rule_name(const std::string& hint) {
  std::string base;
  for (char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
  if (base.empty()) base = "r";
  std::string name = base;
  for (int i = 2; names_.count(name) || name.rfind("json-", 0) == 0 || name == "ws" || name == root_rule_; ++i)
    name = fmt::format("{}-{}", base, i);
  names_.insert(name);
  return name;
}
std::string SchemaConverter::add_rule(const std::string& hint, const std::string& body) {
  const std::string name = rule_name(hint);
  rules_.emplace_back(name, body);
  return name;
}

// A maximum above kMaxRepetition is lowered to it (narrower); a minimum above it is refused.
std::optional<int> SchemaConverter::count_of(const JsonValue& s, const std::string& path, const char* key) {
  const JsonValue* v = s.find(key);
  if (!v) return std::nullopt;
  if (v->type != Type::number || v->text[0] == '-')
    invalid(path, fmt::format("'{}' must be a non-negative integer", key));
  const auto d = parse_decimal(v->text);
  if (!d || !d->fraction.empty()) invalid(path, fmt::format("'{}' must be a non-negative integer", key));
  const bool too_many = d->whole.size() > 5 || std::stol(d->whole) > kMaxRepetition;
  if (too_many && std::string_view(key).substr(0, 3) == "max") return kMaxRepetition;
  if (too_many) unsupported(path, fmt::format("'{}' = {} (at most {})", key, v->text, kMaxRepetition));
  return static_cast<int>(std::stol(d->whole));
}

std::string SchemaConverter::visit(const JsonValue& raw, const std::string& path, const std::string& hint) {
  if (++depth_ > 256) unsupported(path, "a schema nested deeper than 256");
  if (++visits_ > 10 * kRecursionBudget)
    unsupported(path, fmt::format("a schema of more than {} parts (after $refs)", 10 * kRecursionBudget));
  struct Leave {
    int& d;
    ~Leave() { --d; }
  } leave{depth_};
  const SchemaNormalizer::Normalized& n = normalizer_.normalize_once(raw, path);
  const JsonValue& s = n.value;
  // $refs merged into `s` count as entered while its parts are visited.
  const std::vector<std::string>& inlined = n.inlined;
  for (const std::string& ref : inlined)
    if (active_[ref] > 0 && !recursion_allowed()) return use("json-never");
  struct Enter {
    SchemaConverter& c;
    const std::vector<std::string>& refs;
    int reentered = 0;
    Enter(SchemaConverter& conv, const std::vector<std::string>& r) : c(conv), refs(r) {
      for (const std::string& ref : refs) reentered += c.active_[ref]++ > 0;
      c.recursion_ += reentered;
    }
    ~Enter() {
      for (const std::string& ref : refs) --c.active_[ref];
      c.recursion_ -= reentered;
    }
  } enter(*this, inlined);
  if (s.type == Type::boolean) {
    if (!s.boolean) unsatisfiable(path, "a schema that no value satisfies");
    return use("json-value");
  }
  if (const JsonValue* ref = s.find("$ref")) return resolve(ref->text, path);
  if (const JsonValue* list = s.find("anyOf")) {
    std::string out;
    std::optional<Unsatisfiable> none;
    for (std::size_t i = 0; i < list->items.size(); ++i) try {  // a branch no value satisfies is left out
        const std::string b = visit(list->items[i], fmt::format("{}/anyOf/{}", path, i), fmt::format("{}-{}", hint, i));
        out += (out.empty() ? "" : " | ") + b;
      } catch (const Unsatisfiable& e) {
        if (!none) none = e;
      }
    if (out.empty()) throw *none;
    return add_rule(hint, out);
  }
  std::vector<std::string> types = types_of(s, path);
  if (const JsonValue* c = s.find("const")) return values(s, {*c}, path);
  if (const JsonValue* e = s.find("enum")) {
    if (e->type != Type::array || e->items.empty()) invalid(path + "/enum", "'enum' must be a non-empty array");
    return values(s, e->items, path);
  }
  if (types.empty()) {  // no type: the types its keywords are about (others left out: narrower)
    const auto has = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.find(k) != nullptr; });
    };
    if (has({"properties", "required", "additionalProperties", "minProperties", "maxProperties", "patternProperties",
             "propertyNames"}))
      types.push_back("object");
    if (has({"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"})) types.push_back("array");
    if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})) types.push_back("number");
    if (types.empty() && !s.find("x-ember-not")) return use("json-value");
    if (types.empty()) types = {"null", "boolean", "object", "array", "number", "string"};
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    std::string a = typed(s, t, path, hint);
    if (!a.empty()) alts.push_back(std::move(a));
  }
  if (alts.empty()) unsatisfiable(path, "a schema that no value satisfies");
  return alts.size() == 1 ? alts[0] : "(" + join_alts(alts) + ")";
}

// const/enum: the values of an allowed type, not excluded by a negation. Other keywords beside
// them are not checked against the values (a schema's values normally satisfy them).
std::string SchemaConverter::values(const JsonValue& s, const std::vector<JsonValue>& list, const std::string& path) {
  const std::vector<std::string> types = types_of(s, path);
  const JsonValue* excluded = s.find("x-ember-not");
  std::vector<std::string> out;
  for (const JsonValue& v : list) {
    if (!types.empty() && !value_has_type(v, types)) continue;
    if (excluded && std::any_of(excluded->items.begin(), excluded->items.end(),
                                [&](const JsonValue& x) { return x.dump() == v.dump(); }))
      continue;
    out.push_back(gbnf_literal(v.dump()));
  }
  if (out.empty()) unsatisfiable(path, "an 'enum' or 'const' whose values all fail its 'type'");
  return "(" + join_alts(out) + ")";
}

std::vector<std::string> SchemaConverter::types_of(const JsonValue& s, const std::string& path) {
  const JsonValue* t = s.find("type");
  if (!t) return {};
  std::vector<std::string> out;
  const auto add = [&](const JsonValue& v) {
    static const std::set<std::string, std::less<>> names = {"string", "number", "integer", "boolean",
                                                             "null",   "object", "array"};
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

bool SchemaConverter::value_has_type(const JsonValue& v, const std::vector<std::string>& types) {
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

// The keywords that belong to another type than `t` are ignored for it, as validators do. An
// empty result: no value of type `t` validates.
std::string SchemaConverter::typed(const JsonValue& s, const std::string& t, const std::string& path,
                                   const std::string& hint) {
  const JsonValue* excluded = s.find("x-ember-not");
  const auto excludes = [&](const char* text) {
    return excluded && std::any_of(excluded->items.begin(), excluded->items.end(),
                                   [&](const JsonValue& v) { return v.dump() == text; });
  };
  if (t == "null") return excludes("null") ? "" : use("json-null");
  if (t == "boolean") {
    std::vector<std::string> alts;
    for (const char* b : {"true", "false"})
      if (!excludes(b)) alts.push_back(gbnf_literal(b));
    return alts.empty() ? "" : "(" + join_alts(alts) + ")";
  }
  if (excluded && t != "string" && std::any_of(excluded->items.begin(), excluded->items.end(), [&](const JsonValue& v) {
        return (t == "object" && v.type == Type::object) || (t == "array" && v.type == Type::array) ||
               ((t == "number" || t == "integer") && v.type == Type::number);
      }))
    note(path, fmt::format("a negated '{}' value (not, if/else) is not excluded", t));
  if (t == "number" || t == "integer") return number(s, t == "integer", path);
  if (t == "string") return string(s, path, hint);
  if (t == "array") return array(s, path, hint);
  return object(s, path, hint);
}

namespace {

std::optional<std::int64_t> ceil_of(const Decimal& d) {
  const std::int64_t w = std::stoll(d.whole);
  return d.negative ? -w : w + (d.fraction.empty() ? 0 : 1);
}
std::optional<std::int64_t> floor_of(const Decimal& d) {
  const std::int64_t w = std::stoll(d.whole);
  return d.negative ? -(w + (d.fraction.empty() ? 0 : 1)) : w;
}

}  // namespace

std::string SchemaConverter::number(const JsonValue& s, bool integer, const std::string& path) {
  const auto bound = [&](const char* key, bool exclusive) -> std::optional<Bound> {
    const JsonValue* v = s.find(key);
    if (!v) return std::nullopt;
    if (v->type != Type::number) invalid(path, fmt::format("'{}' must be a number", key));
    const auto d = parse_decimal(v->text);
    if (!d) {
      note(path, fmt::format("'{}' = {} (beyond 18 integer digits) is not enforced", key, v->text));
      return std::nullopt;
    }
    return Bound{*d, exclusive};
  };
  const auto pick = [](std::optional<Bound> a, std::optional<Bound> b, int dir) {  // the tighter of two
    if (!a || !b) return a ? a : b;
    const int c = compare(a->value, b->value) * dir;
    return c > 0 ? a : c < 0 ? b : (a->exclusive ? a : b);
  };
  const std::optional<Bound> lo = pick(bound("minimum", false), bound("exclusiveMinimum", true), 1);
  const std::optional<Bound> hi = pick(bound("maximum", false), bound("exclusiveMaximum", true), -1);
  int max_fraction = 16;
  std::optional<std::int64_t> step;
  if (const JsonValue* m = s.find("multipleOf")) {
    const auto d = m->type == Type::number ? parse_decimal(m->text) : std::nullopt;
    if (!d || d->negative || d->is_zero()) invalid(path, "'multipleOf' must be a positive number");
    const bool power_of_ten =
        d->whole == "0" && d->fraction.back() == '1' && d->fraction.find_first_not_of('0') == d->fraction.size() - 1;
    if (d->fraction.empty()) {
      integer = true;
      if (d->whole != "1") step = std::stoll(d->whole);
    } else if (power_of_ten && !integer) {
      max_fraction = static_cast<int>(d->fraction.size());
    } else if (!integer) {
      note(path, fmt::format("'multipleOf' = {} on a number is not enforced", m->text));
    }
  }
  if (!integer) {
    if (!lo && !hi && max_fraction == 16) return use("json-number");
    return decimal_range(lo, hi, max_fraction).value_or("");
  }
  std::optional<std::int64_t> a, b;
  if (lo) a = *ceil_of(lo->value) + (lo->exclusive && lo->value.fraction.empty() ? 1 : 0);
  if (hi) b = *floor_of(hi->value) - (hi->exclusive && hi->value.fraction.empty() ? 1 : 0);
  if (a && b && *a > *b) return "";
  if (step) {
    const std::int64_t k = *step;
    if (a && b && (*b - *a) / k <= 256) {  // few multiples: each one written out
      std::vector<std::string> alts;
      for (std::int64_t v = (*a >= 0 ? (*a + k - 1) / k : -((-*a) / k)) * k; v <= *b; v += k)
        alts.push_back(gbnf_literal(std::to_string(v)));
      return alts.empty() ? "" : "(" + join_alts(alts) + ")";
    }
    note(path, fmt::format("'multipleOf' = {} over a wide range is not enforced", k));
  }
  if (!a && !b) return use("json-int");
  return int_range(a, b);
}

std::string SchemaConverter::string(const JsonValue& s, const std::string& path, const std::string& hint) {
  const std::optional<int> min = count_of(s, path, "minLength"), max = count_of(s, path, "maxLength");
  const JsonValue* pattern = s.find("pattern");
  const JsonValue* format = s.find("format");
  const JsonValue* excluded = s.find("x-ember-not");
  const auto quoted = [&](const std::string& body) { return "\"\\\"\" " + body + " \"\\\"\""; };
  if (pattern) {
    if (pattern->type != Type::string) invalid(path, "'pattern' must be a string");
    try {
      std::string body = pattern_to_gbnf(pattern->text);
      if (min.value_or(0) > 0 || max) {
        if (min && max && *min > *max) return "";
        if (const auto content = bounded_pattern(pattern->text, min.value_or(0), max, hint)) {
          if (content->empty()) return "";  // no string of those lengths matches the pattern
          body = *content;
        } else {
          note(path, fmt::format("'minLength'/'maxLength' beside 'pattern' are not enforced (the pattern times the "
                                 "lengths needs over {} rule alternatives)",
                                 kMaxLengthProduct));
        }
      }
      if (format) note(path, "'format' beside 'pattern' is not enforced");
      if (excluded) note(path, "a negated string value (not, if/else) beside 'pattern' is not excluded");
      return add_rule(hint, quoted(body));
    } catch (const Error& e) {
      note(path, fmt::format("'pattern' is not enforced ({})", e.what()));
    }
  }
  if (format) {
    if (format->type != Type::string) invalid(path, "'format' must be a string");
    if (const auto rule = format_primitive(format->text)) {
      if (min || max)
        note(path, fmt::format("'minLength'/'maxLength' beside the format '{}' are not enforced", format->text));
      return quoted(use(rule->c_str()));
    }
    note(path, fmt::format("the string format '{}' is not enforced", format->text));
  }
  if (min && max && *min > *max) return "";
  if (excluded) {
    std::vector<std::string> names;
    for (const JsonValue& v : excluded->items)
      if (v.type == Type::string) names.push_back(v.text);
    if (!min && !max) return other_key(names, hint + "-not");
    note(path, "a negated string value (not, if/else) beside 'minLength'/'maxLength' is not excluded");
  }
  if (!min && !max) return use("json-string");
  const std::string reps = max ? fmt::format("{{{},{}}}", min.value_or(0), *max) : fmt::format("{{{},}}", *min);
  return quoted(use("json-char") + reps);
}

std::optional<std::string> SchemaConverter::bounded_pattern(const std::string& pattern, int min, std::optional<int> max,
                                                            const std::string& hint) {
  const std::string base = rule_name(hint + "-len");
  const auto bodies = pattern_length_rules(pattern, min, max, base, kMaxLengthProduct);
  if (!bodies) return std::nullopt;
  if (bodies->empty()) return std::string();
  for (std::size_t i = 0; i < bodies->size(); ++i)
    if (names_.count(fmt::format("{}-{}", base, i))) return std::nullopt;  // taken: relaxed instead
  for (std::size_t i = 0; i < bodies->size(); ++i) {
    names_.insert(fmt::format("{}-{}", base, i));
    rules_.emplace_back(fmt::format("{}-{}", base, i), (*bodies)[i]);
  }
  return base + "-0";
}

std::string SchemaConverter::resolve(const std::string& ref, const std::string& path) {
  // Unrolled past kMaxRefDepth levels into nothing (the class comment); non-recursive uses of a
  // definition share one copy.
  const int level = active_[ref];
  if (level > 0 && !recursion_allowed()) return use("json-never");
  const std::string key = fmt::format("{}@{}", ref, level);
  if (auto it = refs_.find(key); it != refs_.end()) return it->second;
  std::string hint;
  const JsonValue* target = normalizer_.resolve(ref, path, &hint);
  if (!target) invalid(path, fmt::format("the $ref \"{}\" points at nothing", ref));
  if (hint.empty()) hint = "ref";
  // The rule is named before its body is built, so recursive references find it.
  const std::string name = rule_name(prefix_ + (ref == "#" ? "schema" : hint));
  refs_.emplace(key, name);
  const std::size_t slot = rules_.size();
  rules_.emplace_back(name, "");
  ++active_[ref];
  recursion_ += level > 0;
  struct Leave {
    int& active;
    int& recursion;
    bool reentered;
    ~Leave() { --active, recursion -= reentered; }
  } leave{active_[ref], recursion_, level > 0};
  try {
    rules_[slot].second = visit(*target, ref.substr(ref.find('#') + 1), name);
  } catch (const Unsatisfiable&) {
    refs_.erase(key);  // its rule stays unused
    rules_[slot].second = use("json-never");
    throw;
  }
  return name;
}

SchemaGrammar compile_json_schema(std::string_view schema_json, std::string_view root_rule,
                                  const SchemaResolver& resolver) {
  JsonValue schema = parse_json(schema_json, "json_schema");
  bundle_schema(schema, resolver);
  if (root_rule.empty() || root_rule.rfind("json-", 0) == 0 || root_rule == "ws" ||
      !std::all_of(root_rule.begin(), root_rule.end(),
                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; }))
    fail(kBadSchema, "json_schema: the root rule name '{}' must be letters, digits and '-', and not ws or json-*",
         root_rule);
  SchemaConverter converter(schema, std::string(root_rule));
  SchemaGrammar out;
  out.gbnf = converter.run();
  out.relaxed = converter.notes().list;
  out.unique_rules = converter.unique_rules();
  return out;
}

std::string json_schema_to_gbnf(std::string_view schema_json, std::string_view root_rule) {
  return compile_json_schema(schema_json, root_rule).gbnf;
}

std::string any_json_gbnf() { return json_schema_to_gbnf("{}"); }

}  // namespace ember::grammar
