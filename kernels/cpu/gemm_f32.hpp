// ember's own FP32 product, for builds without oneDNN (EMBER_WITH_ONEDNN off: Windows, arm64,
// any platform without Debian's libdnnl): y[m, n] (+)= x[m, k] · w[n, k]ᵀ, both row-major, over
// ctx threads. The FP32 path is the reference and the speed baseline, not the fast path: plain
// loops the compiler vectorises, four rows sharing each weight row's reads.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

void gemm_f32(const float* x, const float* w, std::int64_t m, std::int64_t n, std::int64_t k, float* y, bool accumulate,
              int threads);

}  // namespace ember::kernels::cpu
