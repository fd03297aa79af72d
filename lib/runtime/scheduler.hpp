// Continuous batching: each step, every running sequence advances (decodes first, then prefill
// chunks), and waiting requests are admitted while the token budget, the sequence limit and the
// free KV blocks allow. A sequence is just "tokens not yet computed": a decode has one, a prompt
// many, so prefill chunks and decode tokens go into one flattened batch. A decode that
// speculates (SamplingParams::speculative_tokens) adds its draft tokens as rows after its last
// token, each with logits; the engine keeps the ones its sampling confirms (advance()).
//
// Embedding sequences (Sequence::embedding) share the steps: their prompt rows go into the same
// batch as chat decodes and prefills, their rows' hidden states come back instead of logits
// (Batch::hidden_rows). They are not requests: the sequence limit (max_sequences) and the
// request counts (running(), waiting()) are the generating sequences', so an embedding queued
// behind a chat request held back by that limit runs before it; only the token budget and the
// KV blocks hold them back. On an encoder (attention not causal) one runs whole in one step (alone,
// over the budget, when it is longer than the budget). Their blocks never enter the prefix cache,
// neither matched nor published: an encoder's K/V at a position depend on the tokens after it,
// so a decoder must never reuse them; a decoder embedding's would be reusable, but mean pooling
// needs every row's hidden state anyway, and no chat prompt starts with an embedding text's raw
// tokens often enough to pay for the bookkeeping.
//
// Thread-safety: none; the engine calls it under its lock.
#pragma once

#include "backend/batch.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/sequence.hpp"

#include <deque>
#include <memory>
#include <vector>

namespace ember::runtime {

struct SchedulerLimits {
  int max_batch_tokens = 512;     // rows per step
  int max_sequences = 16;         // sequences in one step
  int context_length = 0;         // positions per sequence (drafts stay inside it); 0 = no limit
  bool whole_embeddings = false;  // attention is not causal: an embedding sequence runs in one step
};

// One sequence's share of a step: rows [row_begin, row_begin + rows) of the batch.
struct ScheduledSequence {
  std::shared_ptr<Sequence> sequence;
  int row_begin = 0;
  int rows = 0;                     // the sequence's own tokens, then its draft
  int logit_index = -1;             // index into the step's logits, or -1 when no token is sampled; a
                                    // drafted decode has 1 + draft.size() logit rows from there
  std::vector<std::int32_t> draft;  // tokens proposed after the sequence's last one (its last rows)
  int hidden_index = 0;             // an embedding sequence's first row in the step's hidden states
  int hidden_count = 0;             // and how many of its rows are there (EmbeddingTask::wants)
};

class Scheduler {
 public:
  Scheduler(BlockPool& pool, const SchedulerLimits& limits) : pool_(pool), limits_(limits) {}

  void add(std::shared_ptr<Sequence> sequence);

  // Builds the next step's batch, of at most limits().max_batch_tokens rows. Sequences that can
  // never fit are finished (`context`) and returned through `finished`. Returns the scheduled
  // sequences (empty when there is no work).
  std::vector<ScheduledSequence> schedule(backend::Batch& batch, std::vector<std::shared_ptr<Sequence>>& finished);

  // After the backend ran a step: advances each sequence's computed count over its own rows
  // (not its draft) and publishes the blocks that became full to the prefix cache.
  void commit(const std::vector<ScheduledSequence>& step);
  // `rows` more of the sequence's tokens have their K/V in the cache (accepted draft rows, whose
  // K/V was computed from the token now confirmed at their position); publishes full blocks.
  void advance(Sequence& seq, int rows);

  // Releases a running sequence's blocks and queues it to be computed again from its first
  // token (after its tokens changed: ContextPolicy::shift).
  void recompute(const std::shared_ptr<Sequence>& sequence) { preempt(sequence, /*count=*/false); }

  // Removes a finished or cancelled sequence and releases its blocks.
  void remove(const std::shared_ptr<Sequence>& sequence);

  bool idle() const { return running_.empty() && waiting_.empty(); }
  // Generating sequences running and waiting (embedding sequences are not counted).
  // Every unfinished sequence, running ones first.
  std::vector<std::shared_ptr<Sequence>> sequences() const;
  std::uint64_t preemptions() const { return preemptions_; }
  int running() const;
  int waiting() const;
  const SchedulerLimits& limits() const { return limits_; }

 private:
  void schedule_running(backend::Batch& batch, std::vector<ScheduledSequence>& step, int& budget,
                        std::vector<std::shared_ptr<Sequence>>& finished);
  void admit_waiting(backend::Batch& batch, std::vector<ScheduledSequence>& step, int& budget,
                     std::vector<std::shared_ptr<Sequence>>& finished);
  bool admit(const std::shared_ptr<Sequence>& seq);
  bool reserve_blocks(Sequence& seq, int tokens, const std::vector<ScheduledSequence>& step);
  void preempt(const std::shared_ptr<Sequence>& victim, bool count = true);
  void release_blocks(Sequence& seq);
  // Draft tokens for a decode of `seq`, at most `budget`, inside the blocks it holds or one
  // more free block (a draft never preempts), the context window and max_tokens.
  std::vector<std::int32_t> draft_for(Sequence& seq, int budget);
  void append_rows(const std::shared_ptr<Sequence>& seq, int rows, std::vector<std::int32_t> draft,
                   backend::Batch& batch, std::vector<ScheduledSequence>& step);

  BlockPool& pool_;
  SchedulerLimits limits_;
  std::vector<std::shared_ptr<Sequence>> running_;  // admission order: oldest first
  std::deque<std::shared_ptr<Sequence>> waiting_;   // priority, then arrival
  std::uint64_t preemptions_ = 0;
};

}  // namespace ember::runtime
