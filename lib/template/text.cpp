#include "template/text.hpp"

#include "util/check.hpp"
#include "util/utf8.hpp"

namespace ember::jinja {
namespace {

std::uint32_t decode(std::string_view c) {
  const auto b = static_cast<unsigned char>(c[0]);
  if (c.size() == 1) return b;
  std::uint32_t cp = c.size() == 2 ? (b & 0x1F) : c.size() == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(c[k]) & 0x3F);
  return cp;
}

bool is_lower_cp(std::uint32_t cp) { return (cp >= 'a' && cp <= 'z') || (cp >= 0xDF && cp <= 0xFF && cp != 0xF7); }
bool is_upper_cp(std::uint32_t cp) { return (cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7); }
bool is_cased(std::uint32_t cp) { return is_lower_cp(cp) || is_upper_cp(cp); }

// Not a code point: upper_cp's answer for 'ß', which upper-cases to two letters.
constexpr std::uint32_t kSharpSUpper = 0xFFFFFFFF;

std::uint32_t upper_cp(std::uint32_t cp) {
  if (cp >= 'a' && cp <= 'z') return cp - 32;
  if (cp == 0xDF) return kSharpSUpper;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 32;
  if (cp == 0xFF) return 0x178;
  return cp;
}

std::uint32_t lower_cp(std::uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  return cp;
}

// Maps every code point through `f`, keeping ill-formed bytes as they are.
template <class F>
std::string map_chars(std::string_view s, F f) {
  std::string out;
  std::size_t index = 0;
  for (std::string_view c : utf8_chars(s)) {
    if (c.size() == 1 && static_cast<unsigned char>(c[0]) >= 0x80) {
      out += c;
    } else {
      const std::uint32_t cp = decode(c);
      const std::uint32_t mapped = f(cp, index);
      if (mapped == kSharpSUpper) {
        out += "SS";  // 'ß'.upper(): Python's full case mapping
      } else {
        append_utf8(out, mapped);
      }
    }
    ++index;
  }
  return out;
}

bool is_line_break(std::uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029;
}

}  // namespace

std::string to_upper(std::string_view s) {
  return map_chars(s, [](std::uint32_t cp, std::size_t) { return upper_cp(cp); });
}

std::string to_lower(std::string_view s) {
  return map_chars(s, [](std::uint32_t cp, std::size_t) { return lower_cp(cp); });
}

std::string python_capitalize(std::string_view s) {
  return map_chars(s, [](std::uint32_t cp, std::size_t i) { return i == 0 ? upper_cp(cp) : lower_cp(cp); });
}

std::string python_title(std::string_view s) {
  bool previous_cased = false;
  return map_chars(s, [&](std::uint32_t cp, std::size_t) {
    const std::uint32_t out = previous_cased ? lower_cp(cp) : upper_cp(cp);
    previous_cased = is_cased(cp);
    return out;
  });
}

// jinja2's do_title: words begin after runs of '-', whitespace, '(', '{', '[', '<'.
std::string jinja_title(std::string_view s) {
  bool word_start = true;
  return map_chars(s, [&](std::uint32_t cp, std::size_t) {
    const bool boundary = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || is_python_space(cp);
    const std::uint32_t out = boundary ? cp : word_start ? upper_cp(cp) : lower_cp(cp);
    word_start = boundary;
    return out;
  });
}

std::vector<std::string> python_split(std::string_view s, const std::string* sep, std::int64_t maxsplit,
                                      bool from_right) {
  std::vector<std::string> out;
  if (sep != nullptr) {
    if (sep->empty()) fail(ErrorCode::invalid_argument, "empty separator");
    std::vector<std::string_view> parts;
    std::string_view rest = s;
    while (maxsplit < 0 || static_cast<std::int64_t>(parts.size()) < maxsplit) {
      const std::size_t at = from_right ? rest.rfind(*sep) : rest.find(*sep);
      if (at == std::string_view::npos) break;
      if (from_right) {
        parts.push_back(rest.substr(at + sep->size()));
        rest = rest.substr(0, at);
      } else {
        parts.push_back(rest.substr(0, at));
        rest = rest.substr(at + sep->size());
      }
    }
    parts.push_back(rest);
    if (from_right) std::reverse(parts.begin(), parts.end());
    for (auto p : parts) out.emplace_back(p);
    return out;
  }
  // Runs of whitespace separate; none at the ends.
  std::vector<std::string_view> chars = utf8_chars(s);
  auto space = [&](std::size_t i) {
    return !(chars[i].size() == 1 && static_cast<unsigned char>(chars[i][0]) >= 0x80) &&
           is_python_space(decode(chars[i]));
  };
  if (!from_right) {
    std::size_t i = 0;
    while (true) {
      while (i < chars.size() && space(i)) ++i;
      if (i == chars.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
        std::string tail;
        for (std::size_t k = i; k < chars.size(); ++k) tail += chars[k];
        // Python keeps the tail's trailing whitespace only when maxsplit stopped the split.
        out.push_back(tail);
        break;
      }
      std::string word;
      while (i < chars.size() && !space(i)) word += chars[i++];
      out.push_back(word);
    }
    return out;
  }
  std::size_t i = chars.size();
  while (true) {
    while (i > 0 && space(i - 1)) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) == maxsplit) {
      std::string head;
      for (std::size_t k = 0; k < i; ++k) head += chars[k];
      out.push_back(head);
      break;
    }
    std::size_t e = i;
    while (i > 0 && !space(i - 1)) --i;
    std::string word;
    for (std::size_t k = i; k < e; ++k) word += chars[k];
    out.push_back(word);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  std::string line;
  const std::vector<std::string_view> chars = utf8_chars(s);
  for (std::size_t i = 0; i < chars.size(); ++i) {
    const std::string_view c = chars[i];
    const bool ill_formed = c.size() == 1 && static_cast<unsigned char>(c[0]) >= 0x80;
    if (!ill_formed && is_line_break(decode(c))) {
      out.push_back(line);
      line.clear();
      if (c == "\r" && i + 1 < chars.size() && chars[i + 1] == "\n") ++i;
    } else {
      line += c;
    }
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

std::string python_replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count,
                           Budget& budget) {
  std::string out;
  std::int64_t done = 0;
  if (old.empty()) {
    for (std::string_view c : utf8_chars(s)) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      out += c;
      budget.check_size(out.size());
    }
    if (count < 0 || done < count) out += replacement;
    budget.check_size(out.size());
    return out;
  }
  std::size_t pos = 0;
  while (count < 0 || done < count) {
    const std::size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(replacement);
    budget.check_size(out.size());
    pos = at + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  budget.check_size(out.size());
  return out;
}

std::size_t count_substr(std::string_view s, std::string_view sub) {
  if (sub.empty()) return utf8_length(s) + 1;
  std::size_t n = 0;
  for (std::size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

bool python_is(std::string_view s, std::string_view which) {
  const std::vector<std::string_view> chars = utf8_chars(s);
  if (chars.empty()) return false;
  bool any_cased = false;
  for (std::string_view c : chars) {
    const std::uint32_t cp = decode(c);
    const bool digit = cp >= '0' && cp <= '9';
    const bool alpha = is_cased(cp);
    if (which == "isdigit" && !digit) return false;
    if (which == "isalpha" && !alpha) return false;
    if (which == "isalnum" && !alpha && !digit) return false;
    if (which == "isspace" && !is_python_space(cp)) return false;
    if (which == "isupper" && is_lower_cp(cp)) return false;
    if (which == "islower" && is_upper_cp(cp)) return false;
    any_cased = any_cased || alpha;
  }
  return (which == "isupper" || which == "islower") ? any_cased : true;
}

// printf-style `%` on a string: %s, %r, %d, %i, %f and %% (no widths or flags).
std::string percent_format(std::string_view format, const Value& args, Budget& budget) {
  const Array items = args.is_tuple() ? args.as_array() : Array{args};
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (++i >= format.size()) fail(ErrorCode::invalid_argument, "incomplete format");
    const char spec = format[i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (next >= items.size()) fail(ErrorCode::invalid_argument, "not enough arguments for format string");
    const Value& v = items[next++];
    if (spec == 's') {
      out += to_str(v, budget);
    } else if (spec == 'r') {
      out += to_repr(v, budget);
    } else if ((spec == 'd' || spec == 'i') && v.is_number()) {
      out += std::to_string(v.is_float() ? static_cast<std::int64_t>(v.as_double()) : v.as_int());
    } else if (spec == 'f' && v.is_number()) {
      out += fmt::format("{:.6f}", v.as_double());
    } else {
      fail(ErrorCode::invalid_argument, "unsupported format character '{}'", spec);
    }
    budget.check_size(out.size());
  }
  if (next < items.size()) fail(ErrorCode::invalid_argument, "not all arguments converted during string formatting");
  return out;
}

}  // namespace ember::jinja
