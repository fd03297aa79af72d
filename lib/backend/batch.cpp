#include "backend/batch.hpp"

#include "util/check.hpp"

namespace ember::backend {

void validate_batch(const Batch& batch, std::int32_t block_count, std::int32_t block_size, std::int32_t vocab_size) {
  const std::int32_t rows = batch.rows();
  if (batch.positions.size() != batch.tokens.size() || batch.slots.size() != batch.tokens.size())
    fail(ErrorCode::internal, "batch: {} tokens but {} positions and {} slots", rows, batch.positions.size(),
         batch.slots.size());
  std::int32_t next_row = 0;
  for (const SequenceSlice& seq : batch.sequences) {
    if (seq.row_begin != next_row || seq.row_count <= 0 || seq.row_begin + seq.row_count > rows)
      fail(ErrorCode::internal, "batch: sequence rows [{}, +{}) do not tile the batch", seq.row_begin, seq.row_count);
    next_row = seq.row_begin + seq.row_count;
    for (std::int32_t r = seq.row_begin; r < next_row; ++r) {
      const std::int32_t token = batch.tokens[static_cast<std::size_t>(r)];
      const std::int32_t pos = batch.positions[static_cast<std::size_t>(r)];
      const std::int32_t slot = batch.slots[static_cast<std::size_t>(r)];
      if (token < 0 || token >= vocab_size)
        fail(ErrorCode::internal, "batch: row {} has token {} outside the vocabulary", r, token);
      if (r > seq.row_begin && pos != batch.positions[static_cast<std::size_t>(r - 1)] + 1)
        fail(ErrorCode::internal, "batch: row {} position {} is not consecutive", r, pos);
      const std::size_t logical = static_cast<std::size_t>(pos / block_size);
      if (pos < 0 || logical >= seq.block_table.size())
        fail(ErrorCode::internal, "batch: row {} position {} beyond its block table ({} blocks)", r, pos,
             seq.block_table.size());
      const std::int32_t block = seq.block_table[logical];
      if (block < 0 || block >= block_count || slot != block * block_size + pos % block_size)
        fail(ErrorCode::internal, "batch: row {} slot {} does not match block {} of the table", r, slot, block);
    }
  }
  if (next_row != rows) fail(ErrorCode::internal, "batch: {} rows but sequences cover {}", rows, next_row);
  for (std::int32_t r : batch.logit_rows)
    if (r < 0 || r >= rows) fail(ErrorCode::internal, "batch: logit row {} out of range", r);
  for (std::int32_t r : batch.hidden_rows)
    if (r < 0 || r >= rows) fail(ErrorCode::internal, "batch: hidden row {} out of range", r);
  // The head gathers both lists into one buffer of the step's rows (DecoderOps::gather_logit_rows).
  if (batch.logit_rows.size() + batch.hidden_rows.size() > static_cast<std::size_t>(rows))
    fail(ErrorCode::internal, "batch: {} logit and {} hidden rows in a batch of {}", batch.logit_rows.size(),
         batch.hidden_rows.size(), rows);
}

}  // namespace ember::backend
