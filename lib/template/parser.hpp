// Jinja2's grammar (jinja2/parser.py) over the lexer's tokens, for the statements chat templates
// use: for (with `if` filter, else, recursive), if/elif/else, set (names, tuples, namespace
// attributes, blocks), macro, call, filter, break/continue and transformers' generation block.
#pragma once

#include "template/ast.hpp"
#include "template/lexer.hpp"

#include <vector>

namespace ember::jinja {

// Throws Error(invalid_argument) "template line N: ..." for a syntax error, an unknown or
// unclosed statement, or nesting deeper than `max_depth`.
NodePtr parse(const std::vector<Token>& tokens, int max_depth = 200);

}  // namespace ember::jinja
