// GBNF text -> Grammar (see grammar.hpp). The parser follows llama.cpp's grammar-parser: a rule
// ends at the end of its line unless the line ends in `|` or `::=`, or the newline is inside
// parentheses; a postfix operator applies to the element before it (a whole literal, a class,
// a group or a rule name).
#include "grammar/grammar.hpp"

#include "util/check.hpp"
#include "util/utf8.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace ember::grammar {
namespace {

constexpr ErrorCode kBad = ErrorCode::invalid_argument;

// One symbol of a sequence before lowering: a byte set or a rule.
struct Sym {
  bool is_rule = false;
  std::int32_t id = 0;
};
using Seq = std::vector<Sym>;
using Alts = std::vector<Seq>;

struct Range {
  std::uint32_t lo, hi;
};

// Splits a code point range into ranges whose UTF-8 encodings are a product of byte ranges
// (the utf8-ranges construction used by RE2 and Rust's regex): each output is one sequence of
// 1-4 byte ranges.
void utf8_sequences(std::uint32_t lo, std::uint32_t hi, std::vector<std::vector<Range>>& out) {
  if (lo > hi) return;
  // Split where the encoded length changes, and around the surrogates (never encoded).
  static constexpr std::uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF};
  for (std::uint32_t b : kBounds)
    if (lo <= b && hi > b) {
      utf8_sequences(lo, b, out);
      utf8_sequences(b + 1, hi, out);
      return;
    }
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  if (hi < 0x80) {
    out.push_back({{lo, hi}});
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const std::uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  std::vector<Range> seq;
  for (std::size_t k = 0; k < a.size(); ++k)
    seq.push_back({static_cast<std::uint8_t>(a[k]), static_cast<std::uint8_t>(b[k])});
  out.push_back(std::move(seq));
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Grammar run() {
    skip_space(true);
    while (pos_ < src_.size()) {
      parse_rule();
      skip_space(true);
    }
    return lower();
  }

 private:
  // ---- text ----
  [[noreturn]] void error_at(std::size_t at, const std::string& what) const {
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n')
        ++line, col = 1;
      else
        ++col;
    }
    fail(kBad, "grammar: {} at line {}, column {} (offset {})", what, line, col, at);
  }
  bool eof() const { return pos_ >= src_.size(); }
  char peek(std::size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  void skip_space(bool newline_ok) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else if ((c == '\n' || c == '\r') && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const std::size_t start = pos_;
    while (!eof() && name_char(peek())) ++pos_;
    if (pos_ == start) error_at(start, "expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  std::uint32_t parse_hex(int digits) {
    std::uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      if (d < 0) error_at(pos_, fmt::format("expected {} hex digits", digits));
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  std::uint32_t parse_char() {
    const std::size_t start = pos_;
    if (eof()) error_at(pos_, "unexpected end of the grammar");
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^': return static_cast<unsigned char>(e);
        case 'x': return parse_hex(2);
        case 'u': return check_cp(parse_hex(4), start);
        case 'U': return check_cp(parse_hex(8), start);
        default: error_at(start, fmt::format("unknown escape '\\{}'", e == '\0' ? ' ' : e));
      }
    }
    // Decode one UTF-8 sequence of the grammar text itself.
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<std::size_t>(len) > src_.size())
      error_at(start, "invalid UTF-8 in the grammar text");
    std::uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(src_[pos_ + static_cast<std::size_t>(i)]);
      if ((b & 0xC0) != 0x80) error_at(start, "invalid UTF-8 in the grammar text");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += static_cast<std::size_t>(len);
    return check_cp(cp, start);
  }
  std::uint32_t check_cp(std::uint32_t cp, std::size_t at) const {
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      error_at(at, fmt::format("U+{:04X} is not a Unicode scalar value", cp));
    return cp;
  }

  // ---- building ----
  std::int32_t byte_set(const ByteSet& s) {
    const auto [it, inserted] = set_ids_.try_emplace(s, static_cast<std::int32_t>(sets_.size()));
    if (inserted) sets_.push_back(s);
    return it->second;
  }
  Sym byte_sym(std::uint8_t lo, std::uint8_t hi) {
    ByteSet s;
    for (unsigned b = lo; b <= hi; ++b) s.set(b);
    return {false, byte_set(s)};
  }
  std::int32_t rule_id(const std::string& name, std::size_t used_at) {
    const auto [it, inserted] = rule_ids_.try_emplace(name, static_cast<std::int32_t>(names_.size()));
    if (inserted) {
      names_.push_back(name);
      defs_.emplace_back();
      first_use_.push_back(used_at);
    }
    return it->second;
  }
  std::int32_t new_rule(const std::string& base, Alts alts) {
    std::string name;
    do name = fmt::format("{}@{}", base, ++helper_count_);
    while (rule_ids_.count(name));
    const std::int32_t id = rule_id(name, pos_);
    define(id, std::move(alts));
    return id;
  }
  void define(std::int32_t id, Alts alts) {
    for (const Seq& s : alts) element_count_ += s.size() + 1;
    if (element_count_ > kMaxGrammarElements)
      error_at(pos_, fmt::format("the grammar is larger than {} elements", kMaxGrammarElements));
    defs_[static_cast<std::size_t>(id)] = std::move(alts);
  }

  // ---- syntax ----
  void parse_rule() {
    const std::size_t start = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") error_at(pos_, "expected '::='");
    pos_ += 3;
    skip_space(true);
    current_rule_ = name;
    Alts alts = parse_alternatives(false);
    const std::int32_t id = rule_id(name, start);
    if (defs_[static_cast<std::size_t>(id)]) error_at(start, fmt::format("rule '{}' is defined twice", name));
    define(id, std::move(alts));
    skip_space(false);
    if (!eof() && peek() != '\n' && peek() != '\r') error_at(pos_, fmt::format("unexpected '{}'", peek()));
  }

  Alts parse_alternatives(bool nested) {
    Alts alts;
    alts.push_back(parse_sequence(nested));
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Seq parse_sequence(bool nested) {
    Seq seq;
    std::size_t last_start = 0;  // where the element a postfix operator applies to begins
    bool have_last = false;
    while (true) {
      skip_space(nested);
      if (eof()) break;
      const char c = peek();
      const std::size_t at = pos_;
      if (c == '"') {
        ++pos_;
        last_start = seq.size();
        std::string bytes;
        while (peek() != '"') {
          if (eof()) error_at(at, "unterminated string literal");
          append_utf8(bytes, parse_char());
        }
        ++pos_;
        for (char b : bytes) seq.push_back(byte_sym(static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(b)));
        have_last = true;
      } else if (c == '[') {
        ++pos_;
        last_start = seq.size();
        seq.push_back(parse_class(at));
        have_last = true;
      } else if (c == '.') {
        ++pos_;
        last_start = seq.size();
        seq.push_back(class_sym({{0, 0x10FFFF}}));
        have_last = true;
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        Alts inner = parse_alternatives(true);
        skip_space(true);
        if (peek() != ')') error_at(pos_, "expected ')'");
        ++pos_;
        last_start = seq.size();
        seq.push_back({true, new_rule(current_rule_, std::move(inner))});
        have_last = true;
      } else if (name_char(c)) {
        last_start = seq.size();
        const std::string name = parse_name();
        seq.push_back({true, rule_id(name, at)});
        have_last = true;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (!have_last) error_at(at, fmt::format("'{}' has nothing to repeat", c));
        int min = 0, max = -1;
        ++pos_;
        if (c == '+')
          min = 1;
        else if (c == '?')
          max = 1;
        else if (c == '{')
          parse_bounds(at, min, max);
        Seq item(seq.begin() + static_cast<std::ptrdiff_t>(last_start), seq.end());
        seq.resize(last_start);
        const Seq rep = repeat(item, min, max);
        seq.insert(seq.end(), rep.begin(), rep.end());
        have_last = false;  // x** is an error, as in llama.cpp
      } else if (c == '<') {
        error_at(at, "token references (<...>) are not supported");
      } else {
        break;
      }
    }
    return seq;
  }

  void parse_bounds(std::size_t at, int& min, int& max) {
    const auto number = [&]() {
      skip_space(false);
      if (!(peek() >= '0' && peek() <= '9')) error_at(pos_, "expected a number");
      long v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + (peek() - '0');
        if (v > kMaxRepetition) error_at(at, fmt::format("a repetition count is over {}", kMaxRepetition));
        ++pos_;
      }
      skip_space(false);
      return static_cast<int>(v);
    };
    min = number();
    if (peek() == '}') {
      max = min;
    } else if (peek() == ',') {
      ++pos_;
      skip_space(false);
      if (peek() == '}')
        max = -1;
      else
        max = number();
    } else {
      error_at(pos_, "expected ',' or '}'");
    }
    if (peek() != '}') error_at(pos_, "expected '}'");
    ++pos_;
    if (max >= 0 && max < min) error_at(at, fmt::format("repetition {{{},{}}} has max < min", min, max));
  }

  // x{min,max} (max -1: unbounded) as min copies of x and then helper rules.
  Seq repeat(const Seq& item, int min, int max) {
    Seq out;
    for (int i = 0; i < min; ++i) out.insert(out.end(), item.begin(), item.end());
    if (max < 0) {
      // star ::= item star | ε
      const std::int32_t star = rule_id_reserve();
      Seq again = item;
      again.push_back({true, star});
      define(star, {again, {}});
      out.push_back({true, star});
    } else if (max > min) {
      // opt_k ::= item opt_{k-1} | ε, nested so that at most max - min more copies follow.
      std::optional<std::int32_t> inner;
      for (int k = 0; k < max - min; ++k) {
        Seq s = item;
        if (inner) s.push_back({true, *inner});
        inner = new_rule(current_rule_, {s, {}});
      }
      out.push_back({true, *inner});
    }
    element_count_ += out.size();
    if (element_count_ > kMaxGrammarElements)
      error_at(pos_, fmt::format("the grammar is larger than {} elements", kMaxGrammarElements));
    return out;
  }
  std::int32_t rule_id_reserve() { return new_rule(current_rule_, {}); }

  Sym parse_class(std::size_t at) {
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<Range> ranges;
    while (peek() != ']') {
      if (eof()) error_at(at, "unterminated character class");
      const std::uint32_t lo = parse_char();
      std::uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < src_.size()) {
        ++pos_;
        hi = parse_char();
        if (hi < lo) error_at(at, "a class range is reversed");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
    std::vector<Range> merged;
    for (Range r : ranges) {
      if (!merged.empty() && r.lo <= merged.back().hi + 1)
        merged.back().hi = std::max(merged.back().hi, r.hi);
      else
        merged.push_back(r);
    }
    if (negated) {
      std::vector<Range> complement;
      std::uint32_t next = 0;
      for (Range r : merged) {
        if (r.lo > next) complement.push_back({next, r.lo - 1});
        next = r.hi + 1;
      }
      if (next <= 0x10FFFF) complement.push_back({next, 0x10FFFF});
      merged = std::move(complement);
    }
    // An empty class (such as [^\x00-\U0010FFFF]) is allowed: it matches nothing.
    return class_sym(merged);
  }

  // A set of code point ranges as one byte set (all ASCII) or a helper rule of UTF-8
  // byte-range sequences.
  Sym class_sym(const std::vector<Range>& ranges) {
    std::vector<std::vector<Range>> seqs;
    for (Range r : ranges) utf8_sequences(r.lo, r.hi, seqs);
    ByteSet single;
    Alts alts;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        for (std::uint32_t b = s[0].lo; b <= s[0].hi; ++b) single.set(b);
        continue;
      }
      Seq seq;
      for (Range r : s) seq.push_back(byte_sym(static_cast<std::uint8_t>(r.lo), static_cast<std::uint8_t>(r.hi)));
      alts.push_back(std::move(seq));
    }
    if (alts.empty()) return {false, byte_set(single)};
    if (single.any()) alts.insert(alts.begin(), Seq{{false, byte_set(single)}});
    return {true, new_rule(current_rule_.empty() ? "char" : current_rule_, std::move(alts))};
  }

  // ---- lowering ----
  Grammar lower() {
    Grammar g;
    g.byte_sets = sets_;
    g.rule_names = names_;
    const auto root = rule_ids_.find("root");
    if (root == rule_ids_.end() || !defs_[static_cast<std::size_t>(root->second)])
      fail(kBad, "grammar: there is no 'root' rule");
    for (std::size_t r = 0; r < defs_.size(); ++r)
      if (!defs_[r]) error_at(first_use_[r], fmt::format("undefined rule '{}'", names_[r]));
    g.root = root->second;
    g.rules.resize(defs_.size());
    for (std::size_t r = 0; r < defs_.size(); ++r) {
      for (const Seq& seq : *defs_[r]) {
        g.rules[r].push_back(static_cast<std::int32_t>(g.elements.size()));
        for (Sym s : seq) g.elements.push_back({s.is_rule ? Element::Kind::rule : Element::Kind::bytes, s.id});
        g.elements.push_back({Element::Kind::end, 0});
      }
    }
    check_left_recursion(g);
    return g;
  }

  // A rule reachable from itself without consuming a byte would make a top-down matcher
  // expand forever; such a grammar is refused with the rule's name.
  void check_left_recursion(const Grammar& g) {
    const std::vector<bool> nullable = nullable_rules(g);
    const std::size_t n = g.rules.size();
    std::vector<std::vector<std::int32_t>> left(n);  // rules at a position reachable by ε
    for (std::size_t r = 0; r < n; ++r)
      for (std::int32_t start : g.rules[r])
        for (std::size_t p = static_cast<std::size_t>(start); g.elements[p].kind == Element::Kind::rule; ++p) {
          left[r].push_back(g.elements[p].value);
          if (!nullable[static_cast<std::size_t>(g.elements[p].value)]) break;
        }
    std::vector<std::uint8_t> mark(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<std::int32_t, std::size_t>> stack;
    for (std::size_t s = 0; s < n; ++s) {
      if (mark[s]) continue;
      stack.push_back({static_cast<std::int32_t>(s), 0});
      mark[s] = 1;
      while (!stack.empty()) {
        auto& [r, i] = stack.back();
        const auto& edges = left[static_cast<std::size_t>(r)];
        if (i == edges.size()) {
          mark[static_cast<std::size_t>(r)] = 2;
          stack.pop_back();
          continue;
        }
        const std::int32_t next = edges[i++];
        if (mark[static_cast<std::size_t>(next)] == 1)
          fail(kBad,
               "grammar: rule '{}' is left-recursive (it can reach itself without matching "
               "a byte); write it with repetition instead",
               g.rule_names[static_cast<std::size_t>(next)]);
        if (mark[static_cast<std::size_t>(next)] == 0) {
          mark[static_cast<std::size_t>(next)] = 1;
          stack.push_back({next, 0});
        }
      }
    }
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  std::string current_rule_;
  int helper_count_ = 0;
  std::size_t element_count_ = 0;
  std::vector<ByteSet> sets_;
  std::unordered_map<ByteSet, std::int32_t> set_ids_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::int32_t> rule_ids_;
  std::vector<std::optional<Alts>> defs_;
  std::vector<std::size_t> first_use_;
};

}  // namespace

std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (std::int32_t start : g.rules[r]) {
        std::size_t p = static_cast<std::size_t>(start);
        while (g.elements[p].kind == Element::Kind::rule && nullable[static_cast<std::size_t>(g.elements[p].value)])
          ++p;
        if (g.elements[p].kind == Element::Kind::end) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

Grammar parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace ember::grammar
