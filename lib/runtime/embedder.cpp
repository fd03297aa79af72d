// EngineCore::embed: embedding passes between the engine's generation steps.
//
// Under the engine's lock (so between two steps; a step paused inside its pass is finished
// first, since the backend holds its state), the token lists are packed into batches of up to
// max_batch_tokens rows, each sequence whole (an encoder's attention sees its whole sequence in
// one pass), given KV blocks from the pool for the pass only (never published: an encoder's K/V
// at a position depend on later tokens, so they are no reusable prefix), run through
// Backend::forward_hidden and pooled as llama.cpp pools (llama-context's embd_seq: the average,
// the first or the last row), then L2-normalised as llama.cpp's common_embd_normalize(2); or,
// for rank pooling, the first row through the classification head (model/classifier_head.hpp).
#include "runtime/engine_core.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cmath>

namespace ember::runtime {
namespace {

Pooling resolve_pooling(Pooling asked, const model::ModelConfig& c) {
  if (asked != Pooling::model_default) return asked;
  switch (c.pooling_type) {
    case 0: return Pooling::none;
    case 1: return Pooling::mean;
    case 2: return Pooling::cls;
    case 3: return Pooling::last;
    case 4: return Pooling::rank;
    default: return c.has_lm_head ? Pooling::last : Pooling::mean;
  }
}

// Rank pooling as llama.cpp runs it on encoders: the head over each sequence's first token.
// (On Qwen3-style decoder rerankers llama.cpp takes the last token and a softmax instead.)
void check_rank(const model::ModelConfig& c, const std::optional<model::ClassifierHead>& head) {
  if (c.causal)
    fail(ErrorCode::unsupported, "'{}': rank pooling on a decoder (a Qwen3-Reranker-style file) is not run by ember",
         c.name);
  if (!head)
    fail(ErrorCode::unsupported, "'{}' has no classification head (cls.weight, cls.output.weight) for rank pooling",
         c.name);
}

void normalize(float* v, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  const double norm = std::sqrt(sum);
  const float k = norm > 0.0 ? static_cast<float>(1.0 / norm) : 0.0f;  // llama.cpp: a zero vector stays zero
  for (std::int64_t i = 0; i < n; ++i) v[i] *= k;
}

// The rows of `hidden` (in order from `first`) a sequence of `count` tokens gave, pooled.
Embedding pool(const float* hidden, std::int64_t count, std::int64_t d, Pooling pooling, bool l2) {
  Embedding e;
  e.tokens = static_cast<int>(count);
  if (pooling == Pooling::none) {
    e.values.assign(hidden, hidden + count * d);
    if (l2)
      for (std::int64_t r = 0; r < count; ++r) normalize(e.values.data() + r * d, d);
    return e;
  }
  e.values.assign(static_cast<std::size_t>(d), 0.0f);
  if (pooling == Pooling::mean) {
    for (std::int64_t r = 0; r < count; ++r)
      for (std::int64_t i = 0; i < d; ++i) e.values[static_cast<std::size_t>(i)] += hidden[r * d + i];
    const float k = 1.0f / static_cast<float>(count);
    for (float& v : e.values) v *= k;
  } else {  // cls, last, rank: the one row the batch asked for
    std::copy(hidden, hidden + d, e.values.begin());
  }
  if (l2) normalize(e.values.data(), d);
  return e;
}

}  // namespace

int EngineCore::embed_limit() const {
  return config_.position_embeddings ? std::min(context_length_, config_.context_length) : context_length_;
}

std::vector<Embedding> EngineCore::embed(const std::vector<std::vector<std::int32_t>>& lists,
                                         const EmbedOptions& options) {
  const Pooling pooling = resolve_pooling(options.pooling, config_);
  if (pooling == Pooling::rank) check_rank(config_, classifier_);
  for (const auto& tokens : lists) {
    if (tokens.empty()) fail(ErrorCode::invalid_argument, "embed: a text without tokens");
    if (static_cast<int>(tokens.size()) > embed_limit())
      fail(ErrorCode::context_overflow, "embed: {} tokens do not fit the {} the model embeds at once", tokens.size(),
           embed_limit());
    for (const std::int32_t t : tokens)
      if (t < 0 || t >= config_.vocab)
        fail(ErrorCode::invalid_argument, "embed: token id {} is outside the vocabulary of {}", t, config_.vocab);
  }
  const std::int64_t d = config_.embedding;
  const int bs = pool_->block_size();
  std::vector<Embedding> out;
  out.reserve(lists.size());
  auto lock = lock_.lock();
  while (stepper_->paused()) stepper_->step();  // the backend holds a paused pass's state
  backend::Batch batch;
  std::vector<int> blocks;
  std::vector<float> hidden;
  for (std::size_t next = 0; next < lists.size();) {
    batch.clear();
    blocks.clear();
    std::size_t end = next;
    // Whole sequences up to the batch budget; one that is longer alone still runs alone.
    for (; end < lists.size(); ++end) {
      const auto n = static_cast<std::int32_t>(lists[end].size());
      if (end > next && batch.rows() + n > options_.max_batch_tokens) break;
      const int needed = (n + bs - 1) / bs;
      if (pool_->free_blocks() < needed) {
        if (end > next) break;  // the batch so far runs first and gives its blocks back
        fail(ErrorCode::out_of_memory, "embed: the KV cache has no room for {} tokens now", n);
      }
      backend::SequenceSlice slice{batch.rows(), n, {}, {}};
      for (int b = 0; b < needed; ++b) slice.block_table.push_back(*pool_->allocate());
      for (std::int32_t p = 0; p < n; ++p) {
        batch.tokens.push_back(lists[end][static_cast<std::size_t>(p)]);
        batch.positions.push_back(p);
        batch.slots.push_back(slice.block_table[static_cast<std::size_t>(p / bs)] * bs + p % bs);
        const bool output = pooling == Pooling::mean || pooling == Pooling::none ||
                            ((pooling == Pooling::cls || pooling == Pooling::rank) && p == 0) ||
                            (pooling == Pooling::last && p == n - 1);
        if (output) batch.logit_rows.push_back(slice.row_begin + p);
      }
      blocks.insert(blocks.end(), slice.block_table.begin(), slice.block_table.end());
      batch.sequences.push_back(std::move(slice));
    }
    try {
      backend_->forward_hidden(batch, *kv_, hidden);
    } catch (...) {
      for (const int held : blocks) pool_->release(held);
      throw;
    }
    for (const int held : blocks) pool_->release(held);
    std::int64_t row = 0;  // in the output rows
    for (std::size_t s = next; s < end; ++s) {
      const auto n = static_cast<std::int64_t>(lists[s].size());
      const std::int64_t rows = pooling == Pooling::mean || pooling == Pooling::none ? n : 1;
      Embedding e;
      if (pooling == Pooling::rank)  // the head's scores, never normalised
        e.values = classifier_->apply(hidden.data() + row * d);
      else
        e = pool(hidden.data() + row * d, rows, d, pooling, options.normalize);
      e.tokens = static_cast<int>(n);
      out.push_back(std::move(e));
      row += rows;
    }
    next = end;
  }
  return out;
}

}  // namespace ember::runtime
