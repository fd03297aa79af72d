// EngineCore::embed: each token list becomes an embedding sequence (Sequence::embedding) queued
// in the scheduler beside the generation requests, so embedding rows and chat rows share steps:
// one forward pass computes the chat rows' logits and the embedding rows' hidden states
// (Batch::hidden_rows), and each sequence pools its own rows (runtime/embedding_task.hpp). The
// caller waits as for a request: the background thread steps, or the caller steps the engine
// itself, letting other threads' submissions and embed calls into the same steps.
#include "runtime/engine_core.hpp"

#include "util/check.hpp"

namespace ember::runtime {
namespace {

// The error a sequence that did not finish its embedding ends the call with.
[[noreturn]] void fail_unfinished(const Sequence& seq) {
  const Completion& c = seq.completion;
  switch (c.finish_reason) {
    case FinishReason::context:
      fail(ErrorCode::out_of_memory, "embed: the KV cache cannot hold {} tokens", seq.tokens.size());
    case FinishReason::cancelled: fail(ErrorCode::cancelled, "embed: {}", c.error.empty() ? "cancelled" : c.error);
    default: fail(ErrorCode::internal, "embed: {}", c.error.empty() ? "the sequence did not finish" : c.error);
  }
}

}  // namespace

int EngineCore::embed_limit() const {
  return config_.position_embeddings ? std::min(context_length_, config_.context_length) : context_length_;
}

std::vector<Embedding> EngineCore::embed(const std::vector<std::vector<std::int32_t>>& lists,
                                         const EmbedOptions& options) {
  const Pooling pooling = resolve_pooling(options.pooling, config_);
  if (pooling == Pooling::rank) check_rank_pooling(config_, classifier_);
  if (!backend_->computes_hidden())
    fail(ErrorCode::unsupported, "backend '{}' does not compute embeddings; use the CPU", backend_->name());
  for (const auto& tokens : lists) {
    if (tokens.empty()) fail(ErrorCode::invalid_argument, "embed: a text without tokens");
    if (static_cast<int>(tokens.size()) > embed_limit())
      fail(ErrorCode::context_overflow, "embed: {} tokens do not fit the {} the model embeds at once", tokens.size(),
           embed_limit());
    for (const std::int32_t t : tokens)
      if (t < 0 || t >= config_.vocab)
        fail(ErrorCode::invalid_argument, "embed: token id {} is outside the vocabulary of {}", t, config_.vocab);
  }
  const model::ClassifierHead* head = pooling == Pooling::rank ? &*classifier_ : nullptr;
  std::vector<std::shared_ptr<Sequence>> sequences;
  sequences.reserve(lists.size());
  for (const auto& tokens : lists) {
    auto seq = std::make_shared<Sequence>(0, SamplingParams{}, config_.vocab, *tokenizer_, nullptr);
    seq->tokens = tokens;
    seq->prompt_tokens = static_cast<int>(tokens.size());
    seq->embedding = std::make_unique<EmbeddingTask>(pooling, options.normalize, head, config_.embedding);
    sequences.push_back(std::move(seq));
  }
  {
    auto lock = lock_.lock();
    if (stopping_) fail(ErrorCode::invalid_argument, "embed() on an engine that is shutting down");
    for (const auto& seq : sequences) {
      seq->id = next_id_++;
      seq->submitted = Clock::now();
      scheduler_->add(seq);
    }
    if (driver_) driver_->queued();
  }
  for (const auto& seq : sequences) wait(seq);
  std::vector<Embedding> out;
  out.reserve(sequences.size());
  for (const auto& seq : sequences) {
    if (seq->completion.finish_reason != FinishReason::stop) fail_unfinished(*seq);
    out.push_back(seq->embedding->result());
  }
  return out;
}

}  // namespace ember::runtime
