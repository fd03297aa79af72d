// Numeric ranges as GBNF: integers in [lo, hi] and decimals in exact ranges (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum with fractional bounds), written out digit by digit so the
// grammar is exact at every bound (0.1 < x <= 2.75 admits 0.10001 and 2.75 but not 0.1 or
// 2.750001). Numbers are written without exponents and without leading zeros, with at most
// 18 integer digits and `max_fraction` fraction digits: narrower than JSON, never looser.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember::grammar {

// A JSON number's exact value as decimal digits (no exponent).
struct Decimal {
  bool negative = false;
  std::string whole = "0";  // no leading zeros ("0" for zero)
  std::string fraction;     // no trailing zeros
  bool is_zero() const { return whole == "0" && fraction.empty(); }
};

// Parses a JSON number text (exponents are applied exactly). nullopt when the value needs more
// than 18 integer digits or 32 fraction digits.
std::optional<Decimal> parse_decimal(std::string_view text);
// -1, 0, 1 as a < b, a == b, a > b.
int compare(const Decimal& a, const Decimal& b);

struct Bound {
  Decimal value;
  bool exclusive = false;
};

// Non-negative integers in [lo, hi]; hi absent: up to 19 digits.
std::string natural_range(std::uint64_t lo, std::optional<std::uint64_t> hi);
// Integers in [lo, hi] (either side open when absent).
std::string int_range(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);
// Numbers (JSON number syntax, no exponent) within the bounds; nullopt when none is.
std::optional<std::string> decimal_range(const std::optional<Bound>& lo, const std::optional<Bound>& hi,
                                         int max_fraction = 16);

}  // namespace ember::grammar
