#include "kernel_test_util.hpp"
#include "kernels/cpu/math.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/simd.hpp"
#include "tests/support/test_support.hpp"
#include "util/fp16.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

using namespace ember::kernels::cpu;
using ember::test::random_floats;

TEST_CASE("quantize_rows_s8 round-trips within half a step and honours the row stride") {
  const std::int64_t rows = 4, cols = 100, ld = 130;
  auto x = random_floats(static_cast<std::size_t>(rows * ld), 11, -5.0f, 5.0f);
  for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(2 * ld + c)] = 0.0f;  // zero row
  x[static_cast<std::size_t>(1 * ld + 17)] = -9.0f;                                        // row max
  std::vector<std::int8_t> q(static_cast<std::size_t>(rows * cols), 99);
  std::vector<float> s(rows, -1.0f);
  quantize_rows_s8(x.data(), rows, cols, ld, q.data(), s.data(), 2);
  CHECK(s[2] == 0.0f);
  CHECK(s[1] == doctest::Approx(9.0f / 127.0f));
  CHECK(q[static_cast<std::size_t>(1 * cols + 17)] == -127);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = x[static_cast<std::size_t>(r * ld + c)];
      const int qi = q[static_cast<std::size_t>(r * cols + c)];
      REQUIRE(qi >= -127);
      REQUIRE(qi <= 127);
      REQUIRE(std::abs(qi * s[static_cast<std::size_t>(r)] - v) <= s[static_cast<std::size_t>(r)] * 0.5f + 1e-6f);
    }
  for (std::int64_t c = 0; c < cols; ++c) CHECK(q[static_cast<std::size_t>(2 * cols + c)] == 0);
}

TEST_CASE("quantize rounds half to even and maps integers exactly") {
  // max 127 -> scale 1: integers map to themselves, x.5 goes to the even neighbour.
  const float x[6] = {127.0f, -127.0f, 2.5f, 3.5f, -2.5f, 0.0f};
  std::int8_t q[6];
  float s;
  quantize_weights_s8(x, 1, 6, q, &s);
  CHECK(s == 1.0f);
  CHECK(q[0] == 127);
  CHECK(q[1] == -127);
  CHECK(q[2] == 2);
  CHECK(q[3] == 4);
  CHECK(q[4] == -2);
  CHECK(q[5] == 0);
}

TEST_CASE("exp_approx is accurate over the range softmax and SiLU use") {
  double worst = 0.0;
  for (float x = -80.0f; x <= 80.0f; x += 0.01337f)
    worst = ember::test::worse(worst, std::abs(exp_approx(x) / std::exp(static_cast<double>(x)) - 1.0));
  CHECK(worst < 5e-7);
  CHECK(exp_approx(-1000.0f) < 1e-37f);
  CHECK(exp_approx(-1000.0f) >= 0.0f);
  CHECK(std::isfinite(exp_approx(1000.0f)));
}

// The scalar tiers' fused multiply-add rounds once (MinGW-w64's fmaf does not, so ember has its
// own there): cases that a product rounded first, or a sum rounded twice, get wrong.
TEST_CASE("fused_multiply_add rounds once, on every C library") {
  const float a = 1.0f + 0x1p-12f;  // a * a = 1 + 2^-11 + 2^-24: halfway between two floats
  CHECK(fma_through_double(a, a, 0x1p-70f) == 1.0f + 0x1p-11f + 0x1p-23f);
  CHECK(fma_through_double(a, a, -0x1p-70f) == 1.0f + 0x1p-11f);
  CHECK(fma_through_double(a, a, 0.0f) == 1.0f + 0x1p-11f);  // the tie, to even
  CHECK(fma_through_double(0x1.5ba3dp-1f, -0x1.a6d728p-2f, 0x1.c8b222p-10f) == -0x1.1d5168p-2f);
  CHECK(fma_through_double(-0x1.14e9b6p+0f, -0x1.e3f482p+0f, 0x1.20af5ep-13f) == 0x1.05c33ap+1f);
  CHECK(fma_through_double(3.0f, 4.0f, -12.0f) == 0.0f);
  CHECK(std::isnan(fma_through_double(INFINITY, 0.0f, 1.0f)));
  CHECK(fma_through_double(INFINITY, 1.0f, 1.0f) == INFINITY);
  CHECK(fma_through_double(0x1p100f, 0x1p100f, 0.0f) == INFINITY);
  std::int64_t differ = 0;
  const auto x = random_floats(3 * 100000, 77, -4.0f, 4.0f);
  for (std::size_t i = 0; i < x.size(); i += 3) {
    const float c = x[i + 2] * 0x1p-8f;
    const float want = fma_through_double(x[i], x[i + 1], c), got = fused_multiply_add(x[i], x[i + 1], c);
    differ += std::memcmp(&want, &got, sizeof want) != 0;
  }
  CHECK(differ == 0);
}

// One chunk of keys at a row stride: every ISA agrees with the scalar sums, lanes past `keys`
// are zero, and key j's score does not depend on how many keys share its chunk (the property
// that keeps attention batch invariant).
void check_dot_keys(const VecOps& ops, const VecOps& ref, int n) {
  const std::int64_t stride = n + 3;
  const auto q = random_floats(static_cast<std::size_t>(n) + 1, 26);
  const auto k = random_floats(static_cast<std::size_t>(kKeyChunk * stride), 27);
  for (int keys : {1, 3, 8, 9, 16}) {
    CAPTURE(keys);
    float got[kKeyChunk], want[kKeyChunk], full[kKeyChunk];
    ops.dot_keys_f32(q.data(), k.data(), stride, keys, n, got);
    ref.dot_keys_f32(q.data(), k.data(), stride, keys, n, want);
    ops.dot_keys_f32(q.data(), k.data(), stride, kKeyChunk, n, full);
    for (int j = 0; j < kKeyChunk; ++j) {
      CAPTURE(j);
      if (j >= keys) {
        REQUIRE(got[j] == 0.0f);
        continue;
      }
      REQUIRE(std::memcmp(&got[j], &want[j], sizeof(float)) == 0);  // one order on every tier
      REQUIRE(got[j] == full[j]);                                   // bit for bit
    }
  }
}

// The f16 entry points (a lone decode query reads its f16 chunk in place) give the bits of the
// f32 ones on the converted rows, on every tier that has them; the scalar tier has them.
TEST_CASE("the f16 forms of the attention loops equal the f32 forms on converted rows") {
  CHECK((vec_ops(CpuTier::scalar).dot_keys_f16 != nullptr && vec_ops(CpuTier::scalar).axpy_rows_f16 != nullptr));
  int checked = 0;
  for (CpuTier isa : kAllCpuTiers) {
    if (!tier_available(isa)) continue;
    const VecOps& ops = vec_ops(isa);
    if (ops.dot_keys_f16 == nullptr || ops.axpy_rows_f16 == nullptr) continue;
    ++checked;
    for (int n : {0, 1, 16, 33, 64, 80, 128, 131}) {
      CAPTURE(std::string(to_string(isa)));
      CAPTURE(n);
      const std::int64_t stride = n + 3;
      const auto q = random_floats(static_cast<std::size_t>(n) + 1, 31);
      const auto kf = random_floats(static_cast<std::size_t>(kKeyChunk * stride), 32);
      std::vector<std::uint16_t> kh(kf.size());
      ops.to_f16(kf.data(), kh.data(), static_cast<int>(kf.size()));
      std::vector<float> k(kh.size());
      ops.from_f16(kh.data(), k.data(), static_cast<int>(kh.size()));
      for (int keys : {1, 5, 16}) {
        CAPTURE(keys);
        float got[kKeyChunk], want[kKeyChunk];
        ops.dot_keys_f16(q.data(), kh.data(), stride, keys, n, got);
        ops.dot_keys_f32(q.data(), k.data(), stride, keys, n, want);
        REQUIRE(std::memcmp(got, want, sizeof got) == 0);
      }
      for (const int rows : {1, 4, 5}) {
        const auto p = random_floats(rows, 33, 0.0f, 1.0f);
        auto y1 = random_floats(static_cast<std::size_t>(n), 34), y2 = y1;
        ops.axpy_rows_f16(p.data(), kh.data(), stride, rows, y1.data(), n);
        ops.axpy_rows_f32(p.data(), k.data(), stride, rows, y2.data(), n);
        REQUIRE((y1.empty() || std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0));
      }
    }
  }
  CHECK(checked >= 1);
}

TEST_CASE("every vector ISA path equals the scalar path") {
  const VecOps& ref = vec_ops(CpuTier::scalar);
  MESSAGE("active tier: ", std::string(to_string(active_tier())));
  for (CpuTier isa : kAllCpuTiers) {
    if (isa == CpuTier::scalar || !tier_available(isa)) continue;
    const VecOps& ops = vec_ops(isa);
    // The attention loops' vector forms are built for x86 ELF targets and arm64 (simd.hpp): on
    // Windows x64 (MinGW) every tier runs the scalar ones.
    if (!EMBER_X86_DISPATCH && !EMBER_ARM_DISPATCH) {
      CHECK(&ops == &ref);
      continue;
    }
    CHECK(is_arm_tier(ops.tier) == is_arm_tier(isa));
    CHECK(ops.tier <= isa);
    CHECK(ops.tier != CpuTier::scalar);
    for (int n : {0, 1, 7, 16, 31, 33, 40, 64, 80, 128, 131}) {
      CAPTURE(std::string(to_string(isa)));
      CAPTURE(n);
      const auto b = random_floats(static_cast<std::size_t>(n) + 1, 22);
      std::vector<std::uint16_t> h(static_cast<std::size_t>(n) + 1), h_ref(h.size());
      ops.to_f16(b.data(), h.data(), n);
      ref.to_f16(b.data(), h_ref.data(), n);
      for (int i = 0; i < n; ++i) REQUIRE(h[static_cast<std::size_t>(i)] == h_ref[static_cast<std::size_t>(i)]);
      std::vector<float> back(h.size()), back_ref(h.size());
      ops.from_f16(h.data(), back.data(), n);
      ref.from_f16(h.data(), back_ref.data(), n);
      for (int i = 0; i < n; ++i) REQUIRE(back[static_cast<std::size_t>(i)] == back_ref[static_cast<std::size_t>(i)]);
      check_dot_keys(ops, ref, n);
      // Several rows at a stride (a chunk of V rows): odd and even row counts, stride n + 3.
      auto y1 = random_floats(static_cast<std::size_t>(n), 23), y2 = y1;
      for (const int rows : {1, 4, 5}) {
        const std::int64_t stride = n + 3;
        const auto p = random_floats(rows, 24, 0.0f, 1.0f);
        const auto xs = random_floats(static_cast<std::size_t>(rows * stride), 25);
        ops.axpy_rows_f32(p.data(), xs.data(), stride, rows, y1.data(), n);
        ref.axpy_rows_f32(p.data(), xs.data(), stride, rows, y2.data(), n);
        // n may be 0: memcmp is not given the (null) data of an empty vector.
        REQUIRE((y1.empty() || std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0));
      }
    }
  }
  // The scalar half conversion itself: exact for representable values, ties to even.
  const float vals[4] = {1.0f, -2.5f, 65504.0f, 1.0f + 1.0f / 2048.0f};
  std::uint16_t h[4];
  ref.to_f16(vals, h, 4);
  CHECK(ember::fp16_to_float(h[0]) == 1.0f);
  CHECK(ember::fp16_to_float(h[1]) == -2.5f);
  CHECK(ember::fp16_to_float(h[2]) == 65504.0f);
  CHECK(ember::fp16_to_float(h[3]) == 1.0f);  // halfway between 1 and 1+2^-10: even wins
}

TEST_CASE("residual activation quantization: 256 hi + lo, in steps of s_hi / 256, reconstruct each row") {
  const std::int64_t rows = 4, cols = 1537;
  auto x = random_floats(static_cast<std::size_t>(rows * cols), 41, -2.0f, 2.0f);
  x[7] = 90.0f;                                                                              // an outlier
  for (std::int64_t k = 0; k < cols; ++k) x[static_cast<std::size_t>(2 * cols + k)] = 0.0f;  // a zero row
  std::vector<std::int8_t> hi(x.size()), lo(x.size()), one(x.size());
  std::vector<float> s_hi(rows), s_lo(rows), s_one(rows);
  quantize_rows_s8_residual(x.data(), rows, cols, cols, hi.data(), s_hi.data(), lo.data(), s_lo.data(), 2);
  quantize_rows_s8(x.data(), rows, cols, cols, one.data(), s_one.data());
  CHECK(hi == one);  // the first term is the ordinary per-row quantization
  CHECK(s_hi == s_one);
  CHECK(s_hi[2] == 0.0f);
  CHECK(s_lo[2] == 0.0f);
  CHECK(std::all_of(lo.begin() + 2 * cols, lo.begin() + 3 * cols, [](std::int8_t v) { return v == 0; }));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (r == 2) continue;
    CAPTURE(r);
    const float s = s_lo[static_cast<std::size_t>(r)];
    CHECK(s == s_hi[static_cast<std::size_t>(r)] / 256.0f);
    double worst = 0;
    int clipped = 0;
    for (std::int64_t k = 0; k < cols; ++k) {
      const auto i = static_cast<std::size_t>(r * cols + k);
      CHECK(lo[i] >= -127);  // never -128: the terms stay symmetric
      const std::int32_t wide = 256 * hi[i] + lo[i];
      CHECK(std::abs(wide) <= 32639);  // an int16
      const double error = std::fabs(wide * static_cast<double>(s) - x[i]);
      worst = std::max(worst, error);
      clipped += error > s * 0.5 + 1e-7 * 90;
    }
    // Half a step, plus the float rounding of the error quantized; or, where an error of 128
    // steps was clipped to 127, one and a half: rare.
    CHECK(worst <= s * 1.5 + 1e-7 * 90);
    CHECK(clipped <= cols / 100);
  }
}
