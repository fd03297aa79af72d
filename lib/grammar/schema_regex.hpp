// JSON Schema `pattern` -> GBNF over the JSON-encoded string's content.
//
// The supported regex subset: literal characters, escapes \d \D \w \W \s \S \. \\ \/ \- and
// the other punctuation escapes, \n \r \t, \uXXXX; `.`; classes [a-z0-9_] and [^...] (with the
// escapes above inside); groups (...) and (?:...); alternation |; quantifiers * + ? {m} {m,}
// {m,n} (a trailing lazy ? is accepted: it changes which match a search finds, not the
// language); ^ at the start and $ at the end. Refused by name: backreferences, lookaround,
// \b \B, named groups, flags, anchors elsewhere.
//
// The generated text is the whole string matching the pattern (a validator searches for the
// pattern anywhere in the string, so this is a subset of what it accepts, whether anchored or
// not). Characters JSON must escape are generated in their escaped form; \s and negated
// classes generate only what JSON can write without a \u escape.
#pragma once

#include <string>
#include <string_view>

namespace ember::grammar {

// A GBNF expression (no rule definitions) for the content between a JSON string's quotes.
// Throws Error(invalid_argument) naming the construct and its offset in the pattern.
std::string pattern_to_gbnf(std::string_view pattern);

// `s` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view s);

}  // namespace ember::grammar
