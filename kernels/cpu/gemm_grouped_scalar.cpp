// The grouped kernel's portable tier: the reference the SIMD tiers equal bit for bit, and the
// kernel of CPUs without one. It reads the packed layout of gemm_grouped.hpp value by value and
// performs the float operations of gemm_grouped_tiers.hpp in their order (compiled with
// -ffp-contract=off, kernels/CMakeLists.txt, so that none is fused beyond the written fma).
#include "kernels/cpu/gemm_grouped_tiers.hpp"
#include "kernels/cpu/math.hpp"
#include "kernels/cpu/quantize.hpp"

#include "util/fp16.hpp"

#include <cmath>
#include <cstring>

namespace ember::kernels::cpu::grouped {

namespace {

constexpr int kBlockRows = 16;

float half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return fp16_to_float(h);
}

// The INT32 dot product of output row r of block b with group h of a span's activations x.
std::int32_t group_dot(const TileJob& job, const std::uint8_t* span, int h, int b, int r, const std::int8_t* x) {
  const int nb = job.blocks;
  std::int32_t acc = 0;
  for (int j = 0; j < 4; ++j) {
    if (job.bits == 4) {
      const std::uint8_t* v = span + ((h * 4 + j) * nb + b) * 64 + 4 * r;
      for (int e = 0; e < 4; ++e) acc += (v[e] & 0x0F) * x[4 * j + e] + (v[e] >> 4) * x[16 + 4 * j + e];
    } else {
      const std::uint8_t* lo = span + ((h * 8 + j) * nb + b) * 64 + 4 * r;
      const std::uint8_t* hi = span + ((h * 8 + 4 + j) * nb + b) * 64 + 4 * r;
      for (int e = 0; e < 4; ++e) acc += lo[e] * x[4 * j + e] + hi[e] * x[16 + 4 * j + e];
    }
  }
  return acc;
}

// Activation row `row`'s sums over all groups for the tile's outputs, into s[blocks * 16]: with
// two terms, each group's dot products of the two planes joined as 256 hi + lo.
void row_sums(const TileJob& job, std::int64_t row, float* s) {
  const int nb = job.blocks, lines = 2 * job.bits;
  const std::int32_t bias = 1 << (job.bits - 1);
  const std::int64_t term0 = row * job.terms;
  const float* xs = job.scales + (term0 + job.terms - 1) * job.groups;  // with two terms, the low plane's
  for (int n = 0; n < nb * kBlockRows; ++n) s[n] = 0.0f;
  for (std::int64_t sp = 0; sp < job.spans; ++sp) {
    const std::uint8_t* span = job.weights + sp * nb * job.record_bytes;
    for (int h = 0; h < 2; ++h) {
      const std::int64_t g = 2 * sp + h;
      const auto joined = [&](auto of_term) {
        std::int32_t v = of_term(term0);
        return job.terms == 2 ? kLowTermSteps * v + of_term(term0 + 1) : v;
      };
      const std::int32_t xsum = joined([&](std::int64_t t) { return job.sums[t * job.groups + g]; });
      for (int b = 0; b < nb; ++b) {
        const std::uint8_t* scales = span + nb * lines * 64 + (h * nb + b) * 32;
        for (int r = 0; r < kBlockRows; ++r) {
          const std::int32_t acc =
              joined([&](std::int64_t t) { return group_dot(job, span, h, b, r, job.q + t * job.q_stride + g * 32); });
          const float d = half_at(scales + 2 * r);
          float v;
          if (job.offsets) {
            v = static_cast<float>(acc) * d;
            v = fused_multiply_add(half_at(scales + nb * 64 + 2 * r), static_cast<float>(xsum), v);
          } else {
            v = static_cast<float>(acc - bias * xsum) * d;
          }
          float& out = s[b * kBlockRows + r];
          out = fused_multiply_add(v, xs[g], out);
        }
      }
    }
  }
}

}  // namespace

void tile_scalar(const TileJob& job) {
  float s[2 * kBlockRows];
  for (std::int64_t row = 0; row < job.term_rows / job.terms; ++row) {
    row_sums(job, row, s);
    float* y = job.y + row * job.out + job.first_output;
    for (int n = 0; n < job.blocks * kBlockRows && job.first_output + n < job.out; ++n)
      y[n] = job.accumulate ? y[n] + s[n] : s[n];
  }
}

void sum_groups(const std::int8_t* q, std::int64_t groups, std::int32_t* sums) {
  for (std::int64_t g = 0; g < groups; ++g) {
    std::int32_t s = 0;
    for (int k = 0; k < 32; ++k) s += q[g * 32 + k];
    sums[g] = s;
  }
}

void quantize_groups_scalar(const float* x, std::int64_t groups, std::int8_t* q, float* scales, std::int32_t* sums) {
  quantize_rows_s8(x, groups, 32, 32, q, scales);
  sum_groups(q, groups, sums);
}

}  // namespace ember::kernels::cpu::grouped
