// The grouped kernel on AVX-512 VNNI: a 64-byte line of the layout is one register, 16 output
// rows times 4 inputs, the operand vpdpbusd multiplies with 4 broadcast activations. Also the
// kernel of the AMX tier: AMX's tiles would need another layout for a kernel that is bound by
// memory in decode, and prefill's 4-bit products are unpacked from nibbles either way.
//
// One micro-kernel serves every row count: a tile (up to two blocks, 32 outputs) against up to
// four term rows, all inputs, holding the rows' float sums in registers. Prefill reruns it for
// each group of four rows while the tile's weights are still in L2, so 4-bit ones are unpacked
// from nibbles once per four rows; decode's one row streams them once from memory.
//
// Compiled with -mavx512f -mavx512bw -mavx512vnni -mf16c -mfma -ffp-contract=off
// (kernels/CMakeLists.txt); raw pointers and intrinsics only (gemm_grouped_tiers.hpp says why).
#include "kernels/cpu/gemm_grouped_tiers.hpp"

#include <immintrin.h>

#include <cstring>

namespace ember::kernels::cpu::grouped {

namespace {

#include "kernels/cpu/arch/x86/gemm_grouped_prefetch.inc"

// Term rows [row0, row0 + M) of the tile (NB blocks): one pass over its inputs. With kTerms = 2,
// M is even and term rows 2i and 2i + 1 are the two terms of y's row row0 / 2 + i. The first
// pass over a tile (row0 = 0) prefetches the weights ahead of it; later passes find them in L2.
template <int M, int NB, int kBits, bool kOffsets, int kTerms>
void tile_rows(const TileJob& job, std::int64_t row0) {
  static_assert(M % kTerms == 0);
  constexpr int kLines = 2 * kBits;  // value lines per span
  constexpr std::int32_t kBias = 1 << (kBits - 1);
  // With few rows, the low and high nibbles feed separate INT32 sums so that enough independent
  // vpdpbusd chains hide the instruction's latency; INT32 sums are exact, so this changes no
  // result.
  constexpr int U = M * NB <= 4 ? 2 : 1;
  // With separate sums, a 4-bit weight's high nibble is multiplied in place (16 times its value:
  // one AND instead of a shift and an AND) and its sum shifted back once per group; 16 u times x
  // is exact in vpdpbusd's INT32 sums, so the result is the same integer. At one row the loop's
  // instructions, not only memory, set how fast decode streams (docs/benchmarks.md#moe-decode-kernel).
  constexpr bool kHighInPlace = kBits == 4 && U == 2;
  const std::int64_t record = job.record_bytes, groups = job.groups;
  const std::uint8_t* wt = job.weights;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i high4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const std::int8_t* xq[M];
  const float* xs[M];
  const std::int32_t* xsum[M];
#pragma GCC unroll 4
  for (int i = 0; i < M; ++i) {
    xq[i] = job.q + (row0 + i) * job.q_stride;
    xs[i] = job.scales + (row0 + i) * groups;
    xsum[i] = job.sums + (row0 + i) * groups;
  }
  constexpr int R = M / kTerms;  // activation rows
  __m512 sum[R][NB];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) sum[i][b] = _mm512_setzero_ps();

  // Into L2, twice prefetch_ahead ahead (TileJob::prefetch_ahead says why).
  const bool prefetch = row0 == 0 && job.prefetch_ahead > 0;
  const std::int64_t ahead = 2 * job.prefetch_ahead, tile_bytes = job.spans * NB * record;
  for (std::int64_t s = 0; s < job.spans; ++s) {
    const std::uint8_t* rec = wt + s * NB * record;
    if (prefetch) prefetch_stream(job, s * NB * record + ahead, NB * record, tile_bytes);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = 2 * s + h;
      // Without offsets, the first sum starts at -bias * sum(x) (the term it would subtract last:
      // the same integer).
      __m512i acc[U][M][NB];
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        const __m512i first = kOffsets ? _mm512_setzero_si512() : _mm512_set1_epi32(-kBias * xsum[i][g]);
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
          acc[0][i][b] = first;
          acc[U - 1][i][b] = U == 2 ? _mm512_setzero_si512() : first;
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m512i lo[NB], hi[NB];
#pragma GCC unroll 4
        for (int b = 0; b < NB; ++b) {
          if constexpr (kBits == 4) {
            __m512i v = _mm512_load_si512(rec + ((h * 4 + j) * NB + b) * 64);
            // One load of the line for both nibbles (GCC would fold it into each AND: two loads).
            if constexpr (kHighInPlace) __asm__("" : "+v"(v));
            lo[b] = _mm512_and_si512(v, low4);
            hi[b] = kHighInPlace ? _mm512_and_si512(v, high4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          } else {
            lo[b] = _mm512_load_si512(rec + ((h * 8 + j) * NB + b) * 64);
            hi[b] = _mm512_load_si512(rec + ((h * 8 + 4 + j) * NB + b) * 64);
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < M; ++i) {
          std::int32_t x_lo, x_hi;
          std::memcpy(&x_lo, xq[i] + g * 32 + 4 * j, 4);
          std::memcpy(&x_hi, xq[i] + g * 32 + 16 + 4 * j, 4);
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
        const auto term_acc = [&](int t) {
          __m512i a = acc[0][t][b];
          if constexpr (kHighInPlace)
            a = _mm512_add_epi32(a, _mm512_maskz_srai_epi32(0xFFFF, acc[1][t][b], 4));
          else if constexpr (U == 2)
            a = _mm512_add_epi32(a, acc[1][t][b]);
          return a;
        };
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
          const int t = kTerms * i;  // the row's first term row; with two, a 16-bit value's planes
          __m512i a = term_acc(t);
          std::int32_t x_sum = xsum[t][g];
          if constexpr (kTerms == 2) {
            a = _mm512_add_epi32(_mm512_maskz_slli_epi32(0xFFFF, a, kLowTermBits), term_acc(t + 1));
            x_sum = kLowTermSteps * x_sum + xsum[t + 1][g];
          }
          __m512 v;
          if constexpr (kOffsets) {
            const __m512 o =
                _mm512_maskz_cvtph_ps(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + NB * 64)));
            v = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, a), d);
            v = _mm512_fmadd_ps(o, _mm512_set1_ps(static_cast<float>(x_sum)), v);
          } else {
            v = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, a), d);
          }
          sum[i][b] = _mm512_fmadd_ps(v, _mm512_set1_ps(xs[t + kTerms - 1][g]), sum[i][b]);
        }
      }
    }
  }

#pragma GCC unroll 4
  for (int b = 0; b < NB; ++b) {
    const std::int64_t n0 = job.first_output + b * 16;
    const std::int64_t left = job.out - n0;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      float* yp = job.y + (row0 / kTerms + i) * job.out + n0;
      __m512 v = sum[i][b];
      if (job.accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yp), v);
      _mm512_mask_storeu_ps(yp, mask, v);
    }
  }
}

// Decode's one row of 4-bit weights (one term, no software prefetch): tile_rows<1, NB, 4, ...>'s
// arithmetic, group by group, with the next group's lines loaded before this group's products.
// Loaded at the top of the loop they are in flight while this group multiplies; where the
// compiler placed them, next to their products, fewer misses were outstanding and the one-row
// stream fell further below the loop that only loads (docs/benchmarks.md#moe-s23).
template <int NB, bool kOffsets>
void one_row_4bit(const TileJob& job) {
  constexpr int kLines = 4 * NB;  // value lines of one group
  const std::int64_t record = job.record_bytes, groups = 2 * job.spans;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i high4 = _mm512_set1_epi8(static_cast<char>(0xF0));
  // Line j * NB + b of group g: inputs 4j.. of block b (the layout of gemm_grouped.hpp).
  const auto group_lines = [&](std::int64_t g) { return job.weights + (g / 2) * NB * record + (g % 2) * kLines * 64; };
  __m512i next[kLines];
#pragma GCC unroll 8
  for (int k = 0; k < kLines; ++k) next[k] = _mm512_load_si512(group_lines(0) + k * 64);
  __m512 sum[NB];
#pragma GCC unroll 2
  for (int b = 0; b < NB; ++b) sum[b] = _mm512_setzero_ps();
  for (std::int64_t g = 0; g < groups; ++g) {
    __m512i v[kLines];
#pragma GCC unroll 8
    for (int k = 0; k < kLines; ++k) v[k] = next[k];
    if (g + 1 < groups) {
      const std::uint8_t* ahead = group_lines(g + 1);
#pragma GCC unroll 8
      for (int k = 0; k < kLines; ++k) {
        next[k] = _mm512_load_si512(ahead + k * 64);
        __asm__("" : "+v"(next[k]));  // keeps the load here, ahead of the products below
      }
    }
    // The high nibble multiplied in place (16 times its value) into its own sums, as tile_rows.
    const __m512i first = kOffsets ? _mm512_setzero_si512() : _mm512_set1_epi32(-8 * job.sums[g]);
    __m512i lo[NB], hi[NB];
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) lo[b] = first, hi[b] = _mm512_setzero_si512();
    const std::int8_t* x = job.q + g * 32;
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      std::int32_t x_lo, x_hi;
      std::memcpy(&x_lo, x + 4 * j, 4);
      std::memcpy(&x_hi, x + 16 + 4 * j, 4);
      const __m512i bl = _mm512_set1_epi32(x_lo), bh = _mm512_set1_epi32(x_hi);
#pragma GCC unroll 2
      for (int b = 0; b < NB; ++b) {
        lo[b] = _mm512_dpbusd_epi32(lo[b], _mm512_and_si512(v[j * NB + b], low4), bl);
        hi[b] = _mm512_dpbusd_epi32(hi[b], _mm512_and_si512(v[j * NB + b], high4), bh);
      }
    }
    const std::uint8_t* scales = job.weights + (g / 2) * NB * record + NB * 8 * 64 + (g % 2) * NB * 32;
    const __m512 xs = _mm512_set1_ps(job.scales[g]);
#pragma GCC unroll 2
    for (int b = 0; b < NB; ++b) {
      const __m512 d =
          _mm512_maskz_cvtph_ps(0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * 32)));
      const __m512i a = _mm512_add_epi32(lo[b], _mm512_maskz_srai_epi32(0xFFFF, hi[b], 4));
      __m512 t = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, a), d);
      if constexpr (kOffsets) {
        const __m512 o = _mm512_maskz_cvtph_ps(
            0xFFFF, _mm256_load_si256(reinterpret_cast<const __m256i*>(scales + NB * 64 + b * 32)));
        t = _mm512_fmadd_ps(o, _mm512_set1_ps(static_cast<float>(job.sums[g])), t);
      }
      sum[b] = _mm512_fmadd_ps(t, xs, sum[b]);
    }
  }
#pragma GCC unroll 2
  for (int b = 0; b < NB; ++b) {
    const std::int64_t n0 = job.first_output + b * 16;
    const std::int64_t left = job.out - n0;
    const auto mask = static_cast<__mmask16>(left >= 16 ? 0xFFFFu : (1u << left) - 1u);
    float* yp = job.y + n0;
    __m512 v = sum[b];
    if (job.accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, yp), v);
    _mm512_mask_storeu_ps(yp, mask, v);
  }
}

using RowsFn = void (*)(const TileJob&, std::int64_t);

// The micro-kernel for `rows` term rows (1..kTileRows; with two terms, even) of NB blocks.
template <int NB, int kBits, bool kOffsets, int kTerms>
RowsFn rows_kernel(std::int64_t rows) {
  if constexpr (kTerms == 2) {
    return rows == 2 ? &tile_rows<2, NB, kBits, kOffsets, 2> : &tile_rows<4, NB, kBits, kOffsets, 2>;
  } else {
    switch (rows) {
      case 1: return &tile_rows<1, NB, kBits, kOffsets, 1>;
      case 2: return &tile_rows<2, NB, kBits, kOffsets, 1>;
      case 3: return &tile_rows<3, NB, kBits, kOffsets, 1>;
      default: return &tile_rows<4, NB, kBits, kOffsets, 1>;
    }
  }
}

template <int kBits, bool kOffsets, int kTerms>
void run_format(const TileJob& job) {
  if constexpr (kBits == 4 && kTerms == 1) {
    if (job.term_rows == 1 && job.prefetch_ahead == 0)
      return job.blocks == 2 ? one_row_4bit<2, kOffsets>(job) : one_row_4bit<1, kOffsets>(job);
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

void tile_avx512_vnni(const TileJob& job) { run_job(job); }

}  // namespace ember::kernels::cpu::grouped
