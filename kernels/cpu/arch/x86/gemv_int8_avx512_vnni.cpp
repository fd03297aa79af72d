// The INT8 GEMV at the avx512_vnni tier: vpdpbusd on 512-bit registers, 16 outputs a block.
// Compiled with -mavx512f -mavx512bw -mavx512vnni -ffp-contract=off (kernels/CMakeLists.txt).
#include "kernels/cpu/gemv_int8_tiers.hpp"

#include <immintrin.h>

namespace ember::kernels::cpu {

namespace {

constexpr int kRowsPerPass = 4;  // 4 rows x 4 blocks: 16 accumulators, and registers left

// acc[i][b] += the products of group k (4 inputs) of the NB interleaved blocks at wk with row
// i of the activations.
template <int M, int NB>
__attribute__((always_inline)) inline void add_group(__m512i (&acc)[M][NB], const std::int8_t* wk,
                                                     const std::uint8_t* xu, std::int64_t ldx, std::int64_t k) {
  __m512i wv[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) wv[b] = _mm512_load_si512(wk + b * 64);
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    std::int32_t x4;
    __builtin_memcpy(&x4, xu + i * ldx + 4 * k, sizeof x4);
    const __m512i xb = _mm512_set1_epi32(x4);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_dpbusd_epi32(acc[i][b], xb, wv[b]);
  }
}

// M rows of the tile (NB blocks of 16): one pass over its weights. The first pass prefetches
// them ahead; later ones find them in L2.
template <int M, int NB>
void pass(const GemvTileArgs& a, const std::uint8_t* xu, const float* x_scales, float* y, bool prefetch) {
  // A narrow tile sums alternate groups into U separate accumulators, so that at least 4
  // independent vpdpbusd chains hide the instruction's latency. INT32 sums are exact (and wrap
  // modulo 2^32), so splitting them changes no result.
  constexpr int U = NB >= 3 ? 1 : 4 / NB;
  const std::int64_t steps = a.steps, ldx = a.ldx;
  const std::int8_t* wt = a.tile;
  __m512i acc[U][M][NB];
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) acc[u][i][b] = _mm512_setzero_si512();

  std::int64_t k = 0;
  for (; k + U <= steps; k += U) {
    if (prefetch)  // U * NB lines a step
#pragma GCC unroll 4
      for (int line = 0; line < U * NB; ++line)
        _mm_prefetch(reinterpret_cast<const char*>(wt + (k * NB + line) * 64 + a.prefetch_ahead), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) add_group<M, NB>(acc[u], wt + (k + u) * NB * 64, xu, ldx, k + u);
  }
  for (; k < steps; ++k) add_group<M, NB>(acc[0], wt + k * NB * 64, xu, ldx, k);
#pragma GCC unroll 4
  for (int u = 1; u < U; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) acc[0][i][b] = _mm512_add_epi32(acc[0][i][b], acc[u][i][b]);

        // (float(acc) * w_scale) * x_scale, then + y_old; each a separate rounding.
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const std::int64_t left = a.rows_left - b * 16;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
    const __m512i comp = _mm512_loadu_si512(a.compensation + b * 16);
    const __m512 ws = _mm512_loadu_ps(a.w_scales + b * 16);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      // The all-ones maskz form is vcvtdq2ps all the same; the plain intrinsic trips GCC 12's
      // -Wmaybe-uninitialized inside its own header (_mm512_undefined_ps).
      __m512 v = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[0][i][b], comp));
      v = _mm512_mul_ps(v, ws);
      v = _mm512_mul_ps(v, _mm512_set1_ps(x_scales[i]));
      float* yp = y + i * a.ldy + b * 16;
      if (a.accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
      _mm512_mask_storeu_ps(yp, mask, v);
    }
  }
}

using PassFn = void (*)(const GemvTileArgs&, const std::uint8_t*, const float*, float*, bool);

template <int M>
struct PassesFor {
  static constexpr PassFn fn[4] = {&pass<M, 1>, &pass<M, 2>, &pass<M, 3>, &pass<M, 4>};
};

}  // namespace

void gemv_tile_avx512_vnni(const GemvTileArgs& a) {
  static constexpr const PassFn* kPasses[kRowsPerPass] = {PassesFor<1>::fn, PassesFor<2>::fn, PassesFor<3>::fn,
                                                          PassesFor<4>::fn};
  // Row groups innermost: the second group reads this tile's weights from cache, not memory.
  for (std::int64_t i = 0; i < a.m; i += kRowsPerPass) {
    const std::int64_t rows = a.m - i < kRowsPerPass ? a.m - i : kRowsPerPass;
    kPasses[rows - 1][a.blocks - 1](a, a.xu + i * a.ldx, a.x_scales + i, a.y + i * a.ldy, i == 0);
  }
}

}  // namespace ember::kernels::cpu
