// The INT8 GEMV at the avx2 tier: vpmaddubsw + vpmaddwd with the sign trick. vpmaddubsw
// multiplies unsigned by signed bytes and saturates each pair sum to 16 bits, so it gets |q| of
// the activations as the unsigned operand and the weights with q's sign moved onto them
// (vpsignb): |q| * (sign(q) w) = q w exactly, and a pair sum is at most 2 * 128 * 127 < 2^15
// for weights in [-127, 127], the full range ember quantizes to. No compensation is needed.
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <immintrin.h>

namespace ember::kernels::cpu {

namespace {

struct Row {
  __m256i abs_q;  // |q| as unsigned bytes
  __m256i q;      // q: whose signs go onto the weights
};

constexpr bool kCompensated = false;
constexpr int kRowBlocks = 2;  // a Row is two registers

__attribute__((always_inline)) inline Row prepare_row(__m256i xu) {
  const __m256i q = _mm256_xor_si256(xu, _mm256_set1_epi8(static_cast<char>(0x80)));
  return {_mm256_abs_epi8(q), q};
}

__attribute__((always_inline)) inline __m256i dot4(__m256i acc, Row x, __m256i w) {
  const __m256i pairs = _mm256_maddubs_epi16(x.abs_q, _mm256_sign_epi8(w, x.q));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

}  // namespace

#include "kernels/cpu/arch/x86/gemv_int8_ymm.inc"

void gemv_tile_avx2(const GemvTileArgs& a) { run_tile(a); }

}  // namespace ember::kernels::cpu
