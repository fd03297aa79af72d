#include "tokenizer/chat_template.hpp"

#include "model/gguf.hpp"
#include "template/builtins.hpp"
#include "template/template.hpp"
#include "tokenizer/tokenizer.hpp"
#include "util/check.hpp"

#include <chrono>
#include <ctime>

namespace ember::tokenizer {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Gemma 3's chat template as Google publishes it for the instruction-tuned Gemma 3 models
// (tests/data/tokenizer/templates/gemma3.jinja); gemma-3-270m's GGUF file carries none.
constexpr std::string_view kGemma3Template = R"JINJA({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)JINJA";

ChatFormat family_of(std::string_view source) {
  if (contains(source, "<|im_start|>")) return ChatFormat::chatml;
  if (contains(source, "<|start_header_id|>")) return ChatFormat::llama3;
  if (contains(source, "<start_of_turn>")) return ChatFormat::gemma;
  if (contains(source, "<|user|>") && contains(source, "<|end|>")) return ChatFormat::phi3;
  if (contains(source, "[INST]")) return contains(source, "<<SYS>>") ? ChatFormat::llama2 : ChatFormat::mistral;
  return ChatFormat::other;
}

ReasoningFormat reasoning_of(std::string_view source) {
  ReasoningFormat r;
  // gpt-oss (the harmony format): reasoning on the analysis channel, the answer on the final one.
  if (contains(source, "<|channel|>analysis<|message|>") && contains(source, "<|channel|>final<|message|>") &&
      contains(source, "<|end|>")) {
    r.open = "<|channel|>analysis<|message|>";
    r.close = "<|end|>";
    r.answer = "<|start|>assistant<|channel|>final<|message|>";
  } else if (contains(source, "<think>") && contains(source, "</think>")) {
    r.open = "<think>";
    r.close = "</think>";
  }
  r.toggle = contains(source, "enable_thinking");
  return r;
}

// The host's local time, as transformers' strftime_now (datetime.now()) sees it.
jinja::CivilTime local_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
#if defined(_WIN32)
  localtime_s(&tm, &now);
#else
  localtime_r(&now, &tm);
#endif
  return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec};
}

}  // namespace

const char* to_string(ChatFormat format) {
  switch (format) {
    case ChatFormat::chatml: return "chatml";
    case ChatFormat::llama3: return "llama3";
    case ChatFormat::gemma: return "gemma";
    case ChatFormat::llama2: return "llama2";
    case ChatFormat::mistral: return "mistral";
    case ChatFormat::phi3: return "phi3";
    case ChatFormat::other: return "other";
  }
  return "unknown";
}

jinja::Value messages_value(const std::vector<Message>& messages) {
  jinja::Array out;
  out.reserve(messages.size());
  for (const Message& m : messages) {
    out.push_back(jinja::Value::object({{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}}));
  }
  return jinja::Value::array(std::move(out));
}

ChatTemplate ChatTemplate::detect(std::string_view source, std::string bos_text, std::string eos_text) {
  ChatTemplate t;
  t.template_ = std::make_shared<const jinja::Template>(source);
  t.format_ = family_of(source);
  t.reasoning_ = reasoning_of(source);
  t.bos_text_ = std::move(bos_text);
  t.eos_text_ = std::move(eos_text);
  return t;
}

ChatTemplate ChatTemplate::for_model(std::optional<std::string_view> source, std::string_view architecture,
                                     std::string bos_text, std::string eos_text) {
  if (source) return detect(*source, std::move(bos_text), std::move(eos_text));
  if (architecture == "gemma3") return detect(kGemma3Template, std::move(bos_text), std::move(eos_text));
  fail(ErrorCode::unsupported,
       "the model file has no chat template (tokenizer.chat_template) and ember knows none for "
       "its architecture '{}' (only gemma3 has a default); pass one with EngineOptions::chat_template "
       "(--chat-template FILE)",
       architecture);
}

ChatTemplate ChatTemplate::from_gguf(const model::GgufFile& file, const Tokenizer& tokenizer,
                                     std::string_view replacement) {
  auto text_of = [&](TokenId id) { return id >= 0 ? tokenizer.token_text(id) : std::string(); };
  std::string bos = text_of(tokenizer.bos()), eos = text_of(tokenizer.eos());
  if (!replacement.empty()) return detect(replacement, std::move(bos), std::move(eos));
  return for_model(file.find_string("tokenizer.chat_template"), file.find_string("general.architecture").value_or(""),
                   std::move(bos), std::move(eos));
}

const std::string& ChatTemplate::source() const { return template_->source(); }

std::string ChatTemplate::render(const std::vector<Message>& messages, bool add_generation_prompt,
                                 const TemplateArgs& extra) const {
  return render_values(messages_value(messages), add_generation_prompt, extra);
}

std::string ChatTemplate::render_values(const jinja::Value& messages, bool add_generation_prompt,
                                        const TemplateArgs& extra) const {
  TemplateArgs vars = {{"messages", messages},
                       {"add_generation_prompt", jinja::Value(add_generation_prompt)},
                       {"bos_token", jinja::Value(bos_text_)},
                       {"eos_token", jinja::Value(eos_text_)},
                       {"strftime_now", jinja::strftime_function(local_now())}};
  for (const auto& [k, v] : extra) vars.emplace_back(k, v);  // later names win, as in render(**kwargs)
  return template_->render(vars);
}

}  // namespace ember::tokenizer
