#include <ember/ember.hpp>
#include "kernel_test_util.hpp"
#include "kernels/cpu/ops.hpp"
#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace ember::kernels::cpu;
using ember::test::random_floats;
using ember::test::relative_error;

TEST_CASE("rmsnorm matches the double reference, in place too") {
  for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{1, 576}, {3, 17}, {200, 576}}) {
    const auto x = random_floats(static_cast<std::size_t>(rows * cols), 31, -4.0f, 4.0f);
    const auto w = random_floats(static_cast<std::size_t>(cols), 32, 0.5f, 1.5f);
    std::vector<double> ref(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      double ss = 0.0;
      for (std::int64_t c = 0; c < cols; ++c) ss += std::pow(x[static_cast<std::size_t>(r * cols + c)], 2);
      const double k = 1.0 / std::sqrt(ss / static_cast<double>(cols) + 1e-5);
      for (std::int64_t c = 0; c < cols; ++c)
        ref[static_cast<std::size_t>(r * cols + c)] =
            x[static_cast<std::size_t>(r * cols + c)] * k * w[static_cast<std::size_t>(c)];
    }
    std::vector<float> out(x.size());
    rmsnorm(x.data(), w.data(), rows, cols, 1e-5f, out.data(), 2);
    CHECK(relative_error(out, ref) < 1e-6);
    auto inplace = x;
    rmsnorm(inplace.data(), w.data(), rows, cols, 1e-5f, inplace.data(), 2);
    CHECK(inplace == out);
  }
}

namespace {

// math.hpp's fixed_order_sum written out plainly, in a function of its own so that no product of
// the caller can be fused into its adds.
[[gnu::noinline]] float sum_in_lane_order(const std::vector<float>& terms) {
  float lane[16] = {};
  for (std::size_t i = 0; i < terms.size(); ++i) lane[i % 16] += terms[i];
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

}  // namespace

// Whatever copy of the loop this CPU runs (target_clones: AVX-512, AVX2 or the baseline), a row
// normalises to the same bits: what makes logits equal across machines of different tiers.
TEST_CASE("rmsnorm sums in one fixed order on every CPU: bit-equal to that order written out") {
  for (std::int64_t cols : {1, 7, 16, 17, 64, 576, 2048, 2049}) {
    const auto x = random_floats(static_cast<std::size_t>(cols), 41, -4.0f, 4.0f);
    const auto w = random_floats(static_cast<std::size_t>(cols), 42, 0.5f, 1.5f);
    std::vector<float> squares(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) squares[i] = x[i] * x[i];
    const float mean = sum_in_lane_order(squares) / static_cast<float>(cols);
    const float k = 1.0f / std::sqrt(mean + 1e-5f);
    std::vector<float> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const float xk = x[i] * k;
      expected[i] = xk * w[i];
    }
    std::vector<float> out(x.size());
    rmsnorm(x.data(), w.data(), 1, cols, 1e-5f, out.data(), 1);
    CAPTURE(cols);
    CHECK(std::memcmp(out.data(), expected.data(), out.size() * sizeof(float)) == 0);
  }
}

namespace {

void rope_reference(std::vector<double>& x, std::int64_t rows, std::int64_t ld, int heads, int head_dim, int rope_dims,
                    const std::vector<std::int32_t>& pos, double base, RopeLayout layout) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < rope_dims / 2; ++i) {
        const double theta = pos[static_cast<std::size_t>(r)] * std::pow(base, -2.0 * i / rope_dims);
        const std::int64_t o = r * ld + h * head_dim;
        const std::int64_t a = o + (layout == RopeLayout::interleaved ? 2 * i : i);
        const std::int64_t b = o + (layout == RopeLayout::interleaved ? 2 * i + 1 : i + rope_dims / 2);
        const double x0 = x[static_cast<std::size_t>(a)], x1 = x[static_cast<std::size_t>(b)];
        x[static_cast<std::size_t>(a)] = x0 * std::cos(theta) - x1 * std::sin(theta);
        x[static_cast<std::size_t>(b)] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
}

}  // namespace

TEST_CASE("rope: both layouts match the reference, position 0 is identity, norms kept") {
  const int heads = 3, head_dim = 64;
  const std::int64_t rows = 5, ld = 4 * head_dim + 7;  // q part of a wider fused row
  const std::vector<std::int32_t> pos = {0, 1, 17, 511, 8191};
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half}) {
    for (int rope_dims : {64, 32}) {
      CAPTURE(static_cast<int>(layout));
      CAPTURE(rope_dims);
      auto x = random_floats(static_cast<std::size_t>(rows * ld), 41);
      const auto before = x;
      std::vector<double> ref(x.begin(), x.end());
      rope_reference(ref, rows, ld, heads, head_dim, rope_dims, pos, 10000.0, layout);
      rope(x.data(), rows, ld, heads, head_dim, rope_dims, pos.data(), 10000.0f, layout, 2);
      double worst = 0.0;
      for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - ref[i]));
      CHECK(worst < 1e-5);
      for (std::int64_t c = 0; c < ld; ++c)
        CHECK(x[static_cast<std::size_t>(c)] == before[static_cast<std::size_t>(c)]);  // pos 0
      for (std::int64_t r = 1; r < rows; ++r) {
        for (std::int64_t c = heads * head_dim; c < ld; ++c)  // past the heads: untouched
          REQUIRE(x[static_cast<std::size_t>(r * ld + c)] == before[static_cast<std::size_t>(r * ld + c)]);
        for (int h = 0; h < heads; ++h) {
          double n0 = 0.0, n1 = 0.0;
          for (int d = 0; d < head_dim; ++d) {
            n0 += std::pow(before[static_cast<std::size_t>(r * ld + h * head_dim + d)], 2);
            n1 += std::pow(x[static_cast<std::size_t>(r * ld + h * head_dim + d)], 2);
          }
          CHECK(n1 == doctest::Approx(n0).epsilon(1e-5));
        }
      }
      if (rope_dims < head_dim)  // dims past rope_dims of a rotated row are untouched
        CHECK(x[static_cast<std::size_t>(2 * ld + 63)] == before[static_cast<std::size_t>(2 * ld + 63)]);
    }
  }
}

TEST_CASE("rope with precomputed angles equals rope from positions") {
  const std::vector<std::int32_t> pos = {5, 0, 300};
  const RopeAngles angles = rope_angles(pos.data(), 3, 64, 10000.0f);
  CHECK(angles.cos.size() == 3 * 32);
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half}) {
    auto a = random_floats(3 * 9 * 64, 43), b = a;
    rope(a.data(), 3, 9 * 64, 9, 64, 64, pos.data(), 10000.0f, layout);
    rope(b.data(), 3, 9 * 64, 9, 64, angles, layout, 2);
    CHECK(a == b);
  }
  auto c = random_floats(2 * 64, 44);
  CHECK_THROWS_AS(rope(c.data(), 2, 64, 1, 64, angles, RopeLayout::half), ember::Error);  // rows mismatch
}

TEST_CASE("rope angles with frequency factors and linear scaling follow ggml's formula") {
  // ggml_rope_cache_init: theta_i = p * base^(-2i/d), divided by freq_factors[i], then times
  // freq_scale (1 / the linear factor) in rope_yarn. Written out directly in double here.
  const int rope_dims = 128, half = rope_dims / 2;
  const double base = 500000.0;  // Llama 3's
  const std::vector<std::int32_t> pos = {0, 1, 17, 511, 8191, 131071};
  std::vector<float> factors(half);
  for (int i = 0; i < half; ++i)
    factors[static_cast<std::size_t>(i)] = i < 20 ? 1.0f : i > 40 ? 8.0f : 1.0f + 0.3f * (i - 20);
  for (float linear : {1.0f, 4.0f}) {
    CAPTURE(linear);
    const RopeAngles a = rope_angles(pos.data(), 6, rope_dims, static_cast<float>(base), factors.data(), 1.0f / linear);
    REQUIRE(a.cos.size() == pos.size() * half);
    double worst = 0.0;
    for (std::size_t r = 0; r < pos.size(); ++r)
      for (int i = 0; i < half; ++i) {
        const double theta = pos[r] / static_cast<double>(linear) * std::pow(base, -2.0 * i / rope_dims) /
                             factors[static_cast<std::size_t>(i)];
        const std::size_t at = r * half + static_cast<std::size_t>(i);
        worst = std::max({worst, std::abs(a.cos[at] - std::cos(theta)), std::abs(a.sin[at] - std::sin(theta))});
      }
    CHECK(worst < 1e-6);
    // The factors really change the slow pairs: without them the angles are far off.
    const RopeAngles plain = rope_angles(pos.data(), 6, rope_dims, static_cast<float>(base), nullptr, 1.0f / linear);
    const std::size_t slow = 5 * half + 60;  // position 131071, a pair divided by 8
    CHECK(std::abs(plain.sin[slow] - a.sin[slow]) > 0.1);
    CHECK(plain.sin[5 * half + 3] == a.sin[5 * half + 3]);  // a pair with factor 1
  }
  // Linear scaling alone: position p at scale 1/4 turns like position p/4.
  const std::vector<std::int32_t> quarter = {0, 4, 2048};
  const std::vector<std::int32_t> scaled = {0, 1, 512};
  const RopeAngles q = rope_angles(quarter.data(), 3, rope_dims, 10000.0f, nullptr, 0.25f);
  const RopeAngles p = rope_angles(scaled.data(), 3, rope_dims, 10000.0f);
  for (std::size_t i = 0; i < q.cos.size(); ++i) {
    REQUIRE(std::abs(q.cos[i] - p.cos[i]) < 1e-6);
    REQUIRE(std::abs(q.sin[i] - p.sin[i]) < 1e-6);
  }
  factors[7] = 0.0f;
  CHECK_THROWS_AS(rope_angles(pos.data(), 6, rope_dims, 10000.0f, factors.data()), ember::Error);
  CHECK_THROWS_AS(rope_angles(pos.data(), 6, rope_dims, 10000.0f, nullptr, 0.0f), ember::Error);
}

TEST_CASE("rope layouts differ on the same input") {
  auto a = random_floats(8, 42), b = a;
  const std::int32_t p = 3;
  rope(a.data(), 1, 8, 1, 8, 8, &p, 10000.0f, RopeLayout::interleaved);
  rope(b.data(), 1, 8, 1, 8, 8, &p, 10000.0f, RopeLayout::half);
  CHECK(a != b);
}

TEST_CASE("silu_mul matches silu(gate) * up") {
  const std::int64_t rows = 37, ffn = 1536;
  const auto gu = random_floats(static_cast<std::size_t>(rows * 2 * ffn), 51, -20.0f, 20.0f);
  std::vector<float> out(static_cast<std::size_t>(rows * ffn));
  silu_mul(gu.data(), rows, ffn, out.data(), 2);
  double worst = 0.0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < ffn; ++i) {
      const double g = gu[static_cast<std::size_t>(r * 2 * ffn + i)],
                   u = gu[static_cast<std::size_t>(r * 2 * ffn + ffn + i)];
      const double want = g / (1.0 + std::exp(-g)) * u;
      worst = std::max(worst, std::abs(out[static_cast<std::size_t>(r * ffn + i)] - want) / (std::abs(want) + 1e-6));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("gelu_mul matches gelu(gate) * up with gelu's tanh approximation") {
  const std::int64_t rows = 29, ffn = 2048;
  const auto gu = random_floats(static_cast<std::size_t>(rows * 2 * ffn), 52, -12.0f, 12.0f);
  std::vector<float> out(static_cast<std::size_t>(rows * ffn));
  gelu_mul(gu.data(), rows, ffn, out.data(), 2);
  double worst = 0.0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < ffn; ++i) {
      const double g = gu[static_cast<std::size_t>(r * 2 * ffn + i)],
                   u = gu[static_cast<std::size_t>(r * 2 * ffn + ffn + i)];
      const double want = 0.5 * g * (1.0 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * u;
      // Relative where the value is large; absolute near gelu's zero crossing and its tail.
      worst = ember::test::worse(worst,
                                 std::abs(out[static_cast<std::size_t>(r * ffn + i)] - want) / (std::abs(want) + 1e-3));
    }
  CHECK(worst < 1e-5);
}

TEST_CASE("the gated activations at a width that is not a whole number of chunks, gelu in place, and the clamps") {
  // 300 values: a whole chunk of exponentials and a partial one (kExpChunk, ops.cpp).
  const std::int64_t rows = 3, n = 300;
  auto gu = random_floats(static_cast<std::size_t>(rows * 2 * n), 55, -8.0f, 8.0f);
  gu[0] = 100.0f;                              // e^-100: the lower clamp
  gu[1] = -100.0f;                             // e^100: the upper clamp
  gu[static_cast<std::size_t>(n)] = 2.0f;      // up for gu[0]
  gu[static_cast<std::size_t>(n + 1)] = 2.0f;  // up for gu[1]
  std::vector<float> silu(static_cast<std::size_t>(rows * n));
  silu_mul(gu.data(), rows, n, silu.data(), 1);
  CHECK(silu[0] == doctest::Approx(200.0f));
  CHECK(std::abs(silu[1]) < 1e-30f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 2; i < n; ++i) {
      const double g = gu[static_cast<std::size_t>(r * 2 * n + i)], u = gu[static_cast<std::size_t>(r * 2 * n + n + i)];
      CHECK(silu[static_cast<std::size_t>(r * n + i)] == doctest::Approx(g / (1.0 + std::exp(-g)) * u).epsilon(1e-5));
    }
  std::vector<float> out(gu.size()), in_place = gu;
  gelu(gu.data(), rows, 2 * n, out.data(), 1);
  gelu(in_place.data(), rows, 2 * n, in_place.data(), 1);
  CHECK(in_place == out);
  CHECK(out[0] == doctest::Approx(100.0f));
  CHECK(std::abs(out[1]) < 1e-30f);
}

TEST_CASE("rmsnorm_heads normalises each head of strided rows with one weight") {
  const std::int64_t rows = 5, heads = 3, head_dim = 16, ld = 80;  // 48 values, then 32 others
  auto x = random_floats(static_cast<std::size_t>(rows * ld), 53, -3.0f, 3.0f);
  const auto w = random_floats(static_cast<std::size_t>(head_dim), 54, 0.5f, 1.5f);
  const auto before = x;
  rmsnorm_heads(x.data(), rows, ld, heads, head_dim, w.data(), 1e-6f, 2);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* in = before.data() + r * ld + h * head_dim;
      double ss = 0;
      for (std::int64_t i = 0; i < head_dim; ++i) ss += double(in[i]) * in[i];
      const double inv = 1.0 / std::sqrt(ss / head_dim + 1e-6);
      for (std::int64_t i = 0; i < head_dim; ++i)
        CHECK(x[static_cast<std::size_t>(r * ld + h * head_dim + i)] ==
              doctest::Approx(in[i] * inv * w[static_cast<std::size_t>(i)]).epsilon(1e-5));
    }
    for (std::int64_t i = heads * head_dim; i < ld; ++i)  // the rest of the row is untouched
      CHECK(x[static_cast<std::size_t>(r * ld + i)] == before[static_cast<std::size_t>(r * ld + i)]);
  }
  CHECK_THROWS_AS(rmsnorm_heads(x.data(), 1, 40, 3, 16, w.data(), 1e-6f), ember::Error);  // ld too small
}

TEST_CASE("ops reject bad shapes") {
  float x[4] = {};
  const std::int32_t p = 0;
  CHECK_THROWS_AS(rope(x, 1, 4, 1, 4, 3, &p, 10000.0f, RopeLayout::half), ember::Error);
  CHECK_THROWS_AS(rope(x, 1, 2, 1, 4, 4, &p, 10000.0f, RopeLayout::half), ember::Error);
  CHECK_THROWS_AS(rmsnorm(x, x, 1, 0, 1e-5f, x), ember::Error);
}
