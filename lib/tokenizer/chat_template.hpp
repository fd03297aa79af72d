// Chat templates: the Jinja template in `tokenizer.chat_template` is recognised as one of the
// formats in use (ChatML for SmolLM2/Qwen2, Llama 3, Gemma, Llama 2 and Mistral [INST]), or the
// format is chosen by architecture when the file has none, and rendered natively, producing
// exactly what a Jinja2 rendering of that template produces (tests/tokenizer/chat_template_test.cpp
// compares against Jinja2 output byte for byte).
//
// Thread-safety: immutable once made; render() may run on any number of threads.
#pragma once

#include <ember/ember.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::model {
class GgufFile;
}

namespace ember::tokenizer {

enum class ChatFormat {
  chatml,   // <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen2: with a default system prompt)
  llama3,   // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  gemma,    // <start_of_turn>user|model\ncontent<end_of_turn>\n, system folded into the first turn
  llama2,   // <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s>
  mistral,  // <s>[INST] user [/INST]answer</s> (no system role)
  phi3,     // <|role|>\ncontent<|end|>\n (Phi-3, Phi-3.5)
};

const char* to_string(ChatFormat format);

class Tokenizer;

class ChatTemplate {
 public:
  // The one way a model's chat template is chosen: the file's tokenizer.chat_template,
  // recognised by detect(); a file without one gets the format its general.architecture is
  // known to use (gemma3: Gemma 3's template; gemma-3-270m-q4_k_m.gguf has no template). Throws
  // Error(unsupported) naming the template or the architecture when neither gives a format.
  // A non-empty `replacement` (EngineOptions::chat_template) is used instead of the file's.
  static ChatTemplate from_gguf(const model::GgufFile& file, const Tokenizer& tokenizer,
                                std::string_view replacement = {});
  // The same from plain values: `jinja_source` is the template (nullopt: the file has none).
  static ChatTemplate for_model(std::optional<std::string_view> jinja_source,
                                std::string_view architecture, std::string bos_text = {},
                                std::string eos_text = {});

  // Recognises `jinja_source`. `bos_text`/`eos_text` are the texts of the model's BOS/EOS tokens
  // (the templates' bos_token/eos_token). Throws Error(unsupported) naming the template (its
  // start and size) and the formats ember renders when it is none of them.
  static ChatTemplate detect(std::string_view jinja_source, std::string bos_text = {},
                             std::string eos_text = {});

  ChatFormat format() const { return format_; }
  // The system prompt a ChatML template injects when the conversation has none (may be empty).
  const std::string& default_system() const { return default_system_; }

  // Renders the conversation; `add_generation_prompt` appends the assistant turn opener (the
  // [INST] formats have none: their prompt already ends where the answer starts). Throws
  // Error(invalid_argument) for a conversation the template rejects (roles that do not
  // alternate, a system message where the format has none).
  std::string render(const std::vector<Message>& messages, bool add_generation_prompt) const;

 private:
  std::string render_chatml(const std::vector<Message>& messages, bool add_generation_prompt) const;
  std::string render_llama3(const std::vector<Message>& messages, bool add_generation_prompt) const;
  std::string render_gemma(const std::vector<Message>& messages, bool add_generation_prompt) const;
  std::string render_inst(const std::vector<Message>& messages) const;
  std::string render_phi3(const std::vector<Message>& messages, bool add_generation_prompt) const;

  ChatFormat format_ = ChatFormat::chatml;
  std::string default_system_;  // ChatML templates that inject a system prompt (SmolLM2, Qwen2)
  bool system_allowed_ = true;  // Gemma 1/2 templates reject a system message
  std::string bos_text_, eos_text_;
};

}  // namespace ember::tokenizer
