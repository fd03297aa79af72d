// The VNNI GEMV (see gemv_int8.hpp for the layout and the exactness contract).
//
// This file is compiled with -ffp-contract=off (kernels/cpu/CMakeLists.txt): GCC implements the
// float intrinsics as plain vector arithmetic and would otherwise fuse the epilogue's last
// multiply and add into an FMA, one rounding fewer than oneDNN's vmulps + vaddps.
#include "kernels/cpu/gemv_int8.hpp"

#include "util/check.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
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

// Output blocks of 16 rows taken together by one kernel call: 4 weight streams, and with 4
// activation rows 16 accumulators, which still leaves registers for the weights.
constexpr int kTileBlocks = 4;
constexpr std::int64_t kTileRows = 4;
// The most threads one GEMV call uses: past this, a decode GEMV is bandwidth bound anyway.
constexpr std::int64_t kMaxTeam = 64;
// Below this many weight bytes per thread, forking the OpenMP team costs more than it saves.
constexpr std::int64_t kMinBytesPerThread = 64 * 1024;

#if EMBER_GEMV_X86

// Rows [b0 * 16, (b0 + NB) * 16) of y for M activation rows: one pass over NB weight blocks.
template <int M, int NB>
EMBER_VNNI void gemv_tile(const GemvWeightsS8& w, std::int64_t b0, const std::uint8_t* xu,
                          const float* x_scales, float* y, bool accumulate) {
  const std::int64_t steps = w.padded_in() / 4;
  const std::int64_t ldx = w.padded_in();
  const std::int64_t stride = w.block_bytes();
  const std::int8_t* wb = w.block(b0);
  __m512i acc[M][NB];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_setzero_si512();

  for (std::int64_t k = 0; k < steps; ++k) {
    __m512i wv[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) wv[b] = _mm512_load_si512(wb + b * stride + k * 64);
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      std::int32_t x4;
      std::memcpy(&x4, xu + i * ldx + 4 * k, sizeof x4);
      const __m512i xb = _mm512_set1_epi32(x4);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_dpbusd_epi32(acc[i][b], xb, wv[b]);
    }
  }

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
      __m512 v = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[i][b], comp));
      v = _mm512_mul_ps(v, ws);
      v = _mm512_mul_ps(v, _mm512_set1_ps(x_scales[i]));
      float* yp = y + i * w.out() + n0;
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, yp));
      _mm512_mask_storeu_ps(yp, mask, v);
    }
  }
}

using TileFn = void (*)(const GemvWeightsS8&, std::int64_t, const std::uint8_t*, const float*,
                        float*, bool);

template <int M>
constexpr std::array<TileFn, kTileBlocks> kTilesFor = {&gemv_tile<M, 1>, &gemv_tile<M, 2>,
                                                       &gemv_tile<M, 3>, &gemv_tile<M, 4>};
constexpr std::array<std::array<TileFn, kTileBlocks>, kTileRows> kTiles = {
    kTilesFor<1>, kTilesFor<2>, kTilesFor<3>, kTilesFor<4>};

void run_blocks(const GemvWeightsS8& w, std::int64_t begin, std::int64_t end,
                const std::uint8_t* xu, const float* x_scales, std::int64_t m, float* y,
                bool accumulate) {
  for (std::int64_t b = begin; b < end; b += kTileBlocks) {
    const auto nb = static_cast<std::size_t>(std::min<std::int64_t>(kTileBlocks, end - b));
    // Row groups innermost: the second group reads this tile's weights from cache, not memory.
    for (std::int64_t i = 0; i < m; i += kTileRows) {
      const auto rows = static_cast<std::size_t>(std::min(kTileRows, m - i));
      kTiles[rows - 1][nb - 1](w, b, xu + i * w.padded_in(), x_scales + i, y + i * w.out(),
                               accumulate);
    }
  }
}

bool detect_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

#else

bool detect_vnni() { return false; }

#endif

}  // namespace

bool gemv_int8_supported() {
  static const bool supported = detect_vnni();  // immutable after the first call
  return supported;
}

GemvWeightsS8::GemvWeightsS8(const std::int8_t* q, const float* scales, std::int64_t out,
                             std::int64_t in)
    : out_(out), in_(in), padded_in_((in + 3) / 4 * 4) {
  if (out <= 0 || in <= 0)
    fail(ErrorCode::invalid_argument, "gemv: bad weight shape out={} in={}", out, in);
  packed_ = Tensor::empty(DType::i8, {blocks(), block_bytes()});  // zero padding included
  const auto padded_out = static_cast<std::size_t>(blocks() * 16);
  compensation_.assign(padded_out, 0);
  scales_.assign(padded_out, 0.0f);
  std::int8_t* dst = packed_.data<std::int8_t>();
  for (std::int64_t n = 0; n < out; ++n) {
    std::int8_t* block = dst + (n / 16) * block_bytes() + (n % 16) * 4;
    const std::int8_t* row = q + n * in;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < in; ++k) sum += row[k];
    // Whole groups of 4 bytes at once: 4x fewer scattered stores (this loop is part of every
    // start, the weight cache's warm one included).
    std::int64_t k = 0;
    for (; k + 4 <= in; k += 4) std::memcpy(block + k * 16, row + k, 4);
    for (; k < in; ++k) block[(k / 4) * 64 + k % 4] = row[k];
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
  if (m < 1 || m > kGemvMaxRows)
    fail(ErrorCode::invalid_argument, "gemv: m = {} rows, expected 1..{}", m, kGemvMaxRows);
  if (!gemv_int8_supported()) fail(ErrorCode::internal, "gemv: this CPU has no AVX-512 VNNI");
#if EMBER_GEMV_X86
  const std::int64_t blocks = w.blocks();
  const std::int64_t by_size = blocks * w.block_bytes() / kMinBytesPerThread;
  const auto team = static_cast<int>(std::clamp<std::int64_t>(
      std::min<std::int64_t>({threads, by_size, kMaxTeam}), 1, blocks));
  // Each thread streams its own contiguous range of tiles (what the hardware prefetcher wants),
  // claiming them one at a time from the range's cursor; a thread that is done takes the
  // remaining tiles of the others' ranges. On a shared VM one core is often slowed for a while,
  // and equal fixed halves left the other waiting ~10 % of each call. Which thread computes a
  // tile changes nothing in its result.
  const std::int64_t tiles = (blocks + kTileBlocks - 1) / kTileBlocks;
  std::array<std::atomic<std::int64_t>, kMaxTeam> cursor;  // on the stack: no allocation per call
  for (int p = 0; p < team; ++p) cursor[static_cast<std::size_t>(p)].store(tiles * p / team, std::memory_order_relaxed);
#pragma omp parallel num_threads(team) if (team > 1)
  {
    // Ranges are counted in `team` parts even if the runtime gave fewer threads: every range
    // is still drained.
    const int t = omp_get_thread_num();
    for (int k = 0; k < team; ++k) {
      const int range = (t + k) % team;
      std::atomic<std::int64_t>& next = cursor[static_cast<std::size_t>(range)];
      const std::int64_t end = tiles * (range + 1) / team;
      for (std::int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < end;
           i = next.fetch_add(1, std::memory_order_relaxed))
        run_blocks(w, i * kTileBlocks, std::min(blocks, (i + 1) * kTileBlocks), xu, x_scales, m, y, accumulate);
    }
  }
#endif
}

}  // namespace ember::kernels::cpu
