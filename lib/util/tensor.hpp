// The one tensor type of ember: a dtype, a shape of up to 4 dimensions, row-major strides (in
// elements) and a data pointer that either borrows memory (a view into a mapped model file, a
// KV block) or owns it (shared, 64-byte aligned). Copying a Tensor copies the view, not the data.
#pragma once

#include "util/check.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>

namespace ember {

enum class DType : std::uint8_t { f32, f16, bf16, i8, u8, i32 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32: return 4;
    case DType::f16:
    case DType::bf16: return 2;
    case DType::i8:
    case DType::u8: return 1;
  }
  return 0;
}

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<std::int8_t>() {
  return DType::i8;
}
template <>
constexpr DType dtype_of<std::uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}

// Where a tensor's memory lives (ember::Device, in the public API, names a compute device).
enum class MemorySpace : std::uint8_t { host, cuda };

class Tensor {
 public:
  static constexpr int kMaxDims = 4;

  Tensor() = default;

  // A borrowed view; the caller keeps `data` alive for the view's lifetime.
  static Tensor view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                     MemorySpace memory = MemorySpace::host) {
    Tensor t;
    t.init_shape(dtype, shape);
    t.data_ = data;
    t.memory_ = memory;
    return t;
  }

  // Owning, zero-initialised, 64-byte aligned host memory.
  static Tensor empty(DType dtype, std::initializer_list<std::int64_t> shape) {
    Tensor t;
    t.init_shape(dtype, shape);
    // calloc, not aligned_alloc + memset: a large block comes as fresh pages that the OS zeroes
    // when first touched, so a 256 MB KV cache costs nothing at open() until it is used (the
    // memset and its page faults were ~0.2 s of CPU at every start). Over-allocated to align.
    const std::size_t bytes = (t.nbytes() + 63) / 64 * 64;
    void* raw = std::calloc(bytes + 64, 1);
    if (raw == nullptr) fail(ErrorCode::out_of_memory, "cannot allocate a tensor of {} bytes", bytes);
    const auto aligned = (reinterpret_cast<std::uintptr_t>(raw) + 63) / 64 * 64;
    t.owner_ = std::shared_ptr<void>(raw, std::free);
    t.data_ = reinterpret_cast<void*>(aligned);
    return t;
  }

  DType dtype() const { return dtype_; }
  MemorySpace memory() const { return memory_; }
  int ndim() const { return ndim_; }
  std::int64_t dim(int i) const { return shape_[static_cast<std::size_t>(i)]; }
  std::int64_t stride(int i) const { return strides_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int i = 0; i < ndim_; ++i) n *= shape_[static_cast<std::size_t>(i)];
    return n;
  }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return data_ == nullptr; }

  void* raw() const { return data_; }
  template <class T>
  T* data() const {
    EMBER_ASSERT(dtype_ == dtype_of<T>());
    return static_cast<T*>(data_);
  }
  // Row i of a tensor viewed as [dim(0), rest...].
  template <class T>
  T* row(std::int64_t i) const {
    return data<T>() + i * strides_[0];
  }

 private:
  void init_shape(DType dtype, std::initializer_list<std::int64_t> shape) {
    EMBER_ASSERT(shape.size() >= 1 && shape.size() <= kMaxDims);
    dtype_ = dtype;
    ndim_ = static_cast<int>(shape.size());
    std::size_t i = 0;
    for (std::int64_t d : shape) {
      EMBER_ASSERT(d >= 0);
      shape_[i++] = d;
    }
    std::int64_t s = 1;
    for (int k = ndim_ - 1; k >= 0; --k) {
      strides_[static_cast<std::size_t>(k)] = s;
      s *= shape_[static_cast<std::size_t>(k)];
    }
  }

  std::shared_ptr<void> owner_;
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  MemorySpace memory_ = MemorySpace::host;
  int ndim_ = 0;
  std::array<std::int64_t, kMaxDims> shape_{};
  std::array<std::int64_t, kMaxDims> strides_{};
};

}  // namespace ember
