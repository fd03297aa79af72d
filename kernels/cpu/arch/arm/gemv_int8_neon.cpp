// The INT8 GEMV at the neon tier (the AArch64 baseline, no dot-product instructions): smull
// multiplies 8 byte pairs into 16 bits, addp adds neighbouring products into the pair sums of
// each output and sadalp widens and adds pairs into INT32. A pair sum is at most
// 2 * 128 * 127 = 32,512 in magnitude for weights in [-127, 127] (gemv_int8.hpp), so 16 bits
// hold it exactly. Compiled with -ffp-contract=off (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <arm_neon.h>

namespace ember::kernels::cpu {

namespace {

[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) {
  const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(x));  // outputs 0 and 1
  const int16x8_t hi = vmull_high_s8(w, x);                       // outputs 2 and 3
  return vpadalq_s16(acc, vpaddq_s16(lo, hi));
}

}  // namespace

#include "kernels/cpu/arch/arm/gemv_int8_arm.inc"

void gemv_tile_neon(const GemvTileArgs& a) { run_tile(a); }

}  // namespace ember::kernels::cpu
