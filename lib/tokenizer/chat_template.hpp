// Chat templates: the Jinja template in `tokenizer.chat_template` is recognised as one of the
// formats in use (ChatML for SmolLM2/Qwen2, Llama 3, Gemma, Llama 2/Mistral [INST]) and
// rendered natively, producing exactly what a Jinja2 rendering of that template produces.
#pragma once

#include <ember/ember.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer {

enum class ChatFormat { chatml, llama3, gemma, llama2 };

class ChatTemplate {
 public:
  // Recognises `jinja_source`. Throws Error(unsupported) naming the formats ember renders when
  // the template is none of them.
  static ChatTemplate detect(std::string_view jinja_source, std::string bos_text = {},
                             std::string eos_text = {});

  ChatFormat format() const { return format_; }
  // Renders the conversation; `add_generation_prompt` appends the assistant turn opener.
  // Throws Error(invalid_argument) for a role the format cannot express.
  std::string render(const std::vector<Message>& messages, bool add_generation_prompt) const;

 private:
  ChatFormat format_ = ChatFormat::chatml;
  std::string default_system_;  // ChatML templates that inject a system prompt (SmolLM2)
  std::string bos_text_, eos_text_;
};

}  // namespace ember::tokenizer
