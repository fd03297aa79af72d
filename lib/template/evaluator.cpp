// Runs a parsed template: statements write to the output, expressions compute Values, with
// jinja2's scoping (a `for` body, macro, call, filter or set block is a scope of its own, an
// `if` is not; `namespace` objects carry values out of loops).
#include "template/builtins.hpp"
#include "template/lexer.hpp"
#include "template/parser.hpp"
#include "template/template.hpp"

#include "util/check.hpp"

#include <string_view>

namespace ember::jinja {
namespace {

using Kind = Node::Kind;

class Scope : public std::enable_shared_from_this<Scope> {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
      for (const auto& [k, v] : s->vars_) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    for (auto& [k, v] : vars_) {
      if (k == name) {
        v = std::move(value);
        return;
      }
    }
    vars_.emplace_back(name, std::move(value));
  }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { normal, break_, continue_ };

// Whether `node` or anything below it names `name` (a macro takes varargs/kwargs/caller only then).
bool references(const Node& node, std::string_view name) {
  if (node.kind == Kind::name && node.name == name) return true;
  for (const NodePtr& c : node.children) {
    if (c && references(*c, name)) return true;
  }
  return false;
}

// Values can form cycles only through the objects a rendering makes: a macro stored in the scope
// it closes over, a namespace holding itself. Macros therefore refer to their scope by plain
// pointer while the evaluator keeps those scopes alive, and the evaluator empties every namespace
// it made when it ends, so a rendering frees all it allocated.
class Evaluator {
 public:
  Evaluator(Budget& budget, std::size_t max_bytes) : budget_(budget), max_bytes_(max_bytes) {}
  ~Evaluator() {
    for (const auto& ns : namespaces_) ns->items.clear();
  }
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  Flow exec(const Node& node, const ScopePtr& scope, std::string& out);
  Value eval(const Node& node, const ScopePtr& scope);
  int line() const { return line_; }

 private:
  void write(std::string& out, std::string_view text) {
    if (out.size() + text.size() > max_bytes_) {
      fail(ErrorCode::invalid_argument, "the template's output passed {} bytes", max_bytes_);
    }
    out += text;
  }
  Flow exec_block(const Node& block, const ScopePtr& scope, std::string& out) {
    for (const NodePtr& s : block.children) {
      const Flow f = exec(*s, scope, out);
      if (f != Flow::normal) return f;
    }
    return Flow::normal;
  }
  std::string render_block(const Node& block, const ScopePtr& scope) {
    std::string out;
    exec_block(block, scope, out);
    return out;
  }
  void exec_for(const Node& node, const ScopePtr& scope, std::string& out);
  void assign(const std::vector<std::string>& targets, const Value& value, Scope& scope);
  Value make_macro(const Node& node, const ScopePtr& scope, std::size_t first_default, const Node& body,
                   const std::string& name);
  Value call(const Node& node, const ScopePtr& scope, const Value* caller);
  CallArgs eval_args(const Node& node, const ScopePtr& scope, std::size_t first);
  Value apply_filter_chain(const Node& filter, const Value& operand, const ScopePtr& scope);
  Value eval_compare(const Node& node, const ScopePtr& scope);

  Value make_namespace();

  Budget& budget_;
  std::size_t max_bytes_;
  int line_ = 1;
  std::vector<ScopePtr> closure_scopes_;
  std::vector<std::shared_ptr<Object>> namespaces_;
};

Value Evaluator::make_namespace() {
  return Value::callable("namespace", [this](CallArgs& a) {
    auto o = std::make_shared<Object>();
    o->is_namespace = true;
    for (const Value& p : a.positional) {
      if (!p.is_object()) fail(ErrorCode::invalid_argument, "namespace() takes a mapping");
      for (const auto& [k, v] : p.as_object().items) o->set(k, v);
    }
    for (const auto& [k, v] : a.keywords) o->set(k, v);
    namespaces_.push_back(o);
    return Value::object(std::move(o));
  });
}

Flow Evaluator::exec(const Node& node, const ScopePtr& scope, std::string& out) {
  budget_.step();
  line_ = node.line;
  switch (node.kind) {
    case Kind::block: return exec_block(node, scope, out);
    case Kind::text: write(out, node.value.as_string()); return Flow::normal;
    case Kind::print: write(out, to_str(eval(*node.children[0], scope), budget_)); return Flow::normal;
    case Kind::if_: {
      const std::size_t n = node.children.size();
      for (std::size_t i = 0; i + 1 < n; i += 2) {
        if (eval(*node.children[i], scope).truthy()) return exec_block(*node.children[i + 1], scope, out);
      }
      if (n % 2 == 1) return exec_block(*node.children[n - 1], scope, out);
      return Flow::normal;
    }
    case Kind::for_: exec_for(node, scope, out); return Flow::normal;
    case Kind::set: assign(node.names, eval(*node.children[0], scope), *scope); return Flow::normal;
    case Kind::set_attr: {
      const Value* ns = scope->find(node.name);
      if (ns == nullptr || !ns->is_object() || !ns->as_object().is_namespace) {
        fail(ErrorCode::invalid_argument, "cannot assign attribute on non-namespace object");
      }
      ns->mutable_object().set(node.names[0], eval(*node.children[0], scope));
      return Flow::normal;
    }
    case Kind::set_block: {
      Value v(render_block(*node.children[0], std::make_shared<Scope>(scope)));
      if (node.children[1]) v = apply_filter_chain(*node.children[1], v, scope);
      scope->set(node.names[0], std::move(v));
      return Flow::normal;
    }
    case Kind::macro:
      scope->set(node.name, make_macro(node, scope, 1, *node.children[0], node.name));
      return Flow::normal;
    case Kind::call_block: {
      const Value caller = make_macro(node, scope, 2, *node.children[1], "caller");
      write(out, to_str(call(*node.children[0], scope, &caller), budget_));
      return Flow::normal;
    }
    case Kind::filter_block: {
      const Value body(render_block(*node.children[0], std::make_shared<Scope>(scope)));
      write(out, to_str(apply_filter_chain(*node.children[1], body, scope), budget_));
      return Flow::normal;
    }
    case Kind::break_: return Flow::break_;
    case Kind::continue_: return Flow::continue_;
    default: fail(ErrorCode::internal, "template: an expression where a statement belongs");
  }
}

void Evaluator::assign(const std::vector<std::string>& targets, const Value& value, Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  const Array items = iterate(value, budget_);
  if (items.size() != targets.size()) {
    fail(ErrorCode::invalid_argument, "cannot unpack {} values into {} names", items.size(), targets.size());
  }
  for (std::size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}

void Evaluator::exec_for(const Node& node, const ScopePtr& scope, std::string& out) {
  DepthGuard guard(budget_);
  const Array all = iterate(eval(*node.children[0], scope), budget_);
  const Node* filter = node.children[3].get();
  Array items;
  if (filter != nullptr) {
    for (const Value& item : all) {
      auto probe = std::make_shared<Scope>(scope);
      assign(node.names, item, *probe);
      if (eval(*filter, probe).truthy()) items.push_back(item);
    }
  } else {
    items = all;
  }
  const auto length = static_cast<std::int64_t>(items.size());
  for (std::int64_t i = 0; i < length; ++i) {
    budget_.step();
    auto body = std::make_shared<Scope>(scope);
    const auto at = static_cast<std::size_t>(i);
    auto loop = std::make_shared<Object>();
    loop->items = {{"index", Value(i + 1)},
                   {"index0", Value(i)},
                   {"revindex", Value(length - i)},
                   {"revindex0", Value(length - i - 1)},
                   {"first", Value(i == 0)},
                   {"last", Value(i == length - 1)},
                   {"length", Value(length)},
                   {"depth", Value(1)},
                   {"depth0", Value(0)},
                   {"previtem", i > 0 ? items[at - 1] : Value()},
                   {"nextitem", i + 1 < length ? items[at + 1] : Value()}};
    loop->items.emplace_back("cycle", Value::callable("loop.cycle", [i](CallArgs& a) {
                               if (a.positional.empty())
                                 fail(ErrorCode::invalid_argument, "no items for cycling given");
                               return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
                             }));
    body->set("loop", Value::object(std::move(loop)));
    assign(node.names, items[at], *body);
    if (exec_block(*node.children[1], body, out) == Flow::break_) break;
  }
  if (length == 0 && node.children[2]) exec_block(*node.children[2], scope, out);
}

// A macro (or a call block's `caller`): parameters bound from positional and keyword arguments,
// missing ones from their defaults (evaluated in the macro's scope, later ones seeing earlier
// ones), else undefined; extra arguments only where the body uses varargs/kwargs.
Value Evaluator::make_macro(const Node& node, const ScopePtr& scope, std::size_t first_default, const Node& body,
                            const std::string& name) {
  const bool takes_varargs = references(body, "varargs");
  const bool takes_kwargs = references(body, "kwargs");
  const Node* n = &node;
  const Node* b = &body;
  closure_scopes_.push_back(scope);
  Scope* closure = scope.get();
  return Value::callable(name, [this, n, b, closure, first_default, takes_varargs, takes_kwargs, name](CallArgs& a) {
    DepthGuard guard(budget_);
    auto local = std::make_shared<Scope>(closure->shared_from_this());
    const std::vector<std::string>& params = n->names;
    if (a.positional.size() > params.size() && !takes_varargs) {
      fail(ErrorCode::invalid_argument, "macro '{}' takes not more than {} argument(s)", name, params.size());
    }
    Array varargs;
    for (std::size_t i = params.size(); i < a.positional.size(); ++i) varargs.push_back(a.positional[i]);
    std::vector<std::pair<std::string, Value>> kwargs;
    std::vector<bool> bound(params.size(), false);
    for (std::size_t i = 0; i < params.size() && i < a.positional.size(); ++i) {
      local->set(params[i], a.positional[i]);
      bound[i] = true;
    }
    for (const auto& [k, v] : a.keywords) {
      const auto it = std::find(params.begin(), params.end(), k);
      if (it != params.end()) {
        local->set(k, v);
        bound[static_cast<std::size_t>(it - params.begin())] = true;
      } else if (k == "caller") {
        local->set(k, v);
      } else if (takes_kwargs) {
        kwargs.emplace_back(k, v);
      } else {
        fail(ErrorCode::invalid_argument, "macro '{}' takes no keyword argument '{}'", name, k);
      }
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      const NodePtr& def = n->children[first_default + i];
      local->set(params[i], def ? eval(*def, local) : Value());
    }
    local->set("varargs", Value::array(std::move(varargs), true));
    local->set("kwargs", Value::object(std::move(kwargs)));
    return Value(render_block(*b, local));
  });
}

CallArgs Evaluator::eval_args(const Node& node, const ScopePtr& scope, std::size_t first) {
  CallArgs args;
  const std::size_t n = node.children.size();
  const std::size_t keywords = node.names.size();
  for (std::size_t i = first; i < n; ++i) {
    Value v = eval(*node.children[i], scope);
    if (i + keywords >= n) {
      args.keywords.emplace_back(node.names[i + keywords - n], std::move(v));
    } else {
      args.positional.push_back(std::move(v));
    }
  }
  return args;
}

Value Evaluator::call(const Node& node, const ScopePtr& scope, const Value* caller) {
  const Value callee = eval(*node.children[0], scope);
  CallArgs args = eval_args(node, scope, 1);
  if (caller != nullptr) args.keywords.emplace_back("caller", *caller);
  line_ = node.line;
  if (!callee.is_callable()) {
    const std::string what = node.children[0]->kind == Kind::name      ? "'" + node.children[0]->name + "'"
                             : node.children[0]->kind == Kind::getattr ? "'" + node.children[0]->name + "'"
                                                                       : std::string("the value");
    fail(ErrorCode::invalid_argument, "{} is {}, not callable", what,
         callee.is_undefined() ? "undefined" : callee.type_name());
  }
  Value result = callee.as_callable().call(args);
  line_ = node.line;
  return result;
}

// A filter chain whose innermost operand is null (set and filter blocks) over `operand`.
Value Evaluator::apply_filter_chain(const Node& filter, const Value& operand, const ScopePtr& scope) {
  const Value inner = filter.children[0] ? apply_filter_chain(*filter.children[0], operand, scope) : operand;
  return apply_filter(filter.name, inner, eval_args(filter, scope, 1), budget_);
}

Value Evaluator::eval_compare(const Node& node, const ScopePtr& scope) {
  Value left = eval(*node.children[0], scope);
  for (std::size_t i = 0; i < node.names.size(); ++i) {
    Value right = eval(*node.children[i + 1], scope);
    const std::string& op = node.names[i];
    bool r = false;
    if (op == "==")
      r = equals(left, right);
    else if (op == "!=")
      r = !equals(left, right);
    else if (op == "<")
      r = less(left, right);
    else if (op == "<=")
      r = !less(right, left);
    else if (op == ">")
      r = less(right, left);
    else if (op == ">=")
      r = !less(left, right);
    else if (op == "in")
      r = contains(right, left, budget_);
    else
      r = !contains(right, left, budget_);  // notin
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Evaluator::eval(const Node& node, const ScopePtr& scope) {
  budget_.step();
  line_ = node.line;
  DepthGuard guard(budget_);
  switch (node.kind) {
    case Kind::literal: return node.value;
    case Kind::name: {
      if (const Value* v = scope->find(node.name)) return *v;
      if (node.name == "namespace") return make_namespace();
      return global_function(node.name);
    }
    case Kind::list:
    case Kind::tuple: {
      Array items;
      for (const NodePtr& c : node.children) items.push_back(eval(*c, scope));
      return Value::array(std::move(items), node.kind == Kind::tuple);
    }
    case Kind::dict: {
      auto o = std::make_shared<Object>();
      for (std::size_t i = 0; i + 1 < node.children.size(); i += 2) {
        const Value key = eval(*node.children[i], scope);
        if (!key.is_string()) fail(ErrorCode::invalid_argument, "dict keys must be strings in ember's templates");
        o->set(key.as_string(), eval(*node.children[i + 1], scope));
      }
      return Value::object(std::move(o));
    }
    case Kind::getattr: return get_attribute(eval(*node.children[0], scope), node.name, budget_);
    case Kind::getitem: return get_item(eval(*node.children[0], scope), eval(*node.children[1], scope), budget_);
    case Kind::slice: {
      auto opt = [&](const NodePtr& p) { return p ? eval(*p, scope) : Value(); };
      return slice(eval(*node.children[0], scope), opt(node.children[1]), opt(node.children[2]), opt(node.children[3]),
                   budget_);
    }
    case Kind::call: return call(node, scope, nullptr);
    case Kind::filter: {
      const Value operand = eval(*node.children[0], scope);
      return apply_filter(node.name, operand, eval_args(node, scope, 1), budget_);
    }
    case Kind::test: {
      const Value operand = eval(*node.children[0], scope);
      const bool r = apply_test(node.name, operand, eval_args(node, scope, 1), budget_);
      return Value(r != node.flag);
    }
    case Kind::unary: {
      const Value v = eval(*node.children[0], scope);
      if (node.name == "not") return Value(!v.truthy());
      if (!v.is_number())
        fail(ErrorCode::invalid_argument, "bad operand type for unary {}: '{}'", node.name, v.type_name());
      if (node.name == "+") return v.is_float() ? v : Value(v.as_int());
      if (v.is_float()) return Value(-v.as_double());
      return binary_op("-", Value(0), v, budget_);
    }
    case Kind::binary: {
      const Value left = eval(*node.children[0], scope);
      if (node.name == "and") return left.truthy() ? eval(*node.children[1], scope) : left;
      if (node.name == "or") return left.truthy() ? left : eval(*node.children[1], scope);
      const Value right = eval(*node.children[1], scope);
      if (node.name == "~") {
        std::string s = to_str(left, budget_);
        s += to_str(right, budget_);
        budget_.check_size(s.size());
        return Value(std::move(s));
      }
      return binary_op(node.name, left, right, budget_);
    }
    case Kind::compare: return eval_compare(node, scope);
    case Kind::condexpr: {
      if (eval(*node.children[1], scope).truthy()) return eval(*node.children[0], scope);
      return node.children[2] ? eval(*node.children[2], scope) : Value();
    }
    default: fail(ErrorCode::internal, "template: a statement where an expression belongs");
  }
}

}  // namespace

Template::Template(std::string_view source) : source_(source), root_(parse(lex(source))) {}

std::string Template::render(const std::vector<std::pair<std::string, Value>>& variables, const Limits& limits) const {
  Budget budget(limits.max_steps, limits.max_bytes, limits.max_depth);
  Evaluator evaluator(budget, limits.max_bytes);
  auto scope = std::make_shared<Scope>(nullptr);
  for (const auto& [k, v] : variables) scope->set(k, v);
  std::string out;
  try {
    evaluator.exec(*root_, scope, out);
  } catch (const Error& e) {
    const std::string_view what = e.what();
    if (what.rfind("template line ", 0) == 0) throw;
    throw Error(e.code() == ErrorCode::internal ? ErrorCode::internal : ErrorCode::invalid_argument,
                fmt::format("template line {}: {}", evaluator.line(), what));
  }
  return out;
}

}  // namespace ember::jinja
