// The FP32 linear in slices (backend/cpu/sliced_linear.hpp): its parts equal its whole bit for
// bit, and its whole is the product oneDNN's single FP32 linear computes.
#include "backend/cpu/sliced_linear.hpp"
#include "tests/support/test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace ember {
namespace {

namespace k = kernels::cpu;

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST_CASE("a sliced FP32 linear: parts equal the whole bit for bit, the whole equals one linear") {
  k::CpuContext ctx(2);
  const std::int64_t in = 64, slice = backend::cpu::fp32_slice_outputs(in), out = 2 * slice + 100;
  CHECK(slice == 4096);  // 1 MiB of FP32 weights
  const std::vector<float> w = random_values(static_cast<std::size_t>(out * in), 1);
  auto sliced = backend::cpu::make_sliced_fp32_linear(ctx, w.data(), out, in);
  auto whole = k::make_fp32_linear(ctx, w.data(), out, in);
  CHECK(sliced->output_granule(3) == slice);
  CHECK(sliced->decode_bytes() == whole->decode_bytes());
  for (const bool accumulate : {false, true}) {
    CAPTURE(accumulate);
    for (const std::int64_t m : {1, 5}) {
      const std::vector<float> x = random_values(static_cast<std::size_t>(m * in), 2);
      const std::vector<float> y0 = random_values(static_cast<std::size_t>(m * out), 3);
      std::vector<float> a = y0, b = y0, c = y0;
      sliced->forward(ctx, x.data(), m, a.data(), accumulate);
      for (std::int64_t begin = 0; begin < out; begin += slice)
        sliced->forward_outputs(ctx, x.data(), m, b.data(), begin, std::min(out, begin + slice), accumulate);
      CHECK(a == b);
      CHECK(a != y0);
      whole->forward(ctx, x.data(), m, c.data(), accumulate);
      double worst = 0;
      for (std::size_t i = 0; i < a.size(); ++i) worst = test::worse(worst, std::abs(double{a[i]} - c[i]));
      CHECK(worst < 1e-4);
    }
  }
  // A range off the slices' grid is refused, not rounded.
  std::vector<float> y(static_cast<std::size_t>(out));
  const std::vector<float> x = random_values(static_cast<std::size_t>(in), 4);
  CHECK_THROWS_AS(sliced->forward_outputs(ctx, x.data(), 1, y.data(), 1, out), Error);
}

TEST_CASE("an FP32 matrix no larger than a slice stays one linear") {
  k::CpuContext ctx(1);
  const std::vector<float> w = random_values(16 * 8, 5);
  auto linear = backend::cpu::make_sliced_fp32_linear(ctx, w.data(), 16, 8);
  CHECK(linear->output_granule(1) == 16);
  CHECK(backend::cpu::fp32_slice_outputs(576) == 448);     // the default model's width
  CHECK(backend::cpu::fp32_slice_outputs(1 << 20) == 16);  // never less than a tile
}

}  // namespace
}  // namespace ember
