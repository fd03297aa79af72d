// Jinja2's filters and tests (jinja2/filters.py, jinja2/tests.py) with transformers' tojson.
#include "template/builtins.hpp"
#include "template/text.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cmath>

namespace ember::jinja {
namespace {

const Value* arg(const CallArgs& a, std::size_t i, std::string_view name) { return a.get(i, name); }

bool bool_arg(const CallArgs& a, std::size_t i, std::string_view name, bool fallback) {
  const Value* v = arg(a, i, name);
  return v != nullptr ? v->truthy() : fallback;
}

// make_attrgetter: "a.b.0" walks items, a number part as an index.
Value attribute_path(const Value& item, const Value& attribute, Budget& budget) {
  if (attribute.is_int()) return get_item(item, attribute, budget);
  if (!attribute.is_string()) return {};
  Value v = item;
  std::string_view rest = attribute.as_string();
  while (true) {
    const std::size_t dot = rest.find('.');
    const std::string part(rest.substr(0, dot));
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = numeric && part.size() < 18 ? get_item(v, Value(static_cast<std::int64_t>(std::stoll(part))), budget)
                                    : get_item(v, Value(part), budget);
    if (dot == std::string_view::npos) return v;
    rest = rest.substr(dot + 1);
  }
}

Value lowered(const Value& v) { return v.is_string() ? Value(to_lower(v.as_string())) : v; }

// The arguments after the first `skip` positional ones, for a test select/map passes on.
CallArgs shifted(const CallArgs& a, std::size_t skip) {
  CallArgs out;
  for (std::size_t i = skip; i < a.positional.size(); ++i) out.positional.push_back(a.positional[i]);
  out.keywords = a.keywords;
  return out;
}

Value select_like(std::string_view name, const Value& value, const CallArgs& a, Budget& budget) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool keep_when = name == "select" || name == "selectattr";
  std::size_t next = 0;
  Value attribute;
  if (by_attr) {
    if (a.positional.empty()) fail(ErrorCode::invalid_argument, "{} needs an attribute", name);
    attribute = a.positional[next++];
  }
  std::string test;
  if (next < a.positional.size()) {
    if (!a.positional[next].is_string()) fail(ErrorCode::invalid_argument, "{}: the test name must be a string", name);
    test = a.positional[next++].as_string();
  }
  const CallArgs rest = shifted(a, next);
  Array out;
  for (const Value& item : iterate(value, budget)) {
    budget.step();
    const Value v = by_attr ? attribute_path(item, attribute, budget) : item;
    const bool passed = test.empty() ? v.truthy() : apply_test(test, v, rest, budget);
    if (passed == keep_when) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Value map_filter(const Value& value, const CallArgs& a, Budget& budget) {
  Array out;
  const Value* attribute = nullptr;
  for (const auto& [k, v] : a.keywords) {
    if (k == "attribute") attribute = &v;
  }
  if (attribute != nullptr) {
    const Value* fallback = nullptr;
    for (const auto& [k, v] : a.keywords) {
      if (k == "default") fallback = &v;
    }
    for (const Value& item : iterate(value, budget)) {
      Value v = attribute_path(item, *attribute, budget);
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::array(std::move(out));
  }
  if (a.positional.empty() || !a.positional[0].is_string())
    fail(ErrorCode::invalid_argument, "map needs a filter name or attribute=");
  const std::string filter = a.positional[0].as_string();
  const CallArgs rest = shifted(a, 1);
  for (const Value& item : iterate(value, budget)) out.push_back(apply_filter(filter, item, rest, budget));
  return Value::array(std::move(out));
}

Value sort_filter(const Value& value, const CallArgs& a, Budget& budget) {
  const bool reverse = bool_arg(a, 0, "reverse", false);
  const bool case_sensitive = bool_arg(a, 1, "case_sensitive", false);
  const Value* attribute = arg(a, 2, "attribute");
  Array items = iterate(value, budget);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = attribute != nullptr && !attribute->is_none() ? attribute_path(item, *attribute, budget) : item;
    keyed.emplace_back(case_sensitive ? key : lowered(key), item);
  }
  budget.step(static_cast<std::int64_t>(keyed.size()) * 8);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  Array out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return Value::array(std::move(out));
}

Value min_max(bool want_max, const Value& value, const CallArgs& a, Budget& budget) {
  const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
  const Value* attribute = arg(a, 1, "attribute");
  const Value* best = nullptr;
  Value best_key;
  const Array items = iterate(value, budget);
  for (const Value& item : items) {
    Value key = attribute != nullptr && !attribute->is_none() ? attribute_path(item, *attribute, budget) : item;
    if (!case_sensitive) key = lowered(key);
    if (best == nullptr || (want_max ? less(best_key, key) : less(key, best_key))) {
      best = &item;
      best_key = key;
    }
  }
  return best != nullptr ? *best : Value();
}

std::string indent_filter(const std::string& s0, const CallArgs& a, Budget& budget) {
  const Value* width = arg(a, 0, "width");
  const std::string unit =
      width != nullptr && width->is_string()
          ? width->as_string()
          : std::string(
                static_cast<std::size_t>(std::clamp<std::int64_t>(width != nullptr ? width->as_int() : 4, 0, 1024)),
                ' ');
  const bool first = bool_arg(a, 1, "first", false);
  const bool blank = bool_arg(a, 2, "blank", false);
  std::vector<std::string> lines = split_lines(s0 + "\n");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += unit;
    out += lines[i];
    budget.check_size(out.size());
  }
  return first ? unit + out : out;
}

Value to_int(const Value& v, const Value& fallback) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double()) || std::fabs(v.as_double()) > 9e18) return fallback;
    return Value(static_cast<std::int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    const std::string s = python_strip(v.as_string(), true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && errno == 0 && end == s.c_str() + s.size()) return Value(static_cast<std::int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9e18) {
      return Value(static_cast<std::int64_t>(d));
    }
  }
  return fallback;
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s = python_strip(v.as_string(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return fallback;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value tojson_filter(const Value& value, const CallArgs& a, Budget& budget) {
  JsonOptions o;
  o.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
  if (const Value* indent = arg(a, 1, "indent"); indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent_text = indent->as_string();
      o.indent = 0;
    } else {
      o.indent = static_cast<int>(std::clamp<std::int64_t>(indent->as_int(), 0, 64));
    }
  }
  if (const Value* sep = arg(a, 2, "separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_array() || sep->as_array().size() != 2 || !sep->as_array()[0].is_string() ||
        !sep->as_array()[1].is_string()) {
      fail(ErrorCode::invalid_argument, "tojson: separators must be a pair of strings");
    }
    o.item_separator = sep->as_array()[0].as_string();
    o.key_separator = sep->as_array()[1].as_string();
  }
  o.sort_keys = bool_arg(a, 3, "sort_keys", false);
  return Value(to_json(value, o, budget));
}

Value string_filter(std::string_view name, const std::string& s, const CallArgs& a, Budget& budget) {
  if (name == "upper") return Value(to_upper(s));
  if (name == "lower") return Value(to_lower(s));
  if (name == "capitalize") return Value(python_capitalize(s));
  if (name == "title") return Value(jinja_title(s));
  if (name == "trim") {
    const Value* chars = arg(a, 0, "chars");
    const bool given = chars != nullptr && !chars->is_none();
    return Value(python_strip(s, true, true, given ? to_str(*chars, budget) : std::string(), given));
  }
  if (name == "replace") {
    const Value* old = arg(a, 0, "old");
    const Value* replacement = arg(a, 1, "new");
    const Value* count = arg(a, 2, "count");
    if (old == nullptr || replacement == nullptr) fail(ErrorCode::invalid_argument, "replace needs old and new");
    return Value(python_replace(s, to_str(*old, budget), to_str(*replacement, budget),
                                count != nullptr && count->is_int() ? count->as_int() : -1, budget));
  }
  if (name == "indent") return Value(indent_filter(s, a, budget));
  if (name == "e" || name == "escape" || name == "forceescape") return Value(html_escape(s));
  if (name == "wordcount") return Value(static_cast<std::int64_t>(python_split(s, nullptr, -1, false).size()));
  if (name == "format") {
    return Value(percent_format(s, Value::array(a.positional, true), budget));
  }
  fail(ErrorCode::internal, "string filter '{}'", name);
}

}  // namespace

bool filter_exists(std::string_view name) {
  static const char* const kNames[] = {
      "abs",     "attr",  "capitalize",  "count",  "d",          "default", "dictsort", "e",          "escape",
      "first",   "float", "forceescape", "format", "indent",     "int",     "items",    "join",       "last",
      "length",  "list",  "lower",       "map",    "max",        "min",     "reject",   "rejectattr", "replace",
      "reverse", "round", "safe",        "select", "selectattr", "sort",    "string",   "sum",        "title",
      "tojson",  "trim",  "unique",      "upper",  "wordcount"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

Value apply_filter(std::string_view name, const Value& value, const CallArgs& a, Budget& budget) {
  budget.step();
  if (name == "default" || name == "d") {
    const Value* fallback = arg(a, 0, "default_value");
    if (value.is_undefined() || (bool_arg(a, 1, "boolean", false) && !value.truthy())) {
      return fallback != nullptr ? *fallback : Value("");
    }
    return value;
  }
  if (name == "safe") return value;
  if (name == "string") return Value(to_str(value, budget));
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title" || name == "trim" ||
      name == "replace" || name == "indent" || name == "e" || name == "escape" || name == "forceescape" ||
      name == "wordcount" || name == "format") {
    return string_filter(name, to_str(value, budget), a, budget);
  }
  if (name == "length" || name == "count") {
    if (value.is_string()) return Value(static_cast<std::int64_t>(utf8_length(value.as_string())));
    if (value.is_array()) return Value(static_cast<std::int64_t>(value.as_array().size()));
    if (value.is_object()) return Value(static_cast<std::int64_t>(value.as_object().items.size()));
    if (value.is_undefined()) return Value(0);
    fail(ErrorCode::invalid_argument, "object of type '{}' has no len()", value.type_name());
  }
  if (name == "tojson") return tojson_filter(value, a, budget);
  if (name == "items") {
    if (value.is_undefined()) return Value::array({});
    if (!value.is_object()) fail(ErrorCode::invalid_argument, "items: can only get item pairs from a mapping");
    Array out;
    for (const auto& [k, v] : value.as_object().items) out.push_back(Value::array({Value(k), v}, true));
    return Value::array(std::move(out));
  }
  if (name == "list") return Value::array(iterate(value, budget));
  if (name == "first" || name == "last") {
    const Array items = iterate(value, budget);
    if (items.empty()) return {};
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    const std::string d = sep != nullptr ? to_str(*sep, budget) : std::string();
    std::string out;
    bool first = true;
    for (const Value& item : iterate(value, budget)) {
      if (!first) out += d;
      first = false;
      out += to_str(attribute != nullptr && !attribute->is_none() ? attribute_path(item, *attribute, budget) : item,
                    budget);
      budget.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "map") return map_filter(value, a, budget);
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    return select_like(name, value, a, budget);
  }
  if (name == "attr") {
    const Value* n = arg(a, 0, "name");
    return n != nullptr && n->is_string() ? get_attribute(value, n->as_string(), budget) : Value();
  }
  if (name == "reverse") {
    if (value.is_string()) {
      std::vector<std::string_view> chars = utf8_chars(value.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    Array items = iterate(value, budget);
    std::reverse(items.begin(), items.end());
    return Value::array(std::move(items));
  }
  if (name == "sort") return sort_filter(value, a, budget);
  if (name == "dictsort") {
    if (!value.is_object()) fail(ErrorCode::invalid_argument, "dictsort: a mapping is required");
    const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
    const Value* by = arg(a, 1, "by");
    const bool by_value = by != nullptr && by->is_string() && by->as_string() == "value";
    std::vector<std::pair<std::string, Value>> items = value.as_object().items;
    std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
      Value kx = by_value ? x.second : Value(x.first), ky = by_value ? y.second : Value(y.first);
      if (!case_sensitive) {
        kx = lowered(kx);
        ky = lowered(ky);
      }
      return bool_arg(a, 2, "reverse", false) ? less(ky, kx) : less(kx, ky);
    });
    Array out;
    for (auto& [k, v] : items) out.push_back(Value::array({Value(k), v}, true));
    return Value::array(std::move(out));
  }
  if (name == "unique") {
    const bool case_sensitive = bool_arg(a, 0, "case_sensitive", false);
    const Value* attribute = arg(a, 1, "attribute");
    Array out, seen;
    for (const Value& item : iterate(value, budget)) {
      Value key = attribute != nullptr && !attribute->is_none() ? attribute_path(item, *attribute, budget) : item;
      if (!case_sensitive) key = lowered(key);
      budget.step(static_cast<std::int64_t>(seen.size()));
      if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
        seen.push_back(key);
        out.push_back(item);
      }
    }
    return Value::array(std::move(out));
  }
  if (name == "min" || name == "max") return min_max(name == "max", value, a, budget);
  if (name == "sum") {
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value total = start != nullptr ? *start : Value(0);
    for (const Value& item : iterate(value, budget)) {
      total = binary_op("+", total,
                        attribute != nullptr && !attribute->is_none() ? attribute_path(item, *attribute, budget) : item,
                        budget);
    }
    return total;
  }
  if (name == "int") {
    const Value* fallback = arg(a, 0, "default");
    return to_int(value, fallback != nullptr ? *fallback : Value(0));
  }
  if (name == "float") {
    const Value* fallback = arg(a, 0, "default");
    return to_float(value, fallback != nullptr ? *fallback : Value(0.0));
  }
  if (name == "abs") {
    if (value.is_float()) return Value(std::fabs(value.as_double()));
    if (value.is_int() || value.is_bool()) return Value(value.as_int() < 0 ? -value.as_int() : value.as_int());
    fail(ErrorCode::invalid_argument, "bad operand type for abs(): '{}'", value.type_name());
  }
  if (name == "round") {
    const Value* precision = arg(a, 0, "precision");
    const Value* method = arg(a, 1, "method");
    const std::string m = method != nullptr && method->is_string() ? method->as_string() : "common";
    const double scale = std::pow(
        10.0, precision != nullptr ? static_cast<double>(std::clamp<std::int64_t>(precision->as_int(), -20, 20)) : 0.0);
    const double x = value.as_double() * scale;
    // Python's round(): halves to even.
    const double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / scale);
  }
  fail(ErrorCode::invalid_argument, "No filter named '{}'.", name);
}

bool test_exists(std::string_view name) {
  static const char* const kNames[] = {
      "odd",     "even",   "divisibleby", "defined",  "undefined", "filter", "test",    "none",
      "boolean", "false",  "true",        "integer",  "float",     "lower",  "upper",   "string",
      "mapping", "number", "sequence",    "iterable", "callable",  "sameas", "escaped", "in",
      "==",      "eq",     "equalto",     "!=",       "ne",        ">",      "gt",      "greaterthan",
      "ge",      ">=",     "<",           "lt",       "lessthan",  "<=",     "le"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return false;
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& a, Budget& budget) {
  budget.step();
  const Value* other = arg(a, 0, "other");
  auto need_other = [&]() -> const Value& {
    if (other == nullptr) fail(ErrorCode::invalid_argument, "test '{}' needs an argument", name);
    return *other;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !v.as_object().is_namespace;
  if (name == "sequence") return v.is_string() || v.is_array() || (v.is_object() && !v.as_object().is_namespace);
  if (name == "iterable") return v.is_string() || v.is_array() || v.is_object() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    return python_is(to_str(v, budget), name == "lower" ? "islower" : "isupper");
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int() && !v.is_bool()) fail(ErrorCode::invalid_argument, "test '{}' needs an integer", name);
    if (name == "divisibleby") {
      const Value& n = need_other();
      if (!n.is_int() || n.as_int() == 0) fail(ErrorCode::invalid_argument, "divisibleby needs a non-zero integer");
      return v.as_int() % n.as_int() == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "sameas") {
    const Value& o = need_other();
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    return v.is_object() ? &v.as_object() == &o.as_object() : v.is_array() ? &v.as_array() == &o.as_array() : false;
  }
  if (name == "in") return contains(need_other(), v, budget);
  if (name == "==" || name == "eq" || name == "equalto") return equals(v, need_other());
  if (name == "!=" || name == "ne") return !equals(v, need_other());
  if (name == ">" || name == "gt" || name == "greaterthan") return less(need_other(), v);
  if (name == ">=" || name == "ge") return !less(v, need_other());
  if (name == "<" || name == "lt" || name == "lessthan") return less(v, need_other());
  if (name == "<=" || name == "le") return !less(need_other(), v);
  if (name == "filter" || name == "test") {
    return v.is_string() && (name == "filter" ? filter_exists(v.as_string()) : test_exists(v.as_string()));
  }
  fail(ErrorCode::invalid_argument, "No test named '{}'.", name);
}

}  // namespace ember::jinja
