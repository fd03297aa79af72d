#include "model/classifier_head.hpp"

#include "model/decoder_tensors.hpp"
#include "util/check.hpp"

#include <cmath>
#include <string>

namespace ember::model {
namespace {

// `name` dequantized, or empty when absent; its shape must be `shape` (ggml order).
std::vector<float> read_tensor(const GgufFile& file, const std::string& name, const std::vector<std::int64_t>& shape) {
  const GgufTensor* t = file.find_tensor(name);
  if (t == nullptr) return {};
  if (t->shape != shape)
    fail(ErrorCode::invalid_model, "{}: tensor '{}' has {} dimensions of which the first is {}; the head needs {}",
         file.path(), name, t->shape.size(), t->shape.empty() ? 0 : t->shape[0], shape[0]);
  return dequantize_tensor(*t);
}

// out[r] = bias[r] + Σ_i w[r, i] in[i], accumulated in double: the head reads one row per
// sequence, so exactness costs nothing.
void affine(const std::vector<float>& w, const std::vector<float>& bias, const float* in, std::int64_t cols,
            std::vector<float>& out) {
  const auto rows = static_cast<std::int64_t>(w.size()) / cols;
  out.assign(static_cast<std::size_t>(rows), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    const float* row = w.data() + r * cols;
    for (std::int64_t i = 0; i < cols; ++i) sum += static_cast<double>(row[i]) * in[i];
    if (!bias.empty()) sum += bias[static_cast<std::size_t>(r)];
    out[static_cast<std::size_t>(r)] = static_cast<float>(sum);
  }
}

}  // namespace

std::optional<ClassifierHead> ClassifierHead::read(const GgufFile& file, const ModelConfig& c) {
  const GgufTensor* out = file.find_tensor("cls.output.weight");
  if (file.find_tensor("cls.weight") == nullptr && out == nullptr) {
    if (file.find_tensor("cls.bias") != nullptr || file.find_tensor("cls.output.bias") != nullptr)
      fail(ErrorCode::invalid_model, "{}: a classification head's bias without its matrix", file.path());
    return std::nullopt;
  }
  ClassifierHead head;
  const std::int64_t d = c.embedding;
  head.width_ = d;
  head.dense_ = read_tensor(file, "cls.weight", {d, d});
  if (!head.dense_.empty()) head.dense_bias_ = read_tensor(file, "cls.bias", {d});
  if (head.dense_.empty() && file.find_tensor("cls.bias") != nullptr)
    fail(ErrorCode::invalid_model, "{}: cls.bias without cls.weight", file.path());
  if (out != nullptr) {
    if (out->shape.size() != 2 || out->shape[0] != d || out->shape[1] < 1)
      fail(ErrorCode::invalid_model, "{}: cls.output.weight must be [{}, outputs]", file.path(), d);
    head.outputs_ = out->shape[1];
    head.output_ = read_tensor(file, "cls.output.weight", {d, head.outputs_});
    head.output_bias_ = read_tensor(file, "cls.output.bias", {head.outputs_});
  } else if (file.find_tensor("cls.output.bias") != nullptr) {
    fail(ErrorCode::invalid_model, "{}: cls.output.bias without cls.output.weight", file.path());
  }
  // llama.cpp sizes its output by the labels (n_cls_out, 1 without them): they must agree.
  const std::string labels_key = c.architecture + ".classifier.output_labels";
  if (file.find(labels_key) != nullptr) {
    const auto labels = static_cast<std::int64_t>(file.get_string_array(labels_key).size());
    if (labels != head.outputs())
      fail(ErrorCode::invalid_model, "{}: {} names {} labels for a head of {} outputs", file.path(), labels_key, labels,
           head.outputs());
  }
  return head;
}

std::vector<float> ClassifierHead::apply(const float* pooled) const {
  std::vector<float> hidden(pooled, pooled + width_);
  std::vector<float> next;
  if (!dense_.empty()) {
    affine(dense_, dense_bias_, hidden.data(), width_, next);
    for (float& v : next) v = std::tanh(v);
    hidden.swap(next);
  }
  if (output_.empty()) return hidden;
  affine(output_, output_bias_, hidden.data(), width_, next);
  return next;
}

}  // namespace ember::model
