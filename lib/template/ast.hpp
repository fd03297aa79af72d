// The syntax tree of a Jinja2 template: one node type whose `kind` says how its fields are
// used (listed per kind below), so the parser and the evaluator share a single small shape.
#pragma once

#include "template/value.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ember::jinja {

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Node {
  enum class Kind : std::uint8_t {
    // Expressions.
    literal,   // value
    name,      // name
    list,      // children: items
    tuple,     // children: items
    dict,      // children: key, value, key, value, ...
    getattr,   // children[0]: object; name: attribute
    getitem,   // children: object, key
    slice,     // children: object, start, stop, step (each may be null)
    call,      // children[0]: callee, then arguments; names: keyword names of the last arguments
    filter,    // children[0]: operand (null inside a filter block/set block chain), arguments; name
    test,      // as filter; name: the test
    unary,     // name: "not", "-", "+"; children[0]
    binary,    // name: the operator ("and", "or", "+", "~", ...); children: left, right
    compare,   // children[0], then one operand per operator in names ("==", "in", "notin", ...)
    condexpr,  // children: then, condition, else (null: undefined)
    // Statements.
    block,         // children: statements
    text,          // value: the template text
    print,         // children[0]
    if_,           // children: condition, block, condition, block, ..., [else block]
    for_,          // names: targets; children: iterable, body, else (null), filter (null); flag: recursive
    set,           // names: targets; children[0]: value
    set_attr,      // name: namespace variable; names[0]: attribute; children[0]: value
    set_block,     // names[0]: target; children: body, filter chain (null)
    macro,         // name; names: parameters; children: body, then one default per parameter (null: none)
    call_block,    // children: call expression, body, then defaults; names: the caller's parameters
    filter_block,  // children: body, filter chain
    break_,
    continue_,
  };

  Kind kind = Kind::literal;
  int line = 0;
  bool flag = false;  // test: negated; for_: recursive
  std::string name;
  std::vector<std::string> names;
  std::vector<NodePtr> children;
  Value value;
};

}  // namespace ember::jinja
