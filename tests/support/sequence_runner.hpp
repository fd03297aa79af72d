// Drives a backend directly for one sequence (tests and tools): a private KV cache with a
// trivial block table, tokens appended in chunks, logits for every row when asked.
#pragma once

#include "backend/backend.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace ember::test {

class SequenceRunner {
 public:
  SequenceRunner(backend::Backend& backend, int max_tokens, KvCacheType kv_type = KvCacheType::f16,
                 int block_size = 16);

  // Appends `tokens` (in chunks of at most `chunk` rows) and returns the logits of the last
  // row, or of every appended row when `all_rows` ([n, vocab] row-major). With `pieces`, each
  // forward pass runs as a budgeted step, advance_forward() called with a deadline of
  // `piece_budget` from the call (zero: no time left, a piece per call), and *pieces counts the
  // calls.
  std::vector<float> append(const std::vector<std::int32_t>& tokens, bool all_rows = false, int chunk = 256,
                            int* pieces = nullptr);
  std::chrono::steady_clock::duration piece_budget{};
  std::vector<backend::LoraUse> adapters;  // the sequence's LoRA adapters (Backend::prepare_adapter)
  int length() const { return length_; }
  void reset() { length_ = 0; }

 private:
  backend::Backend& backend_;
  std::unique_ptr<backend::KvCache> kv_;
  std::vector<std::int32_t> block_table_;
  int block_size_;
  int length_ = 0;
};

// Greedy argmax (lowest id on ties) and the gap between the two best logits of one row.
std::int32_t argmax(const float* logits, int vocab, float* top2_gap = nullptr);

// log softmax(logits)[id] of one row.
double log_softmax_at(const float* logits, int vocab, std::int32_t id);

}  // namespace ember::test
