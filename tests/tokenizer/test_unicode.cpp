#include "tokenizer/unicode.hpp"

#include <doctest/doctest.h>

using namespace ember::tokenizer;
using C = CodepointClass;

TEST_CASE("code point classes follow the Unicode categories and White_Space") {
  CHECK(codepoint_class('a') == C::letter);
  CHECK(codepoint_class(U'日') == C::letter);
  CHECK(codepoint_class('7') == C::number);
  CHECK(codepoint_class(U'²') == C::number);  // No
  CHECK(codepoint_class(U'Ⅻ') == C::number);  // Nl
  CHECK(codepoint_class('.') == C::punctuation);
  CHECK(codepoint_class('$') == C::symbol);
  CHECK(codepoint_class(U'😀') == C::symbol);
  CHECK(codepoint_class(0x0301) == C::mark);
  CHECK(codepoint_class(' ') == (C::separator | C::whitespace));
  CHECK(codepoint_class('\n') == (C::control | C::whitespace));
  CHECK(codepoint_class(0x3000) == (C::separator | C::whitespace));
  CHECK(codepoint_class(0x1C) == C::control);  // not White_Space, unlike Python's isspace()
  CHECK(codepoint_class(0x0378) == C::undefined);
  CHECK(codepoint_class(0x110000) == C::undefined);
}

TEST_CASE("lenient UTF-8 decoding matches llama.cpp: one U+FFFD per undecodable byte") {
  CHECK(decode_utf8("a\xC3\xA9") == std::vector<std::uint32_t>{'a', 0xE9});
  CHECK(decode_utf8("\xFF\xC3") == std::vector<std::uint32_t>{0xFFFD, 0xFFFD});
  CHECK(decode_utf8("\xE2\x82") == std::vector<std::uint32_t>{0xFFFD, 0xFFFD});
  CHECK(decode_utf8("\xC0\x80") == std::vector<std::uint32_t>{0});           // overlong, accepted
  CHECK(decode_utf8("\xED\xA0\x80") == std::vector<std::uint32_t>{0xD800});  // surrogate, accepted
  CHECK(decode_utf8("\xF0\x9F\x98\x80") == std::vector<std::uint32_t>{0x1F600});
}

TEST_CASE("strict UTF-8 helpers for output text") {
  CHECK(complete_utf8_prefix("ab\xF0\x9F\x98") == 2);
  CHECK(complete_utf8_prefix("ab\xF0\x9F\x98\x80") == 6);
  CHECK(complete_utf8_prefix("\xFF"
                             "a") == 2);  // ill-formed bytes count as complete
  CHECK(sanitize_utf8("a\xFF"
                      "b") ==
        "a\xEF\xBF\xBD"
        "b");
  CHECK(sanitize_utf8("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(sanitize_utf8("\xE4\xBD") == "\xEF\xBF\xBD");
  std::string s;
  append_utf8(s, 0x1F600);
  append_utf8(s, 0x110000);
  CHECK(s == "\xF0\x9F\x98\x80\xEF\xBF\xBD");
}
