// Rendering a chat template (lib/template's Jinja engine): parsing, and rendering a 6-message
// conversation with tools through Qwen3's template and SmolLM2's, the cost every chat request
// pays once (twice with a system message, a few times more under ContextPolicy::truncate).
// Figures: docs/benchmarks.md#chat-template-rendering.
#include "template/builtins.hpp"
#include "template/template.hpp"

#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

using ember::jinja::Value;

std::string read_template(const char* name) {
  std::ifstream in(std::string(EMBER_SOURCE_DIR) + "/tests/data/tokenizer/templates/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::pair<std::string, Value>> conversation() {
  const Value messages = ember::jinja::parse_json(R"([
    {"role": "system", "content": "You are a weather bot for a game."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temperature\": 21.5}"},
    {"role": "assistant", "content": "<think>\nIt is warm.\n</think>\n\nIt is 21.5 C in Paris."},
    {"role": "user", "content": "And tomorrow?"}])");
  const Value tools = ember::jinja::parse_json(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
    "required": ["city"]}}}])");
  return {{"messages", messages},
          {"tools", tools},
          {"add_generation_prompt", Value(true)},
          {"bos_token", Value("")},
          {"eos_token", Value("<|im_end|>")},
          {"strftime_now", ember::jinja::strftime_function({2026, 7, 26, 9, 30, 0})}};
}

void BM_Parse(benchmark::State& state, const char* file) {
  const std::string source = read_template(file);
  for (auto _ : state) benchmark::DoNotOptimize(ember::jinja::Template(source));
}

void BM_Render(benchmark::State& state, const char* file) {
  const ember::jinja::Template t(read_template(file));
  const auto vars = conversation();
  for (auto _ : state) benchmark::DoNotOptimize(t.render(vars));
}

}  // namespace

BENCHMARK_CAPTURE(BM_Parse, qwen3, "qwen3.jinja")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, qwen3, "qwen3.jinja")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, smollm2, "smollm2.jinja")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Render, gpt_oss, "gpt_oss.jinja")->Unit(benchmark::kMicrosecond);
