#include "template/value.hpp"

#include "util/check.hpp"
#include "util/utf8.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace ember::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(std::size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keywords) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::none;
  return v;
}

Value Value::array(Array items, bool tuple) {
  Value v;
  v.kind_ = Kind::array;
  v.tuple_ = tuple;
  v.array_ = std::make_shared<const Array>(std::move(items));
  return v;
}

Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::object;
  v.object_ = std::move(object);
  return v;
}

Value Value::object(std::vector<std::pair<std::string, Value>> items) {
  auto o = std::make_shared<Object>();
  o->items = std::move(items);
  return object(std::move(o));
}

Value Value::callable(std::string name, std::function<Value(CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::callable;
  v.callable_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return int_ != 0;
    case Kind::floating: return float_ != 0;
    case Kind::string: return !str_->empty();
    case Kind::array: return !array_->empty();
    case Kind::object: return object_->is_namespace || !object_->items.empty();
    case Kind::callable: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::array: return tuple_ ? "tuple" : "list";
    case Kind::object: return object_->is_namespace ? "Namespace" : "dict";
    case Kind::callable: return "function";
  }
  return "object";
}

// ---- Budget -----------------------------------------------------------------------------------

void Budget::step(std::int64_t n) {
  steps_left_ -= n;
  if (steps_left_ < 0) fail(ErrorCode::invalid_argument, "the template ran past its step limit");
}

void Budget::check_size(std::size_t bytes) const {
  if (bytes > max_string_) {
    fail(ErrorCode::invalid_argument, "the template made a value of {} bytes (limit {})", bytes, max_string_);
  }
}

void Budget::enter() {
  if (++depth_ > max_depth_) {
    --depth_;
    fail(ErrorCode::invalid_argument, "the template nests deeper than {} levels", max_depth_);
  }
}

// ---- UTF-8 ------------------------------------------------------------------------------------

namespace {

// Length of the well-formed UTF-8 sequence at s[i] (1 for an ill-formed byte) and its code point.
std::size_t utf8_at(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    cp = kReplacementCharacter;
    return 1;
  }
  cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) {
      cp = kReplacementCharacter;
      return 1;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  return n;
}

}  // namespace

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  std::uint32_t cp = 0;
  for (std::size_t i = 0; i < s.size(); i += utf8_at(s, i, cp)) ++n;
  return n;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  std::uint32_t cp = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_at(s, i, cp);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

bool is_python_space(std::uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string python_strip(std::string_view s, bool left, bool right, std::string_view chars, bool chars_given) {
  const std::vector<std::string_view> cps = utf8_chars(s);
  std::vector<std::string_view> set;
  if (chars_given) set = utf8_chars(chars);
  auto strippable = [&](std::string_view c) {
    if (chars_given) return std::find(set.begin(), set.end(), c) != set.end();
    std::uint32_t cp = 0;
    utf8_at(c, 0, cp);
    return c.size() == 1 && static_cast<unsigned char>(c[0]) >= 0x80 ? false : is_python_space(cp);
  };
  std::size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && strippable(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strippable(cps[end - 1])) --end;
  }
  std::string out;
  for (std::size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

// ---- str(), repr() ----------------------------------------------------------------------------

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, laid out as Python's repr: positional when the decimal
  // exponent is in [-4, 16), else d.ddde+XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const std::size_t e = sci.find('e');
  std::string digits = sci.substr(0, 1) + (e > 2 ? sci.substr(2, e - 2) : std::string());
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.assign("0.");
      out.append(static_cast<std::size_t>(-exponent - 1), '0');
      out.append(digits);
    } else {
      const auto point = static_cast<std::size_t>(exponent + 1);
      if (digits.size() <= point) {
        out = digits + std::string(point - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, point) + "." + digits.substr(point);
      }
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    const int a = std::abs(exponent);
    out += std::string(exponent < 0 ? "e-" : "e+") + (a < 10 ? "0" : "") + std::to_string(a);
  }
  if (negative) out.insert(out.begin(), '-');
  return out;
}

namespace {

bool python_printable(std::uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp >= 0x80 && cp <= 0xA0) return false;
  if (cp == 0xAD || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return false;
  if ((cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202F)) return false;
  if (cp >= 0x2060 && cp <= 0x206F) return false;
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  if (cp == 0x1680 || cp == 0x3000 || cp == 0x205F) return false;
  return true;
}

std::string string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const std::size_t n = utf8_at(s, i, cp);
    const char c = s[i];
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (n == 1 && static_cast<unsigned char>(c) >= 0x80) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));  // not text Python sees
    } else if (!python_printable(cp)) {
      out += cp < 0x100     ? fmt::format("\\x{:02x}", cp)
             : cp < 0x10000 ? fmt::format("\\u{:04x}", cp)
                            : fmt::format("\\U{:08x}", cp);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  out += quote;
  return out;
}

void append_checked(std::string& out, std::string_view part, Budget& budget) {
  budget.check_size(out.size() + part.size());
  out += part;
}

}  // namespace

std::string to_repr(const Value& value, Budget& budget) {
  budget.step();
  switch (value.kind()) {
    case Value::Kind::string: return string_repr(value.as_string());
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::array: {
      DepthGuard guard(budget);
      std::string out = value.is_tuple() ? "(" : "[";
      const Array& a = value.as_array();
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (i > 0) out += ", ";
        append_checked(out, to_repr(a[i], budget), budget);
      }
      if (value.is_tuple() && a.size() == 1) out += ",";
      return out + (value.is_tuple() ? ")" : "]");
    }
    case Value::Kind::object: {
      DepthGuard guard(budget);
      std::string out = value.as_object().is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : value.as_object().items) {
        if (!first) out += ", ";
        first = false;
        append_checked(out, string_repr(k) + ": " + to_repr(v, budget), budget);
      }
      return out + (value.as_object().is_namespace ? "}>" : "}");
    }
    default: return to_str(value, budget);
  }
}

std::string to_str(const Value& value, Budget& budget) {
  switch (value.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return value.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(value.as_int());
    case Value::Kind::floating: return float_repr(value.as_double());
    case Value::Kind::string: return value.as_string();
    case Value::Kind::callable: return "<function " + value.as_callable().name + ">";
    case Value::Kind::array:
    case Value::Kind::object: return to_repr(value, budget);
  }
  return {};
}

// ---- equality and order -----------------------------------------------------------------------

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.as_string() == b.as_string();
    case Value::Kind::array: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::object: {
      const Object &x = a.as_object(), &y = b.as_object();
      if (x.is_namespace || y.is_namespace) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (other == nullptr || !equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::callable: return &a.as_callable() == &b.as_callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps code point order
  if (a.is_array() && b.is_array() && a.is_tuple() == b.is_tuple()) {
    const Array &x = a.as_array(), &y = b.as_array();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail(ErrorCode::invalid_argument, "'<' not supported between instances of '{}' and '{}'", a.type_name(),
       b.type_name());
}

}  // namespace ember::jinja
