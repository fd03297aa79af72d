// Jinja2's filters, tests and globals, the Python methods templates call on strings and dicts,
// and attribute/item access, with the semantics of jinja2 3.1 under transformers' settings
// (`tojson` is transformers' json.dumps; mutating methods are refused as in the
// ImmutableSandboxedEnvironment).
#pragma once

#include "template/value.hpp"

#include <optional>
#include <string_view>

namespace ember::jinja {

// `obj.name` (a method of a string or dict is returned bound, as Python does).
Value get_attribute(const Value& obj, const std::string& name, Budget& budget);
// `obj[key]`: an index into a list or string (negative from the end), a key of a dict; a
// missing one is undefined.
Value get_item(const Value& obj, const Value& key, Budget& budget);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget);
// The items a `for` walks: a list's items, a dict's keys, a string's characters.
Array iterate(const Value& value, Budget& budget);

// Throws Error(invalid_argument) naming an unknown filter or test.
Value apply_filter(std::string_view name, const Value& value, const CallArgs& args, Budget& budget);
bool apply_test(std::string_view name, const Value& value, const CallArgs& args, Budget& budget);
bool test_exists(std::string_view name);
bool filter_exists(std::string_view name);

// range, dict, raise_exception; undefined for any other name (namespace is the evaluator's).
Value global_function(std::string_view name);

// transformers' strftime_now(format) for the given local time: Python's strftime in the C locale
// for %Y %y %m %d %e %H %I %M %S %p %b %B %a %A %j %%.
struct CivilTime {
  int year = 1970, month = 1, day = 1, hour = 0, minute = 0, second = 0;
};
Value strftime_function(CivilTime time);
std::string format_time(std::string_view format, const CivilTime& time);

// Python operators on values ("+", "-", "*", "/", "//", "%", "**", "in").
Value binary_op(std::string_view op, const Value& a, const Value& b, Budget& budget);
bool contains(const Value& container, const Value& item, Budget& budget);

}  // namespace ember::jinja
