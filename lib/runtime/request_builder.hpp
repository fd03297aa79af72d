// Turns a Request into a Sequence ready to queue: checks its parameters against the engine's
// limits, renders a conversation through the chat template (dropping its oldest turns under
// ContextPolicy::truncate), tokenizes, and compiles its grammar, shared by the requests in
// flight that use the same one.
//
// Thread-safety: every member may run on any thread, concurrently, without the engine's lock
// (the grammar table has a mutex of its own).
#pragma once

#include "grammar/token_mask.hpp"
#include "runtime/sequence.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::runtime {

class RequestBuilder {
 public:
  // `options`: the limits and the default ContextPolicy; `chat_template` empty when the model has
  // none ember renders (`template_error` says why).
  RequestBuilder(const EngineOptions& options, const tokenizer::Tokenizer& tokenizer, int vocab, int context_length,
                 std::optional<tokenizer::ChatTemplate> chat_template, std::string template_error);

  // A new sequence (id 0, not queued). Throws Error(invalid_argument | context_overflow | unsupported).
  std::shared_ptr<Sequence> make_sequence(const Request& request, StreamCallback on_chunk) const;
  // The chat template applied to `messages`, generation prompt appended; `thinking` false renders
  // it with enable_thinking=false (SamplingParams::reasoning_budget = 0).
  std::string render_chat(const std::vector<Message>& messages, bool thinking = true) const;
  // The same for a conversation given as JSON (Engine::apply_chat_template_json).
  std::string render_chat_json(std::string_view messages_json, std::string_view tools_json, std::string_view extra_json,
                               bool add_generation_prompt) const;
  bool has_chat_template() const { return chat_template_.has_value(); }
  std::string chat_template_source() const { return chat_template_ ? chat_template_->source() : std::string(); }

 private:
  std::vector<std::int32_t> encode_rendered(const std::string& text) const;
  // A reasoning marker's tokens: its own vocabulary entry, or text that starts with a special
  // token (parsed as a prompt is); empty when the vocabulary has neither.
  std::vector<std::int32_t> marker_tokens(const std::string& text) const;
  // Where a prompt leaves the completion: inside the reasoning, in the answer, or before both.
  void place_after_prompt(const std::vector<std::int32_t>& prompt, ReasoningTrack& track) const;
  // A chat prompt; with `truncate`, without its oldest turns until it fits with max_tokens.
  // dropped: messages left out; system_tokens: the system message's tokens at its start.
  std::vector<std::int32_t> encode_chat(const Request& request, bool truncate, int& dropped, int& system_tokens) const;
  // The vocabulary's token trie for grammar masks, built by the first constrained request.
  std::shared_ptr<const grammar::TokenTrie> token_trie() const;
  // A request's grammar (SamplingParams::grammar or json_schema) compiled, or the one requests
  // with the same text in flight already share: their states and masks are computed once. Kept
  // only while some request uses it (weak), so nothing grows with the schemas a server has seen.
  std::shared_ptr<grammar::CompiledGrammar> compiled_grammar(const SamplingParams& sampling) const;

  const int max_prompt_tokens_, max_generated_tokens_;
  const ContextPolicy context_policy_;
  const tokenizer::Tokenizer& tokenizer_;
  const int vocab_;
  const int context_length_;
  const std::optional<tokenizer::ChatTemplate> chat_template_;
  const std::string chat_template_error_;
  const SchemaResolver schema_resolver_;  // EngineOptions::schema_resolver
  // A thinking model's reasoning markers as tokens (open empty: reasoning is not separated);
  // ReasoningTrack says what each is.
  std::vector<std::int32_t> reasoning_open_, reasoning_answer_;
  std::int32_t reasoning_close_ = -1;
  mutable std::once_flag token_trie_once_;
  mutable std::shared_ptr<const grammar::TokenTrie> token_trie_;
  mutable std::mutex grammars_mutex_;
  mutable std::unordered_map<std::string, std::weak_ptr<grammar::CompiledGrammar>> grammars_;
};

}  // namespace ember::runtime
