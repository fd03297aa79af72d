#include "template/parser.hpp"

#include "template/parser_impl.hpp"

namespace ember::jinja {
namespace detail {

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

}  // namespace detail

NodePtr parse(const std::vector<Token>& tokens, int max_depth) {
  if (tokens.empty()) fail(ErrorCode::internal, "parse: no tokens");
  return detail::Parser(tokens, max_depth).parse_template();
}

}  // namespace ember::jinja
