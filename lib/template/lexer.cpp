#include "template/lexer.hpp"

#include "template/value.hpp"
#include "util/check.hpp"
#include "util/utf8.hpp"

#include <algorithm>
#include <array>

namespace ember::jinja {
namespace {

// Byte length of the whitespace code point (Python's \s) at s[i], or 0.
std::size_t space_at(std::string_view s, std::size_t i) {
  if (i >= s.size()) return 0;
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return is_python_space(b) ? 1 : 0;
  auto cont = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  if (b == 0xC2 && (cont(1) == 0x85 || cont(1) == 0xA0)) return 2;
  if (b == 0xE1 && cont(1) == 0x9A && cont(2) == 0x80) return 3;  // U+1680
  if (b == 0xE2 && cont(1) == 0x80 && (cont(2) <= 0x8A || cont(2) == 0xA8 || cont(2) == 0xA9 || cont(2) == 0xAF)) {
    return cont(2) >= 0x80 ? 3 : 0;  // U+2000-200A, 2028, 2029, 202F
  }
  if (b == 0xE2 && cont(1) == 0x81 && cont(2) == 0x9F) return 3;  // U+205F
  if (b == 0xE3 && cont(1) == 0x80 && cont(2) == 0x80) return 3;  // U+3000
  return 0;
}

std::size_t skip_spaces(std::string_view s, std::size_t i) {
  while (std::size_t n = space_at(s, i)) i += n;
  return i;
}

// Python's str.rstrip() on UTF-8.
std::string_view rstrip(std::string_view s) {
  std::size_t keep = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = space_at(s, i);
    if (n == 0) {
      ++i;
      while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
      keep = i;
    } else {
      i += n;
    }
  }
  return s.substr(0, keep);
}

bool all_spaces(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = space_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(std::move(source)) {}

  std::vector<Token> run();

 private:
  [[noreturn]] void error(int line, std::string_view what) {
    fail(ErrorCode::invalid_argument, "template line {}: {}", line, what);
  }
  int line_at(std::size_t pos) {
    // Lines are counted incrementally: positions only move forward.
    for (; counted_ < pos && counted_ < s_.size(); ++counted_) line_ += s_[counted_] == '\n';
    return line_;
  }
  void push(Token::Type type, std::string text, std::size_t at) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_at(at);
    tokens_.push_back(std::move(t));
  }
  void emit_data(std::string_view text, char sign, bool is_variable, std::size_t at);
  std::size_t lex_comment(std::size_t pos);
  std::size_t lex_raw(std::size_t pos, std::size_t body);
  std::size_t lex_tag(std::size_t pos, bool block);
  std::size_t lex_number(std::size_t pos);
  std::size_t lex_string(std::size_t pos);
  // Where a block tag's end matches at `pos` ("+%}", "-%}\s*", "%}\n?"), or npos.
  std::size_t block_end_at(std::size_t pos) const;
  std::size_t raw_begin_end(std::size_t pos) const;

  std::string s_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
  int line_ = 1;
  std::size_t counted_ = 0;
};

std::size_t Lexer::block_end_at(std::size_t pos) const {
  const std::string_view s = s_;
  if (s.substr(pos, 3) == "+%}") return pos + 3;
  if (s.substr(pos, 3) == "-%}") return skip_spaces(s, pos + 3);
  if (s.substr(pos, 2) == "%}") return pos + 2 + (s.substr(pos + 2, 1) == "\n" ? 1 : 0);
  return std::string_view::npos;
}

// `{%(-|+|)\s*raw\s*(-%}\s*|%})` at pos: the end of the match, or npos.
std::size_t Lexer::raw_begin_end(std::size_t pos) const {
  const std::string_view s = s_;
  std::size_t i = pos + 2;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  i = skip_spaces(s, i);
  if (s.substr(i, 3) != "raw") return std::string_view::npos;
  i = skip_spaces(s, i + 3);
  if (s.substr(i, 3) == "-%}") return skip_spaces(s, i + 3);
  if (s.substr(i, 2) == "%}") return i + 2;
  return std::string_view::npos;
}

// The text before a tag, stripped as jinja2's OptionalLStrip rule does.
void Lexer::emit_data(std::string_view text, char sign, bool is_variable, std::size_t at) {
  if (sign == '-') {
    text = rstrip(text);
  } else if (sign != '+' && !is_variable) {
    const std::size_t newline = text.rfind('\n');
    const std::size_t l_pos = newline == std::string_view::npos ? 0 : newline + 1;
    if ((l_pos > 0 || line_starting_) && all_spaces(text.substr(l_pos))) text = text.substr(0, l_pos);
  }
  if (!text.empty()) push(Token::Type::data, std::string(text), at);
}

std::vector<Token> Lexer::run() {
  std::size_t pos = 0;
  while (pos < s_.size()) {
    std::size_t tag = s_.find('{', pos);
    while (tag != std::string::npos &&
           !(tag + 1 < s_.size() && (s_[tag + 1] == '{' || s_[tag + 1] == '%' || s_[tag + 1] == '#'))) {
      tag = s_.find('{', tag + 1);
    }
    if (tag == std::string::npos) {
      push(Token::Type::data, s_.substr(pos), pos);
      break;
    }
    const char kind = s_[tag + 1];
    const char sign = tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+') ? s_[tag + 2] : 0;
    const std::string_view text = std::string_view(s_).substr(pos, tag - pos);
    emit_data(text, sign, kind == '{', pos);
    std::size_t body = tag + 2 + (sign != 0 ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      pos = lex_comment(body);
    } else if (kind == '%' && raw_begin_end(tag) != std::string::npos) {
      pos = lex_raw(tag, raw_begin_end(tag));
    } else {
      pos = lex_tag(body, kind == '%');
    }
  }
  Token eof;
  eof.type = Token::Type::end_of_input;
  eof.line = line_at(s_.size());
  tokens_.push_back(eof);
  return std::move(tokens_);
}

std::size_t Lexer::lex_comment(std::size_t pos) {
  for (std::size_t q = pos; q < s_.size(); ++q) {
    std::size_t end = std::string::npos;
    if (s_.compare(q, 3, "+#}") == 0)
      end = q + 3;
    else if (s_.compare(q, 3, "-#}") == 0)
      end = skip_spaces(s_, q + 3);
    else if (s_.compare(q, 2, "#}") == 0)
      end = q + 2 + (s_.compare(q + 2, 1, "\n") == 0 ? 1 : 0);
    if (end != std::string::npos) {
      line_starting_ = end > 0 && s_[end - 1] == '\n';
      return end;
    }
  }
  error(line_at(pos), "Missing end of comment tag");
}

std::size_t Lexer::lex_raw(std::size_t tag, std::size_t body) {
  for (std::size_t q = body; q < s_.size(); ++q) {
    if (s_.compare(q, 2, "{%") != 0) continue;
    std::size_t i = q + 2;
    const char sign = i < s_.size() && (s_[i] == '-' || s_[i] == '+') ? s_[i] : 0;
    i = skip_spaces(s_, i + (sign != 0 ? 1 : 0));
    if (s_.compare(i, 6, "endraw") != 0) continue;
    const std::size_t end = block_end_at(skip_spaces(s_, i + 6));
    if (end == std::string::npos) continue;
    line_starting_ = false;
    emit_data(std::string_view(s_).substr(body, q - body), sign, false, body);
    line_starting_ = s_[end - 1] == '\n';
    return end;
  }
  error(line_at(tag), "Missing end of raw directive");
}

std::size_t Lexer::lex_tag(std::size_t pos, bool block) {
  const std::size_t begin = pos;
  push(block ? Token::Type::block_begin : Token::Type::variable_begin, {}, pos);
  std::vector<char> balance;
  while (true) {
    if (pos >= s_.size())
      error(line_at(begin),
            block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
    if (balance.empty()) {
      std::size_t end = std::string::npos;
      if (block) {
        end = block_end_at(pos);
      } else if (s_.compare(pos, 3, "-}}") == 0) {
        end = skip_spaces(s_, pos + 3);
      } else if (s_.compare(pos, 2, "}}") == 0) {
        end = pos + 2;
      }
      if (end != std::string::npos) {
        push(block ? Token::Type::block_end : Token::Type::variable_end, {}, pos);
        line_starting_ = s_[end - 1] == '\n';
        return end;
      }
    }
    if (const std::size_t next = skip_spaces(s_, pos); next != pos) {
      pos = next;
      continue;
    }
    const char c = s_[pos];
    if (is_digit(c)) {
      pos = lex_number(pos);
    } else if (is_name_start(c)) {
      std::size_t e = pos;
      while (e < s_.size() && is_name_char(s_[e])) ++e;
      push(Token::Type::name, s_.substr(pos, e - pos), pos);
      pos = e;
    } else if (c == '\'' || c == '"') {
      pos = lex_string(pos);
    } else {
      static constexpr std::array<std::string_view, 4> kTwo = {"//", "**", "==", "!="};
      static constexpr std::array<std::string_view, 2> kTwoMore = {">=", "<="};
      std::size_t n = 0;
      for (auto op : kTwo) n = n == 0 && s_.compare(pos, 2, op) == 0 ? 2 : n;
      for (auto op : kTwoMore) n = n == 0 && s_.compare(pos, 2, op) == 0 ? 2 : n;
      if (n == 0 && std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) n = 1;
      if (n == 0) error(line_at(pos), fmt::format("unexpected char '{}'", c));
      if (c == '(' || c == '[' || c == '{') {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (n == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) error(line_at(pos), fmt::format("unexpected '{}'", c));
        if (balance.back() != c) error(line_at(pos), fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
        balance.pop_back();
      }
      push(Token::Type::op, s_.substr(pos, n), pos);
      pos += n;
    }
  }
}

std::size_t Lexer::lex_number(std::size_t pos) {
  auto digits = [&](std::size_t i) {  // (\d+_)*\d+ : the end, or i when none
    std::size_t e = i;
    while (e < s_.size() && is_digit(s_[e])) {
      ++e;
      if (e + 1 < s_.size() && s_[e] == '_' && is_digit(s_[e + 1])) ++e;
    }
    return e;
  };
  if (s_[pos] == '0' && pos + 2 < s_.size()) {  // 0x1F, 0o17, 0b101 (with '_' between digits)
    const char kind = static_cast<char>(s_[pos + 1] | 0x20);
    const int base = kind == 'x' ? 16 : kind == 'o' ? 8 : kind == 'b' ? 2 : 0;
    auto digit = [&](char c) {
      const int d = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : 99;
      return d < base ? d : -1;
    };
    if (base != 0) {
      std::size_t e = pos + 2;
      std::int64_t v = 0;
      int count = 0;
      while (e < s_.size() && (digit(s_[e]) >= 0 || (s_[e] == '_' && e + 1 < s_.size() && digit(s_[e + 1]) >= 0))) {
        if (s_[e] != '_') {
          if (v > (std::int64_t{1} << 58)) error(line_at(pos), "integer literal too large");
          v = v * base + digit(s_[e]);
          ++count;
        }
        ++e;
      }
      if (count > 0) {
        Token t;
        t.type = Token::Type::integer;
        t.integer = v;
        t.line = line_at(pos);
        tokens_.push_back(std::move(t));
        return e;
      }
    }
  }
  const bool after_dot = pos > 0 && s_[pos - 1] == '.';
  const std::size_t int_end = digits(pos);
  std::size_t end = int_end;
  if (!after_dot) {
    std::size_t e = end;
    if (e + 1 < s_.size() && s_[e] == '.' && is_digit(s_[e + 1])) e = digits(e + 1);
    std::size_t exp_end = std::string::npos;
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      std::size_t k = e + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && is_digit(s_[k])) exp_end = digits(k);
    }
    if (exp_end != std::string::npos)
      end = exp_end;
    else if (e != int_end)
      end = e;
  }
  std::string text = s_.substr(pos, end - pos);
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  Token t;
  t.line = line_at(pos);
  if (end != int_end) {
    t.type = Token::Type::floating;
    t.floating = std::strtod(text.c_str(), nullptr);
  } else {
    // Python integer literals: a leading zero only in "0", "00", ...
    if (text.size() > 1 && text[0] == '0' && text.find_first_not_of('0') != std::string::npos) {
      std::size_t zeros = 1;
      while (zeros < text.size() && text[zeros] == '0') ++zeros;
      end = pos + zeros;  // jinja2 lexes "0" then the rest as another integer (a syntax error later)
      text = text.substr(0, zeros);
    }
    if (text.size() > 18) error(t.line, "integer literal too large");
    t.type = Token::Type::integer;
    t.integer = std::stoll(text);
  }
  tokens_.push_back(std::move(t));
  return end;
}

std::size_t Lexer::lex_string(std::size_t pos) {
  const char quote = s_[pos];
  std::size_t i = pos + 1;
  std::string out;
  auto hex = [&](std::size_t at, int n, std::uint32_t& v) {
    v = 0;
    for (int k = 0; k < n; ++k) {
      const char h = at + k < s_.size() ? s_[at + static_cast<std::size_t>(k)] : 0;
      const int d = is_digit(h)              ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return true;
  };
  while (true) {
    if (i >= s_.size()) error(line_at(pos), "unexpected end of string literal");
    const char c = s_[i];
    if (c == quote) break;
    if (c != '\\') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 >= s_.size()) error(line_at(pos), "unexpected end of string literal");
    const char e = s_[i + 1];
    i += 2;
    switch (e) {
      case '\n': break;  // a line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x':
      case 'u':
      case 'U': {
        const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        std::uint32_t v = 0;
        if (!hex(i, n, v) || v > 0x10FFFF) error(line_at(pos), "truncated \\xXX / \\uXXXX escape in a string literal");
        append_utf8(out, v);
        i += static_cast<std::size_t>(n);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          std::uint32_t v = static_cast<std::uint32_t>(e - '0');
          for (int k = 0; k < 2 && i < s_.size() && s_[i] >= '0' && s_[i] <= '7'; ++k)
            v = v * 8 + static_cast<std::uint32_t>(s_[i++] - '0');
          append_utf8(out, v);
        } else if (e == 'N') {
          error(line_at(pos), "\\N{...} escapes are not supported");
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  push(Token::Type::string, std::move(out), pos);
  return i + 1;
}

}  // namespace

std::vector<Token> lex(std::string_view source) {
  // As jinja2: every line break becomes "\n", and one trailing newline is dropped.
  std::string s;
  s.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return Lexer(std::move(s)).run();
}

}  // namespace ember::jinja
