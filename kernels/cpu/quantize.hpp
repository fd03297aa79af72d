// Symmetric INT8 quantization: scale = max|x| / 127, q = round(x / scale) (nearest, ties to
// even) clamped to [-127, 127], so x ~= q * scale. An all-zero row gets scale 0 and q = 0.
// -128 is never produced: the range stays symmetric and q * q' never overflows VNNI pairs.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

// Below this many elements a quantization of activation rows runs on the calling thread. A step
// of 32 decoding streams (32 rows of the default model's 576 or 1,536 inputs) is above it, so its
// quantizations are split over the team instead of leaving one thread waiting (measured in
// docs/benchmarks.md, "Session 16"); one decode row stays on the calling thread.
inline constexpr std::int64_t kQuantizeParallelElements = 16384;

// Per-row activations: x is [rows, cols] with row stride ldx; q is dense [rows, cols];
// scales[rows]. threads: OpenMP threads (rows are split between them).
void quantize_rows_s8(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx, std::int8_t* q,
                      float* scales, int threads = 1);

// Two INT8 terms per row for the layers where one loses too much (see linear.hpp): x ~= q_hi *
// s_hi + q_lo * s_lo, where q_hi is the row's INT8 quantization and q_lo quantizes its rounding
// error (at most s_hi / 2) in steps of s_lo = s_hi / 256, clamped to [-127, 127] (only the last
// step at the edge is clipped). So 256 q_hi + q_lo is a 16-bit quantization of x with scale s_lo:
// a kernel may form 256 (q_hi . w) + (q_lo . w) in INT32, exactly the dot product with those
// 16-bit values, and a kernel with 16-bit multiplies forms it directly.
void quantize_rows_s8_residual(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ldx,
                               std::int8_t* q_hi, float* s_hi, std::int8_t* q_lo, float* s_lo, int threads = 1);

// The low term's steps per step of the high term: the 16-bit value is kLowTermSteps q_hi + q_lo,
// q_hi shifted left by kLowTermBits. Every kernel that joins the two terms takes it from here.
inline constexpr int kLowTermBits = 8;
inline constexpr std::int32_t kLowTermSteps = 1 << kLowTermBits;

// Per-output-channel weights: w is [out, in] (row = output channel), q dense [out, in],
// scales[out]. qmax < 127 narrows the range (scale = max|w| / qmax, q in [-qmax, qmax]): the
// INT8 linear uses 63 on CPUs without VNNI, see linear.cpp.
void quantize_weights_s8(const float* w, std::int64_t out, std::int64_t in, std::int8_t* q, float* scales,
                         int threads = 1, int qmax = 127);

}  // namespace ember::kernels::cpu
