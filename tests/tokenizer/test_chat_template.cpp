// Chat templates rendered by ember's Jinja engine must equal Jinja2's rendering byte for byte
// (tests/reference/make_chat_template_goldens.py writes the goldens); the families ember used to
// render with code of its own are still recognised (format()), and the reasoning markers of a
// thinking model's template are found.
#include "template/value.hpp"
#include "test_support.hpp"
#include "tokenizer/chat_template.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

using namespace ember;
using tokenizer::ChatTemplate;

namespace {

std::vector<Message> messages_of(const nlohmann::json& j) {
  std::vector<Message> out;
  for (const auto& m : j) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

}  // namespace

TEST_CASE("every template and conversation renders exactly as Jinja2 does") {
  const auto goldens = nlohmann::json::parse(test::read_file(test::data_path("tokenizer/chat_template_goldens.json")));
  int matched = 0, total = 0;
  for (const auto& t : goldens.at("templates")) {
    const std::string name = t.at("name");
    const std::string source =
        test::read_file(test::data_path("tokenizer/templates/" + t.at("file").get<std::string>()));
    const ChatTemplate tmpl = ChatTemplate::detect(source, t.at("bos_token"), t.at("eos_token"));
    CHECK_MESSAGE(std::string(to_string(tmpl.format())) == t.at("format").get<std::string>(), name);
    for (const auto& c : t.at("cases")) {
      ++total;
      const auto messages = messages_of(c.at("messages"));
      const bool gen = c.at("add_generation_prompt");
      if (c.contains("error")) {
        bool threw = false;
        try {
          tmpl.render(messages, gen);
        } catch (const Error& e) {
          threw = e.code() == ErrorCode::invalid_argument;
        }
        CHECK_MESSAGE(threw, name << " should reject case " << total);
        matched += threw;
      } else {
        const std::string expected = c.at("output");
        const std::string got = tmpl.render(messages, gen);
        CHECK_MESSAGE(got == expected, name << " case " << total);
        matched += got == expected;
      }
    }
  }
  CHECK(total >= 80);
  std::printf("chat template goldens: %d/%d matched\n", matched, total);
}

TEST_CASE("SmolLM2's template injects its default system prompt") {
  const std::string source = test::read_file(test::data_path("tokenizer/templates/smollm2.jinja"));
  const ChatTemplate t = ChatTemplate::detect(source);
  CHECK(t.format() == tokenizer::ChatFormat::chatml);
  CHECK(!t.reasoning().enabled());
  CHECK(t.render({{"user", "Hi"}}, true) ==
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("any template renders; one that does not parse is Error(invalid_argument) naming its line") {
  const ChatTemplate t = ChatTemplate::detect("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}");
  CHECK(t.format() == tokenizer::ChatFormat::other);
  CHECK(t.render({{"user", "Hi"}, {"assistant", "Yo"}}, true) == "user: Hi\nassistant: Yo\n");
  try {
    ChatTemplate::detect("{% for m in messages %}\n{{ m.content }\n{% endfor %}");
    FAIL("a broken template parsed");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("template line 2") != std::string::npos);
  }
}

TEST_CASE("Qwen3's template: <think> markers, enable_thinking, reasoning kept out of history") {
  const ChatTemplate t =
      ChatTemplate::detect(test::read_file(test::data_path("tokenizer/templates/qwen3.jinja")), "", "<|im_end|>");
  CHECK(t.format() == tokenizer::ChatFormat::chatml);
  CHECK(t.reasoning().open == "<think>");
  CHECK(t.reasoning().close == "</think>");
  CHECK(t.reasoning().toggle);
  const std::vector<Message> chat = {{"user", "2+2?"}, {"assistant", "<think>\nadd\n</think>\n\n4"}, {"user", "3+3?"}};
  CHECK(t.render(chat, true) ==
        "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>\n<|im_start|>user\n3+3?<|im_end|>\n"
        "<|im_start|>assistant\n");
  CHECK(t.render({{"user", "Hi"}}, true, {{"enable_thinking", jinja::Value(false)}}) ==
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  const ChatTemplate r1 =
      ChatTemplate::detect(test::read_file(test::data_path("tokenizer/templates/deepseek_r1.jinja")));
  CHECK(r1.reasoning().enabled());
  CHECK(!r1.reasoning().toggle);
  CHECK(r1.reasoning().answer.empty());
}

TEST_CASE("gpt-oss's template: reasoning on the analysis channel, the answer on the final one") {
  const ChatTemplate t = ChatTemplate::detect(test::read_file(test::data_path("tokenizer/templates/gpt_oss.jinja")));
  CHECK(t.reasoning().open == "<|channel|>analysis<|message|>");
  CHECK(t.reasoning().close == "<|end|>");
  CHECK(t.reasoning().answer == "<|start|>assistant<|channel|>final<|message|>");
  CHECK(!t.reasoning().toggle);
  const std::string prompt = t.render({{"user", "Hi"}}, true);
  REQUIRE(prompt.size() >= 18);
  CHECK(prompt.substr(prompt.size() - 18) == "<|start|>assistant");
}

TEST_CASE("a file's template decides; without one, the architecture does (gemma3 -> Gemma 3)") {
  const std::string smollm2 = test::read_file(test::data_path("tokenizer/templates/smollm2.jinja"));
  // A template in the file wins over the architecture.
  CHECK(ChatTemplate::for_model(smollm2, "gemma3").format() == tokenizer::ChatFormat::chatml);
  const std::string gemma2 = test::read_file(test::data_path("tokenizer/templates/gemma2.jinja"));
  const ChatTemplate g2 = ChatTemplate::for_model(gemma2, "gemma2", "<bos>", "<eos>");
  CHECK(g2.format() == tokenizer::ChatFormat::gemma);
  CHECK_THROWS_AS(g2.render({{"system", "S"}, {"user", "U"}}, true), Error);  // no system role

  // No template: Gemma 3's, system folded into the first user turn, assistant written "model".
  const ChatTemplate g3 = ChatTemplate::for_model(std::nullopt, "gemma3", "<bos>", "<eos>");
  CHECK(g3.format() == tokenizer::ChatFormat::gemma);
  CHECK(g3.render({{"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello."}, {"user", "Bye"}}, true) ==
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
        "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  CHECK(g3.render({{"user", "Hi"}}, false) == "<bos><start_of_turn>user\nHi<end_of_turn>\n");
  // It renders exactly what Gemma 3's own template renders (the Jinja2 goldens).
  const auto goldens = nlohmann::json::parse(test::read_file(test::data_path("tokenizer/chat_template_goldens.json")));
  int compared = 0;
  for (const auto& t : goldens.at("templates")) {
    if (t.at("name") != "gemma3") continue;
    for (const auto& c : t.at("cases")) {
      if (c.contains("error")) continue;
      CHECK(g3.render(messages_of(c.at("messages")), c.at("add_generation_prompt")) ==
            c.at("output").get<std::string>());
      ++compared;
    }
  }
  CHECK(compared >= 20);

  // No template and no known format for the architecture: the error names the architecture.
  try {
    ChatTemplate::for_model(std::nullopt, "llama");
    FAIL("for_model invented a template for a llama file without one");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    const std::string what = e.what();
    CHECK(what.find("no chat template") != std::string::npos);
    CHECK(what.find("'llama'") != std::string::npos);
  }
}
