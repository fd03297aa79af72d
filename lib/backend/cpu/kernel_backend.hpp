// The optimised CPU backend: the decoder graph over CpuOps (cpu_ops.hpp), built from kernels/cpu with
// fused projections (Q|K|V and gate|up are one GEMM each) and INT8 (or, for testing the rest of
// the pipeline, FP32) matrix products through oneDNN.
#pragma once

#include "backend/backend.hpp"

namespace ember::backend::cpu {

// gemm: the matrix products' precision, int8 or fp32 (options.precision is not read: fp32 there
// means the reference backend). Throws Error(unsupported) for fp16.
std::unique_ptr<Backend> make_kernel_backend(std::shared_ptr<const model::GgufFile> file,
                                             const model::ModelConfig& config,
                                             const BackendOptions& options,
                                             Precision gemm = Precision::int8);

}  // namespace ember::backend::cpu
