#include "runtime/scheduler.hpp"

#include "runtime/speculation.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <string>

namespace ember::runtime {
namespace {

int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

// The tokens a sequence's blocks must hold once admitted: its prompt and, when it generates,
// the first generated token, so that an admitted request does not immediately preempt others.
int tokens_to_hold(const Sequence& seq) { return static_cast<int>(seq.tokens.size()) + (seq.embedding ? 0 : 1); }

// Waiting order: higher priority first, then earlier arrival.
bool runs_before(const Sequence& a, const Sequence& b) {
  return a.priority != b.priority ? a.priority > b.priority : a.id < b.id;
}

// Why a sequence ended with `context` short of the context window: the whole pool cannot hold it.
std::string kv_cache_full(const BlockPool& pool, int tokens) {
  return fmt::format(
      "the KV cache holds {} tokens ({} blocks of {}), fewer than this sequence's {}: raise "
      "EngineOptions::kv_cache_bytes",
      pool.token_capacity(), pool.block_count(), pool.block_size(), tokens);
}

bool in_step(const std::vector<ScheduledSequence>& step, const Sequence* seq) {
  return std::any_of(step.begin(), step.end(), [&](const ScheduledSequence& s) { return s.sequence.get() == seq; });
}

}  // namespace

void Scheduler::add(std::shared_ptr<Sequence> sequence) {
  sequence->state = SequenceState::waiting;
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& w) { return runs_before(*sequence, *w); });
  waiting_.insert(at, std::move(sequence));
}

std::vector<ScheduledSequence> Scheduler::schedule(backend::Batch& batch,
                                                   std::vector<std::shared_ptr<Sequence>>& finished) {
  batch.clear();
  std::vector<ScheduledSequence> step;
  int budget = limits_.max_batch_tokens;
  schedule_running(batch, step, budget, finished);
  admit_waiting(batch, step, budget, finished);
  return step;
}

// 1. Running sequences, oldest first: their decode tokens and the next chunks of their prompts.
void Scheduler::schedule_running(backend::Batch& batch, std::vector<ScheduledSequence>& step, int& budget,
                                 std::vector<std::shared_ptr<Sequence>>& finished) {
  const auto running = running_;  // preemption below edits running_
  const auto decodes = std::count_if(running.begin(), running.end(),
                                     [](const auto& s) { return !s->embedding && s->uncomputed() == 1; });
  const bool speculate = decodes <= kSpeculationMaxDecodes;
  int generating = 0;  // generating sequences in the step
  for (const auto& seq : running) {
    if (seq->state != SequenceState::running) continue;  // preempted earlier in this pass
    if (budget == 0) break;
    const bool embedding = seq->embedding != nullptr;
    if (!embedding && generating == limits_.max_sequences) continue;
    const int rows = std::min(seq->uncomputed(), budget);
    if (rows <= 0) continue;
    if (embedding && limits_.whole_embeddings && rows < seq->uncomputed()) continue;  // (admitted whole)
    if (!reserve_blocks(*seq, seq->computed + rows, step)) {
      // No newer sequence left to preempt. Alone, it can never grow: it ends with `context`;
      // otherwise it yields its blocks to the older ones and is recomputed later.
      if (step.empty() && running_.size() == 1) {
        remove(seq);
        seq->completion.finish_reason = FinishReason::context;
        seq->completion.error = kv_cache_full(pool_, seq->computed + rows);
        finished.push_back(seq);
      } else {
        preempt(seq);
      }
      continue;
    }
    std::vector<std::int32_t> draft;
    if (speculate && seq->uncomputed() == 1 && seq->sampling.speculative_tokens > 0 && !embedding)
      draft = draft_for(*seq, budget - rows);
    budget -= rows + static_cast<int>(draft.size());
    append_rows(seq, rows, std::move(draft), batch, step);
    generating += embedding ? 0 : 1;
  }
}

// 2. Waiting requests in priority order, while the budget, the sequence limit and the free
//    blocks allow. Admission never preempts: only running sequences grow by preemption.
void Scheduler::admit_waiting(backend::Batch& batch, std::vector<ScheduledSequence>& step, int& budget,
                              std::vector<std::shared_ptr<Sequence>>& finished) {
  int generating = static_cast<int>(
      std::count_if(step.begin(), step.end(), [](const ScheduledSequence& s) { return !s.sequence->embedding; }));
  int running_generating = running();
  for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0;) {
    const auto seq = *it;
    const bool embedding = seq->embedding != nullptr;
    if (!embedding && (generating >= limits_.max_sequences || running_generating >= limits_.max_sequences)) {
      ++it;  // held by the sequence limit, which embedding sequences behind it do not count in
      continue;
    }
    const int needed = blocks_for(tokens_to_hold(*seq), pool_.block_size());
    if (needed > pool_.block_count()) {  // could not fit even in an empty pool
      it = waiting_.erase(it);
      seq->state = SequenceState::finished;
      seq->completion.finish_reason = FinishReason::context;
      seq->completion.error = kv_cache_full(pool_, tokens_to_hold(*seq));
      finished.push_back(seq);
      continue;
    }
    const bool whole = embedding && limits_.whole_embeddings;
    if (whole && budget < seq->uncomputed() && !step.empty()) break;  // whole in a later step, alone if it must be
    if (!admit(seq)) break;  // keep arrival order: wait for blocks rather than skip ahead
    it = waiting_.erase(it);
    running_.push_back(seq);
    seq->state = SequenceState::running;
    if (!seq->first_scheduled) seq->first_scheduled = Clock::now();
    // After admit(): a prefix-cache hit has already computed the start of the prompt.
    const int rows = whole ? seq->uncomputed() : std::min(seq->uncomputed(), budget);
    append_rows(seq, rows, {}, batch, step);
    budget = std::max(0, budget - rows);
    if (!embedding) {
      ++generating;
      ++running_generating;
    }
  }
}

int Scheduler::running() const {
  return static_cast<int>(std::count_if(running_.begin(), running_.end(), [](const auto& s) { return !s->embedding; }));
}

int Scheduler::waiting() const {
  return static_cast<int>(std::count_if(waiting_.begin(), waiting_.end(), [](const auto& s) { return !s->embedding; }));
}

bool Scheduler::admit(const std::shared_ptr<Sequence>& seq) {
  const int bs = pool_.block_size();
  if (seq->blocks.empty()) {
    if (!seq->embedding) seq->blocks = pool_.match_prefix(seq->tokens, seq->prefix_root);
    seq->published_blocks = static_cast<int>(seq->blocks.size());
    seq->computed = seq->published_blocks * bs;
    seq->last_block_hash = seq->prefix_root;
    for (int b = 0; b < seq->published_blocks; ++b)
      seq->last_block_hash = BlockPool::block_hash(
          seq->last_block_hash,
          std::span(seq->tokens).subspan(static_cast<std::size_t>(b * bs), static_cast<std::size_t>(bs)));
    if (!seq->first_scheduled) seq->completion.cached_prompt_tokens = std::min(seq->computed, seq->prompt_tokens);
  }
  const int needed = blocks_for(tokens_to_hold(*seq), bs) - static_cast<int>(seq->blocks.size());
  if (needed > pool_.free_blocks()) {
    release_blocks(*seq);
    return false;
  }
  const bool whole = seq->embedding && limits_.whole_embeddings;
  const int first_chunk = whole ? seq->uncomputed() : std::min(seq->uncomputed(), limits_.max_batch_tokens);
  const bool ok = reserve_blocks(*seq, seq->computed + first_chunk, {});
  EMBER_ASSERT(ok);
  return true;
}

bool Scheduler::reserve_blocks(Sequence& seq, int tokens, const std::vector<ScheduledSequence>& step) {
  const int needed = blocks_for(tokens, pool_.block_size());
  while (static_cast<int>(seq.blocks.size()) < needed) {
    if (auto block = pool_.allocate()) {
      seq.blocks.push_back(*block);
      continue;
    }
    // Out of blocks: preempt the most recently admitted sequence that is not already in this
    // step (its recompute is the cheapest to lose; the oldest requests keep making progress).
    // Never an older sequence on behalf of a newer one.
    auto victim = std::find_if(running_.rbegin(), running_.rend(), [&](const auto& s) {
      return s.get() != &seq && s->id > seq.id && !in_step(step, s.get());
    });
    if (victim == running_.rend()) return false;
    const std::shared_ptr<Sequence> chosen = *victim;  // preempt() erases it from running_
    preempt(chosen);
  }
  return true;
}

std::vector<std::shared_ptr<Sequence>> Scheduler::sequences() const {
  std::vector<std::shared_ptr<Sequence>> all(running_.begin(), running_.end());
  all.insert(all.end(), waiting_.begin(), waiting_.end());
  return all;
}

void Scheduler::preempt(const std::shared_ptr<Sequence>& victim, bool count) {
  if (count) ++preemptions_;
  release_blocks(*victim);
  if (victim->embedding) victim->embedding->restart();
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  add(victim);  // recomputed later; its published blocks are likely still cached
}

void Scheduler::release_blocks(Sequence& seq) {
  // Last to first, so the LRU evicts the tail of a chain before its shared head.
  for (auto it = seq.blocks.rbegin(); it != seq.blocks.rend(); ++it) pool_.release(*it);
  seq.blocks.clear();
  seq.computed = 0;
  seq.published_blocks = 0;
  seq.last_block_hash = seq.prefix_root;
}

std::vector<std::int32_t> Scheduler::draft_for(Sequence& seq, int budget) {
  const int bs = pool_.block_size();
  const int next = static_cast<int>(seq.tokens.size());  // the first draft token's position
  if (seq.draft_length == 0) seq.draft_length = seq.sampling.speculative_tokens;
  int limit = std::min({seq.draft_length, budget, seq.sampling.max_tokens - seq.generated() - 1});
  // Every accepted token but the last must leave the window unfilled: then a sequence fills
  // it, or shifts, only on its last token of a step, as it does without a draft.
  if (limits_.context_length > 0) limit = std::min(limit, limits_.context_length - 1 - next);
  std::vector<std::int32_t> draft = propose_by_lookup(seq.tokens, limit);
  const int held = static_cast<int>(seq.blocks.size()) * bs - next;  // positions after the decode row
  if (static_cast<int>(draft.size()) > held && pool_.free_blocks() > 0)
    if (auto block = pool_.allocate()) seq.blocks.push_back(*block);
  draft.resize(static_cast<std::size_t>(
      std::clamp(static_cast<int>(seq.blocks.size()) * bs - next, 0, static_cast<int>(draft.size()))));
  return draft;
}

void Scheduler::append_rows(const std::shared_ptr<Sequence>& seq, int rows, std::vector<std::int32_t> draft,
                            backend::Batch& batch, std::vector<ScheduledSequence>& step) {
  const int bs = pool_.block_size();
  const int drafted = static_cast<int>(draft.size());
  ScheduledSequence s{seq, batch.rows(), rows + drafted, -1, std::move(draft)};
  for (int i = 0; i < rows + drafted; ++i) {
    const int pos = seq->computed + i;
    batch.tokens.push_back(i < rows ? seq->tokens[static_cast<std::size_t>(pos)]
                                    : s.draft[static_cast<std::size_t>(i - rows)]);
    batch.positions.push_back(pos);
    batch.slots.push_back(seq->blocks[static_cast<std::size_t>(pos / bs)] * bs + pos % bs);
  }
  batch.sequences.push_back({s.row_begin, rows + drafted, seq->blocks, seq->adapters});
  if (seq->embedding) {  // hidden states instead of logits, of the rows its pooling reads
    s.hidden_index = static_cast<int>(batch.hidden_rows.size());
    for (int i = 0; i < rows; ++i)
      if (seq->embedding->wants(seq->computed + i, static_cast<int>(seq->tokens.size())))
        batch.hidden_rows.push_back(s.row_begin + i);
    s.hidden_count = static_cast<int>(batch.hidden_rows.size()) - s.hidden_index;
    step.push_back(std::move(s));
    return;
  }
  if (seq->computed + rows == static_cast<int>(seq->tokens.size())) {
    s.logit_index = static_cast<int>(batch.logit_rows.size());
    for (int i = rows - 1; i < rows + drafted; ++i) batch.logit_rows.push_back(s.row_begin + i);
  }
  step.push_back(std::move(s));
}

void Scheduler::commit(const std::vector<ScheduledSequence>& step) {
  for (const ScheduledSequence& s : step) advance(*s.sequence, s.rows - static_cast<int>(s.draft.size()));
}

void Scheduler::advance(Sequence& seq, int rows) {
  const int bs = pool_.block_size();
  seq.computed += rows;
  if (seq.embedding) return;  // never published (the class comment says why)
  while ((seq.published_blocks + 1) * bs <= seq.computed) {
    const auto block_tokens =
        std::span(seq.tokens)
            .subspan(static_cast<std::size_t>(seq.published_blocks * bs), static_cast<std::size_t>(bs));
    seq.last_block_hash = pool_.publish_full_block(seq.blocks[static_cast<std::size_t>(seq.published_blocks)],
                                                   seq.last_block_hash, block_tokens);
    ++seq.published_blocks;
  }
}

void Scheduler::remove(const std::shared_ptr<Sequence>& sequence) {
  release_blocks(*sequence);
  if (auto it = std::find(running_.begin(), running_.end(), sequence); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), sequence); it != waiting_.end()) waiting_.erase(it);
  sequence->state = SequenceState::finished;
}

}  // namespace ember::runtime
