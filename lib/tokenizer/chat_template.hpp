// Chat templates: the model's own Jinja template (`tokenizer.chat_template`, or the one a host
// passes in EngineOptions::chat_template) rendered by ember's Jinja2 engine (lib/template) the
// way Python's jinja2 renders it in transformers. A file without a template gets the one its
// architecture is known to use (gemma3: Gemma 3's published template).
//
// Besides rendering, the template tells ember two things about the model: which family of
// formats it belongs to (format(), for messages and tests) and how it marks reasoning
// (reasoning(): Qwen3 and DeepSeek-R1 write <think>...</think>, gpt-oss writes channels,
// <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>; a
// template that reads `enable_thinking` can turn thinking off).
//
// Thread-safety: immutable once made; render() may run on any number of threads.
#pragma once

#include "template/value.hpp"

#include <ember/ember.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::model {
class GgufFile;
}

namespace ember::jinja {
class Template;
}

namespace ember::tokenizer {

// The family a template's markers place it in (informational: every template renders).
enum class ChatFormat {
  chatml,   // <|im_start|>role\ncontent<|im_end|>\n (SmolLM2, Qwen)
  llama3,   // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  gemma,    // <start_of_turn>user|model\ncontent<end_of_turn>\n
  llama2,   // <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s>
  mistral,  // <s>[INST] user [/INST]answer</s>
  phi3,     // <|role|>\ncontent<|end|>\n (Phi-3, Phi-3.5)
  other,    // any other template
};

const char* to_string(ChatFormat format);

// How the model marks its reasoning in the text it writes, as its template shows.
struct ReasoningFormat {
  std::string open;   // "<think>", "<|channel|>analysis<|message|>"; empty: no reasoning markers
  std::string close;  // "</think>", "<|end|>"
  // What a closed reasoning block is followed by before the answer's text: gpt-oss's header of
  // the final channel, "<|start|>assistant<|channel|>final<|message|>"; empty for <think>. A
  // format with one (channels) starts every turn with its reasoning channel.
  std::string answer;
  bool toggle = false;  // the template reads `enable_thinking` (false turns thinking off)
  bool enabled() const { return !open.empty(); }
};

// Extra keyword arguments of a rendering (enable_thinking, reasoning_effort, tools, ...).
using TemplateArgs = std::vector<std::pair<std::string, jinja::Value>>;

class Tokenizer;

class ChatTemplate {
 public:
  // The one way a model's chat template is chosen: the file's tokenizer.chat_template; a file
  // without one gets the template its general.architecture is known to use (gemma3). Throws
  // Error(unsupported) naming the architecture when neither gives a template, and
  // Error(invalid_argument) "template line N: ..." for a template that does not parse.
  // A non-empty `replacement` (EngineOptions::chat_template) is used instead of the file's.
  static ChatTemplate from_gguf(const model::GgufFile& file, const Tokenizer& tokenizer,
                                std::string_view replacement = {});
  // The same from plain values: `jinja_source` is the template (nullopt: the file has none).
  static ChatTemplate for_model(std::optional<std::string_view> jinja_source, std::string_view architecture,
                                std::string bos_text = {}, std::string eos_text = {});
  // Parses `jinja_source`. `bos_text`/`eos_text` are the texts of the model's BOS/EOS tokens
  // (the templates' bos_token/eos_token).
  static ChatTemplate detect(std::string_view jinja_source, std::string bos_text = {}, std::string eos_text = {});

  ChatFormat format() const { return format_; }
  const ReasoningFormat& reasoning() const { return reasoning_; }
  const std::string& source() const;

  // Renders the conversation; `add_generation_prompt` appends the assistant turn opener. Throws
  // Error(invalid_argument) "template line N: ..." for a conversation the template rejects
  // (roles that do not alternate, a system message where the model has none).
  std::string render(const std::vector<Message>& messages, bool add_generation_prompt,
                     const TemplateArgs& extra = {}) const;
  // The same for a conversation given as values (messages with tool calls, tool results and
  // content parts; the inputs of POST /apply-template).
  std::string render_values(const jinja::Value& messages, bool add_generation_prompt,
                            const TemplateArgs& extra = {}) const;

 private:
  std::shared_ptr<const jinja::Template> template_;
  ChatFormat format_ = ChatFormat::other;
  ReasoningFormat reasoning_;
  std::string bos_text_, eos_text_;
};

// A conversation as template values: [{"role": ..., "content": ...}, ...].
jinja::Value messages_value(const std::vector<Message>& messages);

}  // namespace ember::tokenizer
