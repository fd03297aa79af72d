// The GPU's matrix products through cuBLAS, in ember's row-major convention: x is [m, k] (one
// row per token), w is [n, k] (one row per output channel, as in kernels/cpu/linear.hpp) and the
// result is [m, n]. cuBLAS is column-major, so both compute y^T = w * x^T: w is passed
// transposed and x not ("TN"), the layout cuBLAS's INT8 tensor-core kernels require.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ember::kernels::cuda {

// An owned cuBLAS handle bound to one stream, with its own workspace (so that calls can be
// captured into a CUDA graph, which must not allocate). Move-only.
class Blas {
 public:
  // Throws Error(internal / out_of_memory) when cuBLAS cannot be initialised.
  explicit Blas(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  cublasHandle_t handle() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
};

// Shapes the INT8 GEMM accepts: k and n multiples of 4 (cuBLAS's IMMA kernels need 4-byte
// aligned rows of A, B and C).
bool gemm_s8_supported(std::int64_t n, std::int64_t k);

// acc[m, n] (int32) = x[m, k] (int8) * w[n, k]^T (int8), exact integer accumulation.
void gemm_s8(const Blas& blas, const std::int8_t* x, const std::int8_t* w, std::int64_t m, std::int64_t n,
             std::int64_t k, std::int32_t* acc);

// y[m, n] (float) = x[m, k] (half) * w[n, k]^T (half) with FP32 accumulation; added to y when
// accumulate.
void gemm_f16(const Blas& blas, const std::uint16_t* x, const std::uint16_t* w, std::int64_t m, std::int64_t n,
              std::int64_t k, float* y, bool accumulate);

}  // namespace ember::kernels::cuda
