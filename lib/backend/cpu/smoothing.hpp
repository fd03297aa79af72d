// Activation smoothing for the INT8 path (the SmoothQuant idea): a few input channels of an LLM's
// activations are far larger than the rest, and a per-row INT8 scale sized for them rounds every
// other channel coarsely. Dividing channel j of the activations by s_j and multiplying column j
// of the weights by s_j leaves X·Wᵀ unchanged but moves the range into the weights, which are
// quantized per output channel and tolerate it. The 1/s_j is folded into the operation that
// produces the activations (an RMSNorm weight, the V or up projection), so it costs nothing at
// run time. s_j comes from activation ranges observed on a short calibration text at load:
// s_j = max|X_j|^alpha / max_i|W_ij|^(1 - alpha).
#pragma once

#include <cstdint>
#include <vector>

namespace ember::backend::cpu {

// Running per-channel maximum of |x| over the rows seen.
struct ChannelRange {
  std::vector<float> max_abs;
  void observe(const float* x, std::int64_t rows, std::int64_t cols);
};

// Per-input-channel factors for activations with ranges `act` and weights w ([out, in]).
std::vector<float> smoothing_factors(const ChannelRange& act, const float* w, std::int64_t out, std::int64_t in,
                                     float alpha);

// The same from the weights' per-column maxima max_i|W_ij| (column_abs_max over all rows),
// for a matrix prepared a slice of rows at a time.
std::vector<float> smoothing_factors(const ChannelRange& act, const std::vector<float>& w_max, float alpha);
// w_max[j] = max(w_max[j], max_i |w[i, j]|) over the rows of a row-major [rows, in] slice.
void column_abs_max(const float* w, std::int64_t rows, std::int64_t in, std::vector<float>& w_max);

// w[:, j] *= s[j] for a row-major [out, in] matrix.
void scale_columns(float* w, std::int64_t out, std::int64_t in, const std::vector<float>& s);
// v[j] /= s[j].
void divide(std::vector<float>& v, const std::vector<float>& s);

}  // namespace ember::backend::cpu
