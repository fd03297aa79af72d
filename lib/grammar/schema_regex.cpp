#include "grammar/schema_regex.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ember::grammar {
namespace {

struct ClassRange {
  std::uint32_t lo, hi;
};
using Ranges = std::vector<ClassRange>;

constexpr std::uint32_t kMaxCp = 0x10FFFF;

Ranges normalise(Ranges r) {
  std::sort(r.begin(), r.end(), [](ClassRange a, ClassRange b) { return a.lo < b.lo; });
  Ranges out;
  for (ClassRange x : r) {
    if (!out.empty() && x.lo <= out.back().hi + 1)
      out.back().hi = std::max(out.back().hi, x.hi);
    else
      out.push_back(x);
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  std::uint32_t next = 0;
  for (ClassRange x : normalise(r)) {
    if (x.lo > next) out.push_back({next, x.lo - 1});
    next = x.hi + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

// r minus [lo, hi].
Ranges subtract(const Ranges& r, std::uint32_t lo, std::uint32_t hi) {
  Ranges out;
  for (ClassRange x : r) {
    if (x.hi < lo || x.lo > hi) {
      out.push_back(x);
      continue;
    }
    if (x.lo < lo) out.push_back({x.lo, lo - 1});
    if (x.hi > hi) out.push_back({hi + 1, x.hi});
  }
  return out;
}

bool contains(const Ranges& r, std::uint32_t c) {
  for (ClassRange x : r)
    if (c >= x.lo && c <= x.hi) return true;
  return false;
}

std::string class_char(std::uint32_t c) {
  if (c >= 0x20 && c < 0x7F && c != ']' && c != '\\' && c != '^' && c != '-' && c != '"')
    return std::string(1, static_cast<char>(c));
  if (c < 0x80) return fmt::format("\\x{:02X}", c);
  if (c < 0x10000) return fmt::format("\\u{:04X}", c);
  return fmt::format("\\U{:08X}", c);
}

// What a JSON string's content can hold for these characters: the plain ones as a class, and
// the escaped forms of ", \ and the control characters JSON has short escapes for.
std::string json_chars(Ranges r) {
  r = normalise(std::move(r));
  Ranges plain = subtract(subtract(subtract(subtract(r, 0, 0x1F), '"', '"'), '\\', '\\'), 0xD800, 0xDFFF);
  std::vector<std::string> alts;
  if (!plain.empty()) {
    std::string cls = "[";
    for (ClassRange x : plain) {
      cls += class_char(x.lo);
      if (x.hi != x.lo) cls += "-" + class_char(x.hi);
    }
    alts.push_back(cls + "]");
  }
  if (contains(r, '"')) alts.push_back(gbnf_literal("\\\""));
  if (contains(r, '\\')) alts.push_back(gbnf_literal("\\\\"));
  if (contains(r, '\n')) alts.push_back(gbnf_literal("\\n"));
  if (contains(r, '\t')) alts.push_back(gbnf_literal("\\t"));
  if (contains(r, '\r')) alts.push_back(gbnf_literal("\\r"));
  if (alts.empty()) fail(ErrorCode::invalid_argument, "pattern: a character set that JSON text cannot hold");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\n'}, {'\r', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : src_(p) {
    for (std::size_t i = 0; i < p.size();) {  // decode UTF-8 (the schema reader produced it)
      const auto c = static_cast<unsigned char>(p[i]);
      const int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      std::uint32_t cp = len == 1 ? c : c & (0x7F >> len);
      for (int k = 1; k < len && i + static_cast<std::size_t>(k) < p.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(p[i + static_cast<std::size_t>(k)]) & 0x3F);
      cps_.push_back(cp);
      offsets_.push_back(i);
      i += static_cast<std::size_t>(len);
    }
  }

  std::string run() {
    std::string out = alternation();
    if (i_ < cps_.size()) error("an unmatched ')'");
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    const std::size_t at = i_ < offsets_.size() ? offsets_[i_] : src_.size();
    fail(ErrorCode::invalid_argument, "pattern \"{}\": {} at offset {} is not supported", std::string(src_), what, at);
  }
  bool end() const { return i_ >= cps_.size(); }
  std::uint32_t peek(std::size_t ahead = 0) const { return i_ + ahead < cps_.size() ? cps_[i_ + ahead] : 0; }

  std::string alternation() {
    std::vector<std::string> alts = {sequence()};
    while (!end() && peek() == '|') {
      ++i_;
      alts.push_back(sequence());
    }
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (std::size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
    return out + ")";
  }

  std::string sequence() {
    std::string out;
    while (!end() && peek() != '|' && peek() != ')') {
      const std::string part = quantified();
      if (part.empty()) continue;
      out += (out.empty() ? "" : " ") + part;
    }
    return out.empty() ? "\"\"" : "(" + out + ")";
  }

  int number() {
    if (!(peek() >= '0' && peek() <= '9')) error("a malformed {m,n}");
    long v = 0;
    while (!end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<long>(peek() - '0');
      if (v > 10000) error("a repetition count over 10000");
      ++i_;
    }
    return static_cast<int>(v);
  }

  std::string quantified() {
    const std::size_t start = i_;
    std::string a = atom();
    if (end()) return a;
    std::string q;
    const std::uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q = std::string(1, static_cast<char>(c));
    } else if (c == '{') {
      ++i_;
      const int m = number();
      q = "{" + std::to_string(m);
      if (peek() == ',') {
        ++i_;
        q += ",";
        if (peek() != '}') {
          const int n = number();
          if (n < m) error("{m,n} with n < m");
          q += std::to_string(n);
        }
      }
      if (peek() != '}') error("a malformed {m,n}");
      ++i_;
      q += "}";
    } else {
      return a;
    }
    if (a.empty()) {
      i_ = start;
      error("a quantifier on an anchor");
    }
    if (!end() && peek() == '?') ++i_;  // lazy: the same language
    if (!end() && (peek() == '+' || peek() == '*' || peek() == '{')) error("a possessive or doubled quantifier");
    return "(" + a + ")" + q;
  }

  std::string atom() {
    const std::uint32_t c = peek();
    switch (c) {
      case '(': {
        ++i_;
        if (peek() == '?') {
          if (peek(1) != ':') error("lookaround or a named group");
          i_ += 2;
        }
        ++depth_;
        std::string inner = alternation();
        --depth_;
        if (peek() != ')') error("an unclosed '('");
        ++i_;
        return inner;
      }
      case '[': return json_chars(parse_class());
      case '.': ++i_; return json_chars(subtract({{0, kMaxCp}}, '\n', '\n'));
      // Anchors at the ends of the pattern, or of a top-level alternative (^a$|^b$): the
      // generated string is the whole match either way.
      case '^':
        if (i_ != 0 && !(depth_ == 0 && cps_[i_ - 1] == '|')) error("'^' other than at the start");
        ++i_;
        return "";
      case '$':
        if (i_ + 1 != cps_.size() && !(depth_ == 0 && cps_[i_ + 1] == '|')) error("'$' other than at the end");
        ++i_;
        return "";
      case '*':
      case '+':
      case '?':
      case '{': error("a quantifier with nothing to repeat");
      case '\\': return json_chars(escape(false));
      default: ++i_; return json_chars({{c, c}});
    }
  }

  // After a backslash (i_ at the backslash). In a class, \b would be a backspace; refused too.
  Ranges escape(bool in_class) {
    ++i_;
    if (end()) error("a trailing backslash");
    const std::uint32_t e = peek();
    ++i_;
    switch (e) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case 'u':
      case 'x': {
        const int digits = e == 'u' ? 4 : 2;
        std::uint32_t v = 0;
        for (int k = 0; k < digits; ++k) {
          const std::uint32_t h = peek();
          const int d = h >= '0' && h <= '9'   ? int(h - '0')
                        : h >= 'a' && h <= 'f' ? int(h - 'a' + 10)
                        : h >= 'A' && h <= 'F' ? int(h - 'A' + 10)
                                               : -1;
          if (d < 0) error("a malformed \\u or \\x escape");
          v = v * 16 + static_cast<std::uint32_t>(d);
          ++i_;
        }
        return {{v, v}};
      }
      default:
        i_ -= 2;  // errors point at the backslash
        if (e >= '0' && e <= '9') error("a backreference");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
          error(fmt::format("the escape \\{}{}", static_cast<char>(e), in_class ? " in a class" : ""));
        i_ += 2;
        return {{e, e}};  // escaped punctuation is itself
    }
  }

  Ranges parse_class() {
    ++i_;  // '['
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++i_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (end()) error("an unclosed '['");
      if (peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      Ranges item;
      std::uint32_t lo = 0;
      bool single = false;
      if (peek() == '\\') {
        item = escape(true);
        single = item.size() == 1 && item[0].lo == item[0].hi;
        lo = item[0].lo;
      } else if (peek() == '[' && peek(1) == ':') {
        error("a POSIX class");
      } else {
        lo = peek();
        ++i_;
        item = {{lo, lo}};
        single = true;
      }
      if (single && peek() == '-' && peek(1) != ']' && i_ + 1 < cps_.size()) {
        ++i_;
        std::uint32_t hi = peek();
        if (hi == '\\') {
          const Ranges h = escape(true);
          if (h.size() != 1 || h[0].lo != h[0].hi) error("a class range ending in a class escape");
          hi = h[0].lo;
        } else {
          ++i_;
        }
        if (hi < lo) error("a reversed class range");
        item = {{lo, hi}};
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    return negated ? complement(r) : normalise(r);
  }

  std::string_view src_;
  std::vector<std::uint32_t> cps_;
  std::vector<std::size_t> offsets_;
  std::size_t i_ = 0;
  int depth_ = 0;  // groups open at i_
};

}  // namespace

std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F)
      out += fmt::format("\\x{:02X}", c);
    else
      out += ch;  // UTF-8 passes through: the GBNF reader decodes it
  }
  return out + '"';
}

std::string pattern_to_gbnf(std::string_view pattern) { return RegexParser(pattern).run(); }

}  // namespace ember::grammar
