#include "sequence_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace ember::test {

SequenceRunner::SequenceRunner(backend::Backend& backend, int max_tokens, KvCacheType kv_type, int block_size)
    : backend_(backend), block_size_(block_size) {
  const model::ModelConfig& c = backend.config();
  backend::KvGeometry g;
  g.layers = c.layers;
  g.kv_heads = c.kv_heads;
  g.head_dim = c.head_dim;
  g.block_size = block_size;
  g.block_count = (max_tokens + block_size - 1) / block_size;
  g.dtype = kv_type;
  kv_ = backend.make_kv_cache(g);
  // Blocks in reverse order, so that a test also exercises a non-identity block table.
  block_table_.resize(static_cast<std::size_t>(g.block_count));
  std::iota(block_table_.rbegin(), block_table_.rend(), 0);
}

std::vector<float> SequenceRunner::append(const std::vector<std::int32_t>& tokens, bool all_rows, int chunk,
                                          int* pieces) {
  const int vocab = backend_.config().vocab;
  std::vector<float> result, logits;
  for (std::size_t begin = 0; begin < tokens.size(); begin += static_cast<std::size_t>(chunk)) {
    const std::size_t end = std::min(tokens.size(), begin + static_cast<std::size_t>(chunk));
    backend::Batch batch;
    for (std::size_t i = begin; i < end; ++i) {
      const int pos = length_++;
      batch.tokens.push_back(tokens[i]);
      batch.positions.push_back(pos);
      batch.slots.push_back(block_table_[static_cast<std::size_t>(pos / block_size_)] * block_size_ +
                            pos % block_size_);
      if (all_rows || i + 1 == tokens.size()) batch.logit_rows.push_back(static_cast<std::int32_t>(i - begin));
    }
    const int blocks_used = (length_ + block_size_ - 1) / block_size_;
    batch.sequences.push_back({0, batch.rows(),
                               std::vector<std::int32_t>(block_table_.begin(), block_table_.begin() + blocks_used),
                               adapters});
    if (pieces == nullptr) {
      backend_.forward(batch, *kv_, logits);
    } else {
      backend_.begin_forward(batch, *kv_, logits, nullptr);
      const auto deadline = [&] {
        return piece_budget == std::chrono::steady_clock::duration::zero()
                   ? std::chrono::steady_clock::time_point::min()
                   : std::chrono::steady_clock::now() + piece_budget;
      };
      do ++*pieces;
      while (!backend_.advance_forward(deadline()));
    }
    result.insert(result.end(), logits.begin(),
                  logits.begin() + static_cast<std::ptrdiff_t>(batch.logit_rows.size()) * vocab);
  }
  return result;
}

std::int32_t argmax(const float* logits, int vocab, float* top2_gap) {
  std::int32_t best = 0, second = -1;
  for (std::int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) {
      second = best;
      best = i;
    } else if (second < 0 || logits[i] > logits[second]) {
      second = i;
    }
  }
  if (top2_gap != nullptr) *top2_gap = second < 0 ? INFINITY : logits[best] - logits[second];
  return best;
}

double log_softmax_at(const float* logits, int vocab, std::int32_t id) {
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - max));
  return static_cast<double>(logits[id] - max) - std::log(sum);
}

}  // namespace ember::test
