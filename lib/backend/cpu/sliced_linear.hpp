// An FP32 linear kept as slices of its outputs, each its own oneDNN linear, so a budgeted step
// (model::PassRunner) can stop between slices of a large product: oneDNN's matmul computes every
// output at once, and the largest FP32 matrix (a model's lm_head) alone outlasts a frame. A slice
// is computed into scratch and copied (or added) into its columns, which rounds as the fused
// matmul's sum does, so the parts equal the whole bit for bit.
//
// Thread-safety: as kernels::cpu::Linear (calls are serialised by the caller, the CPU backend).
#pragma once

#include "kernels/cpu/linear.hpp"

#include <memory>
#include <vector>

namespace ember::backend::cpu {

// The outputs of one slice: a large matrix is cut into slices of this many (the last may be
// shorter); one no larger stays a single oneDNN linear.
inline constexpr std::int64_t kFp32SliceOutputs = 4096;

// w: FP32 [out, in] (row = output channel), copied and packed, not kept.
std::unique_ptr<kernels::cpu::Linear> make_sliced_fp32_linear(kernels::cpu::CpuContext& ctx, const float* w,
                                                              std::int64_t out, std::int64_t in);

}  // namespace ember::backend::cpu
