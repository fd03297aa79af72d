#include "grammar/json_canonical.hpp"

#include "util/utf8.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <vector>

namespace ember::grammar {
namespace {

using Type = JsonValue::Type;

int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

bool number_prefix(std::string_view prefix, std::string_view value);

// Reads a prefix of a JSON value against a value it may become (may_become()).
class PrefixReader {
 public:
  explicit PrefixReader(std::string_view s) : s_(s) {}
  enum class Result { no, open, equal };  // cannot be it / cut short, may be it / complete and equal

  Result value(const JsonValue& v) {
    space();
    if (at_end()) return Result::open;
    const char c = s_[p_];
    if (c == '"') return string_value(v);
    if (c == '{') return object(v);
    if (c == '[') return array(v);
    return scalar(v);
  }

 private:
  bool at_end() const { return p_ >= s_.size(); }
  void space() {
    while (!at_end() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }

  // A string's decoded text; `closed` false when the prefix ends inside it (an escape cut short is
  // left out of the text).
  std::string string_text(bool& closed) {
    ++p_;  // the opening quote
    std::string out;
    closed = false;
    while (!at_end()) {
      const char c = s_[p_];
      if (c == '"') {
        ++p_;
        closed = true;
        return out;
      }
      if (c != '\\') {
        out += c;
        ++p_;
        continue;
      }
      if (p_ + 1 >= s_.size()) return p_ = s_.size(), out;
      const char e = s_[p_ + 1];
      if (e != 'u') {
        const char* from = "\"\\/bfnrt";
        const char* to = "\"\\/\b\f\n\r\t";
        const char* at = std::find(from, from + 8, e);
        out += at == from + 8 ? e : to[at - from];
        p_ += 2;
        continue;
      }
      std::uint32_t cp = 0;
      if (!hex4(p_ + 2, cp)) return p_ = s_.size(), out;
      p_ += 6;
      if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair: the low half follows
        std::uint32_t low = 0;
        if (p_ + 1 >= s_.size() || s_[p_] != '\\' || s_[p_ + 1] != 'u' || !hex4(p_ + 2, low))
          return p_ = s_.size(), out;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        p_ += 6;
      }
      append_utf8(out, cp);
    }
    return out;
  }
  bool hex4(std::size_t at, std::uint32_t& cp) const {
    if (at + 4 > s_.size()) return false;
    for (std::size_t i = at; i < at + 4; ++i) {
      const int d = hex_digit(s_[i]);
      if (d < 0) return false;
      cp = cp * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  }

  Result string_value(const JsonValue& v) {
    bool closed = false;
    const std::string text = string_text(closed);
    if (v.type != Type::string) return Result::no;
    if (!closed) return v.text.compare(0, text.size(), text) == 0 ? Result::open : Result::no;
    return v.text == text ? Result::equal : Result::no;
  }

  Result object(const JsonValue& v) {
    if (v.type != Type::object) return Result::no;
    ++p_;
    std::vector<bool> matched(v.members.size(), false);
    std::size_t count = 0;
    while (true) {
      space();
      if (at_end()) return Result::open;
      if (s_[p_] == '}') return ++p_, count == v.members.size() ? Result::equal : Result::no;
      if (s_[p_] == ',') {
        ++p_;
        continue;
      }
      bool closed = false;
      const std::string key = string_text(closed);
      std::size_t m = 0;
      while (m < v.members.size() && v.members[m].first != key) ++m;
      if (!closed) {
        for (std::size_t i = 0; i < v.members.size(); ++i)
          if (!matched[i] && v.members[i].first.compare(0, key.size(), key) == 0) return Result::open;
        return Result::no;
      }
      // A name given twice: which value counts is the reader's choice; stay conservative.
      if (m < v.members.size() && matched[m]) return Result::open;
      if (m == v.members.size()) return Result::no;
      matched[m] = true;
      ++count;
      space();
      if (at_end()) return Result::open;
      ++p_;  // ':'
      const Result r = value(v.members[m].second);
      if (r != Result::equal) return r;
    }
  }

  Result array(const JsonValue& v) {
    if (v.type != Type::array) return Result::no;
    ++p_;
    std::size_t k = 0;
    while (true) {
      space();
      if (at_end()) return Result::open;
      if (s_[p_] == ']') return ++p_, k == v.items.size() ? Result::equal : Result::no;
      if (s_[p_] == ',') {
        ++p_;
        continue;
      }
      if (k >= v.items.size()) return Result::no;
      const Result r = value(v.items[k++]);
      if (r != Result::equal) return r;
    }
  }

  Result scalar(const JsonValue& v) {
    const std::size_t start = p_;
    while (!at_end() &&
           (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '.' || s_[p_] == '+' || s_[p_] == '-'))
      ++p_;
    const std::string_view word = s_.substr(start, p_ - start);
    if (word.empty()) return Result::open;  // not a value's text: nothing to prove
    const bool cut = at_end();              // more characters of it may follow
    if (word[0] == 't' || word[0] == 'f' || word[0] == 'n') {
      const std::string spelled = v.type == Type::boolean ? (v.boolean ? "true" : "false")
                                  : v.type == Type::null  ? "null"
                                                          : "";
      if (spelled.empty()) return Result::no;
      if (cut) return spelled.compare(0, word.size(), word) == 0 ? Result::open : Result::no;
      return spelled == word ? Result::equal : Result::no;
    }
    if (v.type != Type::number) return Result::no;
    if (cut) return number_prefix(word, v.text) ? Result::open : Result::no;
    return canonical_number(word) == canonical_number(v.text) ? Result::equal : Result::no;
  }

  std::string_view s_;
  std::size_t p_ = 0;
};

// Whether a number cut short after `prefix` may end equal to the number `value`. More digits
// and an exponent may follow (1 becomes 10, 1.5 or 1e-1: any number whose significant digits
// begin with the prefix's, trailing zeros aside). An exponent begun: maybe.
bool number_prefix(std::string_view prefix, std::string_view value) {
  if (prefix.find_first_of("eE") != std::string_view::npos) return true;
  const bool negative = prefix[0] == '-';
  std::string digits;
  for (char c : prefix)
    if (c >= '0' && c <= '9') digits += c;
  digits.erase(0, std::min(digits.size(), digits.find_first_not_of('0')));
  while (!digits.empty() && digits.back() == '0') digits.pop_back();
  const std::string target = canonical_number(value);
  if (digits.empty()) return true;  // zeros so far: any digits may follow
  const std::size_t at = negative ? 1 : 0;
  if ((target[0] == '-') != negative) return false;
  return target.compare(at, digits.size(), digits) == 0 && target.size() > at + digits.size() &&
         (target[at + digits.size()] == 'e' || std::isdigit(static_cast<unsigned char>(target[at + digits.size()])));
}

}  // namespace

std::string canonical_number(std::string_view text) {
  std::size_t p = 0;
  const bool negative = !text.empty() && text[0] == '-';
  p += negative;
  std::string digits;
  long long exponent = 0;
  while (p < text.size() && text[p] >= '0' && text[p] <= '9') digits += text[p++];
  if (p < text.size() && text[p] == '.')
    for (++p; p < text.size() && text[p] >= '0' && text[p] <= '9'; ++p) digits += text[p], --exponent;
  if (p < text.size() && (text[p] == 'e' || text[p] == 'E')) {
    ++p;
    const bool minus = p < text.size() && text[p] == '-';
    if (p < text.size() && (text[p] == '+' || text[p] == '-')) ++p;
    long long e = 0;
    for (; p < text.size() && text[p] >= '0' && text[p] <= '9'; ++p)
      e = std::min<long long>(e * 10 + (text[p] - '0'), 1LL << 40);  // past any double: still distinct
    exponent += minus ? -e : e;
  }
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) return "0";
  digits.erase(0, first);
  while (digits.back() == '0') digits.pop_back(), ++exponent;
  return (negative ? "-" : "") + digits + "e" + std::to_string(exponent);
}

std::string canonical_json(const JsonValue& v) {
  switch (v.type) {
    case Type::null: return "null";
    case Type::boolean: return v.boolean ? "true" : "false";
    case Type::number: return canonical_number(v.text);
    case Type::string: return json_quote(v.text);
    case Type::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out += ',';
        out += canonical_json(v.items[i]);
      }
      return out + "]";
    }
    case Type::object: {
      std::vector<std::pair<std::string, std::string>> members;
      for (const JsonMember& m : v.members) members.emplace_back(json_quote(m.first), canonical_json(m.second));
      std::sort(members.begin(), members.end());
      std::string out = "{";
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out += ',';
        out += members[i].first + ":" + members[i].second;
      }
      return out + "}";
    }
  }
  return "null";
}

bool may_become(std::string_view prefix, const JsonValue& value) {
  return PrefixReader(prefix).value(value) != PrefixReader::Result::no;
}

}  // namespace ember::grammar
