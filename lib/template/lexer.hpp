// The Jinja2 lexer as Hugging Face configures it (trim_blocks, lstrip_blocks, no trailing
// newline kept): template text becomes data tokens, and the inside of {{ }} and {% %} becomes
// names, literals and operators. Whitespace control (`-`, `+`) and the two options are applied
// here, on the same rules and in the same order as jinja2/lexer.py, because they decide every
// byte between the tags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

struct Token {
  enum class Type : std::uint8_t {
    data,
    variable_begin,
    variable_end,
    block_begin,
    block_end,
    name,
    string,
    integer,
    floating,
    op,
    end_of_input,
  };
  Type type = Type::end_of_input;
  std::string text;  // data, name, operator, or the unescaped string literal
  std::int64_t integer = 0;
  double floating = 0;
  int line = 1;
};

// Throws Error(invalid_argument) "template line N: ..." for text Jinja2 rejects (an unclosed
// tag or string, an unbalanced bracket, a character no token starts with).
std::vector<Token> lex(std::string_view source);

}  // namespace ember::jinja
