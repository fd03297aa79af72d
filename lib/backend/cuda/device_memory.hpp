// RAII for the CUDA runtime objects the CUDA backend owns: device selection, device memory and
// a stream. Every failure is an ember::Error (out_of_memory for a failed allocation).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace ember::backend::cuda {

// Makes `device` current on this thread for the guard's lifetime and restores the caller's
// device afterwards: ember runs inside host programs that may use other GPUs themselves.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

// Throws Error(unsupported) when there is no CUDA device `index` (no GPU, no driver, an index
// out of range), naming the reason.
void check_device(int index);

// cudaMalloc'd memory of one device, freed (on that device) on destruction. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Throws Error(out_of_memory) naming `what` and the size when the allocation fails.
  DeviceBuffer(int device, std::size_t bytes, const char* what);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  int device_ = 0;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A device copy of host data (synchronous).
DeviceBuffer upload(int device, const void* host, std::size_t bytes, const char* what);
template <class T>
DeviceBuffer upload(int device, const std::vector<T>& host, const char* what) {
  return upload(device, host.data(), host.size() * sizeof(T), what);
}

// A non-blocking stream (no implicit synchronisation with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;  // throws the stream's first error, if any

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace ember::backend::cuda
