// The INT8 GEMV's per-tier micro-kernels (kernels/cpu/arch/x86/ and arch/arm/
// gemv_int8_<tier>.cpp, and the scalar reference in gemv_int8.cpp), one entry function each, picked once from active_tier().
//
// A tier file sees only this header: plain data and raw pointers, no inline functions or
// templates with external linkage, so nothing compiled with a wider ISA can be chosen by the
// linker for a caller on a narrower CPU (cpu_tier.hpp).
//
// Every tier computes the same INT32 sums (exact) and the same float epilogue, in this order
// with separate roundings: y = (float(acc) * w_scale[n]) * x_scale[i] (+ y_old). The tier
// files are compiled with -ffp-contract=off so the compiler fuses nothing.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

// One tile of GemvWeightsS8 (gemv_int8.hpp) against m activation rows.
struct GemvTileArgs {
  const std::int8_t* tile;           // [steps][blocks][16 outputs][4 inputs]
  std::int64_t steps;                // padded_in / 4
  int blocks;                        // 1..4 blocks of 16 outputs
  std::int64_t rows_left;            // outputs from the tile's first one to out (>= 1)
  const std::int32_t* compensation;  // the tile's first output's: 128 * sum of its weights
  const float* w_scales;             // the tile's first output's, padded with zeros
  const std::uint8_t* xu;            // [m][ldx]: activations q + 128
  std::int64_t ldx;                  // = padded_in
  const float* x_scales;             // [m]
  std::int64_t m;                    // activation rows, >= 1
  float* y;                          // the tile's first output of row 0; row i at y + i * ldy
  std::int64_t ldy;
  bool accumulate;
  std::int64_t prefetch_ahead;  // bytes of weights prefetched ahead on the first row pass
};

using GemvTileFn = void (*)(const GemvTileArgs&);

void gemv_tile_scalar(const GemvTileArgs& a);
void gemv_tile_avx2(const GemvTileArgs& a);
void gemv_tile_avx_vnni(const GemvTileArgs& a);       // VEX vpdpbusd (AVX-VNNI)
void gemv_tile_avx_vnni_evex(const GemvTileArgs& a);  // the same kernel, EVEX (AVX512-VL VNNI)
void gemv_tile_avx512_vnni(const GemvTileArgs& a);
void gemv_tile_neon(const GemvTileArgs& a);     // arm64: smull + sadalp
void gemv_tile_dotprod(const GemvTileArgs& a);  // arm64: sdot
void gemv_tile_i8mm(const GemvTileArgs& a);     // arm64: smmla for row pairs, sdot for a lone row

}  // namespace ember::kernels::cpu
