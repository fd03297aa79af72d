// The grouped kernel on AVX2 (with FMA and F16C), for CPUs without VNNI (AMD Zen 2 and 3, Intel
// before Alder Lake). A 64-byte line of the layout is two registers, output rows 0-7 and 8-15
// of its block, each 8 rows times 4 inputs; vpmaddubsw multiplies them with 4 broadcast INT8
// activations into 16-bit pair sums and vpmaddwd adds the pairs into INT32. The two-term rows of
// 8-bit weights (the Q8_0 lm_head) multiply 16-bit values instead (row16, panel_rows8).
//
// vpmaddubsw saturates its 16-bit sums, so each width keeps them in range:
//  * 4 bits: values 0..15 against activations in [-127, 127] (quantize.hpp never makes -128):
//    a pair is at most 2 * 15 * 127 = 3,810 in magnitude, so a group's 8 products per 16-bit
//    lane add up exactly in 16 bits (30,480) and one vpmaddwd per group widens them.
//  * 8 bits: the stored u = q + 128 is made signed (q in [-128, 127]) and multiplied with the
//    sign trick, |q| as the unsigned operand against the activation carrying q's sign: a pair
//    is at most 2 * 128 * 127 = 32,512. (The other way round, |a| against sign-adjusted
//    weights, breaks on q = -128, whose negation does not fit in a byte.) The sum is then
//    acc - 128 * sum, the INT32 the epilogue forms anyway; with offsets 128 * sum is added back.
//  * Two terms of 8 bits: vpmaddwd of u zero-extended to 16 bits against the 16-bit values,
//    exact in INT32, less 128 times the values' sum (row16 says why it fits).
// The float epilogue is gemm_grouped_tiers.hpp's, lane by lane: equal to the other tiers.
//
// Decode's few term rows (up to four) go through kernels that hold their sums in registers: one
// row of 4-bit weights through row4_in_line_order (gemm_grouped_row4.inc), the two-term rows
// (one or two activation rows) through row16, the rest through tile_rows. More (prefill, many
// streams decoding) through panel_rows (4 bits) or panel_rows8, which hold a group's unpacked
// weights in registers and stream up to 16 rows past them (docs/benchmarks.md#grouped-x86-tiers,
// #x86-tiers-session21 and #lm-head-16bit-s26 have them measured).
//
// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (kernels/CMakeLists.txt); raw pointers
// and intrinsics only (gemm_grouped_tiers.hpp says why).
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <immintrin.h>

#include <cstring>

namespace ember::kernels::cpu::grouped {

namespace {

#include "kernels/cpu/arch/x86/gemm_grouped_prefetch.inc"
#include "kernels/cpu/arch/x86/gemm_grouped_ymm_store.inc"

[[gnu::always_inline]] inline __m256i broadcast4(const std::int8_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// Two 16-bit activations (a row's TileJob::wide values) in every 32-bit lane.
[[gnu::always_inline]] inline __m256i broadcast_wide2(const std::int16_t* x) {
  std::int32_t v;
  std::memcpy(&v, x, 4);
  return _mm256_set1_epi32(v);
}

// Four 16-bit activations (a row's TileJob::wide values) in every 64-bit lane.
[[gnu::always_inline]] inline __m256i broadcast_wide4(const std::int16_t* x) {
  long long v;
  std::memcpy(&v, x, 8);
  return _mm256_set1_epi64x(v);
}

// The INT32 dot products of group g (h of the span) for the 8 outputs of column c (block c / 2,
// rows 8 (c % 2) onwards) with M term rows: acc - bias * sum for 8 bits (see above), acc for 4.
// Beside each line's load, the same line of the span `ahead` is prefetched, into L1 or L2 (none
// when null).
template <int M, int NB, int kBits>
[[gnu::always_inline]] inline void group_dots(const std::uint8_t* rec, const std::uint8_t* ahead, bool into_l1, int h,
                                              int c, const std::int8_t* const* xg, __m256i* acc) {
  const int b = c / 2;
  const std::uint8_t* lines = rec + (c % 2) * 32;
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kBits == 4) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i pairs[M];
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) pairs[i] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const std::int64_t line = ((h * 4 + j) * NB + b) * 64;
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + line));
      if (ahead != nullptr && c % 2 == 0) prefetch_line(ahead, line, into_l1);
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        pairs[i] = _mm256_add_epi16(pairs[i], _mm256_maddubs_epi16(lo, broadcast4(xg[i] + 4 * j)));
        pairs[i] = _mm256_add_epi16(pairs[i], _mm256_maddubs_epi16(hi, broadcast4(xg[i] + 16 + 4 * j)));
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) acc[i] = _mm256_madd_epi16(pairs[i], ones);
  } else {
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_si256();
      // Line k (of 8) holds inputs 4k..4k+3: lines 0-3 the group's first half, 4-7 its second.
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const std::int64_t line = ((h * 8 + k) * NB + b) * 64;
      const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + line));
      if (ahead != nullptr && c % 2 == 0) prefetch_line(ahead, line, into_l1);
      const __m256i q = _mm256_xor_si256(u, bias), magnitude = _mm256_abs_epi8(q);
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        const __m256i signed_x = _mm256_sign_epi8(broadcast4(xg[i] + 4 * k), q);
        acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_x), ones));
      }
    }
  }
}

// The AVX2 sign trick multiplies 8-bit weights as q, not as the stored bytes (see the top).
constexpr Dots kDots8 = Dots::signed_values;

#include "kernels/cpu/arch/x86/gemm_grouped_ymm_tile.inc"

// row4_in_line_order's products: a group's 8 products per 16-bit lane add up exactly (see the top
// of this file), so a column's pair sums stay in 16 bits until the group's end.
struct Row4Dots {
  __m256i pairs = _mm256_setzero_si256();
};

[[gnu::always_inline]] inline void row4_add(Row4Dots& dots, __m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi) {
  dots.pairs = _mm256_add_epi16(dots.pairs, _mm256_maddubs_epi16(lo, x_lo));
  dots.pairs = _mm256_add_epi16(dots.pairs, _mm256_maddubs_epi16(hi, x_hi));
}

[[gnu::always_inline]] inline __m256i row4_sums(const Row4Dots& dots) {
  return _mm256_madd_epi16(dots.pairs, _mm256_set1_epi16(1));
}

#include "kernels/cpu/arch/x86/gemm_grouped_row4.inc"

// Prefill's many rows of 4-bit weights: term rows [row0, row0 + rows), rows <= kPanelRows. A
// group's weights for 8 outputs are unpacked into registers once and every row streams past
// them, its float sums kept in a small array (L1) rather than in registers: one load and store a
// row and group against 8 multiplies, where holding more rows' sums in the 16 registers spills
// more. The float operations on each output are tile_rows', in the same order.
template <int NB, bool kOffsets>
void panel_rows(const TileJob& job, std::int64_t row0, int rows) {
  constexpr int C = 2 * NB;
  constexpr std::int32_t kBias = 8;
  const std::int64_t record = job.record_bytes;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
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
          __m256i pairs = _mm256_maddubs_epi16(lo[0], broadcast4(x));
          pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(hi[0], broadcast4(x + 16)));
#pragma GCC unroll 4
          for (int j = 1; j < 4; ++j) {
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(lo[j], broadcast4(x + 4 * j)));
            pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(hi[j], broadcast4(x + 16 + 4 * j)));
          }
          const __m256i a = _mm256_madd_epi16(pairs, ones);
          _mm256_store_ps(sum[i][c],
                          add_group_loaded<kBias, kOffsets>(d, o, a, terms.row(i), _mm256_load_ps(sum[i][c])));
        }
      }
    }
  }

  store_panel<C>(job, sum, row0, rows);
}

// Decode's two-term rows of 8-bit weights (the Q8_0 lm_head) as one 16-bit product, as
// panel_rows8 multiplies a batch's: each row's 16-bit values (TileJob::wide) against the stored
// bytes u = q + 128 zero-extended to 16 bits, one vpmaddwd where the two terms took two
// sign-trick products each. The INT32 sum with u stays exact (at most 32 * 32,639 * 255 in
// magnitude) and, less 128 times the activations' sum, is the dot product with q: the integer
// tile_rows joins from the terms (256 hi + lo). The float operations are tile_rows', so the
// result is what tile_rows computed from the two terms, bit for bit. A block's two halves (columns 2b
// and 2b + 1) are taken together, each line read from memory once for all R rows (one or two).
// Rows [row0 / 2, row0 / 2 + R) of y from term rows [row0, row0 + 2 R).
template <int NB, bool kOffsets, int R>
void row16(const TileJob& job, std::int64_t row0) {
  constexpr int C = 2 * NB;
  constexpr std::int32_t kBias = 128;  // the stored bytes are u = q + 128
  const std::int64_t record = job.record_bytes;
  __m256 sum[R][C];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) sum[r][c] = _mm256_setzero_ps();

  const std::int64_t span_bytes = NB * record;
  for_spans<NB>(job, row0, [&](std::int64_t s, const std::uint8_t* rec, const std::uint8_t* ahead) {
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = 2 * s + h;
      GroupTerms<kBias> terms[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) terms[r] = row_terms<kBias, 2>(job, row0 + 2 * r, g);
#pragma GCC unroll 1
      for (int b = 0; b < NB; ++b) {
        if (ahead != nullptr) prefetch_tail_line(ahead, NB * 16 * 64, span_bytes, h * NB + b, job.prefetch_into_l1);
          // Each row in turn over the block's 8 lines: a second row finds them in L1.
#pragma GCC unroll 1
        for (int r = 0; r < R; ++r) {
          const std::int16_t* x = job.wide + (row0 / 2 + r) * job.q_stride + g * 32;
          // Per half of the line (columns 2b, 2b + 1): outputs 0-3 and 4-7, two INT32 pair sums each.
          __m256i first[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
          __m256i second[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 8
          for (int k = 0; k < 8; ++k) {
            const std::int64_t line = ((h * 8 + k) * NB + b) * 64;
            if (ahead != nullptr && r == 0) prefetch_line(ahead, line, job.prefetch_into_l1);
            const __m256i xk = broadcast_wide4(x + 4 * k);
#pragma GCC unroll 2
            for (int half = 0; half < 2; ++half) {
              const auto* u = reinterpret_cast<const __m128i*>(rec + line + 32 * half);
              first[half] =
                  _mm256_add_epi32(first[half], _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_load_si128(u)), xk));
              second[half] =
                  _mm256_add_epi32(second[half], _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_load_si128(u + 1)), xk));
            }
          }
#pragma GCC unroll 2
          for (int half = 0; half < 2; ++half) {
            // [o0 o1 o4 o5 | o2 o3 o6 o7], then in order.
            const __m256i a_stored =
                _mm256_permute4x64_epi64(_mm256_hadd_epi32(first[half], second[half]), _MM_SHUFFLE(3, 1, 2, 0));
            const int c = 2 * b + half;
            const std::uint8_t* scales = rec + NB * 16 * 64 + (h * NB + b) * 32 + half * 16;
            sum[r][c] = add_group<NB, kBias, kOffsets>(scales, a_stored, terms[r], sum[r][c]);
          }
        }
      }
    }
  });
  store_rows<R, C>(job, sum, row0 / 2);
}

// Many rows of 8-bit weights: rows [row0, row0 + rows), rows <= kPanelRows (term rows with one
// term, activation rows with two). A group's 8 lines do not fit the 16 registers at once as the
// products need them, so its two halves (inputs 0-15, 16-31) are unpacked in turn, each streamed
// past every row, the rows' INT32 sums of the first half kept in a small array (L1) for the
// second. The float operations on each output are tile_rows', in the same order.
//  * One term (kWide false): the sign trick, two registers a line (q and |q|).
//  * Two terms (kWide): each row's 16-bit values (TileJob::wide) times the stored bytes u = q + 128
//    zero-extended to 16 bits, one vpmaddwd where the two INT8 terms took two sign-trick
//    products (row16 says why it is exact). A line is reordered once for the panel's rows into
//    two registers of 8 outputs times 2 inputs (inputs 0-1, then 2-3), so that each vpmaddwd
//    gives one INT32 per output, already in output order, and the rows add them with no
//    horizontal step.
template <int NB, bool kOffsets, bool kWide>
void panel_rows8(const TileJob& job, std::int64_t row0, int rows) {
  constexpr int C = 2 * NB;
  constexpr std::int32_t kBias = 128;  // the stored bytes are u = q + 128
  const std::int64_t record = job.record_bytes;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  const __m256i by_input_pair = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9,
                                                 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  alignas(32) float sum[kPanelRows][C][8];
  alignas(32) std::int32_t half_acc[kPanelRows][8];
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
#pragma GCC unroll 1
      for (int c = 0; c < C; ++c) {
        const int b = c / 2;
        const std::uint8_t* lines = rec + (c % 2) * 32;
        const std::uint8_t* scales = rec + NB * 16 * 64 + (h * NB + b) * 32 + (c % 2) * 16;
#pragma GCC unroll 1
        for (int half = 0; half < 2; ++half) {
          // Line j: q in w[j] and |q| in w[4 + j]; widened, u's inputs 4j, 4j + 1 of the 8 outputs in
          // w[2j] and inputs 4j + 2, 4j + 3 in w[2j + 1].
          __m256i w[8];
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            const std::uint8_t* line = lines + ((h * 8 + 4 * half + j) * NB + b) * 64;
            if constexpr (kWide) {
              // Each 128-bit half (4 outputs by 4 inputs) as its inputs 0-1 then 2-3, the halves'
              // pieces then put together: inputs 0-1 of the 8 outputs, and inputs 2-3.
              const __m256i pairs = _mm256_permute4x64_epi64(
                  _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(line)), by_input_pair),
                  _MM_SHUFFLE(3, 1, 2, 0));
              w[2 * j] = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(pairs));
              w[2 * j + 1] = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(pairs, 1));
            } else {
              const __m256i q = _mm256_xor_si256(_mm256_load_si256(reinterpret_cast<const __m256i*>(line)), bias);
              w[j] = q;
              w[4 + j] = _mm256_abs_epi8(q);
            }
          }
#pragma GCC unroll 1
          for (int i = 0; i < rows; ++i) {
            __m256i a;
            if constexpr (kWide) {
              const std::int16_t* x = job.wide + (row0 + i) * job.q_stride + g * 32 + 16 * half;
              __m256i first = _mm256_madd_epi16(w[0], broadcast_wide2(x));
              __m256i second = _mm256_madd_epi16(w[1], broadcast_wide2(x + 2));
#pragma GCC unroll 3
              for (int j = 1; j < 4; ++j) {
                first = _mm256_add_epi32(first, _mm256_madd_epi16(w[2 * j], broadcast_wide2(x + 4 * j)));
                second = _mm256_add_epi32(second, _mm256_madd_epi16(w[2 * j + 1], broadcast_wide2(x + 4 * j + 2)));
              }
              a = _mm256_add_epi32(first, second);
            } else {
              const std::int8_t* x = job.q + (row0 + i) * job.q_stride + g * 32 + 16 * half;
              const auto dot = [&](int j) {
                return _mm256_madd_epi16(_mm256_maddubs_epi16(w[4 + j], _mm256_sign_epi8(broadcast4(x + 4 * j), w[j])),
                                         ones);
              };
              a = _mm256_add_epi32(_mm256_add_epi32(dot(0), dot(2)), _mm256_add_epi32(dot(1), dot(3)));
            }
            if (half == 0) {
              _mm256_store_si256(reinterpret_cast<__m256i*>(half_acc[i]), a);
              continue;
            }
            a = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(half_acc[i])), a);
            // One term: the sign trick took the products with q; two: with the stored bytes.
            constexpr Dots kDots = kWide ? Dots::stored : Dots::signed_values;
            _mm256_store_ps(sum[i][c],
                            add_group<NB, kBias, kOffsets, kDots>(scales, a, terms.row(i), _mm256_load_ps(sum[i][c])));
          }
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
  if constexpr (kTerms == 2 && kBits == 8) {
    return rows == 2 ? &row16<NB, kOffsets, 1> : &row16<NB, kOffsets, 2>;
  } else if constexpr (kTerms == 2) {
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
  // Many rows: the panels (two-term rows of 4-bit weights, which no model makes, in tile_rows).
  if (job.term_rows > kTileRows && (kBits == 8 || kTerms == 1)) {
    const std::int64_t rows = job.term_rows / kTerms;
    for (std::int64_t i = 0; i < rows; i += kPanelRows) {
      const auto n = static_cast<int>(rows - i < kPanelRows ? rows - i : kPanelRows);
      if constexpr (kBits == 4)
        job.blocks == 2 ? panel_rows<2, kOffsets>(job, i, n) : panel_rows<1, kOffsets>(job, i, n);
      else
        job.blocks == 2 ? panel_rows8<2, kOffsets, kTerms == 2>(job, i, n)
                        : panel_rows8<1, kOffsets, kTerms == 2>(job, i, n);
    }
    return;
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

void tile_avx2(const TileJob& job) { run_job(job); }

}  // namespace ember::kernels::cpu::grouped
