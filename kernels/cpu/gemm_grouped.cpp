// The grouped kernel (see gemm_grouped.hpp for the layout and the arithmetic).
//
// One micro-kernel serves every row count: a tile (two blocks, 32 outputs) against up to four
// activation rows (term rows: two terms of one row count as two), all inputs, holding the rows'
// float sums in registers. Prefill reruns it for each group of four rows while the tile's
// weights are still in L2, so 4-bit ones are unpacked from nibbles once per four rows; decode's
// one row streams them once from memory.
//
// Compiled with -ffp-contract=off (kernels/cpu/CMakeLists.txt) so that the float operations are
// exactly the ones written: the test reproduces them bit for bit.
#include "kernels/cpu/gemm_grouped.hpp"

#include "kernels/cpu/gemv_int8.hpp"
#include "kernels/cpu/parallel.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/simd.hpp"
#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_GROUPED_X86 1
#define EMBER_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,f16c")))
#else
#define EMBER_GROUPED_X86 0
#endif

namespace ember::kernels::cpu {

namespace {

constexpr std::int64_t kTileRows = 4;  // activation term rows per micro-kernel call
// Below this many weight bytes per thread, forking the OpenMP team costs more than it saves.
constexpr std::int64_t kMinBytesPerThread = 64 * 1024;

#if EMBER_GROUPED_X86

// Term rows [row0, row0 + M) of tile t (NB blocks) of y: one pass over the tile's inputs. With
// kTerms = 2, M is even and term rows 2i and 2i + 1 are the two terms of y's row row0 / 2 + i.
// The first pass over a tile (row0 = 0) prefetches the weights ahead of it; later passes find
// them in L2.
template <int M, int NB, int kBits, bool kOffsets, int kTerms>
EMBER_VNNI void grouped_tile(const GroupedWeights& w, std::int64_t t, const GroupedActivations& x,
                             std::int64_t row0, float* y, bool accumulate) {
  static_assert(M % kTerms == 0);
  constexpr int kLines = 2 * kBits;  // value lines per span
  constexpr std::int32_t kBias = 1 << (kBits - 1);
  // With few rows, the low and high nibbles feed separate INT32 sums so that enough independent
  // vpdpbusd chains hide the instruction's latency; INT32 sums are exact, so this changes no
  // result.
  constexpr int U = M * NB <= 4 ? 2 : 1;
  const std::int64_t record = w.record_bytes(), groups = x.groups();
  const std::uint8_t* wt = w.tile(t);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const std::int8_t* xq[M];
  const float* xs[M];
  const std::int32_t* xsum[M];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    xq[i] = x.q.data() + (row0 + i) * x.padded_in;
    xs[i] = x.scales.data() + (row0 + i) * groups;
    xsum[i] = x.sums.data() + (row0 + i) * groups;
  }
  __m512 sum[M][NB];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) sum[i][b] = _mm512_setzero_ps();

  const bool prefetch = row0 == 0;
  for (std::int64_t s = 0; s < w.spans(); ++s) {
    const std::uint8_t* rec = wt + s * NB * record;
    if (prefetch)  // past the tile's end it is the next tile's, which this thread likely takes
      for (std::int64_t at = 0; at < NB * record; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(rec + kWeightPrefetchAhead + at), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = 2 * s + h;
      __m512i acc[U][M][NB];
#pragma GCC unroll 2
      for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i)
#pragma GCC unroll 4
          for (int b = 0; b < NB; ++b) acc[u][i][b] = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m512i lo[NB], hi[NB];
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
          if constexpr (kBits == 4) {
            const __m512i v = _mm512_load_si512(rec + ((h * 4 + j) * NB + b) * 64);
            lo[b] = _mm512_and_si512(v, low4);
            hi[b] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          } else {
            lo[b] = _mm512_load_si512(rec + ((h * 8 + j) * NB + b) * 64);
            hi[b] = _mm512_load_si512(rec + ((h * 8 + 4 + j) * NB + b) * 64);
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          std::int32_t x_lo, x_hi;
          std::memcpy(&x_lo, xq[i] + g * kWeightGroup + 4 * j, 4);
          std::memcpy(&x_hi, xq[i] + g * kWeightGroup + 16 + 4 * j, 4);
          const __m512i bl = _mm512_set1_epi32(x_lo), bh = _mm512_set1_epi32(x_hi);
#pragma GCC unroll 4
          for (int b = 0; b < NB; ++b) {
            acc[0][i][b] = _mm512_dpbusd_epi32(acc[0][i][b], lo[b], bl);
            acc[U - 1][i][b] = _mm512_dpbusd_epi32(acc[U - 1][i][b], hi[b], bh);
          }
        }
      }
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) {
        const std::uint8_t* scales = rec + NB * kLines * 64 + (h * NB + b) * 32;
        // The all-ones maskz forms (here and below) are vcvtph2ps and vcvtdq2ps all the same; the
        // plain intrinsics trip GCC 12's -Wmaybe-uninitialized inside its own header.
        const __m512 d = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          __m512i a = acc[0][i][b];
          if constexpr (U == 2) a = _mm512_add_epi32(a, acc[1][i][b]);
          __m512 v;
          if constexpr (kOffsets) {
            const __m512 o = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + NB * 64)));
            v = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, a), d);
            v = _mm512_fmadd_ps(o, _mm512_set1_ps(static_cast<float>(xsum[i][g])), v);
          } else {
            a = _mm512_sub_epi32(a, _mm512_set1_epi32(kBias * xsum[i][g]));
            v = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, a), d);
          }
          sum[i][b] = _mm512_fmadd_ps(v, _mm512_set1_ps(xs[i][g]), sum[i][b]);
        }
      }
    }
  }

  const std::int64_t out = w.out();
#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const std::int64_t n0 = (t * GroupedWeights::kTileBlocks + b) * 16;
    const std::int64_t rows = std::min<std::int64_t>(16, out - n0);
    const auto mask = static_cast<__mmask16>((1u << rows) - 1u);
#pragma GCC unroll 4
    for (int i = 0; i < M / kTerms; ++i) {
      float* yp = y + (row0 / kTerms + i) * out + n0;
      __m512 v = sum[kTerms * i][b];
      if constexpr (kTerms == 2) v = _mm512_add_ps(v, sum[2 * i + 1][b]);
      if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yp), v);
      _mm512_mask_storeu_ps(yp, mask, v);
    }
  }
}

using TileFn = void (*)(const GroupedWeights&, std::int64_t, const GroupedActivations&, std::int64_t, float*, bool);
// Tile functions by term rows - 1 and blocks - 1; with two terms only even row counts occur.
using TileTable = std::array<std::array<TileFn, GroupedWeights::kTileBlocks>, kTileRows>;

template <int M, int kBits, bool kOffsets, int kTerms>
constexpr std::array<TileFn, GroupedWeights::kTileBlocks> tiles_of_rows() {
  if constexpr (M % kTerms != 0) return {};
  else return {&grouped_tile<M, 1, kBits, kOffsets, kTerms>, &grouped_tile<M, 2, kBits, kOffsets, kTerms>};
}

template <int kBits, bool kOffsets, int kTerms>
constexpr TileTable kTilesFor = {tiles_of_rows<1, kBits, kOffsets, kTerms>(), tiles_of_rows<2, kBits, kOffsets, kTerms>(),
                                 tiles_of_rows<3, kBits, kOffsets, kTerms>(), tiles_of_rows<4, kBits, kOffsets, kTerms>()};

const TileTable& tile_table(GroupFormat f, int terms) {
  static constexpr std::array<const TileTable*, 8> kTables = {
      &kTilesFor<4, false, 1>, &kTilesFor<4, false, 2>, &kTilesFor<4, true, 1>, &kTilesFor<4, true, 2>,
      &kTilesFor<8, false, 1>, &kTilesFor<8, false, 2>, &kTilesFor<8, true, 1>, &kTilesFor<8, true, 2>};
  return *kTables[static_cast<std::size_t>((f.bits == 8) * 4 + f.offsets * 2 + (terms == 2))];
}

void run_tile(const GroupedWeights& w, std::int64_t t, const GroupedActivations& x, float* y, bool accumulate) {
  const auto nb = static_cast<std::size_t>(w.blocks_in(t));
  const TileTable& table = tile_table(w.format(), x.terms);
  for (std::int64_t i = 0; i < x.term_rows(); i += kTileRows) {
    const auto rows = static_cast<std::size_t>(std::min(kTileRows, x.term_rows() - i));
    table[rows - 1][nb - 1](w, t, x, i, y, accumulate);
  }
}

#endif

}  // namespace

// The GEMV's instructions plus F16C for the scales (every AVX-512 CPU has it).
bool grouped_gemm_supported() {
#if EMBER_GROUPED_X86
  static const bool supported = gemv_int8_supported() && cpu_has_f16c();  // immutable after the first call
  return supported;
#else
  return false;
#endif
}

GroupedWeights::GroupedWeights(std::int64_t out, std::int64_t in, GroupFormat format, const GroupedRowSource& source,
                               std::shared_ptr<WeightArena> arena, int threads)
    : out_(out), in_(in), format_(format), spans_((in + 63) / 64), arena_(std::move(arena)) {
  if (format.bits != 4 && format.bits != 8)
    fail(ErrorCode::invalid_argument, "grouped weights: {} bits a value (4 or 8)", format.bits);
  if (out <= 0 || in <= 0 || in % kWeightGroup != 0)
    fail(ErrorCode::invalid_argument, "grouped weights: bad weight shape out={} in={} (in must be a multiple of {})", out,
         in, kWeightGroup);
  if (!arena_) fail(ErrorCode::invalid_argument, "grouped weights: no weight arena");
  if (!source) fail(ErrorCode::invalid_argument, "grouped weights: no row source");
  std::uint8_t* dst = reinterpret_cast<std::uint8_t*>(arena_->allocate(static_cast<std::size_t>(bytes())));
  packed_ = dst;
  const std::int64_t groups = in / kWeightGroup, record = record_bytes(), lines = value_lines();
  const std::int64_t group_bytes = kWeightGroup * format.bits / 8;
  // One block of 16 rows per task: its rows' values land in the same records.
  for_rows(blocks(), threads, blocks() > 1, [&](std::int64_t block) {
    std::vector<std::uint8_t> values(static_cast<std::size_t>(groups * group_bytes));
    std::vector<float> scales(static_cast<std::size_t>(groups)), offs(static_cast<std::size_t>(groups));
    const std::int64_t t = block / kTileBlocks, nb = blocks_in(t);
    std::uint8_t* tile = dst + t * kTileBlocks * spans_ * record;
    const std::int64_t b = block % kTileBlocks;
    for (std::int64_t r = 0; r < 16 && block * 16 + r < out; ++r) {
      source(block * 16 + r, values.data(), scales.data(), offs.data());
      for (std::int64_t g = 0; g < groups; ++g) {
        std::uint8_t* span = tile + g / 2 * nb * record;
        const std::int64_t h = g % 2;
        // 4 bits: inputs 4j..4j+3 and 16+4j..16+4j+3 of the group are nibble bytes 4j..4j+3;
        // 8 bits: each has its line, the same 4 bytes of it.
        const std::uint8_t* v = values.data() + g * group_bytes;
        for (std::int64_t j = 0; j < group_bytes / 4; ++j)
          std::memcpy(span + ((h * lines / 2 + j) * nb + b) * 64 + r * 4, v + 4 * j, 4);
        const std::uint16_t d = float_to_fp16(scales[static_cast<std::size_t>(g)]);
        std::memcpy(span + nb * lines * 64 + (h * nb + b) * 32 + r * 2, &d, 2);
        if (format.offsets) {
          const std::uint16_t o = float_to_fp16(offs[static_cast<std::size_t>(g)]);
          std::memcpy(span + nb * (lines + 1) * 64 + (h * nb + b) * 32 + r * 2, &o, 2);
        }
      }
    }
  });
}

void quantize_grouped_activations(const float* x, std::int64_t rows, std::int64_t in, std::int64_t ldx,
                                  std::int64_t padded_in, GroupedActivations& a, int threads, int terms) {
  if (rows < 0 || in <= 0 || in % kWeightGroup != 0 || ldx < in || padded_in < in || padded_in % kWeightGroup != 0 ||
      (terms != 1 && terms != 2))
    fail(ErrorCode::invalid_argument, "grouped activations: bad shape rows={} in={} ldx={} padded_in={} terms={}", rows,
         in, ldx, padded_in, terms);
  a.rows = rows;
  a.padded_in = padded_in;
  a.terms = terms;
  const std::int64_t groups = a.groups(), in_groups = in / kWeightGroup;
  a.q.resize(static_cast<std::size_t>(a.term_rows() * padded_in));
  a.scales.resize(static_cast<std::size_t>(a.term_rows() * groups));
  a.sums.resize(static_cast<std::size_t>(a.term_rows() * groups));
  for_rows(rows, threads, rows * in >= kQuantizeParallelElements, [&](std::int64_t r) {
    std::int8_t* q = a.q.data() + r * terms * padded_in;
    float* scales = a.scales.data() + r * terms * groups;
    if (terms == 1)
      quantize_rows_s8(x + r * ldx, in_groups, kWeightGroup, kWeightGroup, q, scales);
    else  // each group is a "row" of the two-term quantizer: its own two scales
      quantize_rows_s8_residual(x + r * ldx, in_groups, kWeightGroup, kWeightGroup, q, scales, q + padded_in,
                                scales + groups);
    for (int term = 0; term < terms; ++term) {
      std::int8_t* tq = q + term * padded_in;
      std::int32_t* sums = a.sums.data() + (r * terms + term) * groups;
      for (std::int64_t g = 0; g < groups; ++g) {
        std::int32_t s = 0;
        if (g < in_groups)
          for (std::int64_t k = 0; k < kWeightGroup; ++k) s += tq[g * kWeightGroup + k];
        sums[g] = s;
      }
      std::fill(tq + in, tq + padded_in, std::int8_t{0});
      std::fill(scales + term * groups + in_groups, scales + (term + 1) * groups, 0.0f);
    }
  });
}

void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads) {
  gemm_grouped(w, x, y, accumulate, threads, 0, w.tiles());
}

void gemm_grouped(const GroupedWeights& w, const GroupedActivations& x, float* y, bool accumulate, int threads,
               std::int64_t tile_begin, std::int64_t tile_end) {
  if (tile_begin < 0 || tile_begin > tile_end || tile_end > w.tiles())
    fail(ErrorCode::invalid_argument, "grouped gemm: tiles [{}, {}) of {}", tile_begin, tile_end, w.tiles());
  if (x.padded_in != w.padded_in())
    fail(ErrorCode::invalid_argument, "grouped gemm: activations of {} inputs for weights of {}", x.padded_in, w.padded_in());
  if (x.rows == 0) return;
  if (!grouped_gemm_supported()) fail(ErrorCode::internal, "grouped gemm: this CPU has no AVX-512 VNNI");
#if EMBER_GROUPED_X86
  // Decode's few rows are bandwidth bound and small matrices are not worth a team; prefill
  // always is.
  const std::int64_t tiles = tile_end - tile_begin;
  const std::int64_t work = w.bytes() / w.tiles() * tiles * ((x.term_rows() + kTileRows - 1) / kTileRows);
  const auto team = static_cast<int>(std::clamp<std::int64_t>(work / kMinBytesPerThread, 1, threads));
  for_tiles(tiles, team, [&](std::int64_t t) { run_tile(w, tile_begin + t, x, y, accumulate); });
#endif
}

}  // namespace ember::kernels::cpu
