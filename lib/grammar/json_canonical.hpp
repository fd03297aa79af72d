// JSON equality as JSON Schema defines it (uniqueItems, enum, const): a canonical text per value,
// and whether a text cut short could still become a given value.
//
// Equal values have equal canonical texts: object members sorted by name, strings decoded and
// re-escaped one way (so "a" and "\u0061" meet), numbers by mathematical value (1, 1.0, 10e-1
// and 0.1e1 are one number; -0 is 0), no whitespace.
//
// Thread-safety: pure functions.
#pragma once

#include "grammar/json_value.hpp"

#include <string>
#include <string_view>

namespace ember::grammar {

// The canonical text of `v` (see above).
std::string canonical_json(const JsonValue& v);

// A JSON number's text as sign, significant digits and exponent ("-125e-1" for -12.50); "0" for
// every zero. `text` is a valid JSON number.
std::string canonical_number(std::string_view text);

// Whether some JSON text that begins with `prefix` (a prefix of a JSON value, whitespace
// allowed) can equal `value`. False only when provably not; a prefix ending inside a number or
// an escape answers conservatively (true when the type fits).
bool may_become(std::string_view prefix, const JsonValue& value);

}  // namespace ember::grammar
