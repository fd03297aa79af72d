// Python's str operations that templates call (case mapping, split, replace, %-formatting),
// on UTF-8 text. Case mapping covers ASCII and Latin-1, where chat templates use it.
#pragma once

#include "template/value.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string python_title(std::string_view s);       // str.title()
std::string jinja_title(std::string_view s);        // the `title` filter
std::string python_capitalize(std::string_view s);  // str.capitalize()
std::vector<std::string> python_split(std::string_view s, const std::string* sep, std::int64_t maxsplit,
                                      bool from_right);
std::vector<std::string> split_lines(std::string_view s);  // str.splitlines()
std::string python_replace(std::string_view s, std::string_view old, std::string_view replacement, std::int64_t count,
                           Budget& budget);
std::size_t count_substr(std::string_view s, std::string_view sub);
bool python_is(std::string_view s, std::string_view which);  // isdigit, isalpha, isspace, ...
std::string percent_format(std::string_view format, const Value& args, Budget& budget);

}  // namespace ember::jinja
