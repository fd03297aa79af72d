// The grouped kernel at the dotprod tier: sdot adds the 4 products of 4 signed bytes into each
// INT32 lane, 4 outputs of a 64-byte line at a time. Compiled with -march=armv8.2-a+dotprod
// -ffp-contract=off for this file only (kernels/CMakeLists.txt); raw pointers and intrinsics
// only (gemm_grouped_tiers.hpp says why).
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <arm_neon.h>

#include <cstdint>

namespace ember::kernels::cpu::grouped {

namespace {

[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }

}  // namespace

#include "kernels/cpu/arch/arm/gemm_grouped_arm.inc"

void tile_dotprod(const TileJob& job) { run_job(job); }

}  // namespace ember::kernels::cpu::grouped
