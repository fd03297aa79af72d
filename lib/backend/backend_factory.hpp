// Which backend a device gets: the one place that knows every device, kept apart from the
// Backend interface so that a device's files include the interface and nothing includes back up.
#pragma once

#include "backend/backend.hpp"

namespace ember::backend {

// The backend of options.device: the CPU backend (backend/cpu/cpu_backend.hpp), or the CUDA
// backend (backend/cuda) when ember was built with it. Throws Error(unsupported) for a precision
// the device does not have (fp16 on the CPU, fp32 on CUDA) or for CUDA in a build without it.
std::unique_ptr<Backend> make_backend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                                      const BackendOptions& options);

}  // namespace ember::backend
