#include <ember/ember.hpp>
#include "kernel_test_util.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/linear.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

using namespace ember::kernels::cpu;
using ember::test::random_floats;
using ember::test::relative_error;

namespace {

// y[m, out] = x · Wᵀ in double.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w, std::int64_t m,
                              std::int64_t out, std::int64_t in) {
  std::vector<double> y(static_cast<std::size_t>(m * out));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < out; ++j) {
      double s = 0.0;
      for (std::int64_t k = 0; k < in; ++k)
        s += static_cast<double>(x[static_cast<std::size_t>(i * in + k)]) * w[static_cast<std::size_t>(j * in + k)];
      y[static_cast<std::size_t>(i * out + j)] = s;
    }
  return y;
}

std::vector<float> run(Linear& lin, CpuContext& ctx, const std::vector<float>& x, std::int64_t m) {
  std::vector<float> y(static_cast<std::size_t>(m * lin.out_features()), -1.0f);
  lin.forward(ctx, x.data(), m, y.data());
  return y;
}

using LinearFactory = std::unique_ptr<Linear> (*)(CpuContext&, const float*, std::int64_t, std::int64_t);
// The INT8 (default activations) and FP32 linears, for checks that hold for both.
const LinearFactory kBothPrecisions[] = {[](CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in) {
                                           return make_int8_linear(ctx, w, out, in);
                                         },
                                         [](CpuContext& ctx, const float* w, std::int64_t out, std::int64_t in) {
                                           return make_fp32_linear(ctx, w, out, in);
                                         }};

}  // namespace

TEST_CASE("int8 and fp32 linear match a double-precision reference") {
  CpuContext ctx(2);
  struct Shape {
    std::int64_t m, in, out;
  };
  for (const Shape s :
       {Shape{1, 576, 960}, Shape{3, 65, 17}, Shape{8, 1536, 576}, Shape{33, 576, 3072}, Shape{512, 576, 576}}) {
    CAPTURE(s.m);
    CAPTURE(s.in);
    CAPTURE(s.out);
    const auto w = random_floats(static_cast<std::size_t>(s.out * s.in), 1, -0.1f, 0.1f);
    const auto x = random_floats(static_cast<std::size_t>(s.m * s.in), 2, -3.0f, 3.0f);
    const auto ref = reference(x, w, s.m, s.out, s.in);
    auto int8 = make_int8_linear(ctx, w.data(), s.out, s.in);
    auto fp32 = make_fp32_linear(ctx, w.data(), s.out, s.in);
    CHECK(int8->in_features() == s.in);
    CHECK(int8->out_features() == s.out);
    const double e8 = relative_error(run(*int8, ctx, x, s.m), ref);
    const double e32 = relative_error(run(*fp32, ctx, x, s.m), ref);
    MESSAGE("int8 rel err ", e8, "  fp32 rel err ", e32, "  impl ", int8->implementation(ctx, s.m));
    CHECK(e8 < 0.02);
    CHECK(e8 > 1e-5);  // it really is quantized, not silently the fp32 path
    CHECK(e32 < 1e-5);
    // No reference kernel on any tier (kernels_test_avx2 and the other caps run this too).
    CHECK(int8->implementation(ctx, s.m).rfind("ref", 0) != 0);
    CHECK(int8->implementation(ctx, s.m, true).rfind("ref", 0) != 0);
    CHECK(fp32->implementation(ctx, s.m).rfind("ref", 0) != 0);
    CHECK(fp32->implementation(ctx, s.m, true).rfind("ref", 0) != 0);
  }
}

TEST_CASE("int8 linear is exact on integer-valued inputs whose rows reach the INT8 range") {
  CpuContext ctx(2);
  // Weights within the range this CPU's int8 kernels use (127, or 63 without VNNI), each row
  // reaching it: weight scale 1. Activations reach 127: activation scale 1.
  const int wmax = int8_weight_range();
  MESSAGE("int8 weight range: ", wmax);
  const std::int64_t m = 5, in = 576, out = 40;  // |sums| <= 576*127*127 < 2^24: exact in float
  std::vector<float> w(static_cast<std::size_t>(out * in)), x(static_cast<std::size_t>(m * in));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-127, 127), dw(-wmax, wmax);
  for (auto& v : w) v = static_cast<float>(dw(rng));
  for (auto& v : x) v = static_cast<float>(d(rng));
  const auto fw = static_cast<float>(wmax);
  for (std::int64_t j = 0; j < out; ++j) w[static_cast<std::size_t>(j * in + j % in)] = (j % 2) ? fw : -fw;
  for (std::int64_t i = 0; i < m; ++i) x[static_cast<std::size_t>(i * in + 3)] = 127.0f;  // scale 1
  const auto ref = reference(x, w, m, out, in);
  for (const LinearFactory make : kBothPrecisions) {
    auto lin = make(ctx, w.data(), out, in);
    const auto y = run(*lin, ctx, x, m);
    for (std::size_t i = 0; i < ref.size(); ++i) REQUIRE(y[i] == static_cast<float>(ref[i]));
  }
}

TEST_CASE("int8 linear on extreme patterns: all 127, all -128, zeros") {
  CpuContext ctx(1);
  const std::int64_t in = 65, out = 17;
  SUBCASE("x = -128 everywhere, w = 127 everywhere") {
    std::vector<float> w(static_cast<std::size_t>(out * in), 127.0f);
    std::vector<float> x(static_cast<std::size_t>(3 * in), -128.0f);
    auto lin = make_int8_linear(ctx, w.data(), out, in);
    for (float v : run(*lin, ctx, x, 3)) CHECK(v == doctest::Approx(-128.0 * 127.0 * in).epsilon(1e-6));
  }
  SUBCASE("x = 127, w = -128") {
    std::vector<float> w(static_cast<std::size_t>(out * in), -128.0f);
    std::vector<float> x(static_cast<std::size_t>(in), 127.0f);
    auto lin = make_int8_linear(ctx, w.data(), out, in);
    for (float v : run(*lin, ctx, x, 1)) CHECK(v == doctest::Approx(-128.0 * 127.0 * in).epsilon(1e-6));
  }
  SUBCASE("zero activations and zero weight rows give exact zeros") {
    auto w = random_floats(static_cast<std::size_t>(out * in), 3);
    for (std::int64_t k = 0; k < in; ++k) w[static_cast<std::size_t>(5 * in + k)] = 0.0f;  // channel 5
    auto x = random_floats(static_cast<std::size_t>(2 * in), 4);
    for (std::int64_t k = 0; k < in; ++k) x[static_cast<std::size_t>(k)] = 0.0f;  // row 0
    auto lin = make_int8_linear(ctx, w.data(), out, in);
    const auto y = run(*lin, ctx, x, 2);
    for (std::int64_t j = 0; j < out; ++j) CHECK(y[static_cast<std::size_t>(j)] == 0.0f);
    CHECK(y[static_cast<std::size_t>(out + 5)] == 0.0f);
    CHECK(y[static_cast<std::size_t>(out + 4)] != 0.0f);
  }
}

TEST_CASE("accumulate adds the product to y (residual add), both precisions") {
  CpuContext ctx(2);
  const std::int64_t in = 576, out = 576;
  const auto w = random_floats(static_cast<std::size_t>(out * in), 5, -0.1f, 0.1f);
  for (std::int64_t m : {1, 3, 512}) {
    CAPTURE(m);
    const auto x = random_floats(static_cast<std::size_t>(m * in), 6);
    const auto base = random_floats(static_cast<std::size_t>(m * out), 7, -10.0f, 10.0f);
    auto ref = reference(x, w, m, out, in);
    for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += base[i];
    for (const LinearFactory make : kBothPrecisions) {
      auto lin = make(ctx, w.data(), out, in);
      auto y = base;
      lin->forward(ctx, x.data(), m, y.data(), /*accumulate=*/true);
      CHECK(relative_error(y, ref) < 2e-3);  // the residual dominates; quantization is small
      // A plain forward afterwards (cached primitive of the other kind) overwrites again.
      auto y2 = base;
      lin->forward(ctx, x.data(), m, y2.data());
      double diff = 0.0;
      for (std::size_t i = 0; i < y.size(); ++i)
        diff = std::max(diff, std::abs(static_cast<double>(y[i] - y2[i] - base[i])));
      CHECK(diff < 1e-3);
    }
  }
}

TEST_CASE("linear rejects bad shapes with invalid_argument") {
  CpuContext ctx(1);
  std::vector<float> w(4, 1.0f);
  CHECK_THROWS_AS(make_int8_linear(ctx, w.data(), 0, 4), ember::Error);
  auto lin = make_fp32_linear(ctx, w.data(), 2, 2);
  float x[2] = {1, 2}, y[2] = {0, 0};
  try {
    lin->forward(ctx, x, -1, y);
    FAIL("no throw");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::invalid_argument);
  }
  lin->forward(ctx, x, 0, y);  // m = 0 is a no-op
  CHECK(y[0] == 0.0f);
}

TEST_CASE("int8 linear with residual activations: near-FP32 accuracy on outlier-heavy rows") {
  CpuContext ctx(2);
  const std::int64_t in = 1536, out = 576;
  const auto w = random_floats(static_cast<std::size_t>(out * in), 31, -0.05f, 0.05f);
  for (std::int64_t m : {1, 3, 4, 5, 8, 9, 64}) {
    CAPTURE(m);
    auto x = random_floats(static_cast<std::size_t>(m * in), 32, -1.0f, 1.0f);
    // One outlier channel per row makes the per-row scale coarse for every other channel, the
    // case the second term is for (a SwiGLU output looks like this).
    for (std::int64_t i = 0; i < m; ++i) x[static_cast<std::size_t>(i * in + 11)] = 60.0f;
    const auto ref = reference(x, w, m, out, in);
    auto one = make_int8_linear(ctx, w.data(), out, in, ActivationQuant::per_row);
    auto two = make_int8_linear(ctx, w.data(), out, in, ActivationQuant::residual);
    const double e1 = relative_error(run(*one, ctx, x, m), ref);
    const double e2 = relative_error(run(*two, ctx, x, m), ref);
    MESSAGE("m=", m, ": per-row rel err ", e1, ", residual ", e2);
    CHECK(e2 < e1 / 3);  // what is left is the weights' own rounding
    CHECK(e2 > 1e-6);    // still INT8 weights, not an FP32 path
    // Accumulating adds onto y exactly like a plain forward followed by an add.
    const auto base = random_floats(static_cast<std::size_t>(m * out), 33, -5.0f, 5.0f);
    auto y = base;
    two->forward(ctx, x.data(), m, y.data(), /*accumulate=*/true);
    auto plain = run(*two, ctx, x, m);
    for (std::size_t i = 0; i < plain.size(); ++i) plain[i] += base[i];
    CHECK(relative_error(y, std::vector<double>(plain.begin(), plain.end())) < 1e-6);
  }
}
