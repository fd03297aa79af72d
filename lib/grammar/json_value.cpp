#include "grammar/json_value.hpp"

#include "util/check.hpp"
#include "util/utf8.hpp"

namespace ember::grammar {
namespace {

constexpr int kMaxDepth = 512;

// The length of the well-formed UTF-8 sequence at the start of `s` (lead byte >= 0x80), or 0.
std::size_t utf8_length(std::string_view s) {
  const auto c = static_cast<unsigned char>(s[0]);
  const std::size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || s.size() < n) return 0;
  std::uint32_t cp = c & (0x7F >> n);
  for (std::size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

class Reader {
 public:
  Reader(std::string_view s, std::string_view what) : s_(s), what_(what) {}

  JsonValue document() {
    space();
    JsonValue v = value(0);
    space();
    if (p_ != s_.size()) error("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& msg) const {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < p_ && i < s_.size(); ++i) {
      if (s_[i] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    fail(ErrorCode::invalid_argument, "{}: {} at line {}, column {} (offset {})", what_, msg, line, col, p_);
  }
  char peek() const { return p_ < s_.size() ? s_[p_] : '\0'; }
  void space() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  void expect(char c) {
    if (peek() != c) error(fmt::format("expected '{}'", c));
    ++p_;
  }
  void word(std::string_view w) {
    if (s_.substr(p_, w.size()) != w) error("invalid literal");
    p_ += w.size();
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) error(fmt::format("nesting deeper than {}", kMaxDepth));
    JsonValue v;
    switch (peek()) {
      case '{': {
        ++p_;
        v.type = JsonValue::Type::object;
        space();
        if (peek() == '}') {
          ++p_;
          return v;
        }
        while (true) {
          space();
          if (peek() != '"') error("expected a member name");
          std::string key = string();
          space();
          expect(':');
          space();
          v.members.push_back({std::move(key), value(depth + 1)});
          space();
          if (peek() == ',') {
            ++p_;
            continue;
          }
          expect('}');
          return v;
        }
      }
      case '[': {
        ++p_;
        v.type = JsonValue::Type::array;
        space();
        if (peek() == ']') {
          ++p_;
          return v;
        }
        while (true) {
          space();
          v.items.push_back(value(depth + 1));
          space();
          if (peek() == ',') {
            ++p_;
            continue;
          }
          expect(']');
          return v;
        }
      }
      case '"':
        v.type = JsonValue::Type::string;
        v.text = string();
        return v;
      case 't':
        word("true");
        v.type = JsonValue::Type::boolean;
        v.boolean = true;
        return v;
      case 'f':
        word("false");
        v.type = JsonValue::Type::boolean;
        return v;
      case 'n': word("null"); return v;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        error(p_ >= s_.size() ? "unexpected end of the text" : "expected a value");
    }
  }

  JsonValue number() {
    const std::size_t start = p_;
    const auto digits = [&] {
      const std::size_t d = p_;
      while (peek() >= '0' && peek() <= '9') ++p_;
      if (p_ == d) error("expected a digit");
    };
    if (peek() == '-') ++p_;
    if (peek() == '0')
      ++p_;
    else
      digits();
    if (peek() == '.') {
      ++p_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      digits();
    }
    JsonValue v;
    v.type = JsonValue::Type::number;
    v.text = std::string(s_.substr(start, p_ - start));
    return v;
  }

  std::uint32_t hex4() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) error("expected 4 hex digits after \\u");
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++p_;
    }
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (p_ >= s_.size()) error("unterminated string");
      const auto c = static_cast<unsigned char>(s_[p_]);
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c < 0x20) error("a control character inside a string");
      if (c >= 0x80) {  // JSON text is UTF-8: a schema's names end up in the grammar
        const std::size_t n = utf8_length(s_.substr(p_));
        if (n == 0) error("invalid UTF-8 in a string");
        out.append(s_.substr(p_, n));
        p_ += n;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++p_;
        continue;
      }
      ++p_;
      const char e = peek();
      ++p_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(p_, 2) == "\\u") {
            p_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error("an unpaired surrogate escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            error("an unpaired surrogate escape");
          }
          append_utf8(out, cp);
          break;
        }
        default: --p_; error("an invalid escape");
      }
    }
  }

  std::string_view s_;
  std::string_view what_;
  std::size_t p_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

bool JsonValue::is_integer() const { return type == Type::number && text.find_first_of(".eE") == std::string::npos; }

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20)
          out += fmt::format("\\u{:04x}", c);
        else
          out += ch;
    }
  }
  return out + '"';
}

std::string JsonValue::dump() const {
  switch (type) {
    case Type::null: return "null";
    case Type::boolean: return boolean ? "true" : "false";
    case Type::number: return text;
    case Type::string: return json_quote(text);
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i].dump();
      return out + "]";
    }
    case Type::object: {
      std::string out = "{";
      for (std::size_t i = 0; i < members.size(); ++i)
        out += (i ? "," : "") + json_quote(members[i].first) + ":" + members[i].second.dump();
      return out + "}";
    }
  }
  return "null";
}

JsonValue parse_json(std::string_view text, std::string_view what) { return Reader(text, what).document(); }

JsonValue json_bool(bool b) {
  JsonValue v;
  v.type = JsonValue::Type::boolean;
  v.boolean = b;
  return v;
}

}  // namespace ember::grammar
