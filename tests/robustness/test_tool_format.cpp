// Tool calls in each chat family's own format (examples/server/tool_format.cpp): where the
// tools are described, how calls and results are rendered and read back, the grammars of
// tool_choice auto and required, the streamed deltas, and tool_choice auto on the default model
// (a reply in text, or a call that parses).
#include "examples/server/openai_api.hpp"
#include "examples/server/tool_format.hpp"

#include "grammar/grammar.hpp"
#include "grammar/matcher.hpp"
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

namespace server {
namespace {

using nlohmann::json;

const char* kTools =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
    "additionalProperties": false}}}, {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}])";

ParsedRequest parse(ToolFormat f, const std::string& choice, const std::string& messages) {
  const std::string body =
      R"({"messages": )" + messages + R"(, "tools": )" + kTools + R"(, "tool_choice": )" + choice + "}";
  return parse_request(Endpoint::chat_completions, body, 1, f);
}
ParsedRequest parse(ToolFormat f, const std::string& choice) {
  return parse(f, choice,
               R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}])");
}

struct Language {
  explicit Language(const std::string& gbnf)
      : m(std::make_shared<const ember::grammar::Grammar>(ember::grammar::parse_gbnf(gbnf))) {}
  bool whole(const std::string& text) { return m.matches(text); }
  bool prefix(const std::string& text) { return m.advance(m.start(), text) != ember::grammar::Matcher::kDead; }
  ember::grammar::Matcher m;
};

const ToolFormat kFormats[] = {ToolFormat::hermes, ToolFormat::llama3, ToolFormat::gemma, ToolFormat::phi,
                               ToolFormat::generic};

// A call of get_weather in the family's own shape.
std::string weather_call(ToolFormat f) { return render_call(f, "get_weather", json{{"city", "Paris"}}); }

}  // namespace

TEST_CASE("the chat family is told by its template's markers") {
  CHECK(tool_format_of_rendering("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n") == ToolFormat::hermes);
  CHECK(tool_format_of_rendering("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>") ==
        ToolFormat::llama3);
  CHECK(tool_format_of_rendering("<bos><start_of_turn>user\nx<end_of_turn>\n<start_of_turn>model\n") ==
        ToolFormat::gemma);
  CHECK(tool_format_of_rendering("<|user|>\nx<|end|>\n<|assistant|>\n") == ToolFormat::phi);
  CHECK(tool_format_of_rendering("<s>[INST] x [/INST]") == ToolFormat::generic);
}

TEST_CASE("tools are described where each family's template puts them") {
  const ParsedRequest hermes = parse(ToolFormat::hermes, R"("auto")");
  REQUIRE(hermes.request.messages.size() == 2);
  CHECK(hermes.request.messages[0].content.rfind("Be brief.\n\n# Tools\n", 0) == 0);
  CHECK(hermes.request.messages[0].content.find("<tools>\n{\"function\":{\"description\":\"The weather") !=
        std::string::npos);
  CHECK(hermes.request.messages[0].content.find("<tool_call></tool_call> XML tags") != std::string::npos);

  const ParsedRequest llama = parse(ToolFormat::llama3, R"("auto")");
  CHECK(llama.request.messages[0].content == "Be brief.");
  CHECK(llama.request.messages[1].content.rfind("Given the following functions", 0) == 0);
  CHECK(llama.request.messages[1].content.find("\"parameters\": dictionary") != std::string::npos);
  CHECK(llama.request.messages[1].content.find("Weather in Paris?") != std::string::npos);

  const ParsedRequest gemma = parse(ToolFormat::gemma, R"("required")");
  CHECK(gemma.request.messages[1].content.rfind("You have access to functions.", 0) == 0);
  CHECK(gemma.request.messages[1].content.find("Call one of the functions.") != std::string::npos);

  const ParsedRequest phi = parse(ToolFormat::phi, R"({"type": "function", "function": {"name": "get_time"}})");
  CHECK(phi.request.messages[0].content.find("<|tool|>[{") != std::string::npos);
  CHECK(phi.request.messages[0].content.find("Call the function get_time.") != std::string::npos);

  const ParsedRequest generic = parse(ToolFormat::generic, R"("auto")");
  CHECK(generic.request.messages[0].content.find("You can call these functions:\n") != std::string::npos);
}

TEST_CASE("a call is read back in each family's format, with the text before it") {
  for (ToolFormat f : kFormats) {
    CAPTURE(to_string(f));
    const ParsedRequest p = parse(f, R"("auto")");
    std::vector<ToolCall> calls;
    std::string content;
    REQUIRE(parse_tool_calls(p.tools, weather_call(f), calls, content));
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].name == "get_weather");
    CHECK(json::parse(calls[0].arguments) == json{{"city", "Paris"}});
    CHECK(content.empty());
    CHECK_FALSE(parse_tool_calls(p.tools, "It is sunny in Paris.", calls, content));
    CHECK_FALSE(parse_tool_calls(p.tools, render_call(f, "get_stock", json::object()), calls, content));
  }
  const ParsedRequest hermes = parse(ToolFormat::hermes, R"("auto")");
  std::vector<ToolCall> calls;
  std::string content;
  REQUIRE(parse_tool_calls(
      hermes.tools,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
      calls, content));
  CHECK(content == "Let me look.");
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].name == "get_time");
  // A call cut short (max_tokens) is no call; one without its closer (a stop) still is.
  CHECK_FALSE(parse_tool_calls(hermes.tools, "<tool_call>\n{\"name\": \"get_weather\", \"argu", calls, content));
  CHECK(parse_tool_calls(hermes.tools, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}", calls, content));
}

TEST_CASE("calls and results of a round trip are rendered in the family's format") {
  const std::string history = R"([{"role": "user", "content": "Weather in Paris and the time?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                                                           {"id": "c2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
      {"role": "tool", "tool_call_id": "c2", "content": "12:00"}])";
  const ParsedRequest hermes = parse(ToolFormat::hermes, R"("auto")", history);
  const auto& h = hermes.request.messages;
  REQUIRE(h.size() == 4);  // system (tools), user, assistant, one user turn with both results
  CHECK(h[2].content ==
        "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>\n"
        "<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>");
  CHECK(h[3].role == "user");
  CHECK(h[3].content == "<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n12:00\n</tool_response>");

  const ParsedRequest llama = parse(ToolFormat::llama3, R"("auto")", history);
  const auto& l = llama.request.messages;
  REQUIRE(l.size() == 3);  // user (tools + question), assistant, ipython
  CHECK(l[1].content.find("\"parameters\":{\"city\":\"Paris\"}") != std::string::npos);
  CHECK(l[2].role == "ipython");

  const ParsedRequest gemma = parse(ToolFormat::gemma, R"("auto")", history);
  const auto& g = gemma.request.messages;
  REQUIRE(g.size() == 3);  // the turns alternate: both results in one user turn
  CHECK(g[2].role == "user");
  CHECK(g[2].content.find("Result of the function call c1:\n{\"temp\": 21}\nResult of the function call c2:\n12:00") ==
        0);
}

TEST_CASE("tool_choice auto: any text, or a call once the opener appears; required: only a call") {
  for (ToolFormat f : kFormats) {
    CAPTURE(to_string(f));
    const ParsedRequest a = parse(f, R"("auto")");
    REQUIRE_FALSE(a.request.sampling.grammar.empty());
    Language auto_(a.request.sampling.grammar);
    CHECK(auto_.whole("It is sunny, 21 degrees. Ask me more <3"));
    CHECK(auto_.whole(""));
    CHECK(auto_.whole("Ünïcödé ✓ and a < b"));
    const std::string call = weather_call(f);
    CHECK(auto_.whole(call));
    CHECK_FALSE(auto_.prefix(render_call(f, "get_stock", json::object())));             // not one of the tools
    CHECK_FALSE(auto_.prefix(render_call(f, "get_weather", json{{"town", "Paris"}})));  // not its schema

    const ParsedRequest r = parse(f, R"("required")");
    Language required(r.request.sampling.grammar);
    CHECK(required.whole(call));
    CHECK(required.whole(render_call(f, "get_time", json{{"any", 1}})));
    CHECK_FALSE(required.prefix("It is sunny"));
    const ParsedRequest n = parse(f, R"({"type": "function", "function": {"name": "get_time"}})");
    Language named(n.request.sampling.grammar);
    CHECK_FALSE(named.prefix(call));
  }
  // The marked formats: text first, then a call; once the opener is written, only a call.
  Language hermes(parse(ToolFormat::hermes, R"("auto")").request.sampling.grammar);
  CHECK(hermes.whole("Let me check <tool_ and <tool_cal.\n" + weather_call(ToolFormat::hermes)));
  CHECK(hermes.prefix("Sure. <tool_call>\n{\"name\""));
  CHECK_FALSE(hermes.prefix("Sure. <tool_call> no call"));
  // The bare formats: a reply that starts with `{` is a call.
  Language llama(parse(ToolFormat::llama3, R"("auto")").request.sampling.grammar);
  CHECK_FALSE(llama.prefix("{\"foo\""));
  CHECK(llama.whole("Paris is sunny {today}."));
}

TEST_CASE("a streamed reply: its text, then the call as tool_calls deltas") {
  for (ToolFormat f : {ToolFormat::hermes, ToolFormat::phi, ToolFormat::llama3}) {
    CAPTURE(to_string(f));
    ResponseContext ctx;
    ctx.endpoint = Endpoint::chat_completions;
    ctx.id = "x";
    ctx.tools = parse(f, R"("auto")").tools;
    StreamMapper mapper(ctx);
    const std::string prefix = markers(f).open.empty() ? "" : "I will look <it up. ";
    const std::string reply = prefix + weather_call(f);
    std::vector<json> out;
    for (std::size_t i = 0; i < reply.size(); i += 3) {  // three bytes a chunk: markers split anywhere
      ember::Chunk c;
      const std::string piece = reply.substr(i, 3);
      c.text = piece;
      for (json& j : mapper.on_chunk(c)) out.push_back(std::move(j));
    }
    ember::Completion done;
    done.finish_reason = ember::FinishReason::stop;
    for (json& j : mapper.finish(done)) out.push_back(std::move(j));
    std::string text, name, arguments;
    for (const json& j : out) {
      const json& d = j["choices"][0]["delta"];
      if (d.contains("content")) text += d["content"].get<std::string>();
      if (d.contains("tool_calls")) {
        const json& fn = d["tool_calls"][0]["function"];
        if (fn.contains("name")) name += fn["name"].get<std::string>();
        arguments += fn["arguments"].get<std::string>();
      }
    }
    CHECK(text == prefix);
    CHECK(name == "get_weather");
    CHECK(json::parse(arguments) == json{{"city", "Paris"}});
    CHECK(out.back()["choices"][0]["finish_reason"] == "tool_calls");
  }
}

TEST_CASE("tool_choice auto on the default model: a plain answer stays text, an asked-for call parses") {
  const std::string model = ember::test::default_model_path();
  if (model.empty()) return;  // no default model here
  ember::EngineOptions o;
  o.threads = 2;
  ember::Engine engine = ember::Engine::open(model, o);
  const ToolFormat f = tool_format_of_rendering(engine.apply_chat_template({{"user", "x"}}));
  CHECK(f == ToolFormat::hermes);  // SmolLM2: ChatML
  int calls_seen = 0, texts_seen = 0;
  // A greeting, and a weather question after an earlier call of the same tool (a 135M model
  // follows an example far better than an instruction).
  const std::string example = R"({"role": "user", "content": "What is the weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 5}"},
      {"role": "assistant", "content": "It is 5 degrees in Oslo."},)";
  for (const std::string& conversation :
       {std::string(R"([{"role": "user", "content": "Hello! Who are you? Answer in one sentence."}])"),
        "[" + example + R"({"role": "user", "content": "And what is the weather in Paris?"}])"}) {
    CAPTURE(conversation);
    ParsedRequest p = parse(f, R"("auto")", conversation);
    p.request.sampling.temperature = 0;
    p.request.sampling.max_tokens = 60;
    if (conversation.find("Oslo") != std::string::npos) {
      // The example's answer starts "<tool_" but this small model goes on with "response":
      // tip it to the opener (where "<tool_call>" and "<tool_response>" part) and let the
      // grammar take over from there.
      const auto call = engine.tokenize("<tool_call>"), response = engine.tokenize("<tool_response>");
      std::size_t k = 0;
      while (k < call.size() && k < response.size() && call[k] == response[k]) ++k;
      REQUIRE(k < call.size());
      p.request.sampling.logit_bias.push_back({call[k], 10.0f});
    }
    const ember::Completion c = engine.generate(p.request);
    MESSAGE("reply (", std::string(ember::to_string(c.finish_reason)), ", ", c.generated_tokens, " tokens): ", c.text);
    std::vector<ToolCall> calls;
    std::string content;
    const bool called = parse_tool_calls(p.tools, c.text, calls, content);
    if (c.text.find("<tool_call>") != std::string::npos) {
      // Once the opener appeared the call was constrained: it parses (unless cut by max_tokens).
      CHECK((called || c.finish_reason == ember::FinishReason::length));
      if (called) CHECK(calls[0].name == "get_weather");
      ++calls_seen;
    } else {
      CHECK_FALSE(called);
      CHECK(c.finish_reason != ember::FinishReason::error);
      ++texts_seen;
    }
  }
  CHECK(texts_seen >= 1);
  CHECK(calls_seen >= 1);
}

}  // namespace server
