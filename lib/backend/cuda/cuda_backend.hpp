// The CUDA backend: the forward pass of backend/cpu/cpu_backend.cpp on an NVIDIA GPU, built
// from kernels/cuda: weight placement here, the graph's ops in CudaOps (cuda_ops.hpp). Weights
// are uploaded once at open, either re-quantized to INT8 per output channel (Precision::int8:
// cuBLAS INT8 GEMMs with INT32 accumulation, activations quantized per row on the GPU) or
// converted to FP16 (Precision::fp16: cuBLAS FP16 GEMMs with FP32
// accumulation, the GPU's baseline). Norms, RoPE, softmax and residuals run in FP32; the KV pool
// lives in device memory (make_kv_cache). Small batches (decode steps) replay CUDA graphs.
//
// Differences from the CPU INT8 backend: no activation smoothing (BackendOptions::
// calibration_tokens is ignored), and Precision::fp32 is not offered (use fp16).
//
// Thread-safety: as Backend; forward() may be called from any thread (it selects its device
// and restores the caller's), never concurrently.
#pragma once

#include "backend/backend.hpp"

namespace ember::backend::cuda {

// Throws Error(unsupported) without a usable CUDA device options.device.index or for a shape or
// precision the backend does not handle, Error(out_of_memory) when the weights or the scratch
// for options.max_batch_rows rows do not fit. use_graphs = false runs every step eagerly (tests
// compare the two).
std::unique_ptr<Backend> make_cuda_backend(std::shared_ptr<const model::GgufFile> file,
                                           const model::ModelConfig& config, const BackendOptions& options,
                                           bool use_graphs = true);

}  // namespace ember::backend::cuda
