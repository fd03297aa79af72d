// ember::Engine: the public face of EngineCore.
#include "runtime/engine_core.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

namespace ember {

struct Engine::Impl {
  Impl(const std::string& path, const EngineOptions& options) : core(path, options) {}
  runtime::EngineCore core;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Engine Engine::open(const std::string& path, const EngineOptions& options) {
  return Engine(std::make_unique<Impl>(path, options));
}

Completion Engine::generate(const Request& request, const StreamCallback& on_chunk) {
  if (!impl_) fail(ErrorCode::invalid_argument, "generate() on a moved-from Engine");
  auto seq = impl_->core.make_sequence(request, on_chunk);
  impl_->core.submit(seq);
  impl_->core.run_until_finished(seq);
  return seq->completion;
}

Completion Engine::chat(const std::vector<Message>& messages, const SamplingParams& sampling,
                        const StreamCallback& on_chunk) {
  if (messages.empty()) fail(ErrorCode::invalid_argument, "chat() needs at least one message");
  Request request;
  request.messages = messages;
  request.sampling = sampling;
  return generate(request, on_chunk);
}

std::string Engine::apply_chat_template(const std::vector<Message>& messages) const {
  if (!impl_) fail(ErrorCode::invalid_argument, "apply_chat_template() on a moved-from Engine");
  return impl_->core.render_chat(messages);
}

std::vector<std::int32_t> Engine::tokenize(std::string_view text, bool parse_special) const {
  if (!impl_) fail(ErrorCode::invalid_argument, "tokenize() on a moved-from Engine");
  return impl_->core.tokenizer().encode(text, parse_special, /*add_bos=*/false);
}

std::string Engine::detokenize(const std::vector<std::int32_t>& tokens) const {
  if (!impl_) fail(ErrorCode::invalid_argument, "detokenize() on a moved-from Engine");
  return impl_->core.tokenizer().decode(tokens);
}

ModelInfo Engine::info() const {
  if (!impl_) fail(ErrorCode::invalid_argument, "info() on a moved-from Engine");
  const model::ModelConfig& c = impl_->core.config();
  ModelInfo info;
  info.name = c.name;
  info.architecture = c.architecture;
  info.layers = c.layers;
  info.embedding = c.embedding;
  info.heads = c.heads;
  info.kv_heads = c.kv_heads;
  info.vocab = c.vocab;
  info.context_length = impl_->core.context_length();
  const std::uint64_t d = static_cast<std::uint64_t>(c.embedding);
  const std::uint64_t per_layer = d * static_cast<std::uint64_t>(c.heads * c.head_dim) * 2 +
                                  d * static_cast<std::uint64_t>(c.kv_heads * c.head_dim) * 2 +
                                  3 * d * static_cast<std::uint64_t>(c.ffn) + 2 * d;
  info.parameters = per_layer * static_cast<std::uint64_t>(c.layers) +
                    d * static_cast<std::uint64_t>(c.vocab) * (c.tied_embeddings ? 1 : 2) + d;
  try {
    impl_->core.render_chat({{"user", "x"}});
    info.has_chat_template = true;
  } catch (const Error&) {
    info.has_chat_template = false;
  }
  return info;
}

double Engine::load_ms() const { return impl_ ? impl_->core.load_ms() : 0.0; }

}  // namespace ember
