// Weight preparation for the CPU backend: the model's tensors placed as CpuOps reads them —
// Q|K|V and gate|up fused, matrices as INT8 (or FP32) linears packed for their kernels, vectors
// in FP32 — one layer at a time, straight into that final layout.
//
// On the INT8 path each layer is first built in FP32 and run over the calibration text's hidden
// states (an explicit LinearInputObserver records its linears' input ranges), then smoothed
// (backend/cpu/smoothing.hpp) and quantized; its output feeds the next layer's calibration, so
// the ranges are those of a whole-model FP32 pass without ever holding the model in FP32. The
// lm_head, the largest matrix, is prepared a slice of rows at a time. With a weight cache
// directory the result is written to the cache (backend/cpu/weight_cache.hpp), and a later
// open reads it back instead.
#pragma once

#include "backend/backend.hpp"
#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/kernel_backend.hpp"
#include "model/decoder_tensors.hpp"

namespace ember::backend::cpu {

// The weights of `config`'s model for CpuOps in `gemm`, from the weight cache when
// options.weight_cache_dir has a valid one (INT8 only), else prepared from `tensors`: what
// options.tokenize makes of the calibration text is what the INT8 path calibrates on (no
// tokenize: no smoothing). Reports options.progress; throws Error(cancelled) when it says so.
CpuWeights prepare_cpu_weights(const model::GgufFile& file, const model::ModelConfig& config,
                               const model::DecoderTensors& tensors, kernels::cpu::CpuContext& ctx,
                               const BackendOptions& options, Precision gemm);

}  // namespace ember::backend::cpu
