#include "backend/backend.hpp"

#include "backend/cpu/kernel_backend.hpp"
#include "backend/cpu/reference.hpp"
#include "util/check.hpp"

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

namespace ember::backend {

std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const model::GgufFile> file,
                                          const model::ModelConfig& config,
                                          const BackendOptions& options) {
  if (options.precision == Precision::fp16)
    fail(ErrorCode::unsupported, "precision fp16 runs on CUDA only; on the CPU use int8 or fp32");
  if (options.precision == Precision::fp32)
    return cpu::make_reference_backend(std::move(file), config, options);
  return cpu::make_kernel_backend(std::move(file), config, options, Precision::int8);
}

std::unique_ptr<Backend> make_backend(std::shared_ptr<const model::GgufFile> file,
                                      const model::ModelConfig& config,
                                      const BackendOptions& options) {
  if (options.device.type == DeviceType::cpu) return make_cpu_backend(std::move(file), config, options);
#ifdef EMBER_HAVE_CUDA
  return cuda::make_cuda_backend(std::move(file), config, options);
#else
  fail(ErrorCode::unsupported, "Device::cuda({}): ember was built without CUDA", options.device.index);
#endif
}

}  // namespace ember::backend
