#include "backend/cuda/device_memory.hpp"

#include "kernels/cuda/check.hpp"

#include <utility>

namespace ember::backend::cuda {

using kernels::cuda::check_cuda;

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    restore_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (restore_) cudaSetDevice(previous_);
}

void check_device(int index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    fail(ErrorCode::unsupported, "Device::cuda({}): no usable CUDA device: {}", index, cudaGetErrorString(status));
  if (index < 0 || index >= count)
    fail(ErrorCode::unsupported, "Device::cuda({}): this machine has {} CUDA device(s)", index, count);
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes, const char* what) : device_(device), bytes_(bytes) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  const cudaError_t status = cudaMalloc(&ptr_, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // reset the runtime's last error: a failed allocation is recoverable
    ptr_ = nullptr;
    fail(ErrorCode::out_of_memory, "CUDA device {}: cannot allocate {} MiB for {}: {}", device, bytes >> 20, what,
         cudaGetErrorString(status));
  }
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ == nullptr) return;
  int previous = 0;
  const bool switch_device = cudaGetDevice(&previous) == cudaSuccess && previous != device_;
  if (switch_device) cudaSetDevice(device_);
  cudaFree(ptr_);  // errors ignored: a destructor cannot report them
  if (switch_device) cudaSetDevice(previous);
  ptr_ = nullptr;
  bytes_ = 0;
}

DeviceBuffer upload(int device, const void* host, std::size_t bytes, const char* what) {
  DeviceBuffer buffer(device, bytes, what);
  if (bytes > 0) {
    DeviceGuard guard(device);
    check_cuda(cudaMemcpy(buffer.get(), host, bytes, cudaMemcpyHostToDevice), what);
  }
  return buffer;
}

Stream::Stream() { check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"); }

Stream::~Stream() { cudaStreamDestroy(stream_); }

void Stream::synchronize() const { check_cuda(cudaStreamSynchronize(stream_), "forward pass"); }

}  // namespace ember::backend::cuda
