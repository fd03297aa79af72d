// Helpers of the CUDA tests: skip without a GPU, and copies between host vectors and device
// buffers.
#pragma once

#include "backend/cuda/device_memory.hpp"
#include "kernels/cuda/check.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ember::test {

// Exits with ctest's skip code (77) and says why when there is no usable CUDA device: a skip,
// never a pass that checked nothing.
inline void require_cuda_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::fprintf(stderr, "SKIPPED: no CUDA device (%s); the CUDA tests need an NVIDIA GPU\n",
                 status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    std::exit(77);
  }
}

template <class T>
backend::cuda::DeviceBuffer to_device(const std::vector<T>& host) {
  return backend::cuda::upload(0, host, "test data");
}

template <class T>
std::vector<T> to_host(const backend::cuda::DeviceBuffer& buffer, std::size_t count) {
  std::vector<T> host(count);
  kernels::cuda::check_cuda(cudaDeviceSynchronize(), "test kernels");
  kernels::cuda::check_cuda(cudaMemcpy(host.data(), buffer.get(), count * sizeof(T), cudaMemcpyDeviceToHost),
                            "download test data");
  return host;
}

}  // namespace ember::test
