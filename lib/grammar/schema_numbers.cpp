#include "grammar/schema_numbers.hpp"

#include "grammar/schema_regex.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace ember::grammar {
namespace {

std::string join(const std::vector<std::string>& alts) {
  std::string out;
  for (std::size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out;
}

// Integers in [lo, hi] written without leading zeros, for digit strings of one length n.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  const std::size_t n = lo.size();
  if (n == 0) return "";
  if (lo == hi) return gbnf_literal(lo);
  const auto all = [](const std::string& s, char c) {
    return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
  };
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  const auto digits = [](std::size_t k) {
    return k == 0 ? std::string() : k == 1 ? std::string(" [0-9]") : fmt::format(" [0-9]{{{}}}", k);
  };
  if (lo[0] == hi[0]) return "\"" + std::string(1, lo[0]) + "\" (" + same_length_range(lo_rest, hi_rest) + ")";
  std::vector<std::string> alts;
  char first_full = lo[0], last_full = hi[0];
  if (!all(lo_rest, '0')) {
    alts.push_back("\"" + std::string(1, lo[0]) + "\" (" + same_length_range(lo_rest, std::string(n - 1, '9')) + ")");
    ++first_full;
  }
  if (!all(hi_rest, '9')) --last_full;
  if (first_full <= last_full) alts.push_back(fmt::format("[{}-{}]{}", first_full, last_full, digits(n - 1)));
  if (!all(hi_rest, '9'))
    alts.push_back("\"" + std::string(1, hi[0]) + "\" (" + same_length_range(std::string(n - 1, '0'), hi_rest) + ")");
  return join(alts);
}

std::string strip_trailing_zeros(std::string s) {
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

// A fraction bound: the digits after the point (no trailing zeros) and whether it is exclusive.
struct FracBound {
  std::string digits;
  bool exclusive = false;
};

// Digit strings F (at most n digits) with 0.F within the bounds: whether F may be empty (no
// fraction written) and a GBNF expression for the non-empty ones (nullopt: none).
struct Frac {
  bool empty_ok = false;
  std::optional<std::string> nonempty;
};

Frac fraction_between(std::optional<FracBound> lo, std::optional<FracBound> hi, int n) {
  if (lo && lo->digits.empty() && !lo->exclusive) lo.reset();  // >= 0 says nothing
  Frac out;
  out.empty_ok = !lo && !(hi && hi->digits.empty() && hi->exclusive);
  if (n == 0) return out;
  if (!lo && !hi) {
    out.nonempty = n == 1 ? std::string("[0-9]") : fmt::format("[0-9]{{1,{}}}", n);
    return out;
  }
  // The first digit c decides the bounds on the rest; runs of digits with equal outcomes share
  // one alternative.
  struct Outcome {
    bool skip;
    std::optional<FracBound> lo, hi;
  };
  const auto outcome = [&](char c) {
    Outcome o{false, std::nullopt, std::nullopt};
    if (lo) {
      const char lc = lo->digits.empty() ? '0' : lo->digits[0];
      if (c < lc)
        o.skip = true;
      else if (c == lc)
        o.lo = FracBound{lo->digits.empty() ? "" : strip_trailing_zeros(lo->digits.substr(1)), lo->exclusive};
    }
    if (hi) {
      const char hc = hi->digits.empty() ? '0' : hi->digits[0];
      if (c > hc)
        o.skip = true;
      else if (c == hc)
        o.hi = FracBound{hi->digits.empty() ? "" : strip_trailing_zeros(hi->digits.substr(1)), hi->exclusive};
    }
    return o;
  };
  const auto same = [](const Outcome& a, const Outcome& b) {
    const auto eq = [](const std::optional<FracBound>& x, const std::optional<FracBound>& y) {
      return x.has_value() == y.has_value() && (!x || (x->digits == y->digits && x->exclusive == y->exclusive));
    };
    return a.skip == b.skip && eq(a.lo, b.lo) && eq(a.hi, b.hi);
  };
  std::vector<std::string> alts;
  for (char c = '0'; c <= '9';) {
    const Outcome o = outcome(c);
    char last = c;
    while (last < '9' && same(outcome(static_cast<char>(last + 1)), o)) ++last;
    if (!o.skip) {
      const Frac rest = fraction_between(o.lo, o.hi, n - 1);
      const std::string digit = c == last ? fmt::format("\"{}\"", c) : fmt::format("[{}-{}]", c, last);
      if (rest.nonempty)
        alts.push_back(digit + (rest.empty_ok ? " (" + *rest.nonempty + ")?" : " (" + *rest.nonempty + ")"));
      else if (rest.empty_ok)
        alts.push_back(digit);
    }
    c = static_cast<char>(last + 1);
  }
  if (!alts.empty()) out.nonempty = "(" + join(alts) + ")";
  return out;
}

std::uint64_t whole_of(const Decimal& d) { return std::stoull(d.whole); }

// Non-negative numbers within the bounds (lo absent: from 0 inclusive).
std::optional<std::string> nonnegative_range(const std::optional<Bound>& lo, const std::optional<Bound>& hi,
                                             int max_fraction) {
  const std::uint64_t wlo = lo ? whole_of(lo->value) : 0;
  // whi is the upper bound's whole part where there is one (bounded). A std::optional here drew
  // GCC 12's false -Wmaybe-uninitialized.
  const bool bounded = hi.has_value();
  const std::uint64_t whi = bounded ? whole_of(hi->value) : 0;
  const auto frac_lo = [&]() -> std::optional<FracBound> {
    if (!lo) return std::nullopt;
    return FracBound{lo->value.fraction, lo->exclusive};
  };
  const auto frac_hi = [&]() -> std::optional<FracBound> {
    if (!hi) return std::nullopt;
    return FracBound{hi->value.fraction, hi->exclusive};
  };
  std::vector<std::string> alts;
  const auto add = [&](const std::string& whole, const Frac& f) {
    if (f.nonempty)
      alts.push_back(whole + (f.empty_ok ? " (\".\" " + *f.nonempty + ")?" : " \".\" " + *f.nonempty));
    else if (f.empty_ok)
      alts.push_back(whole);
  };
  if (bounded && whi < wlo) return std::nullopt;
  if (bounded && whi == wlo) {
    add(gbnf_literal(std::to_string(wlo)), fraction_between(frac_lo(), frac_hi(), max_fraction));
  } else {
    add(gbnf_literal(std::to_string(wlo)), fraction_between(frac_lo(), std::nullopt, max_fraction));
    if (!bounded || whi > wlo + 1)
      add(natural_range(wlo + 1, bounded ? std::optional(whi - 1) : std::nullopt),
          fraction_between(std::nullopt, std::nullopt, max_fraction));
    if (bounded) add(gbnf_literal(std::to_string(whi)), fraction_between(std::nullopt, frac_hi(), max_fraction));
  }
  if (alts.empty()) return std::nullopt;
  return "(" + join(alts) + ")";
}

Bound absolute(Bound b) {
  b.value.negative = false;
  return b;
}

}  // namespace

std::optional<Decimal> parse_decimal(std::string_view text) {
  std::size_t i = 0;
  Decimal d;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  std::string digits;
  long point = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) digits += text[i++], ++point;
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));) digits += text[i++];
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool neg = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    long e = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
      if ((e = e * 10 + (text[i] - '0')) > 100) return std::nullopt;
    point += neg ? -e : e;
  }
  if (i != text.size() || digits.empty()) return std::nullopt;
  if (point < 0) digits.insert(0, static_cast<std::size_t>(-point), '0'), point = 0;
  if (point > static_cast<long>(digits.size())) digits.append(static_cast<std::size_t>(point) - digits.size(), '0');
  d.whole = digits.substr(0, static_cast<std::size_t>(point));
  d.fraction = strip_trailing_zeros(digits.substr(static_cast<std::size_t>(point)));
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size()));
  if (d.whole.empty()) d.whole = "0";
  if (d.whole.size() > 18 || d.fraction.size() > 32) return std::nullopt;
  if (d.is_zero()) d.negative = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  if (a.whole.size() != b.whole.size()) return a.whole.size() < b.whole.size() ? -sign : sign;
  if (const int c = a.whole.compare(b.whole); c != 0) return c < 0 ? -sign : sign;
  const std::size_t n = std::max(a.fraction.size(), b.fraction.size());
  for (std::size_t i = 0; i < n; ++i) {
    const char x = i < a.fraction.size() ? a.fraction[i] : '0', y = i < b.fraction.size() ? b.fraction[i] : '0';
    if (x != y) return x < y ? -sign : sign;
  }
  return 0;
}

std::string natural_range(std::uint64_t lo, std::optional<std::uint64_t> hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo);
  const std::size_t max_len = hi ? std::to_string(*hi).size() : 19;
  const auto power_of_ten = [](std::size_t digits) {  // "10...0"
    std::string s(digits, '0');
    s[0] = '1';
    return s;
  };
  for (std::size_t len = a.size(); len <= max_len; ++len) {
    const std::string first = len == a.size() ? a : power_of_ten(len);
    std::string last = std::string(len, '9');
    if (hi && len == max_len) last = std::to_string(*hi);
    if (len == 1 && first == "0" && last == "0") {
      alts.push_back("\"0\"");
      continue;
    }
    alts.push_back(fmt::format("({})", same_length_range(first, last)));  // not "(" + ...: GCC 12's false -Wrestrict
  }
  return "(" + join(alts) + ")";
}

std::string int_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  std::vector<std::string> alts;
  // Negative part: -m for m in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const std::uint64_t from = hi && *hi < 0 ? static_cast<std::uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<std::uint64_t> to;
    if (lo) to = static_cast<std::uint64_t>(-(*lo + 1)) + 1;
    alts.push_back("\"-\" " + natural_range(from, to));
  }
  if (!hi || *hi >= 0) {
    const std::uint64_t from = lo && *lo > 0 ? static_cast<std::uint64_t>(*lo) : 0;
    std::optional<std::uint64_t> to;
    if (hi) to = static_cast<std::uint64_t>(*hi);
    alts.push_back(natural_range(from, to));
  }
  return "(" + join(alts) + ")";
}

std::optional<std::string> decimal_range(const std::optional<Bound>& lo, const std::optional<Bound>& hi,
                                         int max_fraction) {
  if (lo && hi) {
    const int c = compare(lo->value, hi->value);
    if (c > 0 || (c == 0 && (lo->exclusive || hi->exclusive))) return std::nullopt;
  }
  std::vector<std::string> alts;
  // x >= 0 (x = 0 is written "0" only: "-0" is left out).
  if (!hi || !hi->value.negative) {
    std::optional<Bound> from;
    if (lo && !lo->value.negative) from = lo;
    if (auto r = nonnegative_range(from, hi, max_fraction)) alts.push_back(*r);
  }
  // x < 0: x = -y with y > 0.
  if (!lo || lo->value.negative) {
    Bound from{Decimal{}, true};  // y > 0
    if (hi && hi->value.negative) from = absolute(*hi);
    std::optional<Bound> to;
    if (lo) to = absolute(*lo);
    if (auto r = nonnegative_range(from, to, max_fraction)) alts.push_back("\"-\" " + *r);
  }
  if (alts.empty()) return std::nullopt;
  return "(" + join(alts) + ")";
}

}  // namespace ember::grammar
