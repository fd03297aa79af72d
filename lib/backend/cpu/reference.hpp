// The readable FP32 reference backend (reference.cpp): the oracle tests and ember-logits check
// the CPU and CUDA backends against; no engine precision selects it.
#pragma once

#include "backend/backend.hpp"

namespace ember::backend::cpu {

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const model::GgufFile> file,
                                                const model::ModelConfig& config, const BackendOptions& options);

}  // namespace ember::backend::cpu
