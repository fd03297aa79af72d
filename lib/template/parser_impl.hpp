// The parser's class, shared by parser.cpp (statements) and parser_expressions.cpp
// (expressions); internal to lib/template.
#pragma once

#include "template/parser.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>

namespace ember::jinja::detail {

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

}  // namespace ember::jinja::detail
