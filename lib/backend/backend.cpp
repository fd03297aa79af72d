#include "backend/backend.hpp"

#include "backend/cpu/kernel_backend.hpp"
#include "backend/cpu/reference.hpp"

namespace ember::backend {

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const model::GgufFile> file,
                                          const model::ModelConfig& config,
                                          const BackendOptions& options) {
  if (options.precision == Precision::fp32)
    return cpu::make_reference_backend(std::move(file), config, options);
  return cpu::make_kernel_backend(std::move(file), config, options, cpu::GemmPrecision::int8);
}

}  // namespace ember::backend
