// The template engine's bounds and errors: a template is input, so no template may hang, recurse
// without end or grow without bound, and every error names the template line it comes from.
#include "template/template.hpp"

#include <doctest/doctest.h>
#include <ember/ember.hpp>

#include <string>

using namespace ember;
using jinja::Template;
using jinja::Value;

namespace {

// The message of the Error(invalid_argument) that parsing or rendering `source` throws.
std::string error_of(const std::string& source, const jinja::Limits& limits = {}) {
  try {
    Template(source).render({{"messages", Value::array({})}}, limits);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    return e.what();
  }
  FAIL("no error from: " << source);
  return {};
}

}  // namespace

TEST_CASE("syntax errors name the template line") {
  CHECK(error_of("line one\n{% if x %}\nno end").find("template line 3") != std::string::npos);
  CHECK(error_of("a\nb\n{{ 1 + }}").find("template line 3") != std::string::npos);
  CHECK(error_of("{% for %}").find("template line 1") != std::string::npos);
  CHECK(error_of("\n\n\n{{ 'unterminated }}").find("template line 4") != std::string::npos);
  CHECK(error_of("{% endif %}").find("template line 1") != std::string::npos);
  CHECK(error_of("{{ (1 }}").find("template line 1") != std::string::npos);
  CHECK(error_of("{% include 'x' %}").find("unsupported statement 'include'") != std::string::npos);
  // A slice among several subscripts (found by fuzz_template: it was evaluated without its operand).
  CHECK(error_of("{{ x[1, :2] }}").find("slice inside a subscript of several items") != std::string::npos);
  CHECK(error_of("{{ x[1:, 2] }}").find("slice inside a subscript of several items") != std::string::npos);
}

TEST_CASE("render errors name the line, raise_exception its message") {
  const std::string e = error_of("ok\n{% if true %}\n{{ raise_exception('roles must alternate') }}\n{% endif %}");
  CHECK(e.find("template line 3") != std::string::npos);
  CHECK(e.find("roles must alternate") != std::string::npos);
  CHECK(error_of("\n{{ messages[0].role }}").find("template line 2") != std::string::npos);
  CHECK(error_of("{{ [].append(1) }}").find("unsafe") != std::string::npos);
}

TEST_CASE("loops, recursion and growth stop at the limits") {
  jinja::Limits small;
  small.max_steps = 100000;
  small.max_bytes = 1 << 16;
  small.max_depth = 32;
  // Recursion without end.
  CHECK(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", small).find("nests deeper") !=
        std::string::npos);
  // Nested loops over the sandbox's largest range.
  CHECK(error_of("{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}", small)
            .find("step limit") != std::string::npos);
  // A string doubling itself.
  CHECK(error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 small)
            .find("bytes") != std::string::npos);
  CHECK(error_of("{{ 'x' * 100000000 }}", small).find("bytes") != std::string::npos);
  // A list that shares itself: printing it would take 2^40 items.
  CHECK(
      error_of(
          "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}",
          small)
          .find("template line") != std::string::npos);
  CHECK(error_of("{{ range(1000000) | length }}", small).find("Range too big") != std::string::npos);
  // Output itself.
  CHECK(error_of("{% for i in range(100000) %}xxxxxxxxxx{% endfor %}", small).find("output") != std::string::npos);
  // Deep nesting in the source is refused by the parser, not by the stack.
  CHECK(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nests too deeply") !=
        std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 3000; ++i) deep_ifs += "{% if true %}";
  CHECK(error_of(deep_ifs).find("nests too deeply") != std::string::npos);
}

TEST_CASE("inputs reach the template as Python values") {
  const Template t(
      "{{ messages[0].content }}|{{ messages | length }}|{{ tools[0].function.name }}|{{ flag }}|{{ n + 1 }}");
  const Value messages =
      jinja::parse_json(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])");
  const Value tools = jinja::parse_json(R"([{"type": "function", "function": {"name": "get_weather"}}])");
  CHECK(t.render({{"messages", messages}, {"tools", tools}, {"flag", Value(true)}, {"n", Value(41)}}) ==
        "hi|2|get_weather|True|42");
}
