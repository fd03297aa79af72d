// The INT8 GEMV at the dotprod tier: sdot adds the 4 products of 4 signed bytes into each INT32
// lane, the operation the layout's [16 outputs][4 inputs] groups are made for. Compiled with
// -march=armv8.2-a+dotprod -ffp-contract=off for this file only (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <arm_neon.h>

namespace ember::kernels::cpu {

namespace {

[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t w, int8x16_t x) { return vdotq_s32(acc, w, x); }

}  // namespace

#include "kernels/cpu/arch/arm/gemv_int8_arm.inc"

void gemv_tile_dotprod(const GemvTileArgs& a) { run_tile(a); }

}  // namespace ember::kernels::cpu
