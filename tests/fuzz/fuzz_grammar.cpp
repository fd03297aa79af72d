// Fuzz target: the GBNF parser, the JSON Schema translator (and its JSON and regex readers) and
// the byte matcher on arbitrary input.
//
// Input: the first byte picks the mode (even: GBNF, odd: JSON Schema), then the grammar or
// schema text up to a NUL byte, then bytes fed to the matcher. Checked: only
// Error(invalid_argument) comes out of parsing; a schema's generated GBNF always parses (the
// translator never writes a grammar its own parser refuses); the matcher's incremental and
// whole-text answers agree, and a dead state stays dead.
#include "fuzz_support.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"

#include <ember/ember.hpp>

#include <memory>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool schema = (data[0] & 1) != 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view input = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);

  std::string gbnf;
  if (schema) {
    try {
      gbnf = ember::grammar::json_schema_to_gbnf(text);
    } catch (const ember::Error& e) {
      FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
      return 0;
    }
  } else {
    gbnf = std::string(text);
  }
  std::shared_ptr<const ember::grammar::Grammar> g;
  try {
    g = std::make_shared<const ember::grammar::Grammar>(ember::grammar::parse_gbnf(gbnf));
  } catch (const ember::Error& e) {
    FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
    FUZZ_CHECK(!schema);  // generated grammars always parse
    return 0;
  }
  try {
    ember::grammar::Matcher m(g);
    auto s = m.start();
    for (std::size_t i = 0; i < input.size() && i < 4096; ++i) {
      const auto next = m.advance(s, static_cast<std::uint8_t>(input[i]));
      if (s == ember::grammar::Matcher::kDead) FUZZ_CHECK(next == ember::grammar::Matcher::kDead);
      s = next;
    }
    ember::grammar::Matcher fresh(g);
    const std::string_view fed = input.substr(0, 4096);
    FUZZ_CHECK(fresh.matches(fed) == m.accepting(s));
  } catch (const ember::Error& e) {
    // An ambiguous grammar whose parses multiply is refused while matching.
    FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
  }
  return 0;
}
