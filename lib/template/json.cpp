// JSON out (Python's json.dumps, as transformers' `tojson` filter calls it) and JSON in (the
// conversations and tools a host passes as text).
#include "template/value.hpp"

#include "util/check.hpp"
#include "util/utf8.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace ember::jinja {
namespace {

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
      out += fmt::format("\\u{:04x}", c);
    } else if (ensure_ascii && c >= 0x80) {
      // Decode one code point; escape it (as a surrogate pair above the BMP).
      std::size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      if (i + n > s.size()) n = 1;
      std::uint32_t cp = n == 1 ? kReplacementCharacter : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
      for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      i += n - 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        out += fmt::format("\\u{:04x}", cp);
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

class Dumper {
 public:
  Dumper(const JsonOptions& o, Budget& budget) : o_(o), budget_(budget) {
    indented_ = o.indent >= 0 || !o.indent_text.empty();
    unit_ = !o.indent_text.empty() ? o.indent_text : std::string(static_cast<std::size_t>(std::max(o.indent, 0)), ' ');
    item_sep_ = o.item_separator ? *o.item_separator : indented_ ? "," : ", ";
  }

  void dump(const Value& v, int level) {
    budget_.step();
    budget_.check_size(out.size());
    switch (v.kind()) {
      case Value::Kind::none: out += "null"; return;
      case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::integer: out += std::to_string(v.as_int()); return;
      case Value::Kind::floating: {
        const double d = v.as_double();
        out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
        return;
      }
      case Value::Kind::string: dump_string(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Kind::array: return dump_array(v.as_array(), level);
      case Value::Kind::object: return dump_object(v.as_object(), level);
      default: fail(ErrorCode::invalid_argument, "Object of type {} is not JSON serializable", v.type_name());
    }
  }

  std::string out;

 private:
  void newline(int level) {
    if (!indented_) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += unit_;
  }

  void dump_array(const Array& a, int level) {
    DepthGuard guard(budget_);
    if (a.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (i > 0) out += item_sep_;
      newline(level + 1);
      dump(a[i], level + 1);
    }
    newline(level);
    out += ']';
  }

  void dump_object(const Object& o, int level) {
    DepthGuard guard(budget_);
    if (o.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<std::string, Value>*> items;
    for (const auto& item : o.items) items.push_back(&item);
    if (o_.sort_keys) {
      std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
    }
    out += '{';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      newline(level + 1);
      dump_string(out, items[i]->first, o_.ensure_ascii);
      out += o_.key_separator;
      dump(items[i]->second, level + 1);
    }
    newline(level);
    out += '}';
  }

  const JsonOptions& o_;
  Budget& budget_;
  bool indented_ = false;
  std::string unit_, item_sep_;
};

// A small recursive-descent JSON reader with a depth limit.
class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Value parse_document() {
    Value v = parse(0);
    skip_space();
    if (pos_ != s_.size()) error("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(std::string_view what) {
    fail(ErrorCode::invalid_argument, "invalid JSON at offset {}: {}", pos_, what);
  }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  bool consume(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse(int depth) {
    if (depth > 128) error("nested too deeply");
    skip_space();
    if (pos_ >= s_.size()) error("unexpected end");
    const char c = s_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value::none();
    return parse_number();
  }

  Value parse_object(int depth) {
    ++pos_;
    std::vector<std::pair<std::string, Value>> items;
    skip_space();
    if (consume("}")) return Value::object(std::move(items));
    while (true) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') error("expected a key");
      std::string key = parse_string();
      skip_space();
      if (!consume(":")) error("expected ':'");
      Value v = parse(depth + 1);
      bool replaced = false;
      for (auto& [k, old] : items) {
        if (k == key) {
          old = v;
          replaced = true;
        }
      }
      if (!replaced) items.emplace_back(std::move(key), std::move(v));
      skip_space();
      if (consume("}")) return Value::object(std::move(items));
      if (!consume(",")) error("expected ',' or '}'");
    }
  }

  Value parse_array(int depth) {
    ++pos_;
    Array items;
    skip_space();
    if (consume("]")) return Value::array(std::move(items));
    while (true) {
      items.push_back(parse(depth + 1));
      skip_space();
      if (consume("]")) return Value::array(std::move(items));
      if (!consume(",")) error("expected ',' or ']'");
    }
  }

  std::uint32_t hex4() {
    if (pos_ + 4 > s_.size()) error("short \\u escape");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else
        error("bad \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) error("unterminated string");
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) error("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case '/': out += '/'; break;
        case '\\': out += '\\'; break;
        case '"': out += '"'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            const std::uint32_t low = hex4();
            cp = low >= 0xDC00 && low < 0xE000 ? 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                                               : kReplacementCharacter;
          }
          append_utf8(out, cp);
          break;
        }
        default: error("bad escape");
      }
    }
  }

  Value parse_number() {
    const std::size_t start = pos_;
    bool is_float = false;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
        is_float = true;
        ++pos_;
      } else {
        break;
      }
    }
    const std::string text(s_.substr(start, pos_ - start));
    if (text.empty() || text == "-") error("unexpected character");
    char* end = nullptr;
    if (!is_float) {
      errno = 0;
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end == text.c_str() + text.size()) return Value(static_cast<std::int64_t>(v));
    }
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) error("bad number");
    return Value(d);
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string to_json(const Value& value, const JsonOptions& options, Budget& budget) {
  Dumper d(options, budget);
  d.dump(value, 0);
  return std::move(d.out);
}

Value parse_json(std::string_view text) { return Parser(text).parse_document(); }

}  // namespace ember::jinja
