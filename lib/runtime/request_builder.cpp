#include "runtime/request_builder.hpp"

#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "runtime/sampler.hpp"
#include "template/value.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace ember::runtime {
namespace {

constexpr int kMaxSpeculativeTokens = 16;  // SamplingParams::speculative_tokens at most

}  // namespace

RequestBuilder::RequestBuilder(const EngineOptions& options, const tokenizer::Tokenizer& tokenizer, int vocab,
                               int context_length, std::optional<tokenizer::ChatTemplate> chat_template,
                               std::string template_error)
    : max_prompt_tokens_(options.max_prompt_tokens),
      max_generated_tokens_(options.max_generated_tokens),
      context_policy_(options.context_policy),
      tokenizer_(tokenizer),
      vocab_(vocab),
      context_length_(context_length),
      chat_template_(std::move(chat_template)),
      chat_template_error_(std::move(template_error)),
      schema_resolver_(options.schema_resolver) {
  // The markers the template writes around reasoning, else the usual ones where the vocabulary
  // has them as tokens of their own: reasoning is told apart by token, not by text. The closing
  // marker must be one token (it is recognised as the model writes it); the opening one and the
  // answer's header may be several, as they are forced or found in the prompt.
  tokenizer::ReasoningFormat markers;
  if (chat_template_) markers = chat_template_->reasoning();
  if (!markers.enabled()) markers = {"<think>", "</think>", {}, false};
  const auto close = tokenizer_.find_token(markers.close);
  std::vector<std::int32_t> open = marker_tokens(markers.open), answer = marker_tokens(markers.answer);
  if (!open.empty() && close && *close < vocab_ && answer.empty() == markers.answer.empty()) {
    reasoning_open_ = std::move(open);
    reasoning_close_ = *close;
    reasoning_answer_ = std::move(answer);
  }
}

std::vector<std::int32_t> RequestBuilder::marker_tokens(const std::string& text) const {
  if (text.empty()) return {};
  if (const auto id = tokenizer_.find_token(text))
    return *id < vocab_ ? std::vector<std::int32_t>{*id} : std::vector<std::int32_t>{};
  std::vector<std::int32_t> ids = tokenizer_.encode(text, /*parse_special=*/true);
  const tokenizer::TokenType first = ids.empty() ? tokenizer::TokenType::normal : tokenizer_.token_type(ids[0]);
  const bool special_first = (first == tokenizer::TokenType::control || first == tokenizer::TokenType::user_defined) &&
                             text.rfind(tokenizer_.token_text(ids[0]), 0) == 0;
  if (!special_first || std::any_of(ids.begin(), ids.end(), [&](std::int32_t id) { return id >= vocab_; })) return {};
  return ids;
}

void RequestBuilder::place_after_prompt(const std::vector<std::int32_t>& prompt, ReasoningTrack& track) const {
  track.open = reasoning_open_;
  track.close = reasoning_close_;
  track.answer = reasoning_answer_;
  if (reasoning_open_.empty()) return;
  // The prompt's end without the whitespace after a marker (DeepSeek-R1's generation prompt
  // ends with "<think>\n").
  std::size_t end = prompt.size();
  while (end > 0) {
    const std::string piece = tokenizer_.token_to_piece(prompt[end - 1]);
    if (piece.empty() || piece.find_first_not_of(" \t\r\n") != std::string::npos) break;
    --end;
  }
  const auto ends_with = [&](const std::vector<std::int32_t>& marker) {
    return !marker.empty() && marker.size() <= end &&
           std::equal(marker.begin(), marker.end(), prompt.begin() + static_cast<std::ptrdiff_t>(end - marker.size()));
  };
  if (ends_with(reasoning_open_)) track.inside = true;                 // the completion starts in the reasoning
  if (ends_with(reasoning_answer_)) track.closed = track.over = true;  // ... or in the answer
}

std::string RequestBuilder::render_chat(const std::vector<Message>& messages, bool thinking) const {
  if (!chat_template_) fail(ErrorCode::unsupported, "cannot render a chat: {}", chat_template_error_);
  tokenizer::TemplateArgs extra;
  if (!thinking && chat_template_->reasoning().toggle) extra.emplace_back("enable_thinking", jinja::Value(false));
  return chat_template_->render(messages, /*add_generation_prompt=*/true, extra);
}

std::string RequestBuilder::render_chat_json(std::string_view messages_json, std::string_view tools_json,
                                             std::string_view extra_json, bool add_generation_prompt) const {
  if (!chat_template_) fail(ErrorCode::unsupported, "cannot render a chat: {}", chat_template_error_);
  const jinja::Value messages = jinja::parse_json(messages_json);
  if (!messages.is_array()) fail(ErrorCode::invalid_argument, "the messages must be a JSON array");
  tokenizer::TemplateArgs extra;
  if (!tools_json.empty()) extra.emplace_back("tools", jinja::parse_json(tools_json));
  if (!extra_json.empty()) {
    const jinja::Value args = jinja::parse_json(extra_json);
    if (!args.is_object()) fail(ErrorCode::invalid_argument, "the extra template arguments must be a JSON object");
    for (const auto& [k, v] : args.as_object().items) extra.emplace_back(k, v);
  }
  return chat_template_->render_values(messages, add_generation_prompt, extra);
}

std::shared_ptr<const grammar::TokenTrie> RequestBuilder::token_trie() const {
  std::call_once(token_trie_once_, [&] {
    const tokenizer::Tokenizer& tok = tokenizer_;
    std::vector<std::string> pieces(static_cast<std::size_t>(vocab_));
    std::vector<bool> usable(pieces.size(), false);
    for (std::int32_t id = 0; id < vocab_ && id < tok.vocab_size(); ++id) {
      // Control, unknown and unused tokens never appear in constrained text.
      const tokenizer::TokenType t = tok.token_type(id);
      if (t != tokenizer::TokenType::normal && t != tokenizer::TokenType::byte &&
          t != tokenizer::TokenType::user_defined && t != tokenizer::TokenType::undefined)
        continue;
      pieces[static_cast<std::size_t>(id)] = tok.token_to_piece(id);
      usable[static_cast<std::size_t>(id)] = true;
    }
    token_trie_ = std::make_shared<const grammar::TokenTrie>(pieces, usable, tok.end_of_generation_tokens());
  });
  return token_trie_;
}

std::shared_ptr<grammar::CompiledGrammar> RequestBuilder::compiled_grammar(const SamplingParams& sp) const {
  if (sp.grammar.empty() && sp.json_schema.empty()) return nullptr;
  // One key space for both sources: a schema's key cannot equal a grammar's (a NUL starts it).
  const std::string key = sp.grammar.empty() ? std::string(1, '\0') + sp.json_schema : sp.grammar;
  {
    std::lock_guard lock(grammars_mutex_);
    if (const auto it = grammars_.find(key); it != grammars_.end())
      if (auto shared = it->second.lock()) return shared;
  }
  // Compiled without the lock (a large schema takes a while); two requests racing here each
  // compile, and the later one's is kept for the next.
  grammar::SchemaGrammar schema;
  if (sp.grammar.empty()) schema = grammar::compile_json_schema(sp.json_schema, "root", schema_resolver_);
  auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(sp.grammar.empty() ? schema.gbnf : sp.grammar));
  auto compiled = std::make_shared<grammar::CompiledGrammar>(std::move(g), token_trie());
  compiled->relaxed = std::move(schema.relaxed);
  compiled->mark_unique_items(schema.unique_rules);
  std::lock_guard lock(grammars_mutex_);
  std::erase_if(grammars_, [](const auto& entry) { return entry.second.expired(); });
  grammars_[key] = compiled;
  return compiled;
}

std::shared_ptr<Sequence> RequestBuilder::make_sequence(const Request& request, StreamCallback on_chunk) const {
  validate(request.sampling, vocab_);
  if (request.sampling.speculative_tokens < 0 || request.sampling.speculative_tokens > kMaxSpeculativeTokens)
    fail(ErrorCode::invalid_argument, "sampling.speculative_tokens must be in [0, {}], got {}", kMaxSpeculativeTokens,
         request.sampling.speculative_tokens);
  if (max_generated_tokens_ > 0 && request.sampling.max_tokens > max_generated_tokens_)
    fail(ErrorCode::invalid_argument,
         "max_tokens = {} is over this engine's limit, EngineOptions::max_generated_tokens = {}",
         request.sampling.max_tokens, max_generated_tokens_);
  const ContextPolicy policy = request.context_policy.value_or(context_policy_);
  if (request.context_keep < -1)
    fail(ErrorCode::invalid_argument, "context_keep = {} (it must be -1 or at least 0)", request.context_keep);
  int dropped_messages = 0, keep = 0;
  std::vector<std::int32_t> prompt;
  if (!request.prompt_tokens.empty()) {
    prompt = request.prompt_tokens;
    for (std::int32_t id : prompt)
      if (id < 0 || id >= vocab_)
        fail(ErrorCode::invalid_argument, "prompt token {} is outside the vocabulary [0, {})", id, vocab_);
  } else if (!request.messages.empty()) {
    prompt = encode_chat(request, policy != ContextPolicy::error, dropped_messages, keep);
  } else {
    prompt = tokenizer_.encode(request.prompt, request.parse_special_tokens, tokenizer_.add_bos());
  }
  if (prompt.empty()) fail(ErrorCode::invalid_argument, "the prompt is empty (0 tokens)");
  if (max_prompt_tokens_ > 0 && static_cast<int>(prompt.size()) > max_prompt_tokens_)
    fail(ErrorCode::context_overflow,
         "the prompt has {} tokens, over this engine's limit, EngineOptions::max_prompt_tokens = {}", prompt.size(),
         max_prompt_tokens_);
  if (static_cast<int>(prompt.size()) >= context_length_)
    fail(ErrorCode::context_overflow,
         "the prompt has {} tokens but the context holds {} (one more is needed to generate)", prompt.size(),
         context_length_);

  if (request.sampling.reasoning_budget < -1)
    fail(ErrorCode::invalid_argument, "sampling.reasoning_budget = {} (it must be -1, 0 or more)",
         request.sampling.reasoning_budget);
  SamplingParams sampling = request.sampling;
  // No thinking: a one-token opening marker is banned, so a model that opens a block anyway
  // cannot (a channel format is given an empty reasoning channel instead: OutputStage).
  if (sampling.reasoning_budget == 0 && reasoning_open_.size() == 1 && reasoning_answer_.empty())
    sampling.logit_bias.push_back({reasoning_open_[0], -std::numeric_limits<float>::infinity()});
  auto seq = std::make_shared<Sequence>(0, sampling, vocab_, tokenizer_, std::move(on_chunk));
  place_after_prompt(prompt, seq->reasoning);
  if (auto compiled = compiled_grammar(request.sampling)) {
    // Closing at the limit cannot make a document shorter than the grammar's shortest: such a
    // max_tokens would end unterminated, so it is refused (0 still returns at once).
    const int max_tokens = request.sampling.max_tokens;
    if (request.sampling.close_at_limit && max_tokens > 0 && max_tokens < compiled->shortest_document_bytes())
      if (const int shortest = compiled->shortest_document_tokens(); max_tokens < shortest)
        fail(
            ErrorCode::invalid_argument,
            "max_tokens = {} is below the shortest document the {} allows ({} tokens): the output could not be "
            "closed in time (close_at_limit = false lets it end unterminated)",
            max_tokens, request.sampling.grammar.empty() ? "json_schema" : "grammar",
            shortest >= grammar::Matcher::kUnreachable ? std::string("no finite number of") : std::to_string(shortest));
    seq->completion.schema_relaxed = compiled->relaxed;
    seq->constraint = std::make_unique<grammar::TokenConstraint>(std::move(compiled));
  }
  seq->priority = request.priority;
  seq->tokens = std::move(prompt);
  seq->prompt_tokens = static_cast<int>(seq->tokens.size());
  seq->completion.prompt_tokens = seq->prompt_tokens;
  seq->completion.dropped_messages = dropped_messages;
  seq->shift_on_full = policy == ContextPolicy::shift;
  seq->context_keep = std::min(request.context_keep >= 0 ? request.context_keep : keep, context_length_ / 2);
  return seq;
}

std::vector<std::int32_t> RequestBuilder::encode_rendered(const std::string& text) const {
  const auto& tok = tokenizer_;
  // Templates that write the BOS text themselves (Llama 3) must not get a second BOS.
  const bool has_bos_text = tok.bos() >= 0 && text.rfind(tok.token_text(tok.bos()), 0) == 0;
  return tok.encode(text, /*parse_special=*/true, tok.add_bos() && !has_bos_text);
}

std::vector<std::int32_t> RequestBuilder::encode_chat(const Request& request, bool truncate, int& dropped,
                                                      int& system_tokens) const {
  const std::vector<Message>& messages = request.messages;
  const bool thinking = request.sampling.reasoning_budget != 0;
  const std::size_t first = messages[0].role == "system" ? 1 : 0;
  if (first == 1 && chat_template_) {
    // The system message's tokens: what the prompt shares with the system turn rendered alone.
    const std::vector<std::int32_t> prompt = encode_rendered(render_chat(messages, thinking));
    // A template may refuse a conversation of a system message alone (roles must alternate,
    // or a user turn must follow): then no tokens are known to be the system message's.
    std::vector<std::int32_t> alone;
    try {
      alone = encode_rendered(chat_template_->render({messages[0]}, false));
    } catch (const Error&) {
    }
    system_tokens = static_cast<int>(std::mismatch(prompt.begin(), prompt.end(), alone.begin(), alone.end()).first -
                                     prompt.begin());
    if (!truncate) return prompt;
  }
  // Where the conversation may start after the system message: at its first turn, or at a later
  // user message (a turn is a user message and the replies that follow it).
  std::vector<std::size_t> starts{first};
  for (std::size_t i = first + 1; i < messages.size(); ++i)
    if (messages[i].role == "user") starts.push_back(i);
  const auto encode_from = [&](std::size_t start) {
    std::vector<Message> kept(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(first));
    kept.insert(kept.end(), messages.begin() + static_cast<std::ptrdiff_t>(start), messages.end());
    return encode_rendered(render_chat(kept, thinking));
  };
  const auto fits = [&](const std::vector<std::int32_t>& p) {
    return static_cast<long long>(p.size()) + request.sampling.max_tokens <= context_length_;
  };
  std::vector<std::int32_t> prompt = encode_from(starts[0]);
  if (!truncate || fits(prompt)) return prompt;
  // The fewest dropped turns that fit (a later start is never longer): a binary search, so a
  // long conversation is rendered a few times, not once per turn. When even the last turn
  // alone does not fit it is the prompt, and the context window decides.
  std::size_t lo = 1, hi = starts.size() - 1;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (fits(encode_from(starts[mid])))
      hi = mid;
    else
      lo = mid + 1;
  }
  // Then the cut moves in steps of half the turns that fit, not one turn at a time: the next
  // turns of the conversation keep the same start, so their prompts extend this one and the
  // prefix cache serves it instead of a whole window being prefilled again every turn.
  const std::size_t step = std::max<std::size_t>(1, (starts.size() - lo) / 2);
  lo = std::min(starts.size() - 1, (lo + step - 1) / step * step);
  if (starts.size() > 1) {
    prompt = encode_from(starts[lo]);
    dropped = static_cast<int>(starts[lo] - first);
  }
  return prompt;
}

}  // namespace ember::runtime
