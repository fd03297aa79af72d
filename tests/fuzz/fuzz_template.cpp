// Fuzz target: the Jinja template engine (lib/template) on arbitrary templates and inputs.
//
// Input: the template source, a NUL byte, then the variables as a JSON object (messages, tools,
// anything); when that is not a JSON object a small conversation is used instead, so rendering
// is fuzzed on every input. Rendering runs under tight limits (a fuzzed template must stop at
// them, never hang or exhaust memory). Checked: only ember::Error(invalid_argument) comes out,
// and its message names a template line; a rendering is deterministic; JSON the engine reads,
// it writes back in a form it reads to the same value.
#include "fuzz_support.hpp"
#include "template/builtins.hpp"
#include "template/template.hpp"

#include <ember/ember.hpp>

#include <optional>
#include <string>

namespace {

using ember::jinja::Value;

constexpr std::string_view kDefaultVariables =
    R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},)"
    R"( {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function":)"
    R"( {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "content": "ok"}],)"
    R"( "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],)"
    R"( "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

void check_error(const ember::Error& e) {
  FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
  FUZZ_CHECK(std::string_view(e.what()).rfind("template line ", 0) == 0);
}

std::optional<Value> variables_of(std::string_view json) {
  try {
    Value v = ember::jinja::parse_json(json);
    ember::jinja::Budget budget(1'000'000, 1 << 22, 256);
    const std::string again = ember::jinja::to_json(v, {}, budget);
    const Value back = ember::jinja::parse_json(again);
    FUZZ_CHECK(ember::jinja::equals(v, back) || again.find("NaN") != std::string::npos ||
               again.find("Infinity") != std::string::npos);
    if (v.is_object()) return v;
  } catch (const ember::Error& e) {
    FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
  }
  return std::nullopt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember::fuzz::InputReader in(data, size);
  const std::string_view source = in.field();
  std::optional<Value> vars = variables_of(in.rest());
  if (!vars) vars = ember::jinja::parse_json(kDefaultVariables);
  std::vector<std::pair<std::string, Value>> variables(vars->as_object().items);
  variables.emplace_back("strftime_now", ember::jinja::strftime_function({2026, 7, 26, 9, 30, 0}));

  std::optional<ember::jinja::Template> tmpl;
  try {
    tmpl.emplace(source);
  } catch (const ember::Error& e) {
    check_error(e);
    return 0;
  }
  ember::jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_bytes = 1 << 20;
  limits.max_depth = 64;
  std::optional<std::string> first;
  for (int run = 0; run < 2; ++run) {
    try {
      std::string out = tmpl->render(variables, limits);
      FUZZ_CHECK(out.size() <= limits.max_bytes);
      if (first) FUZZ_CHECK(*first == out);
      first = std::move(out);
    } catch (const ember::Error& e) {
      check_error(e);
      FUZZ_CHECK(!first);  // the second run fails exactly when the first did
      return 0;
    }
  }
  return 0;
}
