// The classification head of a reranker: what llama.cpp attaches to the graph for rank pooling
// (LLAMA_POOLING_TYPE_RANK, llm_graph_context::build_pooling) on BERT-family cross-encoders
// (bge-reranker, ms-marco MiniLM, jina-reranker). For a sequence's pooled hidden state h (its
// first token's, [CLS]: llama.cpp's cls input picks the lowest position of each sequence):
//
//   h = tanh(cls.weight h + cls.bias)            when the file has cls.weight (the dense layer
//                                                 of Hugging Face's *ClassificationHead)
//   scores = cls.output.weight h + cls.output.bias   when it has cls.output.weight
//
// Either part may be absent (jina-reranker-v1-tiny has no cls.output; a plain BERT sequence
// classifier has no dense layer); a bias only with its matrix. The scores are the head's raw
// outputs (no sigmoid): llama.cpp's llama_get_embeddings_seq, and llama-server's
// relevance_score is the first of them.
//
// The head runs on the host in FP32 whatever the engine's precision: it reads one row per
// sequence (width² + outputs * width multiply-adds), nothing beside the encoder's layers.
#pragma once

#include "model/gguf.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace ember::model {

class ClassifierHead {
 public:
  // Reads the head of `file` (dequantized to FP32, shapes checked against config.embedding), or
  // nullopt when the file has neither cls.weight nor cls.output.weight. The number of outputs
  // is cls.output.weight's rows; where {arch}.classifier.output_labels is present it must name
  // as many. Throws Error(invalid_model) for a wrong shape, a bias without its matrix or
  // labels that do not match.
  static std::optional<ClassifierHead> read(const GgufFile& file, const ModelConfig& config);

  // Scores per sequence: cls.output.weight's rows, or the width when there is no cls.output.
  std::int64_t outputs() const { return output_.empty() ? width_ : outputs_; }
  std::int64_t width() const { return width_; }

  // The head over one pooled row of width() values.
  std::vector<float> apply(const float* pooled) const;

 private:
  std::int64_t width_ = 0, outputs_ = 0;
  std::vector<float> dense_, dense_bias_;    // [width, width], [width]; empty when absent
  std::vector<float> output_, output_bias_;  // [outputs, width], [outputs]; empty when absent
};

}  // namespace ember::model
