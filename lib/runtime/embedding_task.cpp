#include "runtime/embedding_task.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cmath>

namespace ember::runtime {
namespace {

void normalize(float* v, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(v[i]) * v[i];
  const double norm = std::sqrt(sum);
  const float k = norm > 0.0 ? static_cast<float>(1.0 / norm) : 0.0f;  // llama.cpp: a zero vector stays zero
  for (std::int64_t i = 0; i < n; ++i) v[i] *= k;
}

}  // namespace

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
void check_rank_pooling(const model::ModelConfig& c, const std::optional<model::ClassifierHead>& head) {
  if (c.causal)
    fail(ErrorCode::unsupported, "'{}': rank pooling on a decoder (a Qwen3-Reranker-style file) is not run by ember",
         c.name);
  if (!head)
    fail(ErrorCode::unsupported, "'{}' has no classification head (cls.weight, cls.output.weight) for rank pooling",
         c.name);
}

bool EmbeddingTask::wants(int position, int length) const {
  switch (pooling_) {
    case Pooling::cls:
    case Pooling::rank: return position == 0;
    case Pooling::last: return position == length - 1;
    default: return true;  // mean, none
  }
}

void EmbeddingTask::take(const float* hidden, int rows) {
  const std::int64_t n = rows * width_;
  if (pooling_ == Pooling::mean) {
    // Row after row into one sum, whichever steps the rows came in: the same float additions
    // in the same order as over the whole sequence at once.
    if (values_.empty()) values_.assign(static_cast<std::size_t>(width_), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t i = 0; i < width_; ++i) values_[static_cast<std::size_t>(i)] += hidden[r * width_ + i];
    return;
  }
  values_.insert(values_.end(), hidden, hidden + n);
}

void EmbeddingTask::finish(int tokens) {
  result_.tokens = tokens;
  if (pooling_ == Pooling::rank) {  // the head's scores, never normalised
    result_.values = head_->apply(values_.data());
    return;
  }
  result_.values = std::move(values_);
  if (pooling_ == Pooling::mean) {
    const float k = 1.0f / static_cast<float>(tokens);
    for (float& v : result_.values) v *= k;
  }
  if (!normalize_) return;
  const std::int64_t rows = static_cast<std::int64_t>(result_.values.size()) / width_;
  for (std::int64_t r = 0; r < rows; ++r) normalize(result_.values.data() + r * width_, width_);
}

}  // namespace ember::runtime
