// What an embedding sequence computes instead of tokens (Sequence::embedding): the hidden states
// of its rows pooled as llama.cpp pools them (llama-context's embd_seq: the average, the first or
// the last row; every row for Pooling::none), then L2-normalised as llama.cpp's
// common_embd_normalize(2); or, for rank pooling, the first row through the classification head
// (model/classifier_head.hpp). The scheduler runs the sequence's rows in the steps it shares with
// generating sequences (a decoder's prompt in chunks, an encoder's whole); each step hands the
// rows it asked for here (take), in order, and the last one finishes the embedding.
//
// Thread-safety: none; the engine's lock guards it as it guards the sequence.
#pragma once

#include "model/classifier_head.hpp"
#include "model/model_config.hpp"

#include <ember/ember.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace ember::runtime {

// EmbedOptions::pooling with model_default replaced by the file's pooling_type (or, without
// one, last for a decoder and mean for an encoder).
Pooling resolve_pooling(Pooling asked, const model::ModelConfig& config);
// Throws Error(unsupported) where rank pooling cannot run: a decoder, or no classification head.
void check_rank_pooling(const model::ModelConfig& config, const std::optional<model::ClassifierHead>& head);

class EmbeddingTask {
 public:
  // `pooling` resolved (never model_default); `head` for rank pooling, else null; `width` the
  // hidden state's (ModelConfig::embedding).
  EmbeddingTask(Pooling pooling, bool normalize, const model::ClassifierHead* head, std::int64_t width)
      : pooling_(pooling), normalize_(normalize), head_(head), width_(width) {}

  // Whether the hidden state of the token at `position` of a sequence of `length` is needed.
  bool wants(int position, int length) const;
  // The hidden states of the rows the last step computed and wants() asked for, in order.
  void take(const float* hidden, int rows);
  // Every row is computed: makes the embedding of a sequence of `tokens` tokens.
  void finish(int tokens);
  // The sequence is computed again from its first token (preempted): forget what was taken.
  void restart() { values_.clear(); }
  const Embedding& result() const { return result_; }

 private:
  Pooling pooling_;
  bool normalize_;
  const model::ClassifierHead* head_;
  std::int64_t width_;
  std::vector<float> values_;  // mean: the running sum; none: the rows so far; else the one row
  Embedding result_;
};

}  // namespace ember::runtime
