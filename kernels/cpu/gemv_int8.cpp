// The VNNI GEMV (see gemv_int8.hpp for the layout and the exactness contract).
//
// This file is compiled with -ffp-contract=off (kernels/cpu/CMakeLists.txt): GCC implements the
// float intrinsics as plain vector arithmetic and would otherwise fuse the epilogue's last
// multiply and add into an FMA, one rounding fewer than oneDNN's vmulps + vaddps.
#include "kernels/cpu/gemv_int8.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/parallel.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_GEMV_X86 1
#define EMBER_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#else
#define EMBER_GEMV_X86 0
#endif

namespace ember::kernels::cpu {

namespace {

constexpr int kMaxTileBlocks = 4;  // 4 x 16 outputs x 4 rows: 16 accumulators, and registers left
constexpr std::int64_t kTileRows = 4;  // activation rows per kernel call
// Below this many weight bytes per thread, forking the OpenMP team costs more than it saves.
constexpr std::int64_t kMinBytesPerThread = 64 * 1024;
// Tiles narrower than kMaxTileBlocks until a matrix has this many: threads claim whole tiles,
// so the last one of a call is what the other threads may wait for. The default model's down
// projection (576 outputs, 1536 inputs) had 9 tiles of 98 KB. Decode-step Linears on its
// shapes, 2 threads, against an AVX-512 read loop in the same run: down 84-87 % of the loop's bandwidth
// with 4-block tiles, 87-91 % with 1-block tiles (36 of 25 KB); wo 78-79 % -> 82 %; the whole
// step 92-93 % -> 94-95 %.
constexpr std::int64_t kMinTiles = 32;

#if EMBER_GEMV_X86

// acc[i][b] += the products of group k (4 inputs) of the NB interleaved blocks at wk with row
// i of the activations.
template <int M, int NB>
EMBER_VNNI __attribute__((always_inline)) inline void add_group(__m512i (&acc)[M][NB],
                                                                const std::int8_t* wk,
                                                                const std::uint8_t* xu,
                                                                std::int64_t ldx, std::int64_t k) {
  __m512i wv[NB];
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) wv[b] = _mm512_load_si512(wk + b * 64);
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    std::int32_t x4;
    std::memcpy(&x4, xu + i * ldx + 4 * k, sizeof x4);
    const __m512i xb = _mm512_set1_epi32(x4);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_dpbusd_epi32(acc[i][b], xb, wv[b]);
  }
}

// Rows of tile t (NB blocks of 16) of y for M activation rows: one pass over the tile. The first
// pass (`prefetch`) prefetches the weights kWeightPrefetchAhead ahead; later ones find them in L2.
template <int M, int NB>
EMBER_VNNI void gemv_tile(const GemvWeightsS8& w, std::int64_t t, const std::uint8_t* xu,
                          const float* x_scales, float* y, bool accumulate, bool prefetch) {
  // A narrow tile sums alternate groups into U separate accumulators, so that at least 4
  // independent vpdpbusd chains hide the instruction's latency. INT32 sums are exact (and wrap
  // modulo 2^32), so splitting them changes no result.
  constexpr int U = NB >= 3 ? 1 : 4 / NB;
  const std::int64_t steps = w.padded_in() / 4;
  const std::int64_t ldx = w.padded_in();
  const std::int64_t b0 = t * w.tile_blocks();
  const std::int8_t* wt = w.tile(t);
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
        _mm_prefetch(reinterpret_cast<const char*>(wt + (k * NB + line) * 64 + kWeightPrefetchAhead), _MM_HINT_T0);
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

  // oneDNN's order: (float(acc) * w_scale) * x_scale, then + y_old; each a separate rounding.
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const std::int64_t n0 = (b0 + b) * 16;
    const std::int64_t rows = std::min<std::int64_t>(16, w.out() - n0);
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
    const __m512i comp = _mm512_loadu_si512(w.compensation() + n0);
    const __m512 ws = _mm512_loadu_ps(w.scales() + n0);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      // The all-ones maskz form is vcvtdq2ps all the same; the plain intrinsic trips GCC 12's
      // -Wmaybe-uninitialized inside its own header (_mm512_undefined_ps).
      __m512 v = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[0][i][b], comp));
      v = _mm512_mul_ps(v, ws);
      v = _mm512_mul_ps(v, _mm512_set1_ps(x_scales[i]));
      float* yp = y + i * w.out() + n0;
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
      _mm512_mask_storeu_ps(yp, mask, v);
    }
  }
}

using TileFn = void (*)(const GemvWeightsS8&, std::int64_t, const std::uint8_t*, const float*,
                        float*, bool, bool);

template <int M>
constexpr std::array<TileFn, kMaxTileBlocks> kTilesFor = {&gemv_tile<M, 1>, &gemv_tile<M, 2>,
                                                       &gemv_tile<M, 3>, &gemv_tile<M, 4>};
constexpr std::array<std::array<TileFn, kMaxTileBlocks>, kTileRows> kTiles = {
    kTilesFor<1>, kTilesFor<2>, kTilesFor<3>, kTilesFor<4>};

void run_tile(const GemvWeightsS8& w, std::int64_t t, const std::uint8_t* xu,
              const float* x_scales, std::int64_t m, float* y, bool accumulate) {
  const auto nb = static_cast<std::size_t>(w.blocks_in(t));
  // Row groups innermost: the second group reads this tile's weights from cache, not memory.
  for (std::int64_t i = 0; i < m; i += kTileRows) {
    const auto rows = static_cast<std::size_t>(std::min(kTileRows, m - i));
    kTiles[rows - 1][nb - 1](w, t, xu + i * w.padded_in(), x_scales + i, y + i * w.out(), accumulate, i == 0);
  }
}

#endif

}  // namespace

bool gemv_int8_supported() { return tier_available(CpuTier::avx512_vnni); }

GemvWeightsS8::GemvWeightsS8(const std::int8_t* q, const float* scales, std::int64_t out,
                             std::int64_t in, std::shared_ptr<WeightArena> arena)
    : out_(out), in_(in), padded_in_((in + 3) / 4 * 4), tile_blocks_(kMaxTileBlocks), arena_(std::move(arena)) {
  if (out <= 0 || in <= 0)
    fail(ErrorCode::invalid_argument, "gemv: bad weight shape out={} in={}", out, in);
  if (!arena_) fail(ErrorCode::invalid_argument, "gemv: no weight arena");
  while (tile_blocks_ > 1 && tiles() < kMinTiles) tile_blocks_ /= 2;
  std::int8_t* dst = arena_->allocate(static_cast<std::size_t>(blocks() * 16 * padded_in_));  // zeroed: the padding
  packed_ = dst;
  const auto padded_out = static_cast<std::size_t>(blocks() * 16);
  compensation_.assign(padded_out, 0);
  scales_.assign(padded_out, 0.0f);
  for (std::int64_t n = 0; n < out; ++n) {
    const std::int64_t t = n / 16 / tile_blocks_, group_bytes = blocks_in(t) * 64;
    std::int8_t* at = dst + tile_offset(t) + (n / 16 % tile_blocks_) * 64 + (n % 16) * 4;
    const std::int8_t* row = q + n * in;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < in; ++k) sum += row[k];
    // Whole groups of 4 bytes at once: 4x fewer scattered stores (this loop is part of every
    // start, the weight cache's warm one included).
    std::int64_t k = 0;
    for (; k + 4 <= in; k += 4) std::memcpy(at + k / 4 * group_bytes, row + k, 4);
    for (; k < in; ++k) at[k / 4 * group_bytes + k % 4] = row[k];
    compensation_[static_cast<std::size_t>(n)] = 128 * sum;
    scales_[static_cast<std::size_t>(n)] = scales[n];
  }
}

void gemv_activations(const std::int8_t* q, std::int64_t m, std::int64_t in,
                      std::int64_t padded_in, std::uint8_t* xu) {
  for (std::int64_t i = 0; i < m; ++i) {
    std::uint8_t* row = xu + i * padded_in;
    // q + 128 as a byte is q with its sign bit flipped.
    for (std::int64_t k = 0; k < in; ++k)
      row[k] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(q[i * in + k]) ^ 0x80u);
    std::fill(row + in, row + padded_in, std::uint8_t{128});  // meets zero weights
  }
}

void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales,
               std::int64_t m, float* y, bool accumulate, int threads) {
  gemv_int8(w, xu, x_scales, m, y, accumulate, threads, 0, w.tiles());
}

void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales,
               std::int64_t m, float* y, bool accumulate, int threads, std::int64_t tile_begin,
               std::int64_t tile_end) {
  if (tile_begin < 0 || tile_begin > tile_end || tile_end > w.tiles())
    fail(ErrorCode::invalid_argument, "gemv: tiles [{}, {}) of {}", tile_begin, tile_end, w.tiles());
  if (m < 1 || m > kGemvMaxRows)
    fail(ErrorCode::invalid_argument, "gemv: m = {} rows, expected 1..{}", m, kGemvMaxRows);
  if (!gemv_int8_supported()) fail(ErrorCode::internal, "gemv: this CPU has no AVX-512 VNNI");
#if EMBER_GEMV_X86
  const std::int64_t tiles = tile_end - tile_begin;
  const std::int64_t by_size = tiles * w.tile_blocks() * 16 * w.padded_in() / kMinBytesPerThread;
  const auto team = static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(threads, by_size), 1, kMaxTileTeam));
  for_tiles(tiles, team, [&](std::int64_t t) { run_tile(w, tile_begin + t, xu, x_scales, m, y, accumulate); });
#endif
}

}  // namespace ember::kernels::cpu
