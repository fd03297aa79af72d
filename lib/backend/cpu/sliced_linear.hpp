// An FP32 linear kept as slices of its outputs, each its own oneDNN linear, so a budgeted step
// (model::PassRunner) can stop between slices of a product: oneDNN's matmul computes every output
// at once, and an FP32 product (a prompt chunk's gate|up, a decode step's lm_head) alone can
// outlast a frame (docs/benchmarks.md#frames-fp32). A slice is computed into scratch and copied
// (or added) into its columns, which rounds as the fused matmul's sum does, so the parts equal
// the whole bit for bit.
//
// Thread-safety: as kernels::cpu::Linear (calls are serialised by the caller, the CPU backend).
#pragma once

#include "kernels/cpu/linear.hpp"

#include <memory>
#include <vector>

namespace ember::backend::cpu {

// The outputs of one slice of a matrix of `in` inputs: about 1 MiB of weights, in whole tiles of
// 16 outputs (the last slice may be shorter). A matrix no larger stays a single oneDNN linear.
constexpr std::int64_t fp32_slice_outputs(std::int64_t in) {
  constexpr std::int64_t kSliceBytes = std::int64_t{1} << 20, kTile = 16;
  const std::int64_t outputs = kSliceBytes / (in * static_cast<std::int64_t>(sizeof(float))) / kTile * kTile;
  return outputs < kTile ? kTile : outputs;
}

// w: FP32 [out, in] (row = output channel), copied and packed, not kept.
std::unique_ptr<kernels::cpu::Linear> make_sliced_fp32_linear(kernels::cpu::CpuContext& ctx, const float* w,
                                                              std::int64_t out, std::int64_t in);

}  // namespace ember::backend::cpu
