// The readable FP32 reference backend (reference.cpp).
#pragma once

#include "backend/backend.hpp"

namespace ember::backend::cpu {

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const model::GgufFile> file,
                                                const model::ModelConfig& config,
                                                const BackendOptions& options);

}  // namespace ember::backend::cpu
