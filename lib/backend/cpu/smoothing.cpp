#include "backend/cpu/smoothing.hpp"

#include <algorithm>
#include <cmath>

namespace ember::backend::cpu {

void ChannelRange::observe(const float* x, std::int64_t rows, std::int64_t cols) {
  if (max_abs.empty()) max_abs.assign(static_cast<std::size_t>(cols), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < cols; ++j)
      max_abs[static_cast<std::size_t>(j)] = std::max(max_abs[static_cast<std::size_t>(j)], std::fabs(x[r * cols + j]));
}

void column_abs_max(const float* w, std::int64_t rows, std::int64_t in, std::vector<float>& w_max) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < in; ++j)
      w_max[static_cast<std::size_t>(j)] = std::max(w_max[static_cast<std::size_t>(j)], std::fabs(w[i * in + j]));
}

std::vector<float> smoothing_factors(const ChannelRange& act, const std::vector<float>& w_max, float alpha) {
  std::vector<float> s(w_max.size(), 1.0f);
  if (act.max_abs.size() != w_max.size()) return s;  // nothing observed
  for (std::size_t j = 0; j < s.size(); ++j) {
    // Floors keep dead channels (all-zero activations or weights) from producing 0 or inf.
    const double a = std::max(act.max_abs[j], 1e-5f), b = std::max(w_max[j], 1e-5f);
    s[j] = static_cast<float>(std::clamp(std::pow(a, alpha) / std::pow(b, 1.0 - alpha), 1e-3, 1e3));
  }
  return s;
}

std::vector<float> smoothing_factors(const ChannelRange& act, const float* w, std::int64_t out, std::int64_t in,
                                     float alpha) {
  std::vector<float> w_max(static_cast<std::size_t>(in), 0.0f);
  column_abs_max(w, out, in, w_max);
  return smoothing_factors(act, w_max, alpha);
}

void scale_columns(float* w, std::int64_t out, std::int64_t in, const std::vector<float>& s) {
  for (std::int64_t i = 0; i < out; ++i)
    for (std::int64_t j = 0; j < in; ++j) w[i * in + j] *= s[static_cast<std::size_t>(j)];
}

void divide(std::vector<float>& v, const std::vector<float>& s) {
  for (std::size_t j = 0; j < v.size(); ++j) v[j] /= s[j];
}

}  // namespace ember::backend::cpu
