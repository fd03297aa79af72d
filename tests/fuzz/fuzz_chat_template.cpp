// Fuzz target: chat-template detection on arbitrary template text and rendering of arbitrary
// conversations.
//
// Input: fields separated by NUL bytes: the template source, the BOS text, the EOS text, then
// role/content pairs; the first byte of the template field's remainder is not special. When the
// source is not recognised (Error(unsupported)), the conversation is rendered with the SmolLM2
// template instead, so rendering is fuzzed on every input. Checked: only ember::Error comes
// out, with the documented codes, and a rendered prompt contains every message's content.
#include "fuzz_support.hpp"
#include "model_writer/gguf_writer.hpp"
#include "tokenizer/chat_template.hpp"

#include <ember/ember.hpp>

#include <optional>
#include <string>
#include <vector>

namespace {

using ember::tokenizer::ChatFormat;
using ember::tokenizer::ChatTemplate;

// `content` without the bytes a Jinja `trim` may remove at its ends (Python's str.isspace():
// ASCII whitespace, \x1c-\x1f, and Unicode spaces, all of whose UTF-8 bytes are >= 0x80).
std::string_view core_of(std::string_view content) {
  auto trimmable = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == ' ' || (u >= '\t' && u <= '\r') || (u >= 0x1c && u <= 0x1f) || u >= 0x80;
  };
  while (!content.empty() && trimmable(content.front())) content.remove_prefix(1);
  while (!content.empty() && trimmable(content.back())) content.remove_suffix(1);
  return content;
}

void render_both_ways(const ChatTemplate& chat, const std::vector<ember::Message>& messages) {
  for (const bool generation_prompt : {false, true}) {
    try {
      const std::string out = chat.render(messages, generation_prompt);
      for (const ember::Message& m : messages) {
        // ChatML copies each content as it is; the other formats trim it.
        // `trim` works on code points, so ill-formed bytes of a trimmed content come out as
        // U+FFFD (Jinja never sees such text: Python strings are code points).
        if (chat.format() == ChatFormat::chatml) {
          FUZZ_CHECK(out.find(m.content) != std::string::npos);
        } else if ((m.role == "user" || m.role == "assistant") && ember::fuzz::is_valid_utf8(m.content)) {
          // (As the Jinja templates do, the other formats fold a system message into the first
          // user turn, so without one it is not written, and skip roles they do not know.)
          FUZZ_CHECK(out.find(core_of(m.content)) != std::string::npos);
        }
      }
    } catch (const ember::Error& e) {
      FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ember::fuzz::InputReader in(data, size);
  const std::string_view source = in.field();
  const std::string bos(in.field());
  const std::string eos(in.field());
  std::vector<ember::Message> messages;
  while (!in.done() && messages.size() < 64) {
    ember::Message m;
    m.role = std::string(in.field());
    m.content = std::string(in.field());
    messages.push_back(std::move(m));
  }
  std::optional<ChatTemplate> chat;
  try {
    chat = ChatTemplate::detect(source, bos, eos);
  } catch (const ember::Error& e) {
    FUZZ_CHECK(e.code() == ember::ErrorCode::unsupported);
    chat = ChatTemplate::detect(ember::model::kSmolLmChatTemplate, bos, eos);
  }
  (void)ember::tokenizer::to_string(chat->format());
  render_both_ways(*chat, messages);
  return 0;
}
