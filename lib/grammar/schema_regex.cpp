#include "grammar/schema_regex.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <regex>
#include <unordered_map>
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

// A parsed pattern. Anchors are kept only as empty sequences (they match where they may appear).
struct Node {
  enum class Kind { chars, seq, alt, repeat };
  explicit Node(Kind k = Kind::seq) : kind(k) {}
  Kind kind;
  Ranges set;              // chars: one code point of these
  std::vector<Node> kids;  // seq, alt: the parts; repeat: the one repeated
  int min = 0, max = -1;   // repeat: the counts (-1: no upper bound)
  std::string quant;       // repeat: the quantifier as GBNF writes it
};

// The pattern's GBNF expression (no rules).
std::string emit(const Node& n) {
  switch (n.kind) {
    case Node::Kind::chars: return json_chars(n.set);
    case Node::Kind::repeat: return "(" + emit(n.kids[0]) + ")" + n.quant;
    case Node::Kind::alt: {
      if (n.kids.size() == 1) return emit(n.kids[0]);
      std::string out = "(";
      for (std::size_t k = 0; k < n.kids.size(); ++k) out += (k ? " | " : "") + emit(n.kids[k]);
      return out + ")";
    }
    case Node::Kind::seq: break;
  }
  std::string out;
  for (const Node& k : n.kids) {
    if (k.kind == Node::Kind::seq && k.kids.empty()) continue;  // an anchor
    out += (out.empty() ? "" : " ") + emit(k);
  }
  return out.empty() ? "\"\"" : "(" + out + ")";
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

  Node run() {
    Node out = alternation();
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

  Node alternation() {
    Node alt{Node::Kind::alt};
    alt.kids.push_back(sequence());
    while (!end() && peek() == '|') {
      ++i_;
      alt.kids.push_back(sequence());
    }
    return alt;
  }

  Node sequence() {
    Node seq{Node::Kind::seq};
    while (!end() && peek() != '|' && peek() != ')') seq.kids.push_back(quantified());
    return seq;
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

  Node quantified() {
    const std::size_t start = i_;
    Node a = atom();
    if (end()) return a;
    Node rep{Node::Kind::repeat};
    std::string& q = rep.quant;
    const std::uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q = std::string(1, static_cast<char>(c));
      rep.min = c == '+' ? 1 : 0;
      rep.max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++i_;
      const int m = number();
      rep.min = rep.max = m;
      q = "{" + std::to_string(m);
      if (peek() == ',') {
        ++i_;
        q += ",";
        rep.max = -1;
        if (peek() != '}') {
          const int n = number();
          if (n < m) error("{m,n} with n < m");
          q += std::to_string(n);
          rep.max = n;
        }
      }
      if (peek() != '}') error("a malformed {m,n}");
      ++i_;
      q += "}";
    } else {
      return a;
    }
    if (a.kind == Node::Kind::seq && a.kids.empty()) {
      i_ = start;
      error("a quantifier on an anchor");
    }
    if (!end() && peek() == '?') ++i_;  // lazy: the same language
    if (!end() && (peek() == '+' || peek() == '*' || peek() == '{')) error("a possessive or doubled quantifier");
    rep.kids.push_back(std::move(a));
    return rep;
  }

  static Node chars(Ranges set) {
    Node n{Node::Kind::chars};
    n.set = std::move(set);
    return n;
  }

  Node atom() {
    const std::uint32_t c = peek();
    switch (c) {
      case '(': {
        ++i_;
        if (peek() == '?') {
          if (peek(1) != ':') error("lookaround or a named group");
          i_ += 2;
        }
        ++depth_;
        Node inner = alternation();
        --depth_;
        if (peek() != ')') error("an unclosed '('");
        ++i_;
        return inner;
      }
      case '[': return chars(parse_class());
      case '.': ++i_; return chars(subtract({{0, kMaxCp}}, '\n', '\n'));
      // Anchors at the ends of the pattern, or of a top-level alternative (^a$|^b$): the
      // generated string is the whole match either way.
      case '^':
        if (i_ != 0 && !(depth_ == 0 && cps_[i_ - 1] == '|')) error("'^' other than at the start");
        ++i_;
        return Node{};
      case '$':
        if (i_ + 1 != cps_.size() && !(depth_ == 0 && cps_[i_ + 1] == '|')) error("'$' other than at the end");
        ++i_;
        return Node{};
      case '*':
      case '+':
      case '?':
      case '{': error("a quantifier with nothing to repeat");
      case '\\': return chars(escape(false));
      default: ++i_; return chars({{c, c}});
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

// Glushkov's position automaton of a pattern: every code-point class the pattern writes is a
// position (a counted repeat's body once per count), a state is "just read position p", and
// reading position q from there is allowed when q may follow p. No empty moves, so a product
// with a length counter is a right-linear grammar directly.
class PositionAutomaton {
 public:
  PositionAutomaton(const Node& root, std::size_t max_positions) : max_positions_(max_positions) {
    const Frag f = build(root);
    first = f.first;
    nullable = f.nullable;
    is_last.assign(sets.size(), false);
    for (int p : f.last) is_last[static_cast<std::size_t>(p)] = true;
    for (auto& next : follow) {
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
    }
    std::sort(first.begin(), first.end());
    first.erase(std::unique(first.begin(), first.end()), first.end());
  }
  bool too_large = false;
  std::vector<Ranges> sets;              // per position
  std::vector<std::vector<int>> follow;  // per position
  std::vector<int> first;                // positions that may start a match
  std::vector<bool> is_last;             // positions that may end one
  bool nullable = false;                 // the empty string matches

 private:
  struct Frag {
    bool nullable = true;
    std::vector<int> first, last;
  };
  Frag concat(Frag a, const Frag& b) {
    for (int p : a.last) {
      auto& f = follow[static_cast<std::size_t>(p)];
      f.insert(f.end(), b.first.begin(), b.first.end());
    }
    if (a.nullable) a.first.insert(a.first.end(), b.first.begin(), b.first.end());
    std::vector<int> last = b.last;
    if (b.nullable) last.insert(last.end(), a.last.begin(), a.last.end());
    return {a.nullable && b.nullable, std::move(a.first), std::move(last)};
  }
  Frag build(const Node& n) {
    if (too_large) return {};
    switch (n.kind) {
      case Node::Kind::chars: {
        if (sets.size() >= max_positions_) {
          too_large = true;
          return {};
        }
        const int p = static_cast<int>(sets.size());
        sets.push_back(n.set);
        follow.emplace_back();
        return {false, {p}, {p}};
      }
      case Node::Kind::alt: {
        Frag out{false, {}, {}};
        for (const Node& k : n.kids) {
          Frag f = build(k);
          out.nullable = out.nullable || f.nullable;
          out.first.insert(out.first.end(), f.first.begin(), f.first.end());
          out.last.insert(out.last.end(), f.last.begin(), f.last.end());
        }
        return out;
      }
      case Node::Kind::seq: {
        Frag out;
        for (const Node& k : n.kids) out = concat(std::move(out), build(k));
        return out;
      }
      case Node::Kind::repeat: break;
    }
    Frag out;  // min copies, then max - min optional ones, or a last copy that loops
    for (int i = 0; i < n.min; ++i) out = concat(std::move(out), build(n.kids[0]));
    if (n.max < 0) {
      Frag loop = build(n.kids[0]);
      for (int p : loop.last) {
        auto& f = follow[static_cast<std::size_t>(p)];
        f.insert(f.end(), loop.first.begin(), loop.first.end());
      }
      loop.nullable = true;
      out = concat(std::move(out), loop);
    }
    if (n.max <= n.min) return out;
    // The optional copies nested, (X(X(X)?)?)?: copy i is followed by copy i + 1 or by what
    // follows the whole, so the moves grow with the copies, not with their square (as X?X?X?
    // would). A body that matches the empty string (rare) is written as X?X?X? instead.
    std::vector<Frag> copies;
    for (int i = n.min; i < n.max && !too_large; ++i) copies.push_back(build(n.kids[0]));
    if (too_large || copies.empty()) return {};
    Frag chain;
    if (copies[0].nullable) {
      for (Frag& f : copies) chain = concat(std::move(chain), f);
    } else {
      chain.first = copies[0].first;
      for (std::size_t i = 0; i < copies.size(); ++i) {
        if (i + 1 < copies.size())
          for (int p : copies[i].last) {
            auto& f = follow[static_cast<std::size_t>(p)];
            f.insert(f.end(), copies[i + 1].first.begin(), copies[i + 1].first.end());
          }
        chain.last.insert(chain.last.end(), copies[i].last.begin(), copies[i].last.end());
      }
    }
    chain.nullable = true;
    return concat(std::move(out), chain);
  }
  std::size_t max_positions_;
};

}  // namespace

std::optional<std::vector<std::string>> pattern_length_rules(std::string_view pattern, int min, std::optional<int> max,
                                                             const std::string& base, std::size_t max_alternatives) {
  const PositionAutomaton a(RegexParser(pattern).run(), max_alternatives);
  if (a.too_large) return std::nullopt;
  // A state is (s, k): s = 0 before the first code point, p + 1 after position p; k code points
  // read, counted to max, or without a max to min (then k = min means "min or more").
  const int top = max ? *max : min;
  const std::size_t width = static_cast<std::size_t>(top) + 1;
  const auto id = [&](std::size_t s, int k) { return s * width + static_cast<std::size_t>(k); };
  const auto next_of = [&](std::size_t s) -> const std::vector<int>& { return s == 0 ? a.first : a.follow[s - 1]; };
  const auto step = [&](int k) { return max ? (k < *max ? k + 1 : -1) : std::min(k + 1, min); };
  const auto accepting = [&](std::size_t s, int k) { return k >= min && (s == 0 ? a.nullable : a.is_last[s - 1]); };
  // Forward from (0, 0), then back from the accepting states: only states on a path are written.
  // States are numbered as found (at most one more than the edges, which are bounded).
  std::vector<std::size_t> order{id(0, 0)};
  std::unordered_map<std::size_t, std::size_t> index{{order[0], 0}};
  std::vector<std::vector<std::size_t>> from(1);
  std::size_t edges = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t s = order[i] / width;
    const int k = static_cast<int>(order[i] % width), k2 = step(k);
    if (k2 < 0) continue;
    for (int p : next_of(s)) {
      if (++edges > max_alternatives) return std::nullopt;
      const auto [it, added] = index.emplace(id(static_cast<std::size_t>(p) + 1, k2), order.size());
      if (added) {
        order.push_back(it->first);
        from.emplace_back();
      }
      from[it->second].push_back(i);
    }
  }
  std::vector<char> alive(order.size(), 0);
  std::vector<std::size_t> back;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (accepting(order[i] / width, static_cast<int>(order[i] % width))) {
      alive[i] = 1;
      back.push_back(i);
    }
  for (std::size_t j = 0; j < back.size(); ++j)
    for (std::size_t u : from[back[j]])
      if (!alive[u]) {
        alive[u] = 1;
        back.push_back(u);
      }
  if (!alive[0]) return std::vector<std::string>{};  // no string of these lengths matches
  // Rules: the alive states in the order found (the first is (0, 0)), then a class per position.
  std::vector<std::size_t> rule_of(order.size(), 0);
  std::size_t rules = 0;
  for (std::size_t i = 0; i < order.size(); ++i)
    if (alive[i]) rule_of[i] = rules++;
  const auto name = [&](std::size_t rule) { return base + "-" + std::to_string(rule); };
  std::vector<std::string> bodies(rules);
  std::vector<std::size_t> class_rule(a.sets.size(), 0);  // 0: none yet (rule 0 is never a class)
  const std::vector<int> none;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (!alive[i]) continue;
    const std::size_t s = order[i] / width;
    const int k = static_cast<int>(order[i] % width), k2 = step(k);
    std::string body;
    for (int p : k2 < 0 ? none : next_of(s)) {
      const std::size_t t = index.at(id(static_cast<std::size_t>(p) + 1, k2));
      if (!alive[t]) continue;
      std::size_t& c = class_rule[static_cast<std::size_t>(p)];
      if (c == 0) {
        c = bodies.size();
        bodies.push_back(json_chars(a.sets[static_cast<std::size_t>(p)]));
      }
      body += (body.empty() ? "" : " | ") + name(c) + " " + name(rule_of[t]);
    }
    if (accepting(s, k)) body += body.empty() ? "\"\"" : " | \"\"";
    bodies[rule_of[i]] = std::move(body);
  }
  return bodies;
}

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

std::string pattern_to_gbnf(std::string_view pattern) { return emit(RegexParser(pattern).run()); }

std::optional<bool> pattern_matches(std::string_view pattern, std::string_view text) {
  // std::regex works on bytes: with ASCII on both sides its ECMAScript grammar is the validators'.
  const auto ascii = [](std::string_view v) {
    return std::all_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  };
  if (!ascii(pattern) || !ascii(text) || pattern.size() > 1000) return std::nullopt;
  try {
    const std::regex re(pattern.begin(), pattern.end(), std::regex::ECMAScript);
    return std::regex_search(text.begin(), text.end(), re);
  } catch (const std::regex_error&) {
    return std::nullopt;
  }
}

}  // namespace ember::grammar
