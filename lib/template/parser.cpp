#include "template/parser.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <initializer_list>

namespace ember::jinja {
namespace {

using Type = Token::Type;
using Kind = Node::Kind;
using MutableNode = std::shared_ptr<Node>;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : t_(tokens), max_depth_(max_depth) {}

  NodePtr parse_template() {
    std::string end;
    NodePtr body = subparse({}, end);
    if (cur().type != Type::end_of_input) error("unexpected end tag");
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[std::min(pos_, t_.size() - 1)]; }
  const Token& peek(std::size_t ahead = 1) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().type == Type::op && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().type == Type::name && cur().text == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(std::string_view what) const {
    fail(ErrorCode::invalid_argument, "template line {}: {}", cur().line, what);
  }
  std::string describe() const {
    switch (cur().type) {
      case Type::end_of_input: return "end of template";
      case Type::block_end: return "end of statement block";
      case Type::variable_end: return "end of print statement";
      case Type::data: return "template data";
      default: return "'" + cur().text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(fmt::format("expected '{}', got {}", op, describe()));
  }
  std::string expect_name() {
    if (cur().type != Type::name) error(fmt::format("expected a name, got {}", describe()));
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Type::block_end) error(fmt::format("expected end of statement block, got {}", describe()));
    next();
  }
  MutableNode make(Kind kind) const {
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->line = cur().line;
    return n;
  }
  // Bounds the recursion of the recursive-descent parser (templates are input).
  struct Deeper {
    explicit Deeper(Parser& p) : p_(p) {
      if (++p_.depth_ > p_.max_depth_) p_.error("the template nests too deeply");
    }
    ~Deeper() { --p_.depth_; }
    Parser& p_;
  };

  // ---- statements ----
  NodePtr subparse(std::initializer_list<std::string_view> end_tags, std::string& which_end);
  NodePtr parse_statement();
  NodePtr parse_for();
  NodePtr parse_if();
  NodePtr parse_set();
  NodePtr parse_macro();
  NodePtr parse_call_block();
  NodePtr parse_filter_block();
  NodePtr body_until(std::initializer_list<std::string_view> end_tags, std::string& which_end);
  void parse_signature(MutableNode& node, std::size_t first_default_slot);
  NodePtr parse_filter_chain();

  // ---- expressions ----
  NodePtr parse_tuple(bool with_condexpr = true, std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parentheses = false, bool simplified = false);
  NodePtr parse_expression(bool with_condexpr = true);
  NodePtr parse_condexpr();
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_compare();
  NodePtr parse_math1();
  NodePtr parse_concat();
  NodePtr parse_math2();
  NodePtr parse_pow();
  NodePtr parse_unary(bool with_filter = true);
  NodePtr parse_primary();
  NodePtr parse_postfix(NodePtr node);
  NodePtr parse_filter_expr(NodePtr node);
  NodePtr parse_subscript(NodePtr node);
  NodePtr parse_subscribed();
  void parse_call_args(MutableNode& node);
  NodePtr parse_filter(NodePtr operand, bool start_inline);
  NodePtr parse_test(NodePtr operand);
  std::vector<std::string> parse_targets(std::initializer_list<std::string_view> extra_end);
  NodePtr binary(std::string op, NodePtr left, NodePtr right) const {
    auto n = make(Kind::binary);
    n->name = std::move(op);
    n->children = {std::move(left), std::move(right)};
    return n;
  }

  const std::vector<Token>& t_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

NodePtr Parser::subparse(std::initializer_list<std::string_view> end_tags, std::string& which_end) {
  Deeper d(*this);
  auto body = make(Kind::block);
  while (cur().type != Type::end_of_input) {
    if (cur().type == Type::data) {
      auto n = make(Kind::text);
      n->value = Value(cur().text);
      body->children.push_back(n);
      next();
    } else if (cur().type == Type::variable_begin) {
      next();
      auto n = make(Kind::print);
      n->children.push_back(parse_tuple());
      if (cur().type != Type::variable_end) error(fmt::format("expected end of print statement, got {}", describe()));
      next();
      body->children.push_back(n);
    } else if (cur().type == Type::block_begin) {
      next();
      if (cur().type == Type::name) {
        for (std::string_view tag : end_tags) {
          if (cur().text == tag) {
            which_end = cur().text;
            next();  // the tag's name; the caller parses the rest of the tag
            return body;
          }
        }
      }
      body->children.push_back(parse_statement());
    } else {
      error(fmt::format("unexpected {}", describe()));
    }
  }
  if (end_tags.size() > 0) {
    error(fmt::format("unexpected end of template; expected '{}'", *end_tags.begin()));
  }
  return body;
}

NodePtr Parser::body_until(std::initializer_list<std::string_view> end_tags, std::string& which_end) {
  return subparse(end_tags, which_end);
}

NodePtr Parser::parse_statement() {
  if (cur().type != Type::name) error("tag name expected");
  const std::string tag = cur().text;
  if (tag == "for") return parse_for();
  if (tag == "if") return parse_if();
  if (tag == "set") return parse_set();
  if (tag == "macro") return parse_macro();
  if (tag == "call") return parse_call_block();
  if (tag == "filter") return parse_filter_block();
  if (tag == "break" || tag == "continue") {
    auto n = make(tag == "break" ? Kind::break_ : Kind::continue_);
    next();
    expect_block_end();
    return n;
  }
  if (tag == "generation") {  // transformers' AssistantTracker: marks text, renders it unchanged
    next();
    expect_block_end();
    std::string end;
    NodePtr body = body_until({"endgeneration"}, end);
    expect_block_end();
    return body;
  }
  error(fmt::format("unknown or unsupported statement '{}'", tag));
}

NodePtr Parser::parse_for() {
  auto n = make(Kind::for_);
  next();
  n->names = parse_targets({"in"});
  if (!skip_name("in")) error(fmt::format("expected 'in', got {}", describe()));
  NodePtr iter = parse_tuple(false, {"recursive"});
  NodePtr filter;
  if (skip_name("if")) filter = parse_expression();
  n->flag = skip_name("recursive");
  expect_block_end();
  std::string end;
  NodePtr body = body_until({"endfor", "else"}, end);
  NodePtr else_body;
  if (end == "else") {
    expect_block_end();
    else_body = body_until({"endfor"}, end);
  }
  expect_block_end();
  n->children = {iter, body, else_body, filter};
  return n;
}

NodePtr Parser::parse_if() {
  auto n = make(Kind::if_);
  next();
  while (true) {
    n->children.push_back(parse_tuple(false));
    expect_block_end();
    std::string end;
    n->children.push_back(body_until({"elif", "else", "endif"}, end));
    if (end == "elif") continue;
    if (end == "else") {
      expect_block_end();
      n->children.push_back(body_until({"endif"}, end));
    }
    expect_block_end();
    return n;
  }
}

NodePtr Parser::parse_set() {
  next();
  if (cur().type == Type::name && peek().type == Type::op && peek().text == "." && peek(2).type == Type::name) {
    auto n = make(Kind::set_attr);
    n->name = cur().text;
    next();
    next();
    n->names.push_back(expect_name());
    expect_op("=");
    n->children.push_back(parse_tuple());
    expect_block_end();
    return n;
  }
  std::vector<std::string> targets = parse_targets({});
  if (skip_op("=")) {
    auto n = make(Kind::set);
    n->names = std::move(targets);
    n->children.push_back(parse_tuple());
    expect_block_end();
    return n;
  }
  if (targets.size() != 1) error("a block set takes one name");
  auto n = make(Kind::set_block);
  n->names = std::move(targets);
  NodePtr filters = is_op("|") ? parse_filter_chain() : nullptr;
  expect_block_end();
  std::string end;
  n->children = {body_until({"endset"}, end), filters};
  expect_block_end();
  return n;
}

// `(a, b=default, ...)`: parameter names into node->names, defaults from children[first_default_slot].
void Parser::parse_signature(MutableNode& node, std::size_t first_default_slot) {
  expect_op("(");
  node->children.resize(first_default_slot);
  while (!is_op(")")) {
    if (!node->names.empty()) expect_op(",");
    if (is_op(")")) break;
    node->names.push_back(expect_name());
    node->children.push_back(skip_op("=") ? parse_expression() : nullptr);
  }
  expect_op(")");
}

NodePtr Parser::parse_macro() {
  auto n = make(Kind::macro);
  next();
  n->name = expect_name();
  parse_signature(n, 1);
  expect_block_end();
  std::string end;
  n->children[0] = body_until({"endmacro"}, end);
  if (cur().type == Type::name && cur().text == n->name) next();
  expect_block_end();
  return n;
}

NodePtr Parser::parse_call_block() {
  auto n = make(Kind::call_block);
  next();
  if (is_op("(")) {
    parse_signature(n, 2);
  } else {
    n->children.resize(2);
  }
  NodePtr call = parse_expression();
  if (call->kind != Kind::call) error("expected a call expression in a call block");
  n->children[0] = call;
  expect_block_end();
  std::string end;
  n->children[1] = body_until({"endcall"}, end);
  expect_block_end();
  return n;
}

// `| a | b(x)` after a set block's name, `a | b(x)` in a filter block: filters over a null
// operand that the evaluator replaces with the rendered body.
NodePtr Parser::parse_filter_chain() {
  NodePtr chain = parse_filter(nullptr, !is_op("|"));
  while (is_op("|")) chain = parse_filter(chain, false);
  return chain;
}

NodePtr Parser::parse_filter_block() {
  auto n = make(Kind::filter_block);
  next();
  NodePtr chain = parse_filter_chain();
  expect_block_end();
  std::string end;
  n->children = {body_until({"endfilter"}, end), chain};
  expect_block_end();
  return n;
}

std::vector<std::string> Parser::parse_targets(std::initializer_list<std::string_view> extra_end) {
  std::vector<std::string> names;
  const bool paren = skip_op("(");
  while (true) {
    names.push_back(expect_name());
    if (!skip_op(",")) break;
    if (cur().type == Type::block_end || is_op(")") || is_op("=")) break;
    bool at_end = false;
    for (auto e : extra_end) at_end = at_end || is_name(e);
    if (at_end) break;
  }
  if (paren) expect_op(")");
  return names;
}

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
    if (cur().type == Type::op &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
         cur().text == ">" || cur().text == ">=")) {
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
      if (tok.text == "true" || tok.text == "True") n->value = Value(true);
      else if (tok.text == "false" || tok.text == "False") n->value = Value(false);
      else if (tok.text == "none" || tok.text == "None") n->value = Value::none();
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

}  // namespace

NodePtr parse(const std::vector<Token>& tokens, int max_depth) {
  if (tokens.empty()) fail(ErrorCode::internal, "parse: no tokens");
  return Parser(tokens, max_depth).parse_template();
}

}  // namespace ember::jinja
