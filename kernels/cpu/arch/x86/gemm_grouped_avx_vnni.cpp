// The grouped kernel on AVX-VNNI: 256-bit vpdpbusd (Intel's consumer CPUs from Alder Lake on,
// and every AVX-512 VNNI CPU through its AVX-512VL encoding). The structure is the AVX2 tier's
// (gemm_grouped_avx2.cpp): a 64-byte line of the layout is two registers, output rows 0-7 and
// 8-15 of its block; vpdpbusd adds 4 products of unsigned values and INT8 activations into each
// INT32 lane without saturating, so both widths multiply the stored values u as the AVX-512
// tier does. The float epilogue is gemm_grouped_tiers.hpp's, lane by lane: equal to the others.
// Decode's one row of 4-bit weights goes through row4_in_line_order (gemm_grouped_row4.inc, as
// on the AVX2 tier), its other few rows through tile_rows, prefill's many through panel_rows.
//
// Compiled twice (kernels/CMakeLists.txt), always with -mavx2 -mfma -mf16c -ffp-contract=off:
// with -mavxvnni, the VEX encoding of Intel's consumer CPUs, as tile_avx_vnni; and with
// -mavx512vl -mavx512vnni, the EVEX encoding of AVX-512 VNNI CPUs that lack AVX-VNNI (AMD Zen
// 4), as tile_avx_vnni_evex. Raw pointers and intrinsics only (gemm_grouped_tiers.hpp says why).
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <immintrin.h>

#include <cstring>

#if defined(__AVXVNNI__)
#define EMBER_DPBUSD256 _mm256_dpbusd_avx_epi32
#define EMBER_TILE_AVX_VNNI tile_avx_vnni
#else
#define EMBER_DPBUSD256 _mm256_dpbusd_epi32
#define EMBER_TILE_AVX_VNNI tile_avx_vnni_evex
#endif

namespace ember::kernels::cpu::grouped {

namespace {

#include "kernels/cpu/arch/x86/gemm_grouped_prefetch.inc"
#include "kernels/cpu/arch/x86/gemm_grouped_ymm_store.inc"

[[gnu::always_inline]] inline __m256i broadcast4(const std::int8_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// The INT32 dot products of group g (h of the span) for the 8 outputs of column c (block c / 2,
// rows 8 (c % 2) onwards) with M term rows: the values as stored (u, not u - bias). With few
// rows, the group's two halves feed separate sums so that enough independent vpdpbusd chains
// hide the instruction's latency; INT32 sums are exact, so this changes no result. Beside each
// line's load, the same line of the span `ahead` is prefetched, into L1 or L2 (none when null).
template <int M, int NB, int kBits>
[[gnu::always_inline]] inline void group_dots(const std::uint8_t* rec, const std::uint8_t* ahead, bool into_l1, int h,
                                              int c, const std::int8_t* const* xg, __m256i* acc) {
  constexpr int U = M <= 2 ? 2 : 1;
  const int b = c / 2;
  const std::uint8_t* lines = rec + (c % 2) * 32;
  __m256i part[U][M];
#pragma GCC unroll 2
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) part[u][i] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    __m256i lo, hi;  // inputs 4j..4j+3 and 16+4j..16+4j+3
    if constexpr (kBits == 4) {
      const __m256i low4 = _mm256_set1_epi8(0x0F);
      const std::int64_t line = ((h * 4 + j) * NB + b) * 64;
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + line));
      if (ahead != nullptr && c % 2 == 0) prefetch_line(ahead, line, into_l1);
      lo = _mm256_and_si256(v, low4);
      hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    } else {
      const std::int64_t line_lo = ((h * 8 + j) * NB + b) * 64, line_hi = ((h * 8 + 4 + j) * NB + b) * 64;
      lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + line_lo));
      hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + line_hi));
      if (ahead != nullptr && c % 2 == 0) {
        prefetch_line(ahead, line_lo, into_l1);
        prefetch_line(ahead, line_hi, into_l1);
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      part[0][i] = EMBER_DPBUSD256(part[0][i], lo, broadcast4(xg[i] + 4 * j));
      part[U - 1][i] = EMBER_DPBUSD256(part[U - 1][i], hi, broadcast4(xg[i] + 16 + 4 * j));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) acc[i] = U == 2 ? _mm256_add_epi32(part[0][i], part[U - 1][i]) : part[0][i];
}

// vpdpbusd multiplies the stored bytes of both widths.
constexpr Dots kDots8 = Dots::stored;

#include "kernels/cpu/arch/x86/gemm_grouped_ymm_tile.inc"

// row4_in_line_order's products: one vpdpbusd chain a column (two would not fit the VEX
// build's 16 registers beside the float sums); the next group's chains are independent of
// these, which hides the instruction's latency.
struct Row4Dots {
  __m256i sums = _mm256_setzero_si256();
};

[[gnu::always_inline]] inline void row4_add(Row4Dots& dots, __m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi) {
  dots.sums = EMBER_DPBUSD256(EMBER_DPBUSD256(dots.sums, lo, x_lo), hi, x_hi);
}

[[gnu::always_inline]] inline __m256i row4_sums(const Row4Dots& dots) { return dots.sums; }

#include "kernels/cpu/arch/x86/gemm_grouped_row4.inc"

// Prefill's many rows of 4-bit weights: term rows [row0, row0 + rows), rows <= kPanelRows. A
// group's weights for 8 outputs are unpacked into registers once and every row streams past
// them, its float sums kept in a small array (L1) rather than in registers: one load and store a
// row and group against 8 multiplies, where holding more rows' sums in the 16 registers spills
// more. Two independent vpdpbusd chains a row, and the rows' independence, hide its latency.
// The float operations on each output are tile_rows', in the same order.
template <int NB, bool kOffsets>
void panel_rows(const TileJob& job, std::int64_t row0, int rows) {
  constexpr int C = 2 * NB;
  constexpr std::int32_t kBias = 8;
  const std::int64_t record = job.record_bytes;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  alignas(32) float sum[kPanelRows][C][8];
  for (int i = 0; i < rows; ++i)
    for (int c = 0; c < C; ++c) _mm256_store_ps(sum[i][c], _mm256_setzero_ps());

  for (std::int64_t s = 0; s < job.spans; ++s) {
    const std::uint8_t* rec = job.weights + s * NB * record;
    if (row0 == 0 && job.prefetch_ahead > 0)  // the first pass over the tile; past its end the next tile's
      for (std::int64_t at = 0; at < NB * record; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(rec + job.prefetch_ahead + at), _MM_HINT_T0);
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = 2 * s + h;
      PanelTerms<kBias> terms;
      panel_terms(job, row0, rows, g, terms);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) {
        const int b = c / 2;
        const std::uint8_t* lines = rec + (c % 2) * 32;
        __m256i lo[4], hi[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + ((h * 4 + j) * NB + b) * 64));
          lo[j] = _mm256_and_si256(v, low4);
          hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        }
        const std::uint8_t* scales = rec + NB * 8 * 64 + (h * NB + b) * 32 + (c % 2) * 16;
        const __m256 d = load_f16x8(scales), o = kOffsets ? load_f16x8(scales + NB * 64) : _mm256_setzero_ps();
#pragma GCC unroll 1
        for (int i = 0; i < rows; ++i) {
          const std::int8_t* x = job.q + (row0 + i) * job.q_stride + g * 32;
          __m256i part_lo = _mm256_setzero_si256(), part_hi = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            part_lo = EMBER_DPBUSD256(part_lo, lo[j], broadcast4(x + 4 * j));
            part_hi = EMBER_DPBUSD256(part_hi, hi[j], broadcast4(x + 16 + 4 * j));
          }
          const __m256i a = _mm256_add_epi32(part_lo, part_hi);
          _mm256_store_ps(sum[i][c],
                          add_group_loaded<kBias, kOffsets>(d, o, a, terms.row(i), _mm256_load_ps(sum[i][c])));
        }
      }
    }
  }

  store_panel<C>(job, sum, row0, rows);
}

using RowsFn = void (*)(const TileJob&, std::int64_t);

// The micro-kernel for `rows` term rows (1..kTileRows; with two terms, even) of NB blocks.
template <int NB, int kBits, bool kOffsets, int kTerms>
RowsFn rows_kernel(std::int64_t rows) {
  if constexpr (kTerms == 2) {
    return rows == 2 ? &tile_rows<2, NB, kBits, kOffsets, 2> : &tile_rows<4, NB, kBits, kOffsets, 2>;
  } else {
    switch (rows) {
      case 1:
        if constexpr (kBits == 4)
          return &row4_in_line_order<NB, kOffsets>;
        else
          return &tile_rows<1, NB, kBits, kOffsets, 1>;
      case 2: return &tile_rows<2, NB, kBits, kOffsets, 1>;
      case 3: return &tile_rows<3, NB, kBits, kOffsets, 1>;
      default: return &tile_rows<4, NB, kBits, kOffsets, 1>;
    }
  }
}

template <int kBits, bool kOffsets, int kTerms>
void run_format(const TileJob& job) {
  if constexpr (kBits == 4 && kTerms == 1) {
    if (job.term_rows > kTileRows) {
      for (std::int64_t i = 0; i < job.term_rows; i += kPanelRows) {
        const auto rows = static_cast<int>(job.term_rows - i < kPanelRows ? job.term_rows - i : kPanelRows);
        if (job.blocks == 2)
          panel_rows<2, kOffsets>(job, i, rows);
        else
          panel_rows<1, kOffsets>(job, i, rows);
      }
      return;
    }
  }
  for (std::int64_t i = 0; i < job.term_rows; i += kTileRows) {
    const std::int64_t rows = job.term_rows - i < kTileRows ? job.term_rows - i : kTileRows;
    const RowsFn fn =
        job.blocks == 2 ? rows_kernel<2, kBits, kOffsets, kTerms>(rows) : rows_kernel<1, kBits, kOffsets, kTerms>(rows);
    fn(job, i);
  }
}

#include "kernels/cpu/gemm_grouped_formats.inc"

}  // namespace

void EMBER_TILE_AVX_VNNI(const TileJob& job) { run_job(job); }

}  // namespace ember::kernels::cpu::grouped
