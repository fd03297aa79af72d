// The CPU backend: the model's weights placed for kernels/cpu (weight_preparation.hpp), with
// fused projections (Q|K|V and gate|up are one GEMM each) and INT8 or FP32 matrix products, and
// the decoder graph run over CpuOps (cpu_ops.hpp) by a model::PassRunner, so a pass can stop
// between pieces for a frame budget on either precision.
#pragma once

#include "backend/backend.hpp"

namespace ember::backend::cpu {

// options.precision: int8 (the weights as options.weight_format says) or fp32 (FP32 weights and
// matrix products). Throws Error(unsupported) for fp16.
std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                                          const BackendOptions& options);

}  // namespace ember::backend::cpu
