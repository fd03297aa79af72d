// The INT8 GEMV at the avx_vnni tier: 256-bit vpdpbusd, 8 outputs a register. Compiled twice:
// as itself with -mavx2 -mfma -mf16c -mavxvnni (the VEX form of Intel's consumer cores), and
// through gemv_int8_avx_vnni_evex.cpp with -mavx512vl -mavx512vnni (the EVEX form, for AVX-512
// VNNI CPUs without AVX-VNNI, Zen 4): the same instruction and results (cpu_tier.hpp). Both with
// -ffp-contract=off (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <immintrin.h>

namespace ember::kernels::cpu {

namespace {

using Row = __m256i;  // the activations as they are, q + 128: vpdpbusd's unsigned operand

constexpr bool kCompensated = true;
constexpr int kRowBlocks = 4;

__attribute__((always_inline)) inline Row prepare_row(__m256i xu) { return xu; }

__attribute__((always_inline)) inline __m256i dot4(__m256i acc, Row x, __m256i w) {
#if defined(EMBER_GEMV_EVEX)
  return _mm256_dpbusd_epi32(acc, x, w);
#else
  return _mm256_dpbusd_avx_epi32(acc, x, w);
#endif
}

}  // namespace

#include "kernels/cpu/arch/x86/gemv_int8_ymm.inc"

#if defined(EMBER_GEMV_EVEX)
void gemv_tile_avx_vnni_evex(const GemvTileArgs& a) { run_tile(a); }
#else
void gemv_tile_avx_vnni(const GemvTileArgs& a) { run_tile(a); }
#endif

}  // namespace ember::kernels::cpu
