// The grouped kernel at the neon tier (the AArch64 baseline, no dot-product instructions):
// smull multiplies 8 byte pairs into 16 bits, addp adds neighbouring products into pair sums
// and sadalp widens and adds pairs into each output's INT32. A pair sum is at most
// 2 * 128 * 127 = 32,512 in magnitude (values q of 8-bit groups in [-128, 127], activations in
// [-127, 127]), so 16 bits hold it exactly. Compiled with -ffp-contract=off
// (kernels/CMakeLists.txt); raw pointers and intrinsics only (gemm_grouped_tiers.hpp says why).
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <arm_neon.h>

#include <cstdint>

namespace ember::kernels::cpu::grouped {

namespace {

[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) {
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(x));  // outputs 0 and 1
  const int16x8_t hi = vmull_high_s8(w, x);                       // outputs 2 and 3
  return vpadalq_s16(acc, vpaddq_s16(lo, hi));
}

}  // namespace

#include "kernels/cpu/arch/arm/gemm_grouped_arm.inc"

void tile_neon(const TileJob& job) { run_job(job); }

}  // namespace ember::kernels::cpu::grouped
