// The INT8 GEMV: weight packing, the scalar reference tile and the tier dispatch (see
// gemv_int8.hpp for the layout and the exactness contract; the tiers are in arch/x86/ and
// arch/arm/).
//
// This file and the tier files are compiled with -ffp-contract=off (kernels/CMakeLists.txt):
// GCC implements the float intrinsics as plain vector arithmetic and would otherwise fuse the
// epilogue's last multiply and add into an FMA, one rounding fewer than oneDNN's vmulps + vaddps.
#include "kernels/cpu/gemv_int8.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/gemv_int8_tiers.hpp"
#include "kernels/cpu/parallel.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#define EMBER_GEMV_X86 1  // the tier files of kernels/cpu/arch/x86 are built
#else
#define EMBER_GEMV_X86 0
#endif
#if defined(__aarch64__) || defined(_M_ARM64)
#define EMBER_GEMV_ARM 1  // the tier files of kernels/cpu/arch/arm are built
#else
#define EMBER_GEMV_ARM 0
#endif

namespace ember::kernels::cpu {

namespace {

constexpr int kMaxTileBlocks = 4;  // 4 x 16 outputs: 4 AVX-512 accumulators a row
// Below this many weight bytes per thread, forking the OpenMP team costs more than it saves.
constexpr std::int64_t kMinBytesPerThread = 64 * 1024;
// Tiles narrower than kMaxTileBlocks until a matrix has this many: threads claim whole tiles,
// so the last one of a call is what the other threads may wait for; narrower tiles measured
// closer to the read loop's bandwidth on the default model's shapes
// (docs/benchmarks.md#int8-gemv-tiles).
constexpr std::int64_t kMinTiles = 32;

GemvTileFn tile_fn(CpuTier tier) {
  if (!tier_available(tier)) fail(ErrorCode::invalid_argument, "gemv: the {} tier is not available", to_string(tier));
#if EMBER_GEMV_X86
  switch (tier) {
    case CpuTier::amx:
    case CpuTier::avx512_vnni: return &gemv_tile_avx512_vnni;
    case CpuTier::avx_vnni: return cpu_has_avx_vnni_vex() ? &gemv_tile_avx_vnni : &gemv_tile_avx_vnni_evex;
    case CpuTier::avx2: return &gemv_tile_avx2;
    default: break;
  }
#endif
#if EMBER_GEMV_ARM
  switch (tier) {
    case CpuTier::i8mm: return &gemv_tile_i8mm;
    case CpuTier::dotprod: return &gemv_tile_dotprod;
    case CpuTier::neon: return &gemv_tile_neon;
    default: break;
  }
#endif
  return &gemv_tile_scalar;
}

}  // namespace

// The reference every tier is checked against: the same layout, sums and epilogue, one output
// at a time.
void gemv_tile_scalar(const GemvTileArgs& a) {
  const std::int64_t outputs = std::min<std::int64_t>(a.rows_left, a.blocks * 16);
  for (std::int64_t i = 0; i < a.m; ++i)
    for (std::int64_t o = 0; o < outputs; ++o) {
      const std::int8_t* w = a.tile + (o / 16) * 64 + (o % 16) * 4;
      const std::uint8_t* x = a.xu + i * a.ldx;
      std::int32_t acc = 0;
      for (std::int64_t k = 0; k < a.steps; ++k)
        for (int j = 0; j < 4; ++j) acc += (static_cast<std::int32_t>(x[4 * k + j]) - 128) * w[k * a.blocks * 64 + j];
      float v = static_cast<float>(acc);
      v = v * a.w_scales[o];
      v = v * a.x_scales[i];
      float* yp = a.y + i * a.ldy + o;
      *yp = a.accumulate ? *yp + v : v;
    }
}

GemvWeightsS8::GemvWeightsS8(const std::int8_t* q, const float* scales, std::int64_t out, std::int64_t in,
                             std::shared_ptr<WeightArena> arena)
    : out_(out), in_(in), padded_in_((in + 3) / 4 * 4), tile_blocks_(kMaxTileBlocks), arena_(std::move(arena)) {
  if (out <= 0 || in <= 0) fail(ErrorCode::invalid_argument, "gemv: bad weight shape out={} in={}", out, in);
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

void gemv_activations(const std::int8_t* q, std::int64_t m, std::int64_t in, std::int64_t padded_in, std::uint8_t* xu) {
  for (std::int64_t i = 0; i < m; ++i) {
    std::uint8_t* row = xu + i * padded_in;
    // q + 128 as a byte is q with its sign bit flipped.
    for (std::int64_t k = 0; k < in; ++k)
      row[k] = static_cast<std::uint8_t>(static_cast<std::uint8_t>(q[i * in + k]) ^ 0x80u);
    std::fill(row + in, row + padded_in, std::uint8_t{128});  // meets zero weights
  }
}

void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales, std::int64_t m, float* y,
               bool accumulate, int threads) {
  gemv_int8(w, xu, x_scales, m, y, accumulate, threads, 0, w.tiles());
}

void gemv_int8(const GemvWeightsS8& w, const std::uint8_t* xu, const float* x_scales, std::int64_t m, float* y,
               bool accumulate, int threads, std::int64_t tile_begin, std::int64_t tile_end, CpuTier tier) {
  if (tile_begin < 0 || tile_begin > tile_end || tile_end > w.tiles())
    fail(ErrorCode::invalid_argument, "gemv: tiles [{}, {}) of {}", tile_begin, tile_end, w.tiles());
  if (m < 1) fail(ErrorCode::invalid_argument, "gemv: m = {} rows, expected at least 1", m);
  const GemvTileFn kernel = tile_fn(tier);
  const std::int64_t tiles = tile_end - tile_begin;
  const std::int64_t by_size = tiles * w.tile_blocks() * 16 * w.padded_in() / kMinBytesPerThread;
  const auto team =
      static_cast<int>(std::clamp<std::int64_t>(std::min<std::int64_t>(threads, by_size), 1, kMaxTileTeam));
  for_tiles(tiles, team, [&](std::int64_t i, std::int64_t) {
    const std::int64_t t = tile_begin + i, n0 = t * w.tile_blocks() * 16;
    const GemvTileArgs args{w.tile(t),
                            w.padded_in() / 4,
                            static_cast<int>(w.blocks_in(t)),
                            w.out() - n0,
                            w.compensation() + n0,
                            w.scales() + n0,
                            xu,
                            w.padded_in(),
                            x_scales,
                            m,
                            y + n0,
                            w.out(),
                            accumulate,
                            kWeightPrefetchAhead};
    kernel(args);
  });
}

}  // namespace ember::kernels::cpu
