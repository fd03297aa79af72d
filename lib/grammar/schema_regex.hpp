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

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

// A GBNF expression (no rule definitions) for the content between a JSON string's quotes.
// Throws Error(invalid_argument) naming the construct and its offset in the pattern.
std::string pattern_to_gbnf(std::string_view pattern);

// The same content restricted to min..max code points (max nullopt: no upper bound) as the
// pattern's position automaton (Glushkov) times a length counter: a right-linear grammar whose
// rule i is named `base`-i, rule 0 the content. Empty when no string of those lengths matches;
// nullopt when it would take more than `max_alternatives` positions or alternatives. Throws as
// pattern_to_gbnf does.
std::optional<std::vector<std::string>> pattern_length_rules(std::string_view pattern, int min, std::optional<int> max,
                                                             const std::string& base, std::size_t max_alternatives);

// Whether a validator finds `pattern` in `text` (ECMA-262 search, as JSON Schema's `pattern` and
// `patternProperties` do): for a property name known when the schema is compiled. nullopt when
// it cannot tell (a non-ASCII text or pattern, or a pattern std::regex refuses).
std::optional<bool> pattern_matches(std::string_view pattern, std::string_view text);

// `s` as a GBNF string literal, quotes included.
std::string gbnf_literal(std::string_view s);

}  // namespace ember::grammar
