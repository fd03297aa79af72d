// The values a Jinja2 template computes with, shaped after the Python objects Jinja2 sees: none,
// booleans, integers, floats, strings (code points held as UTF-8), lists and tuples, dicts that
// keep insertion order, namespaces (the one mutable object a template can write to) and
// callables (macros, globals, bound methods). `undefined` is Jinja2's default Undefined: empty
// when printed or iterated, an error when an attribute of it is taken.
//
// Lists and dicts are shared, immutable once built (Hugging Face renders chat templates in an
// ImmutableSandboxedEnvironment, where `list.append` is an error), so copying a Value is cheap.
// Thread-safety: a Value is immutable except a namespace's attributes; values of one rendering
// stay on its thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::jinja {

class Value;
class Budget;
using Array = std::vector<Value>;

// A dict: keys are strings (JSON's and the templates' literals), kept in insertion order.
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // made by namespace(): attributes may be assigned

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces or appends
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;

  // The argument at `index`, or the keyword `name`, or nullptr.
  const Value* get(std::size_t index, std::string_view name) const;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : std::uint8_t { undefined, none, boolean, integer, floating, string, array, object, callable };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::boolean), int_(b ? 1 : 0) {}
  Value(int i) : kind_(Kind::integer), int_(i) {}
  Value(std::int64_t i) : kind_(Kind::integer), int_(i) {}
  Value(double f) : kind_(Kind::floating), float_(f) {}
  Value(std::string s) : kind_(Kind::string), str_(std::make_shared<const std::string>(std::move(s))) {}
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}

  static Value none();
  static Value array(Array items, bool tuple = false);
  static Value object(std::shared_ptr<Object> object);
  static Value object(std::vector<std::pair<std::string, Value>> items);
  static Value callable(std::string name, std::function<Value(CallArgs&)> call);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer; }
  bool is_float() const { return kind_ == Kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_tuple() const { return kind_ == Kind::array && tuple_; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_callable() const { return kind_ == Kind::callable; }

  bool as_bool() const { return int_ != 0; }
  std::int64_t as_int() const { return int_; }
  double as_double() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *str_; }
  const Array& as_array() const { return *array_; }
  const Object& as_object() const { return *object_; }
  Object& mutable_object() const { return *object_; }  // namespaces only
  const Callable& as_callable() const { return *callable_; }

  bool truthy() const;
  // Python's type name, as Jinja2's messages use it ("dict", "str", "NoneType").
  const char* type_name() const;

 private:
  Kind kind_ = Kind::undefined;
  bool tuple_ = false;
  std::int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<const Callable> callable_;
};

// Python's str(): what `{{ value }}`, `~` and `join` write (undefined: "").
std::string to_str(const Value& value, Budget& budget);
// Python's repr() (str() of an item inside a list or dict).
std::string to_repr(const Value& value, Budget& budget);
// Python's float.__repr__.
std::string float_repr(double value);

struct JsonOptions {
  int indent = -1;                            // < 0: one line
  std::string indent_text;                    // used when not empty (json.dumps(indent="\t"))
  std::optional<std::string> item_separator;  // none: ", " on one line, "," when indented
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// Python's json.dumps as transformers' `tojson` calls it; undefined or a callable is an error.
std::string to_json(const Value& value, const JsonOptions& options, Budget& budget);
// Parses JSON text (a conversation, tools) into values; throws Error(invalid_argument).
Value parse_json(std::string_view text);

// Python's ==, and < (throws Error(invalid_argument) for types Python does not order).
bool equals(const Value& a, const Value& b);
bool less(const Value& a, const Value& b);

// Code point helpers over UTF-8 (an ill-formed byte counts as one code point, kept as it is).
std::size_t utf8_length(std::string_view s);
std::vector<std::string_view> utf8_chars(std::string_view s);
bool is_python_space(std::uint32_t cp);
std::string python_strip(std::string_view s, bool left, bool right, std::string_view chars = {},
                         bool chars_given = false);

// Limits one rendering: every step, every byte written and every level of nesting is counted
// against them, so no template (templates are input) can hang or exhaust memory.
class Budget {
 public:
  Budget(std::int64_t steps, std::size_t max_string, int max_depth)
      : steps_left_(steps), max_string_(max_string), max_depth_(max_depth) {}
  void step(std::int64_t n = 1);
  void check_size(std::size_t bytes) const;
  void enter();
  void leave() { --depth_; }
  std::size_t max_string() const { return max_string_; }

 private:
  std::int64_t steps_left_;
  std::size_t max_string_;
  int max_depth_;
  int depth_ = 0;
};

// RAII for Budget::enter/leave.
class DepthGuard {
 public:
  explicit DepthGuard(Budget& budget) : budget_(budget) { budget_.enter(); }
  ~DepthGuard() { budget_.leave(); }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  Budget& budget_;
};

}  // namespace ember::jinja
