// Fuzz target: chat templates (ember's Jinja engine) on arbitrary template text, rendering
// arbitrary conversations.
//
// Input: fields separated by NUL bytes: the template source, the BOS text, the EOS text, then
// role/content pairs. When the source does not parse (Error(invalid_argument)), the conversation
// is rendered with the SmolLM2 template instead, so rendering is fuzzed on every input. Checked:
// only ember::Error comes out, with the documented codes, and the SmolLM2 template's rendering
// contains every message's content.
#include "fuzz_support.hpp"
#include "model_writer/gguf_writer.hpp"
#include "tokenizer/chat_template.hpp"

#include <ember/ember.hpp>

#include <optional>
#include <string>
#include <vector>

namespace {

using ember::tokenizer::ChatTemplate;

void render_both_ways(const ChatTemplate& chat, const std::vector<ember::Message>& messages, bool is_smollm2) {
  for (const bool generation_prompt : {false, true}) {
    try {
      const std::string out = chat.render(messages, generation_prompt);
      if (!is_smollm2) continue;
      for (const ember::Message& m : messages) FUZZ_CHECK(out.find(m.content) != std::string::npos);
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
  bool is_smollm2 = source == ember::model::kSmolLmChatTemplate;
  try {
    chat = ChatTemplate::detect(source, bos, eos);
  } catch (const ember::Error& e) {
    FUZZ_CHECK(e.code() == ember::ErrorCode::invalid_argument);
    chat = ChatTemplate::detect(ember::model::kSmolLmChatTemplate, bos, eos);
    is_smollm2 = true;
  }
  (void)ember::tokenizer::to_string(chat->format());
  render_both_ways(*chat, messages, is_smollm2);
  return 0;
}
