// A context-free grammar over bytes, and the parser of llama.cpp's GBNF notation that builds it.
//
// A Grammar is rules of alternatives of sequences of elements; an element is a set of bytes
// (one byte of input) or a reference to a rule. Everything a GBNF text can say is lowered to
// that: string literals become one byte set per byte, character classes (over Unicode code
// points) become alternatives of UTF-8 byte-range sequences, and repetitions (* + ? {m,n})
// become helper rules. Matching is therefore over bytes, which is what tokens are made of: a
// token may end in the middle of a multi-byte character and nothing special is needed.
//
// Every alternative is stored in `elements` and ended by an element of kind `end`; a position
// in `elements` is a point in the grammar (what the matcher's stacks hold).
//
// Thread-safety: a Grammar is an immutable value after parse_gbnf() returns.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : std::uint8_t { end, bytes, rule };
  Kind kind = Kind::end;
  std::int32_t value = 0;  // bytes: index into Grammar::byte_sets; rule: the rule's index
};

struct Grammar {
  std::vector<Element> elements;                 // every alternative, each ended by `end`
  std::vector<std::vector<std::int32_t>> rules;  // rule -> start positions of its alternatives
  std::vector<std::string> rule_names;           // for messages; helper rules are "name@N"
  std::vector<ByteSet> byte_sets;
  std::int32_t root = 0;  // the rule named "root"
};

// Limits on what a grammar text may ask for, so that a hostile or mistaken text fails with an
// error instead of exhausting memory.
inline constexpr std::size_t kMaxGrammarElements = 1u << 20;
inline constexpr int kMaxRepetition = 10000;  // the largest m or n of {m,n}

// Parses GBNF (llama.cpp's notation: `name ::= alternatives`, "literals", [classes], [^negated],
// `.`, ( groups ), * + ? {m} {m,} {m,n}, # comments; the start rule is `root`). Throws
// Error(invalid_argument) naming the line and column of a syntax error, an undefined rule (at
// its first use), a missing root, or a left-recursive rule (which a top-down matcher would
// expand forever; rewrite it with repetition).
Grammar parse_gbnf(std::string_view text);

// True when the rule can match the empty string.
std::vector<bool> nullable_rules(const Grammar& g);

}  // namespace ember::grammar
