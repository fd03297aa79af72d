// ember::Engine and ember::RequestHandle: the public face of EngineCore.
#include "grammar/json_schema.hpp"
#include "runtime/engine_core.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

namespace ember {

struct Engine::Impl {
  // The engine stops here, on the thread that destroys it, whoever still holds the core.
  ~Impl() {
    if (core) core->shutdown();
  }
  std::shared_ptr<runtime::EngineCore> core;
};

runtime::EngineCore& Engine::core(const char* caller) const {
  if (!impl_) fail(ErrorCode::invalid_argument, "{}() on a moved-from Engine", caller);
  return *impl_->core;
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::open(const std::string& path, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->core = std::make_shared<runtime::EngineCore>(path, options);
  const int missing = impl->core->tokenizer().missing_byte_tokens();
  if (missing > 0 && options.log) {
    try {
      options.log(LogLevel::warning,
                  fmt::format("the vocabulary of {} has no token for {} of the 256 byte values: text "
                              "containing them cannot be tokenized exactly (unknown token or fallback)",
                              path, missing));
    } catch (...) {  // a throwing log callback loses its line, as in EngineCore::log
    }
  }
  return Engine(std::move(impl));
}

RequestHandle Engine::submit(const Request& request, StreamCallback on_chunk) {
  runtime::EngineCore& engine = core("submit");
  auto seq = engine.make_sequence(request, std::move(on_chunk));
  engine.submit(seq);
  return RequestHandle(std::move(seq), impl_->core);
}

Completion Engine::generate(const Request& request, const StreamCallback& on_chunk) {
  return submit(request, on_chunk).wait();
}

Completion Engine::chat(const std::vector<Message>& messages, const SamplingParams& sampling,
                        const StreamCallback& on_chunk) {
  if (messages.empty()) fail(ErrorCode::invalid_argument, "chat() needs at least one message");
  Request request;
  request.messages = messages;
  request.sampling = sampling;
  return generate(request, on_chunk);
}

StepResult Engine::step(std::chrono::microseconds budget) { return core("step").run_for(budget); }

EngineStats Engine::stats() const { return core("stats").stats(); }

std::string Engine::apply_chat_template(const std::vector<Message>& messages) const {
  return core("apply_chat_template").render_chat(messages);
}

std::string Engine::apply_chat_template_json(std::string_view messages_json, std::string_view tools_json,
                                             std::string_view extra_json, bool add_generation_prompt) const {
  return core("apply_chat_template_json")
      .requests()
      .render_chat_json(messages_json, tools_json, extra_json, add_generation_prompt);
}

std::string Engine::chat_template_source() const {
  return core("chat_template_source").requests().chat_template_source();
}

std::vector<std::int32_t> Engine::tokenize(std::string_view text, bool parse_special) const {
  return core("tokenize").tokenizer().encode(text, parse_special, /*add_bos=*/false);
}

std::string Engine::detokenize(const std::vector<std::int32_t>& tokens) const {
  return core("detokenize").tokenizer().decode(tokens);
}

ModelInfo Engine::info() const {
  const runtime::EngineCore& engine = core("info");
  const model::ModelConfig& c = engine.config();
  ModelInfo info;
  info.name = c.name;
  info.architecture = c.architecture;
  info.layers = c.layers;
  info.embedding = c.embedding;
  info.heads = c.heads;
  info.kv_heads = c.kv_heads;
  info.vocab = c.vocab;
  info.context_length = engine.context_length();
  info.experts = c.routed() ? c.experts : 0;
  info.experts_used = c.routed() ? c.experts_used : 0;
  const std::uint64_t d = static_cast<std::uint64_t>(c.embedding);
  // A routed layer's feed-forward: every expert's three matrices and the router.
  const std::uint64_t feed_forward =
      c.routed() ? static_cast<std::uint64_t>(c.experts) * (3 * d * static_cast<std::uint64_t>(c.expert_ffn) + d)
                 : 3 * d * static_cast<std::uint64_t>(c.ffn);
  const std::uint64_t per_layer = d * static_cast<std::uint64_t>(c.heads * c.head_dim) * 2 +
                                  d * static_cast<std::uint64_t>(c.kv_heads * c.head_dim) * 2 + feed_forward + 2 * d;
  info.parameters = per_layer * static_cast<std::uint64_t>(c.layers) +
                    d * static_cast<std::uint64_t>(c.vocab) * (c.tied_embeddings ? 1 : 2) + d;
  info.has_chat_template = engine.has_chat_template();
  info.weight_format = engine.weight_format();
  info.decode_weight_bytes = engine.decode_weight_bytes();
  info.cpu_tier = engine.cpu_tier();
  static constexpr const char* kPoolings[] = {"none", "mean", "cls", "last", "rank"};
  if (c.pooling_type >= 0) info.pooling = kPoolings[c.pooling_type];
  info.embedding_only = !c.has_lm_head;
  if (engine.classifier()) info.classifier_outputs = static_cast<int>(engine.classifier()->outputs());
  return info;
}

std::vector<Embedding> Engine::embed(const std::vector<std::string>& texts, const EmbedOptions& options) {
  runtime::EngineCore& engine = core("embed");
  const tokenizer::Tokenizer& tok = engine.tokenizer();
  std::vector<std::vector<std::int32_t>> lists;
  lists.reserve(texts.size());
  for (const std::string& text : texts) lists.push_back(tok.encode(text, /*parse_special=*/false, options.add_special));
  const auto limit = static_cast<std::size_t>(engine.embed_limit());
  for (auto& tokens : lists) {
    if (tokens.size() <= limit) continue;
    if (!options.truncate)
      fail(ErrorCode::context_overflow, "a text of {} tokens does not fit the {} the model embeds at once",
           tokens.size(), limit);
    // Cut inside the text, keeping the closing special token ([SEP]) where there is one.
    const bool keep_end = options.add_special && tok.add_bos() && tokens.back() != tokens[limit - 1] &&
                          tok.token_type(tokens.back()) == tokenizer::TokenType::control;
    const std::int32_t end = tokens.back();
    tokens.resize(limit);
    if (keep_end) tokens.back() = end;
  }
  return engine.embed(lists, options);
}

std::vector<Embedding> Engine::embed_tokens(const std::vector<std::vector<std::int32_t>>& token_lists,
                                            const EmbedOptions& options) {
  runtime::EngineCore& engine = core("embed_tokens");
  const auto limit = static_cast<std::size_t>(engine.embed_limit());
  std::vector<std::vector<std::int32_t>> lists = token_lists;
  for (auto& tokens : lists) {
    if (tokens.size() <= limit) continue;
    if (!options.truncate)
      fail(ErrorCode::context_overflow, "a token list of {} tokens does not fit the {} the model embeds at once",
           tokens.size(), limit);
    tokens.resize(limit);
  }
  return engine.embed(lists, options);
}

double Engine::load_ms() const { return core("load_ms").load_ms(); }

std::vector<std::uint8_t> Engine::save_state(const std::vector<std::int32_t>& tokens) {
  return core("save_state").save_state({tokens});
}

std::size_t Engine::load_state(const std::vector<std::uint8_t>& snapshot) {
  return core("load_state").load_state(snapshot);
}

void Engine::save_state_file(const std::string& path, const std::vector<std::int32_t>& tokens) {
  runtime::write_snapshot_file(path, core("save_state_file").save_state({tokens}));
}

std::size_t Engine::load_state_file(const std::string& path) { return core("load_state_file").load_state_file(path); }

void Engine::save_prefix_store(const std::string& path, const std::vector<Request>& prompts) {
  runtime::EngineCore& engine = core("save_prefix_store");
  std::vector<std::vector<std::int32_t>> token_lists;
  for (const Request& request : prompts) token_lists.push_back(engine.make_sequence(request, {})->tokens);
  runtime::write_snapshot_file(path, engine.save_state(token_lists));
}

// ---- RequestHandle ----

std::uint64_t RequestHandle::id() const {
  if (!sequence_) fail(ErrorCode::invalid_argument, "id() on an empty RequestHandle");
  return sequence_->id;
}

RequestStatus RequestHandle::status() const {
  if (!sequence_) fail(ErrorCode::invalid_argument, "status() on an empty RequestHandle");
  if (auto core = core_.lock()) return core->status(*sequence_);
  return RequestStatus::finished;  // the engine is gone; it finished every request first
}

Completion RequestHandle::wait() {
  if (!sequence_) fail(ErrorCode::invalid_argument, "wait() on an empty RequestHandle");
  if (auto core = core_.lock()) core->wait(sequence_);
  return sequence_->completion;
}

void RequestHandle::cancel() {
  if (!sequence_) fail(ErrorCode::invalid_argument, "cancel() on an empty RequestHandle");
  if (auto core = core_.lock()) core->cancel(sequence_);
}

void RequestHandle::cancel_soon() {
  if (!sequence_) fail(ErrorCode::invalid_argument, "cancel_soon() on an empty RequestHandle");
  if (auto core = core_.lock()) core->cancel_soon(sequence_);
}

std::string json_schema_to_gbnf(std::string_view schema, std::string_view root_rule) {
  return grammar::json_schema_to_gbnf(schema, root_rule);
}

}  // namespace ember
