#include "kernels/cuda/gemm.hpp"

#include "kernels/cuda/check.hpp"

#include <limits>

namespace ember::kernels::cuda {
namespace {

// cuBLAS's recommendation for Hopper (smaller suffices elsewhere).
constexpr std::size_t kWorkspaceBytes = 32u << 20;

int to_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    fail(ErrorCode::invalid_argument, "GEMM: {} = {} out of cuBLAS's int range", what, v);
  return static_cast<int>(v);
}

}  // namespace

Blas::Blas(cudaStream_t stream) {
  check_cublas(cublasCreate(&handle_), "cublasCreate");
  try {
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cuda(cudaMalloc(&workspace_, kWorkspaceBytes), "cuBLAS workspace");
    check_cublas(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
  } catch (...) {
    if (workspace_ != nullptr) cudaFree(workspace_);
    cublasDestroy(handle_);
    throw;
  }
}

Blas::~Blas() {
  cublasDestroy(handle_);
  cudaFree(workspace_);
}

bool gemm_s8_supported(std::int64_t n, std::int64_t k) { return n % 4 == 0 && k % 4 == 0; }

void gemm_s8(const Blas& blas, const std::int8_t* x, const std::int8_t* w, std::int64_t m, std::int64_t n,
             std::int64_t k, std::int32_t* acc) {
  if (m == 0) return;
  if (!gemm_s8_supported(n, k))
    fail(ErrorCode::invalid_argument, "INT8 GEMM: n = {} and k = {} must be multiples of 4", n, k);
  const std::int32_t alpha = 1, beta = 0;
  check_cublas(cublasGemmEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, to_int(n, "n"), to_int(m, "m"), to_int(k, "k"),
                            &alpha, w, CUDA_R_8I, to_int(k, "k"), x, CUDA_R_8I, to_int(k, "k"), &beta, acc, CUDA_R_32I,
                            to_int(n, "n"), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
               "INT8 GEMM (cublasGemmEx)");
}

void gemm_f16(const Blas& blas, const std::uint16_t* x, const std::uint16_t* w, std::int64_t m, std::int64_t n,
              std::int64_t k, float* y, bool accumulate) {
  if (m == 0) return;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_cublas(cublasGemmEx(blas.handle(), CUBLAS_OP_T, CUBLAS_OP_N, to_int(n, "n"), to_int(m, "m"), to_int(k, "k"),
                            &alpha, w, CUDA_R_16F, to_int(k, "k"), x, CUDA_R_16F, to_int(k, "k"), &beta, y, CUDA_R_32F,
                            to_int(n, "n"), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "FP16 GEMM (cublasGemmEx)");
}

}  // namespace ember::kernels::cuda
