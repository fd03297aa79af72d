// Weight preparation for the CPU backend: the model's tensors placed as CpuOps reads them —
// Q|K|V and gate|up fused, matrices as INT8 (or FP32) linears packed for their kernels, vectors
// in FP32 — one layer at a time, straight into that final layout.
//
// On the INT8 path a matrix that is 4-bit (Q4_0, Q4_1, Q4_K) in the file, and a Q8_0 lm_head,
// are kept in the file's groups of 32, in the grouped kernel's layout
// (kernels/cpu/gemm_grouped.hpp), unless options.weight_format says w8a8 or the CPU lacks
// AVX-512 VNNI: no FP32 copy, no calibration, no cache. The other matrices
// become INT8 (w8a8). For those, each layer is first built in FP32 and run over the calibration text's hidden
// states (an explicit LinearInputObserver records its linears' input ranges), then smoothed
// (backend/cpu/smoothing.hpp) and quantized; its output feeds the next layer's calibration, so
// the ranges are those of a whole-model FP32 pass without ever holding the model in FP32. The
// lm_head, the largest matrix, is prepared a slice of rows at a time. With a weight cache
// directory the result is written to the cache (backend/cpu/weight_cache.hpp), and a later
// open reads it back instead.
#pragma once

#include "backend/backend.hpp"
#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/memory_plan.hpp"
#include "model/decoder_tensors.hpp"

namespace ember::backend::cpu {

// The weights of `config`'s model for CpuOps in `gemm`, from the weight cache when
// options.weight_cache_dir has a valid one (INT8 only, for its w8a8 matrices), else prepared
// from `tensors`: what options.tokenize makes of the calibration text is what the w8a8 matrices
// are calibrated on (no tokenize: no smoothing). Reports options.progress; throws Error(cancelled) when it says so.
// The shares of the model's matrix weights (0..1) that prepare_cpu_weights keeps as w4a8, by
// layout (with an offset per group or not).
FourBitShares four_bit_shares(const model::ModelConfig& config, const model::DecoderTensors& tensors, Precision gemm,
                              WeightFormat format);

struct PreparedWeights {
  CpuWeights weights;
  std::string format;  // ModelInfo::weight_format: "w4a8", "w8a8-g32", "w8a8" joined by '+', or "fp32"
};

PreparedWeights prepare_cpu_weights(const model::GgufFile& file, const model::ModelConfig& config,
                                    const model::DecoderTensors& tensors, kernels::cpu::CpuContext& ctx,
                                    const BackendOptions& options, Precision gemm);

}  // namespace ember::backend::cpu
