#include "backend/backend_factory.hpp"

#include "backend/cpu/cpu_backend.hpp"
#include "util/check.hpp"

#ifdef EMBER_HAVE_CUDA
#include "backend/cuda/cuda_backend.hpp"
#endif

namespace ember::backend {

std::unique_ptr<Backend> make_backend(std::shared_ptr<const model::GgufFile> file, const model::ModelConfig& config,
                                      const BackendOptions& options) {
  if (options.device.type == DeviceType::cpu) return cpu::make_cpu_backend(std::move(file), config, options);
  if (config.routed())
    fail(ErrorCode::unsupported, "mixture-of-experts models ({}) run on the CPU; the CUDA backend has no routed layers",
         config.architecture);
#ifdef EMBER_HAVE_CUDA
  return cuda::make_cuda_backend(std::move(file), config, options);
#else
  fail(ErrorCode::unsupported, "Device::cuda({}): ember was built without CUDA", options.device.index);
#endif
}

}  // namespace ember::backend
