// The unit of work a backend runs: one flattened batch of rows from any number of sequences,
// prefill chunks and decode tokens mixed. The scheduler builds it; the backend only reads it.
#pragma once

#include <cstdint>
#include <vector>

namespace ember::model {
class LoraAdapter;
}

namespace ember::backend {

// A LoRA adapter a sequence runs with, as the backend prepared it (Backend::prepare_adapter),
// and the request's scale for it.
struct LoraUse {
  const model::LoraAdapter* adapter = nullptr;
  float scale = 1.0f;
};

// One sequence's rows in the batch. Its rows are contiguous and its positions consecutive; the
// block table maps the sequence's logical KV blocks (position / block_size) to pool blocks.
struct SequenceSlice {
  std::int32_t row_begin = 0;
  std::int32_t row_count = 0;
  std::vector<std::int32_t> block_table;
  std::vector<LoraUse> adapters;  // applied in this order to the sequence's rows; empty: none
};

struct Batch {
  std::vector<std::int32_t> tokens;     // token id of every row
  std::vector<std::int32_t> positions;  // position of every row within its sequence
  std::vector<std::int32_t> slots;      // KV slot every row writes: block * block_size + offset
  std::vector<SequenceSlice> sequences;
  std::vector<std::int32_t> logit_rows;  // rows that need logits, in the order they are returned
  // Rows whose hidden states are returned instead (embedding sequences: they never sample), in
  // the order they are returned; never a logit row too.
  std::vector<std::int32_t> hidden_rows;

  std::int32_t rows() const { return static_cast<std::int32_t>(tokens.size()); }
  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    sequences.clear();
    logit_rows.clear();
    hidden_rows.clear();
  }
};

// Checks a batch against the pool's geometry before a backend trusts its indices: every slot
// inside the pool and inside its sequence's block table, positions consecutive per sequence,
// logit and hidden rows in range and no more of them than rows. Throws Error(internal) naming the first violation.
void validate_batch(const Batch& batch, std::int32_t block_count, std::int32_t block_size, std::int32_t vocab_size);

}  // namespace ember::backend
