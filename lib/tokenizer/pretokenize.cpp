#include "tokenizer/pretokenize.hpp"

#include "tokenizer/unicode.hpp"
#include "util/check.hpp"

#include <array>
#include <string>

namespace ember::tokenizer {
namespace {

using Class = CodepointClass;
constexpr std::uint32_t kOutOfRange = 0xFFFFFFFF;

// A fragment [begin, end) of the code points with the helpers every splitter needs. Outside the
// fragment a code point reads as kOutOfRange with no class bits, which is how the regexes'
// look-aheads (\s+(?!\S)) see the end of a fragment.
struct Fragment {
  const std::vector<std::uint32_t>& cpts;
  std::size_t begin, end;
  std::vector<std::size_t>& out;
  std::size_t prev_end;

  Fragment(const std::vector<std::uint32_t>& c, std::size_t b, std::size_t e, std::vector<std::size_t>& o)
      : cpts(c), begin(b), end(e), out(o), prev_end(b) {}

  std::uint32_t cp(std::size_t pos) const { return pos >= begin && pos < end ? cpts[pos] : kOutOfRange; }
  std::uint16_t cls(std::size_t pos) const { return pos >= begin && pos < end ? codepoint_class(cpts[pos]) : 0; }
  // Ends the current word at `pos`; returns its length (empty words are not emitted).
  std::size_t cut(std::size_t pos) {
    const std::size_t length = pos - prev_end;
    if (length > 0) out.push_back(length);
    prev_end = pos;
    return length;
  }
};

bool has(std::uint16_t cls, std::uint16_t bits) { return (cls & bits) != 0; }
bool is_word_class(std::uint16_t c) { return has(c, Class::whitespace | Class::letter | Class::number); }
std::uint32_t ascii_lower(std::uint32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp; }

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive for Llama 3 / Qwen2): the length matched at pos.
std::size_t contraction(const Fragment& f, std::size_t pos, bool any_case) {
  if (f.cp(pos) != '\'' || pos + 1 >= f.end) return 0;
  auto at = [&](std::size_t p) { return any_case ? ascii_lower(f.cp(p)) : f.cp(p); };
  const std::uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= f.end) return 0;
  const std::uint32_t b = at(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Whitespace run at pos: \s+(?!\S) leaves the last space for the next word unless the run
// reaches the end of the fragment.
void cut_whitespace_run(Fragment& f, std::size_t& pos) {
  std::size_t n = 0;
  while (has(f.cls(pos + n), Class::whitespace)) ++n;
  if (n > 1 && f.cp(pos + n) != kOutOfRange) {
    pos += n - 1;
  } else if (n > 0) {
    pos += n;
  } else {
    ++pos;  // no alternative matches: the code point is a word by itself
  }
  f.cut(pos);
}

void split_gpt2(Fragment& f) {
  for (std::size_t pos = f.begin; pos < f.end;) {
    if (std::size_t n = contraction(f, pos, false)) {
      pos += f.cut(pos + n);
      continue;
    }
    const std::uint32_t cp = f.cp(pos);
    std::uint16_t c2 = cp == ' ' ? f.cls(pos + 1) : f.cls(pos);  // optional leading space
    if (has(c2, Class::letter) || has(c2, Class::number)) {
      const std::uint16_t bit = has(c2, Class::letter) ? Class::letter : Class::number;
      pos += cp == ' ';
      while (has(f.cls(pos), bit)) ++pos;
      f.cut(pos);
      continue;
    }
    if (!is_word_class(c2) && c2 != 0) {
      pos += cp == ' ';
      while (!is_word_class(c2) && c2 != 0) c2 = f.cls(++pos);
      f.cut(pos);
      continue;
    }
    cut_whitespace_run(f, pos);
  }
}

void split_llama3(Fragment& f, std::size_t max_digits) {
  for (std::size_t pos = f.begin; pos < f.end;) {
    if (std::size_t n = contraction(f, pos, true)) {
      pos += f.cut(pos + n);
      continue;
    }
    const std::uint32_t cp = f.cp(pos);
    const std::uint16_t c = f.cls(pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(cp == '\r' || cp == '\n' || has(c, Class::number)) &&
        (has(c, Class::letter) || has(f.cls(pos + 1), Class::letter))) {
      ++pos;
      while (has(f.cls(pos), Class::letter)) ++pos;
      f.cut(pos);
      continue;
    }
    // \p{N}{1,max_digits}
    if (has(c, Class::number)) {
      std::size_t start = pos;
      while (has(f.cls(pos), Class::number)) {
        if (++pos - start >= max_digits) {
          f.cut(pos);
          start = pos;
        }
      }
      f.cut(pos);
      continue;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*' (llama.cpp tests the class of the current code point here)
    std::uint16_t c2 = cp == ' ' ? f.cls(pos + 1) : c;
    if (!is_word_class(c2) && c != 0) {
      pos += cp == ' ';
      while (!is_word_class(c2) && c2 != 0) c2 = f.cls(++pos);
      while (f.cp(pos) == '\r' || f.cp(pos) == '\n') ++pos;
      f.cut(pos);
      continue;
    }
    // \s*[\r\n]+ : the run up to its last line break
    std::size_t n = 0, last_break = 0;
    while (has(f.cls(pos + n), Class::whitespace)) {
      if (f.cp(pos + n) == '\r' || f.cp(pos + n) == '\n') last_break = pos + n + 1;
      ++n;
    }
    if (last_break > 0) {
      pos = last_break;
      f.cut(pos);
      continue;
    }
    cut_whitespace_run(f, pos);
  }
}

// A regex used with "isolated" behaviour: every match and every gap between matches becomes a
// fragment. `match(f, pos)` is the length of the match starting at pos (0 = none).
template <class Match>
void split_isolated(Fragment& f, Match match) {
  for (std::size_t pos = f.begin; pos < f.end;) {
    if (std::size_t n = match(f, pos)) {
      f.cut(pos);
      pos += n;
      f.cut(pos);
    } else {
      ++pos;
    }
  }
  f.cut(f.end);
}

std::size_t match_number(const Fragment& f, std::size_t pos) { return has(f.cls(pos), Class::number) ? 1 : 0; }
std::size_t match_number_run(const Fragment& f, std::size_t pos) {
  std::size_t n = 0;
  while (has(f.cls(pos + n), Class::number)) ++n;
  return n;
}
std::size_t match_punctuation_run(const Fragment& f, std::size_t pos) {
  auto is_punct = [&](std::size_t p) {
    const std::uint32_t cp = f.cp(p);
    if (cp == kOutOfRange) return false;
    return has(f.cls(p), Class::punctuation) || std::u32string_view(U"$+<=>^~|").find(cp) != std::u32string_view::npos;
  };
  std::size_t n = 0;
  while (is_punct(pos + n)) ++n;
  return n;
}
std::size_t match_ascii_digit_triple(const Fragment& f, std::size_t pos) {
  for (std::size_t k = 0; k < 3; ++k) {
    const std::uint32_t cp = f.cp(pos + k);
    if (cp < '0' || cp > '9') return 0;
  }
  return 3;
}

// Applies one split to every current fragment, producing the next list of fragments.
template <class Split>
std::vector<std::size_t> refine(const std::vector<std::uint32_t>& cpts, const std::vector<std::size_t>& lengths,
                                Split split) {
  std::vector<std::size_t> out;
  out.reserve(lengths.size() + cpts.size() / 4);
  std::size_t start = 0;
  for (std::size_t length : lengths) {
    Fragment f(cpts, start, start + length, out);
    split(f);
    start += length;
  }
  return out;
}

}  // namespace

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    PreTokenizer kind;
  };
  static constexpr std::array<Entry, 16> kNames{{
      {"", PreTokenizer::standard},
      {"default", PreTokenizer::standard},
      {"gpt2", PreTokenizer::gpt2},
      {"gpt-2", PreTokenizer::gpt2},
      {"smollm", PreTokenizer::smollm},
      {"starcoder", PreTokenizer::smollm},
      {"refact", PreTokenizer::smollm},
      {"command-r", PreTokenizer::smollm},
      {"codeshell", PreTokenizer::smollm},
      {"exaone", PreTokenizer::smollm},
      {"llama-bpe", PreTokenizer::llama3},
      {"llama3", PreTokenizer::llama3},
      {"llama-v3", PreTokenizer::llama3},
      {"qwen2", PreTokenizer::qwen2},
      {"deepseek-r1-qwen", PreTokenizer::qwen2},
      {"stablelm2", PreTokenizer::qwen2},
  }};
  for (const Entry& e : kNames) {
    if (e.name == name) return e.kind;
  }
  fail(ErrorCode::unsupported,
       "tokenizer.ggml.pre = '{}' is not supported; ember supports default, gpt2, smollm "
       "(starcoder, refact, command-r, codeshell, exaone), llama-bpe (llama3), qwen2 "
       "(deepseek-r1-qwen, stablelm2)",
       name);
}

std::vector<std::size_t> pre_tokenize(PreTokenizer kind, const std::vector<std::uint32_t>& cpts) {
  std::vector<std::size_t> words;
  if (cpts.empty()) return words;
  words.push_back(cpts.size());
  switch (kind) {
    case PreTokenizer::standard:
      words = refine(cpts, words, [](Fragment& f) { split_isolated(f, match_punctuation_run); });
      words = refine(cpts, words, split_gpt2);
      words = refine(cpts, words, [](Fragment& f) { split_isolated(f, match_number_run); });
      return refine(cpts, words, [](Fragment& f) { split_isolated(f, match_ascii_digit_triple); });
    case PreTokenizer::gpt2: return refine(cpts, words, split_gpt2);
    case PreTokenizer::smollm:
      words = refine(cpts, words, [](Fragment& f) { split_isolated(f, match_number); });
      return refine(cpts, words, split_gpt2);
    case PreTokenizer::llama3: return refine(cpts, words, [](Fragment& f) { split_llama3(f, 3); });
    case PreTokenizer::qwen2: return refine(cpts, words, [](Fragment& f) { split_llama3(f, 1); });
  }
  return words;
}

}  // namespace ember::tokenizer
