// Jinja2's expression grammar (jinja2/parser.py, parse_tuple down to parse_primary): the
// precedence of or, and, not, comparisons, + -, ~, * / // %, **, unary signs, and the postfix
// subscripts, calls, filters and tests.
#include "template/parser_impl.hpp"

namespace ember::jinja::detail {

// ---- expressions ----

NodePtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                            bool explicit_parentheses, bool simplified) {
  std::vector<NodePtr> items;
  bool is_tuple = false;
  const int line = cur().line;
  while (true) {
    if (!items.empty()) expect_op(",");
    bool at_end = cur().type == Type::variable_end || cur().type == Type::block_end || is_op(")");
    for (auto e : extra_end) at_end = at_end || is_name(e);
    if (at_end) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return items[0];
    if (!explicit_parentheses) error(fmt::format("expected an expression, got {}", describe()));
  }
  auto n = make(Kind::tuple);
  n->line = line;
  n->children = std::move(items);
  return n;
}

NodePtr Parser::parse_expression(bool with_condexpr) {
  Deeper d(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

NodePtr Parser::parse_condexpr() {
  NodePtr expr = parse_or();
  while (skip_name("if")) {
    NodePtr cond = parse_or();
    NodePtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    auto n = make(Kind::condexpr);
    n->children = {expr, cond, otherwise};
    expr = n;
  }
  return expr;
}

NodePtr Parser::parse_or() {
  NodePtr left = parse_and();
  while (skip_name("or")) left = binary("or", left, parse_and());
  return left;
}

NodePtr Parser::parse_and() {
  NodePtr left = parse_not();
  while (skip_name("and")) left = binary("and", left, parse_not());
  return left;
}

NodePtr Parser::parse_not() {
  if (is_name("not")) {
    Deeper d(*this);
    auto n = make(Kind::unary);
    next();
    n->name = "not";
    n->children.push_back(parse_not());
    return n;
  }
  return parse_compare();
}

NodePtr Parser::parse_compare() {
  NodePtr first = parse_math1();
  MutableNode cmp;
  while (true) {
    std::string op;
    if (cur().type == Type::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                   cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = cur().text;
      next();
    } else if (is_name("in")) {
      op = "in";
      next();
    } else if (is_name("not") && peek().type == Type::name && peek().text == "in") {
      op = "notin";
      next();
      next();
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Kind::compare);
      cmp->children.push_back(first);
    }
    cmp->names.push_back(op);
    cmp->children.push_back(parse_math1());
  }
  return cmp ? NodePtr(cmp) : first;
}

NodePtr Parser::parse_math1() {
  NodePtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = cur().text;
    next();
    left = binary(op, left, parse_concat());
  }
  return left;
}

NodePtr Parser::parse_concat() {
  NodePtr left = parse_math2();
  while (skip_op("~")) left = binary("~", left, parse_math2());
  return left;
}

NodePtr Parser::parse_math2() {
  NodePtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = cur().text;
    next();
    left = binary(op, left, parse_pow());
  }
  return left;
}

NodePtr Parser::parse_pow() {
  NodePtr left = parse_unary();
  while (skip_op("**")) left = binary("**", left, parse_unary());
  return left;
}

NodePtr Parser::parse_unary(bool with_filter) {
  Deeper d(*this);
  NodePtr node;
  if (is_op("-") || is_op("+")) {
    auto n = make(Kind::unary);
    n->name = cur().text;
    next();
    n->children.push_back(parse_unary(false));
    node = n;
  } else {
    node = parse_primary();
  }
  node = parse_postfix(node);
  if (with_filter) node = parse_filter_expr(node);
  return node;
}

NodePtr Parser::parse_primary() {
  const Token& tok = cur();
  auto n = make(Kind::literal);
  switch (tok.type) {
    case Type::name:
      if (tok.text == "true" || tok.text == "True")
        n->value = Value(true);
      else if (tok.text == "false" || tok.text == "False")
        n->value = Value(false);
      else if (tok.text == "none" || tok.text == "None")
        n->value = Value::none();
      else {
        n->kind = Kind::name;
        n->name = tok.text;
      }
      next();
      return n;
    case Type::string: {
      std::string s;
      while (cur().type == Type::string) {  // adjacent literals concatenate, as in Python
        s += cur().text;
        next();
      }
      n->value = Value(std::move(s));
      return n;
    }
    case Type::integer:
      n->value = Value(tok.integer);
      next();
      return n;
    case Type::floating:
      n->value = Value(tok.floating);
      next();
      return n;
    default: break;
  }
  if (skip_op("(")) {
    NodePtr inner = parse_tuple(true, {}, true);
    expect_op(")");
    return inner;
  }
  if (is_op("[") || is_op("{")) {
    const bool is_list = is_op("[");
    auto c = make(is_list ? Kind::list : Kind::dict);
    next();
    const char* close = is_list ? "]" : "}";
    while (!is_op(close)) {
      if (!c->children.empty()) expect_op(",");
      if (is_op(close)) break;
      c->children.push_back(parse_expression());
      if (!is_list) {
        expect_op(":");
        c->children.push_back(parse_expression());
      }
    }
    expect_op(close);
    return c;
  }
  error(fmt::format("unexpected {}", describe()));
}

NodePtr Parser::parse_postfix(NodePtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(node);
    } else if (is_op("(")) {
      auto c = make(Kind::call);
      c->children.push_back(node);
      parse_call_args(c);
      node = c;
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_filter_expr(NodePtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(node, false);
    } else if (is_name("is")) {
      node = parse_test(node);
    } else if (is_op("(")) {
      auto c = make(Kind::call);
      c->children.push_back(node);
      parse_call_args(c);
      node = c;
    } else {
      return node;
    }
  }
}

NodePtr Parser::parse_subscript(NodePtr node) {
  Deeper d(*this);
  if (skip_op(".")) {
    if (cur().type == Type::name) {
      auto n = make(Kind::getattr);
      n->name = cur().text;
      n->children.push_back(node);
      next();
      return n;
    }
    if (cur().type != Type::integer) error(fmt::format("expected name or number, got {}", describe()));
    auto key = make(Kind::literal);
    key->value = Value(cur().integer);
    next();
    auto n = make(Kind::getitem);
    n->children = {node, key};
    return n;
  }
  expect_op("[");
  std::vector<NodePtr> args;
  while (!is_op("]")) {
    if (!args.empty()) {
      expect_op(",");
      if (is_op("]")) break;
    }
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.empty()) error("expected a subscript");
  NodePtr key = args[0];
  if (args.size() > 1) {
    // x[a, b:c] would make a tuple holding a slice, which has no value of its own.
    for (const NodePtr& a : args)
      if (a->kind == Kind::slice) error("a slice inside a subscript of several items is not supported");
    auto t = make(Kind::tuple);
    t->children = args;
    key = t;
  }
  if (key->kind == Kind::slice) {  // a slice node carries its operand in children[0]
    auto s = std::make_shared<Node>(*key);
    s->children[0] = node;
    return s;
  }
  auto n = make(Kind::getitem);
  n->children = {node, key};
  return n;
}

NodePtr Parser::parse_subscribed() {
  std::vector<NodePtr> parts;  // start, stop, step
  if (is_op(":")) {
    next();
    parts.push_back(nullptr);
  } else {
    NodePtr first = parse_expression();
    if (!is_op(":")) return first;
    next();
    parts.push_back(first);
  }
  if (is_op(":")) {
    parts.push_back(nullptr);
  } else if (!is_op("]") && !is_op(",")) {
    parts.push_back(parse_expression());
  } else {
    parts.push_back(nullptr);
  }
  if (skip_op(":")) {
    parts.push_back(!is_op("]") && !is_op(",") ? parse_expression() : nullptr);
  } else {
    parts.push_back(nullptr);
  }
  auto s = make(Kind::slice);
  s->children = {nullptr, parts[0], parts[1], parts[2]};
  return s;
}

void Parser::parse_call_args(MutableNode& node) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
    if (cur().type == Type::name && peek().type == Type::op && peek().text == "=") {
      node->names.push_back(cur().text);
      next();
      next();
      node->children.push_back(parse_expression());
    } else {
      if (!node->names.empty()) error("positional argument follows keyword argument");
      node->children.push_back(parse_expression());
    }
  }
  expect_op(")");
}

NodePtr Parser::parse_filter(NodePtr operand, bool start_inline) {
  if (!start_inline) expect_op("|");
  auto n = make(Kind::filter);
  n->name = expect_name();
  while (is_op(".") && peek().type == Type::name) {
    next();
    n->name += "." + expect_name();
  }
  n->children.push_back(operand);
  if (is_op("(")) parse_call_args(n);
  return n;
}

NodePtr Parser::parse_test(NodePtr operand) {
  next();  // "is"
  auto n = make(Kind::test);
  n->flag = skip_name("not");
  n->name = expect_name();
  while (is_op(".") && peek().type == Type::name) {
    next();
    n->name += "." + expect_name();
  }
  n->children.push_back(operand);
  if (is_op("(")) {
    parse_call_args(n);
  } else if ((cur().type == Type::name || cur().type == Type::string || cur().type == Type::integer ||
              cur().type == Type::floating || is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error("You cannot chain multiple tests with is");
    n->children.push_back(parse_postfix(parse_primary()));
  }
  return n;
}

}  // namespace ember::jinja::detail
