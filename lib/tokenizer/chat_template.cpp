#include "tokenizer/chat_template.hpp"

#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"
#include "util/check.hpp"

#include <algorithm>

namespace ember::tokenizer {
namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Python's str.isspace(), which Jinja's `trim` and str.strip() use.
bool is_python_space(std::uint32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  return (codepoint_class(cp) & (CodepointClass::whitespace | CodepointClass::separator)) != 0;
}

std::string trim(std::string_view text) {
  const std::vector<std::uint32_t> cpts = decode_utf8(text);
  std::size_t begin = 0, end = cpts.size();
  while (begin < end && is_python_space(cpts[begin])) ++begin;
  while (end > begin && is_python_space(cpts[end - 1])) --end;
  if (begin == 0 && end == cpts.size()) return std::string(text);
  std::string out;
  for (std::size_t i = begin; i < end; ++i) append_utf8(out, cpts[i]);
  return out;
}

// Undoes the escapes of a Jinja string literal (\n, \t, \', \", \\).
std::string unescape_jinja(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char next = s[++i];
    out.push_back(next == 'n' ? '\n' : next == 't' ? '\t' : next);
  }
  return out;
}

// The system prompt a ChatML template writes when the conversation does not start with one:
// the text of its literal "<|im_start|>system\n...<|im_end|>", guarded by a role test.
std::string find_default_system(std::string_view source) {
  if (!contains(source, "!= 'system'") && !contains(source, "!= \"system\"")) return {};
  constexpr std::string_view kOpen = "<|im_start|>system";
  const std::size_t open = source.find(kOpen);
  if (open == std::string_view::npos) return {};
  std::size_t start = open + kOpen.size();
  if (source.substr(start, 1) == "\n") {
    start += 1;
  } else if (source.substr(start, 2) == "\\n") {
    start += 2;
  } else {
    return {};
  }
  const std::size_t close = source.find("<|im_end|>", start);
  if (close == std::string_view::npos) return {};
  return unescape_jinja(source.substr(start, close - start));
}

constexpr std::string_view kSupported =
    "supported: ChatML (<|im_start|>: SmolLM2, Qwen2), Llama 3 (<|start_header_id|>), Gemma "
    "(<start_of_turn>), Llama 2 ([INST] with <<SYS>>), Mistral ([INST]), Phi-3 (<|user|>)";

// The first characters of a template, on one line, to name it in an error.
std::string excerpt(std::string_view source) {
  constexpr std::size_t kMax = 60;
  std::size_t end = std::min(source.size(), kMax);
  auto continuation = [&](std::size_t i) {
    return (static_cast<unsigned char>(source[i]) & 0xC0) == 0x80;
  };
  while (end > 0 && end < source.size() && continuation(end)) --end;  // not inside a character
  std::string out;
  for (char ch : source.substr(0, end)) {
    if (ch == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(ch) >= 0x20 || ch == '\t') {
      out.push_back(ch);
    }
  }
  return sanitize_utf8(out) + (end < source.size() ? "..." : "");
}

[[noreturn]] void fail_alternation() {
  fail(ErrorCode::invalid_argument,
       "the chat template needs roles that alternate user/assistant/user/assistant/...");
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
  }
  return "unknown";
}

ChatTemplate ChatTemplate::detect(std::string_view source, std::string bos_text,
                                  std::string eos_text) {
  ChatTemplate t;
  t.bos_text_ = std::move(bos_text);
  t.eos_text_ = std::move(eos_text);
  if (contains(source, "<|im_start|>")) {
    t.format_ = ChatFormat::chatml;
    t.default_system_ = find_default_system(source);
  } else if (contains(source, "<|start_header_id|>")) {
    t.format_ = ChatFormat::llama3;
  } else if (contains(source, "<start_of_turn>")) {
    t.format_ = ChatFormat::gemma;
    t.system_allowed_ = !contains(source, "System role not supported");
  } else if (contains(source, "<|user|>") && contains(source, "<|end|>")) {
    t.format_ = ChatFormat::phi3;
  } else if (contains(source, "[INST]")) {
    t.format_ = contains(source, "<<SYS>>") ? ChatFormat::llama2 : ChatFormat::mistral;
  } else {
    fail(ErrorCode::unsupported,
         "the model's chat template ('{}', {} bytes) is not one ember renders; {}",
         excerpt(source), source.size(), kSupported);
  }
  return t;
}

ChatTemplate ChatTemplate::for_model(std::optional<std::string_view> source,
                                     std::string_view architecture, std::string bos_text,
                                     std::string eos_text) {
  if (source) return detect(*source, std::move(bos_text), std::move(eos_text));
  // Architectures whose every instruction-tuned model uses one format. Gemma 3's template puts
  // a system message in front of the first user turn (tests/data/tokenizer/templates/gemma3.jinja).
  if (architecture == "gemma3") return detect("<start_of_turn>", std::move(bos_text), std::move(eos_text));
  fail(ErrorCode::unsupported,
       "the model file has no chat template (tokenizer.chat_template) and ember knows none for "
       "its architecture '{}' (only gemma3 has a default); {}",
       architecture, kSupported);
}

ChatTemplate ChatTemplate::from_gguf(const model::GgufFile& file, const Tokenizer& tokenizer,
                                     std::string_view replacement) {
  auto text_of = [&](TokenId id) { return id >= 0 ? tokenizer.token_text(id) : std::string(); };
  std::string bos = text_of(tokenizer.bos()), eos = text_of(tokenizer.eos());
  if (!replacement.empty()) return detect(replacement, std::move(bos), std::move(eos));
  return for_model(file.find_string("tokenizer.chat_template"),
                   file.find_string("general.architecture").value_or(""), std::move(bos), std::move(eos));
}

std::string ChatTemplate::render(const std::vector<Message>& messages,
                                 bool add_generation_prompt) const {
  switch (format_) {
    case ChatFormat::chatml: return render_chatml(messages, add_generation_prompt);
    case ChatFormat::llama3: return render_llama3(messages, add_generation_prompt);
    case ChatFormat::gemma: return render_gemma(messages, add_generation_prompt);
    case ChatFormat::llama2:
    case ChatFormat::mistral: return render_inst(messages);
    case ChatFormat::phi3: return render_phi3(messages, add_generation_prompt);
  }
  return {};
}

std::string ChatTemplate::render_chatml(const std::vector<Message>& messages,
                                        bool add_generation_prompt) const {
  std::string out;
  if (!default_system_.empty() && !messages.empty() && messages[0].role != "system") {
    out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
  }
  for (const Message& m : messages) {
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render_llama3(const std::vector<Message>& messages,
                                        bool add_generation_prompt) const {
  std::string out;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) out += bos_text_;
    out += "<|start_header_id|>" + messages[i].role + "<|end_header_id|>\n\n" +
           trim(messages[i].content) + "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Gemma has no system role: Gemma 3's template puts the system text in front of the first user
// turn, Gemma 1/2's reject it.
std::string ChatTemplate::render_gemma(const std::vector<Message>& messages,
                                       bool add_generation_prompt) const {
  std::size_t first = 0;
  std::string prefix;
  if (!messages.empty() && messages[0].role == "system") {
    if (!system_allowed_) {
      fail(ErrorCode::invalid_argument, "this Gemma chat template does not support a system message");
    }
    prefix = messages[0].content + "\n\n";
    first = 1;
  }
  std::string out = bos_text_;
  for (std::size_t i = first; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if ((m.role == "user") != ((i - first) % 2 == 0)) fail_alternation();
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n" + (i == first ? prefix : std::string()) +
           trim(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// [INST] formats end the prompt where the answer starts, so there is no generation prompt.
std::string ChatTemplate::render_inst(const std::vector<Message>& messages) const {
  std::string out;
  if (format_ == ChatFormat::mistral) {
    out = bos_text_;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const Message& m = messages[i];
      if ((m.role == "user") != (i % 2 == 0)) fail_alternation();
      if (m.role == "user") {
        out += "[INST] " + m.content + " [/INST]";
      } else if (m.role == "assistant") {
        out += m.content + eos_text_;
      } else {
        fail(ErrorCode::invalid_argument, "the Mistral chat template supports only user and "
                                          "assistant roles, not '{}'", m.role);
      }
    }
    return out;
  }
  std::size_t first = 0;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (has_system) first = 1;
  for (std::size_t i = first; i < messages.size(); ++i) {
    const Message& m = messages[i];
    if ((m.role == "user") != ((i - first) % 2 == 0)) fail_alternation();
    std::string content = m.content;
    if (i == first && has_system) {
      content = "<<SYS>>\n" + messages[0].content + "\n<</SYS>>\n\n" + content;
    }
    if (m.role == "user") {
      out += bos_text_ + "[INST] " + trim(content) + " [/INST]";
    } else if (m.role == "assistant") {
      out += " " + trim(content) + " " + eos_text_;
    }
  }
  return out;
}

// Phi-3.5-mini's template: every turn as <|role|>\ncontent<|end|>\n, a system message only when
// it has content; without a generation prompt the conversation ends with the EOS text.
std::string ChatTemplate::render_phi3(const std::vector<Message>& messages, bool add_generation_prompt) const {
  std::string out;
  for (const Message& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;  // as the template
    if (m.role == "system" && m.content.empty()) continue;
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  out += add_generation_prompt ? std::string("<|assistant|>\n") : eos_text_;
  return out;
}

}  // namespace ember::tokenizer
