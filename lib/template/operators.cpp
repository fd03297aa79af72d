// Attribute and item access, Python's methods on str and dict, slicing, operators and globals.
#include "template/builtins.hpp"
#include "template/text.hpp"

#include "util/check.hpp"

#include <cmath>
#include <limits>

namespace ember::jinja {
namespace {

std::int64_t int_arg(const CallArgs& a, std::size_t i, std::string_view name, std::int64_t fallback) {
  const Value* v = a.get(i, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) fail(ErrorCode::invalid_argument, "'{}' must be an integer", name);
  return v->as_int();
}

std::string str_arg(const CallArgs& a, std::size_t i, std::string_view name) {
  const Value* v = a.get(i, name);
  if (v == nullptr || !v->is_string()) fail(ErrorCode::invalid_argument, "'{}' must be a string", name);
  return v->as_string();
}

bool prefix_test(const Value& arg, const std::string& s, bool ends) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) fail(ErrorCode::invalid_argument, "startswith/endswith takes a string or a tuple of strings");
    const std::string& x = p.as_string();
    if (x.size() > s.size()) return false;
    return ends ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0;
  };
  if (arg.is_array()) {
    for (const Value& p : arg.as_array()) {
      if (one(p)) return true;
    }
    return false;
  }
  return one(arg);
}

Value string_method(const std::string& s, const std::string& name, const CallArgs& a, Budget& budget) {
  auto chars = [&](std::size_t i) -> std::optional<std::string> {
    const Value* v = a.get(i, "chars");
    if (v == nullptr || v->is_none()) return std::nullopt;
    if (!v->is_string()) fail(ErrorCode::invalid_argument, "strip arg must be None or str");
    return v->as_string();
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto c = chars(0);
    return Value(python_strip(s, name != "rstrip", name != "lstrip", c.value_or(""), c.has_value()));
  }
  if (name == "upper") return Value(to_upper(s));
  if (name == "lower") return Value(to_lower(s));
  if (name == "title") return Value(python_title(s));
  if (name == "capitalize") return Value(python_capitalize(s));
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (p == nullptr) fail(ErrorCode::invalid_argument, "{}() takes at least 1 argument", name);
    return Value(prefix_test(*p, s, name == "endswith"));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = a.get(0, "sep");
    if (sep != nullptr && !sep->is_none() && !sep->is_string())
      fail(ErrorCode::invalid_argument, "must be str or None, not {}", sep->type_name());
    const std::int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
    Array parts;
    for (auto& p :
         python_split(s, sep != nullptr && !sep->is_none() ? &sep->as_string() : nullptr, maxsplit, name == "rsplit")) {
      budget.step();
      parts.emplace_back(std::move(p));
    }
    return Value::array(std::move(parts));
  }
  if (name == "splitlines") {
    Array parts;
    for (auto& p : split_lines(s)) parts.emplace_back(std::move(p));
    return Value::array(std::move(parts));
  }
  if (name == "replace") {
    const std::int64_t count = int_arg(a, 2, "count", -1);
    return Value(python_replace(s, str_arg(a, 0, "old"), str_arg(a, 1, "new"), count, budget));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const std::string sub = str_arg(a, 0, "sub");
    if (name == "count") return Value(static_cast<std::int64_t>(count_substr(s, sub)));
    const std::size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") fail(ErrorCode::invalid_argument, "substring not found");
      return Value(-1);
    }
    return Value(static_cast<std::int64_t>(utf8_length(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (items == nullptr) fail(ErrorCode::invalid_argument, "join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*items, budget)) {
      if (!v.is_string())
        fail(ErrorCode::invalid_argument, "sequence item: expected str instance, {} found", v.type_name());
      if (!first) out += s;
      first = false;
      out += v.as_string();
      budget.check_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "isupper" ||
      name == "islower") {
    return Value(python_is(s, name));
  }
  fail(ErrorCode::invalid_argument, "'str' object has no method '{}'", name);
}

Value dict_method(const Value& obj, const std::string& name, const CallArgs& a) {
  const Object& o = obj.as_object();
  if (name == "items" || name == "keys" || name == "values") {
    Array out;
    for (const auto& [k, v] : o.items) {
      if (name == "items")
        out.push_back(Value::array({Value(k), v}, true));
      else
        out.push_back(name == "keys" ? Value(k) : v);
    }
    return Value::array(std::move(out));
  }
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (key == nullptr) fail(ErrorCode::invalid_argument, "get expected at least 1 argument");
    if (key->is_string()) {
      if (const Value* v = o.find(key->as_string())) return *v;
    }
    const Value* fallback = a.get(1, "default");
    return fallback != nullptr ? *fallback : Value::none();
  }
  fail(ErrorCode::invalid_argument, "'dict' object has no method '{}'", name);
}

bool is_string_method(const std::string& n) {
  static const char* const kNames[] = {"strip",      "lstrip",     "rstrip",   "upper",   "lower",   "title",
                                       "capitalize", "startswith", "endswith", "split",   "rsplit",  "splitlines",
                                       "replace",    "find",       "rfind",    "index",   "count",   "join",
                                       "isdigit",    "isalpha",    "isspace",  "isalnum", "isupper", "islower"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

bool is_mutating_method(const std::string& n) {
  static const char* const kNames[] = {"append",  "extend", "insert",     "pop",     "remove", "clear",  "sort",
                                       "reverse", "update", "setdefault", "popitem", "add",    "discard"};
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

std::int64_t normalize_index(std::int64_t i, std::int64_t n) { return i < 0 ? i + n : i; }

}  // namespace

Value get_attribute(const Value& obj, const std::string& name, Budget& budget) {
  budget.step();
  if (obj.is_undefined()) fail(ErrorCode::invalid_argument, "undefined value has no attribute '{}'", name);
  if (!name.empty() && name[0] == '_') return {};  // the sandbox hides private attributes
  if (obj.is_string()) {
    if (!is_string_method(name)) return {};
    const std::string s = obj.as_string();
    return Value::callable("str." + name,
                           [s, name, &budget](CallArgs& a) { return string_method(s, name, a, budget); });
  }
  if (obj.is_object()) {
    const Object& o = obj.as_object();
    if (!o.is_namespace && (name == "items" || name == "keys" || name == "values" || name == "get")) {
      return Value::callable("dict." + name, [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
    }
    if (!o.is_namespace && is_mutating_method(name)) {
      fail(ErrorCode::invalid_argument, "access to attribute '{}' of 'dict' object is unsafe", name);
    }
    const Value* v = o.find(name);
    return v != nullptr ? *v : Value();
  }
  if (obj.is_array() && is_mutating_method(name)) {
    fail(ErrorCode::invalid_argument, "access to attribute '{}' of 'list' object is unsafe", name);
  }
  return {};
}

Value get_item(const Value& obj, const Value& key, Budget& budget) {
  budget.step();
  if (obj.is_undefined()) fail(ErrorCode::invalid_argument, "undefined value has no item");
  if (obj.is_object() && key.is_string()) {
    const Value* v = obj.as_object().find(key.as_string());
    if (v != nullptr) return *v;
    return get_attribute(obj, key.as_string(), budget);  // jinja2 falls back to the attribute
  }
  if ((obj.is_array() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_array()) {
      const auto n = static_cast<std::int64_t>(obj.as_array().size());
      const std::int64_t i = normalize_index(key.as_int(), n);
      return i >= 0 && i < n ? obj.as_array()[static_cast<std::size_t>(i)] : Value();
    }
    const auto chars = utf8_chars(obj.as_string());
    const auto n = static_cast<std::int64_t>(chars.size());
    const std::int64_t i = normalize_index(key.as_int(), n);
    return i >= 0 && i < n ? Value(chars[static_cast<std::size_t>(i)]) : Value();
  }
  if (key.is_string()) return get_attribute(obj, key.as_string(), budget);
  return {};
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget) {
  auto opt = [](const Value& v) -> std::optional<std::int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(ErrorCode::invalid_argument, "slice indices must be integers or None");
    return v.as_int();
  };
  const std::int64_t st = opt(step).value_or(1);
  if (st == 0) fail(ErrorCode::invalid_argument, "slice step cannot be zero");
  std::vector<std::string_view> chars;
  std::int64_t n = 0;
  if (obj.is_string()) {
    chars = utf8_chars(obj.as_string());
    n = static_cast<std::int64_t>(chars.size());
  } else if (obj.is_array()) {
    n = static_cast<std::int64_t>(obj.as_array().size());
  } else {
    fail(ErrorCode::invalid_argument, "'{}' object is not subscriptable", obj.type_name());
  }
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<std::int64_t> v, std::int64_t def) {
    if (!v) return def;
    std::int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = st < 0 ? -1 : 0;
    } else if (i >= n) {
      i = st < 0 ? n - 1 : n;
    }
    return i;
  };
  const std::int64_t b = adjust(opt(start), st < 0 ? n - 1 : 0);
  const std::int64_t e = adjust(opt(stop), st < 0 ? -1 : n);
  std::string s;
  Array items;
  for (std::int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    budget.step();
    if (obj.is_string())
      s += chars[static_cast<std::size_t>(i)];
    else
      items.push_back(obj.as_array()[static_cast<std::size_t>(i)]);
  }
  if (obj.is_string()) return Value(std::move(s));
  return Value::array(std::move(items), obj.is_tuple());
}

Array iterate(const Value& value, Budget& budget) {
  budget.step();
  switch (value.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::array: return value.as_array();
    case Value::Kind::object: {
      Array keys;
      for (const auto& [k, v] : value.as_object().items) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::string: {
      Array out;
      for (std::string_view c : utf8_chars(value.as_string())) out.emplace_back(c);
      return out;
    }
    default: fail(ErrorCode::invalid_argument, "'{}' object is not iterable", value.type_name());
  }
}

bool contains(const Value& container, const Value& item, Budget& budget) {
  if (container.is_string()) {
    if (!item.is_string())
      fail(ErrorCode::invalid_argument, "'in <string>' requires string as left operand, not {}", item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_object()) return item.is_string() && container.as_object().find(item.as_string()) != nullptr;
  for (const Value& v : iterate(container, budget)) {
    budget.step();
    if (equals(v, item)) return true;
  }
  return false;
}

Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget) {
  budget.step();
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool nums = a.is_number() && b.is_number();
  auto checked = [&](long double r) {
    if (r > static_cast<long double>(std::numeric_limits<std::int64_t>::max()) ||
        r < static_cast<long double>(std::numeric_limits<std::int64_t>::min())) {
      fail(ErrorCode::invalid_argument, "integer result out of range");
    }
    return Value(static_cast<std::int64_t>(r));
  };
  if (op == "+") {
    if (ints) return checked(static_cast<long double>(a.as_int()) + b.as_int());
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      budget.check_size(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
      budget.check_size(a.as_array().size() + b.as_array().size());
      Array out = a.as_array();
      out.insert(out.end(), b.as_array().begin(), b.as_array().end());
      return Value::array(std::move(out), a.is_tuple());
    }
  } else if (op == "-") {
    if (ints) return checked(static_cast<long double>(a.as_int()) - b.as_int());
    if (nums) return Value(a.as_double() - b.as_double());
  } else if (op == "*") {
    if (ints) return checked(static_cast<long double>(a.as_int()) * b.as_int());
    if (nums) return Value(a.as_double() * b.as_double());
    const Value& seq = a.is_int() ? b : a;
    const Value& times = a.is_int() ? a : b;
    if ((seq.is_string() || seq.is_array()) && times.is_int()) {
      const std::int64_t k = std::max<std::int64_t>(times.as_int(), 0);
      const std::size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_array().size();
      if (unit > 0 && static_cast<std::uint64_t>(k) > budget.max_string() / unit)
        budget.check_size(budget.max_string() + 1);
      budget.step(k);
      if (seq.is_string()) {
        std::string out;
        for (std::int64_t i = 0; i < k; ++i) out += seq.as_string();
        return Value(std::move(out));
      }
      Array out;
      for (std::int64_t i = 0; i < k; ++i) out.insert(out.end(), seq.as_array().begin(), seq.as_array().end());
      return Value::array(std::move(out), seq.is_tuple());
    }
  } else if (op == "/" || op == "//" || op == "%") {
    if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b, budget));
    if (nums) {
      if (b.as_double() == 0) fail(ErrorCode::invalid_argument, "division by zero");
      if (op == "/") return Value(a.as_double() / b.as_double());
      if (ints) {
        const std::int64_t x = a.as_int(), y = b.as_int();
        if (x == std::numeric_limits<std::int64_t>::min() && y == -1)
          fail(ErrorCode::invalid_argument, "integer result out of range");
        std::int64_t q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) {
          --q;
          r += y;
        }
        return Value(op == "//" ? q : r);
      }
      const double x = a.as_double(), y = b.as_double();
      if (op == "//") return Value(std::floor(x / y));
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value(r);
    }
  } else if (op == "**") {
    if (ints && b.as_int() >= 0) {
      long double r = 1;
      for (std::int64_t i = 0; i < b.as_int() && r != 0 && std::fabs(r) <= 1e19L; ++i) r *= a.as_int();
      return checked(r);
    }
    if (nums) return Value(std::pow(a.as_double(), b.as_double()));
  }
  fail(ErrorCode::invalid_argument, "unsupported operand type(s) for {}: '{}' and '{}'", op, a.type_name(),
       b.type_name());
}

Value global_function(std::string_view name) {
  if (name == "range") {
    return Value::callable("range", [](CallArgs& a) {
      std::int64_t start = 0, stop = 0, step = 1;
      auto num = [](const Value& v) {
        if (!v.is_int() && !v.is_bool()) fail(ErrorCode::invalid_argument, "range() takes integers");
        return v.as_int();
      };
      if (a.positional.size() == 1) {
        stop = num(a.positional[0]);
      } else if (a.positional.size() >= 2) {
        start = num(a.positional[0]);
        stop = num(a.positional[1]);
        if (a.positional.size() > 2) step = num(a.positional[2]);
      } else {
        fail(ErrorCode::invalid_argument, "range expected at least 1 argument");
      }
      if (step == 0) fail(ErrorCode::invalid_argument, "range() arg 3 must not be zero");
      const long double count = step > 0 ? std::ceil(static_cast<long double>(stop - start) / step)
                                         : std::ceil(static_cast<long double>(start - stop) / -step);
      if (count > 100000)
        fail(ErrorCode::invalid_argument, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      Array out;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value::array(std::move(out));
    });
  }
  if (name == "dict") {  // (namespace() is the evaluator's: it tracks the namespaces it makes)
    return Value::callable("dict", [](CallArgs& a) {
      auto o = std::make_shared<Object>();
      for (const Value& p : a.positional) {
        if (!p.is_object()) fail(ErrorCode::invalid_argument, "dict() takes a mapping");
        for (const auto& [k, v] : p.as_object().items) o->set(k, v);
      }
      for (const auto& [k, v] : a.keywords) o->set(k, v);
      return Value::object(std::move(o));
    });
  }
  if (name == "raise_exception") {
    return Value::callable("raise_exception", [](CallArgs& a) -> Value {
      const Value* m = a.get(0, "message");
      Budget budget(10000, 1 << 20, 16);
      fail(ErrorCode::invalid_argument, "{}", m != nullptr ? to_str(*m, budget) : std::string());
    });
  }
  return {};
}

}  // namespace ember::jinja
