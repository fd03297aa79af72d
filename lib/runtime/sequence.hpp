// The engine's state for one request: its tokens, its KV blocks, its sampler and the text
// pipeline (incremental decoder, stop strings), and the clock readings behind its Timings.
#pragma once

#include "backend/batch.hpp"
#include "grammar/token_mask.hpp"
#include "model/lora_adapter.hpp"
#include "runtime/embedding_task.hpp"
#include "runtime/sampler.hpp"
#include "runtime/stop_matcher.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ember::runtime {

using Clock = std::chrono::steady_clock;

enum class SequenceState { waiting, running, finished };

// Where a thinking model's output is: reasoning between its markers, then the answer. Decided
// per token in OutputStage; the markers come from the chat template. Qwen3 and DeepSeek-R1:
// <think> (one token, written by the model) ... </think>. gpt-oss's channels: every turn starts
// on the analysis channel, so "<|channel|>analysis<|message|>" (several tokens) is forced
// there; the model's <|end|> closes it, and the final channel's header
// "<|start|>assistant<|channel|>final<|message|>" is forced before the answer.
struct ReasoningTrack {
  std::vector<std::int32_t> open;    // the opening marker's tokens; empty: reasoning is not separated
  std::int32_t close = -1;           // the closing marker token
  std::vector<std::int32_t> answer;  // the answer's header after the close (channels); else empty
  std::vector<std::int32_t> forced;  // marker tokens to force next, the next one last
  bool inside = false;               // the next generated tokens are reasoning
  bool closed = false;               // a reasoning block ended (its answer's leading space is dropped)
  bool over = false;                 // no reasoning can start any more (the answer has begun)
  bool text_started = false;         // the current stream has written non-space text
  std::optional<std::chrono::steady_clock::time_point> start, end;

  bool channels() const { return !answer.empty(); }
};

struct Sequence {
  Sequence(std::uint64_t id_, const SamplingParams& params, int vocab, const tokenizer::Tokenizer& tokenizer,
           StreamCallback callback)
      : id(id_),
        sampling(params),
        sampler(params, vocab),
        stops(params.stop),
        decoder(tokenizer),
        on_chunk(std::move(callback)) {}

  std::uint64_t id;  // arrival order: lower ids arrived first
  int priority = 0;
  SamplingParams sampling;
  Sampler sampler;
  StopMatcher stops;
  tokenizer::IncrementalDecoder decoder;
  StreamCallback on_chunk;
  // The grammar state of a constrained request (SamplingParams::grammar / json_schema): it
  // depends only on this sequence's generated tokens, never on the batch it runs in.
  std::unique_ptr<grammar::TokenConstraint> constraint;
  ReasoningTrack reasoning;
  // An embedding sequence (Engine::embed, rerank): its prompt is computed and pooled, nothing is
  // sampled, and its KV blocks never enter the prefix cache (Scheduler). Null: it generates.
  std::unique_ptr<EmbeddingTask> embedding;

  std::vector<std::int32_t> tokens;  // prompt, then every generated token
  int prompt_tokens = 0;
  int shifted_tokens = 0;             // tokens ContextPolicy::shift dropped from `tokens`
  bool shift_on_full = false;         // ContextPolicy::shift: make room instead of ending
  int context_keep = 0;               // tokens a shift keeps at the start
  int computed = 0;                   // leading tokens whose K/V are in the cache
  std::vector<std::int32_t> blocks;   // block table: logical block i -> pool block
  int published_blocks = 0;           // leading blocks registered in the prefix cache
  std::uint64_t last_block_hash = 0;  // hash chain up to published_blocks
  // LoRA adapters (SamplingParams::adapters, scale 0 left out) as the backend applies them;
  // `adapter_refs` keeps them alive while the sequence does. prefix_root: the parent hash of the
  // sequence's first KV block, 0 without adapters (BlockPool::match_prefix).
  std::vector<std::shared_ptr<const model::LoraAdapter>> adapter_refs;
  std::vector<backend::LoraUse> adapters;
  std::uint64_t prefix_root = 0;
  bool cancel_requested = false;
  // RequestHandle::cancel_soon: set from any thread without the engine's lock; the stepping
  // thread ends the request before its next step (Stepper::end_cancelled).
  std::atomic<bool> cancel_soon{false};
  // Draft tokens the next speculative step may propose (SamplingParams::speculative_tokens at
  // most): grows by 2 after a draft accepted whole, falls to one more than the accepted run
  // after a rejection, so rows are spent where drafts are being confirmed.
  int draft_length = 0;

  SequenceState state = SequenceState::waiting;
  Completion completion;
  // Set once the completion is final (after the last chunk), for waiters that do not hold the
  // engine's lock: nothing writes the completion after this.
  std::atomic<bool> done{false};

  Clock::time_point submitted = Clock::now();
  std::optional<Clock::time_point> first_scheduled, first_token, last_token;
  double response_seconds = 0;  // detokenizing, stop checks, callbacks
  std::string pending_tail;     // text released at the end, sent with the last chunk
  std::string response_key;     // exact response cache key; empty when the cache is off

  int uncomputed() const { return static_cast<int>(tokens.size()) - computed; }
  int generated() const { return static_cast<int>(tokens.size()) + shifted_tokens - prompt_tokens; }
};

}  // namespace ember::runtime
