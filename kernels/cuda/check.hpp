// CUDA runtime and cuBLAS status codes turned into ember::Error (host code only).
#pragma once

#include "util/check.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace ember::kernels::cuda {

// cudaErrorMemoryAllocation becomes out_of_memory, any other failure internal; `what` names the
// operation.
inline void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  fail(status == cudaErrorMemoryAllocation ? ErrorCode::out_of_memory : ErrorCode::internal, "CUDA: {}: {} ({})", what,
       cudaGetErrorString(status), cudaGetErrorName(status));
}

inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorCode::out_of_memory : ErrorCode::internal, "cuBLAS: {}: {} ({})",
       what, cublasGetStatusString(status), static_cast<int>(status));
}

}  // namespace ember::kernels::cuda
