// The W4A8 kernel (kernels/cpu/gemm_grouped.hpp) against a scalar reference of its arithmetic,
// bit for bit on every instruction-set tier this CPU has, and against the FP32 product of the
// weights it was given.
#include "kernel_test_util.hpp"
#include "kernels/cpu/gemm_grouped.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/math.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ember::kernels::cpu;
using ember::test::bit_mismatches;
using ember::test::random_floats;

namespace {

// A grouped matrix as a row source sees it: one unsigned value (0..2^bits - 1) per weight, and
// per group a scale and an offset. Scales and offsets have 11 significant bits, exact in FP16,
// so the kernel's FP16 copies hold them unchanged.
struct GroupMatrix {
  std::int64_t out, in;
  GroupFormat format;
  std::vector<std::uint8_t> u;  // [out][in]
  std::vector<float> d, o;      // [out][in / 32]

  GroupMatrix(std::int64_t out_, std::int64_t in_, GroupFormat format_, std::uint32_t seed)
      : out(out_), in(in_), format(format_) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> value(0, (1 << format.bits) - 1), fraction(1, 2047);
    u.resize(static_cast<std::size_t>(out * in));
    for (auto& v : u) v = static_cast<std::uint8_t>(value(rng));
    const auto groups = static_cast<std::size_t>(out * in / kWeightGroup);
    d.resize(groups);
    o.resize(groups);
    for (std::size_t g = 0; g < groups; ++g) {
      d[g] = static_cast<float>(fraction(rng)) / 4096.0f / static_cast<float>(1 << format.bits);
      o[g] = format.offsets ? -static_cast<float>(fraction(rng)) / 4096.0f / 2.0f
                            : -static_cast<float>(format.bias()) * d[g];
    }
  }

  float weight(std::int64_t n, std::int64_t k) const {
    const auto g = static_cast<std::size_t>(n * (in / kWeightGroup) + k / kWeightGroup);
    return d[g] * static_cast<float>(u[static_cast<std::size_t>(n * in + k)]) + o[g];
  }

  GroupedRowSource source() const {
    return [this](std::int64_t n, std::uint8_t* values, float* scales, float* offs) {
      for (std::int64_t g = 0; g < in / kWeightGroup; ++g) {
        const std::uint8_t* row = u.data() + n * in + g * kWeightGroup;
        if (format.bits == 4)
          for (int e = 0; e < 16; ++e) values[g * 16 + e] = static_cast<std::uint8_t>(row[e] | (row[16 + e] << 4));
        else
          std::copy_n(row, kWeightGroup, values + g * kWeightGroup);
        scales[g] = d[static_cast<std::size_t>(n * (in / kWeightGroup) + g)];
        offs[g] = o[static_cast<std::size_t>(n * (in / kWeightGroup) + g)];
      }
    };
  }
};

// The kernel's arithmetic in scalar code, in its order (see gemm_grouped.hpp): each term row's
// sum over groups, and a row's terms added after.
std::vector<float> reference(const GroupMatrix& w, const GroupedActivations& x) {
  const std::int64_t groups = w.in / kWeightGroup;
  std::vector<float> y(static_cast<std::size_t>(x.rows * w.out));
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t n = 0; n < w.out; ++n) {
      float sum = 0.0f;
      for (std::int64_t g = 0; g < groups; ++g) {
        // Two terms: the 16-bit values whose planes the kernels join, and the low plane's scale.
        std::int32_t acc = 0, x_sum = 0;
        for (std::int64_t k = 0; k < kWeightGroup; ++k) {
          const auto at = static_cast<std::size_t>(i * x.terms * x.q_stride() + g * kWeightGroup + k);
          const std::int32_t xv =
              x.terms == 2 ? x.wide[static_cast<std::size_t>(i * x.q_stride() + g * kWeightGroup + k)] : x.q[at];
          acc += w.u[static_cast<std::size_t>(n * w.in + g * kWeightGroup + k)] * xv;
          x_sum += xv;
        }
        const auto wg = static_cast<std::size_t>(n * groups + g);
        float v;
        if (w.format.offsets) {
          v = static_cast<float>(acc) * w.d[wg];
          v = fused_multiply_add(w.o[wg], static_cast<float>(x_sum), v);
        } else {
          v = static_cast<float>(acc - w.format.bias() * x_sum) * w.d[wg];
        }
        sum = fused_multiply_add(v, x.scales[static_cast<std::size_t>(((i + 1) * x.terms - 1) * x.groups() + g)], sum);
      }
      y[static_cast<std::size_t>(i * w.out + n)] = sum;
    }
  return y;
}

// Every format the kernel has: 4 and 8 bits, with and without offsets (Q4_0, Q4_1, Q8_0, and
// 8-bit groups with offsets, which no file type has yet).
constexpr GroupFormat kFormats[] = {{4, false}, {4, true}, {8, false}, {8, true}};

// The tiers this CPU runs, the scalar reference first; says which once.
std::vector<CpuTier> available_tiers() {
  std::vector<CpuTier> tiers;
  std::string names;
  for (const CpuTier tier : kAllCpuTiers)
    if (tier_available(tier)) {
      tiers.push_back(tier);
      names += std::string(names.empty() ? "" : ", ") + to_string(tier);
    }
  static bool said = false;
  if (!said)
    MESSAGE("grouped gemm tiers compared: ", names, " (active ", std::string(to_string(grouped_gemm_tier())), ")");
  said = true;
  return tiers;
}

// y = x·Wᵀ on `tier`, every tile.
std::vector<float> product(const GroupedWeights& w, const GroupedActivations& a, CpuTier tier, int threads,
                           bool accumulate = false, float start = -1.0f) {
  std::vector<float> y(static_cast<std::size_t>(a.rows * w.out()), start);
  gemm_grouped(w, a, y.data(), accumulate, threads, 0, w.tiles(), tier);
  return y;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("grouped gemm: every tier equals the scalar reference bit for bit, every format, row count and shape") {
  auto arena = std::make_shared<WeightArena>();
  const std::vector<CpuTier> tiers = available_tiers();
  struct Shape {
    std::int64_t out, in;
  };
  for (const Shape s : {Shape{45, 96}, Shape{576, 576}, Shape{64, 1536}, Shape{16, 32}})
    for (const GroupFormat f : kFormats) {
      CAPTURE(s.out);
      CAPTURE(s.in);
      CAPTURE(f.bits);
      CAPTURE(f.offsets);
      const GroupMatrix m(s.out, s.in, f, 7);
      const GroupedWeights w(s.out, s.in, f, m.source(), arena, 2);
      for (const int terms : {1, 2})
        for (const std::int64_t rows : {1, 2, 3, 4, 5, 9, 37}) {  // GEMV (1, 2 for two terms) and GEMM
          CAPTURE(terms);
          CAPTURE(rows);
          const auto x = random_floats(static_cast<std::size_t>(rows * s.in), 3, -2.0f, 2.0f);
          GroupedActivations a;
          quantize_grouped_activations(x.data(), rows, s.in, s.in, w.padded_in(), a, 2, terms);
          const std::vector<float> expected = reference(m, a);
          const std::vector<float> scalar = product(w, a, CpuTier::scalar, 2);
          CHECK(bit_mismatches(scalar, expected) == 0);
          for (const CpuTier tier : tiers) {
            CAPTURE(std::string(to_string(tier)));
            CHECK(same_bytes(product(w, a, tier, 2), scalar));
            // Accumulating: y_old + product, on every tier alike.
            CHECK(same_bytes(product(w, a, tier, 1, true, 0.25f), product(w, a, CpuTier::scalar, 1, true, 0.25f)));
          }
        }
    }
}

TEST_CASE("grouped gemm: the largest products do not saturate on any tier (all values extreme, activations +-127)") {
  // vpmaddubsw saturates 16-bit pair sums: 4-bit values 15 and 8-bit values 0 and 255 (q = -128
  // and 127) against activations of magnitude 127 of equal or opposite sign are the pairs
  // nearest the limit (gemm_grouped_avx2.cpp), and the 16-bit products' INT32 sums of stored
  // bytes the largest.
  auto arena = std::make_shared<WeightArena>();
  const std::vector<CpuTier> tiers = available_tiers();
  const std::int64_t out = 48, in = 256, rows = 6;
  // Rows 0 and 1 all of one sign, 2 and 3 alternating in pairs (what vpmaddubsw adds), 4 and 5
  // of random signs.
  std::vector<float> x(static_cast<std::size_t>(rows * in));
  std::mt19937 rng(37);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t k = 0; k < in; ++k) {
      bool negative = i == 1;
      if (i == 2 || i == 3) negative = (k / 2 + i) % 2 == 0;
      if (i >= 4) negative = rng() % 2 == 0;
      x[static_cast<std::size_t>(i * in + k)] = negative ? -1.0f : 1.0f;
    }
  for (const GroupFormat f : kFormats)
    for (const std::uint8_t extreme : {std::uint8_t{0}, static_cast<std::uint8_t>((1 << f.bits) - 1)}) {
      CAPTURE(f.bits);
      CAPTURE(f.offsets);
      CAPTURE(int{extreme});
      GroupMatrix m(out, in, f, 31);
      const auto other = static_cast<std::uint8_t>((1 << f.bits) - 1 - extreme);  // every third value
      for (std::size_t e = 0; e < m.u.size(); ++e) m.u[e] = e % 3 == 2 ? other : extreme;
      const GroupedWeights w(out, in, f, m.source(), arena, 1);
      // One and two rows take decode's kernels, six the many-rows panels.
      for (const int terms : {1, 2})
        for (const std::int64_t n : {std::int64_t{1}, std::int64_t{2}, rows}) {
          CAPTURE(terms);
          CAPTURE(n);
          GroupedActivations a;
          quantize_grouped_activations(x.data(), n, in, in, w.padded_in(), a, 1, terms);
          REQUIRE(std::all_of(a.q.begin(), a.q.begin() + in, [](std::int8_t v) { return v == 127; }));
          const std::vector<float> expected = reference(m, a);
          for (const CpuTier tier : tiers) {
            CAPTURE(std::string(to_string(tier)));
            CHECK(bit_mismatches(product(w, a, tier, 1), expected) == 0);
          }
        }
    }
}

TEST_CASE("grouped gemm: the decode form for weights streamed from memory gives the same products") {
  // An arena weighed against a 1-byte cache outgrows it with its first weights; the 256-bit
  // tiers' decode then prefetches each line into L1 at a shorter lead (grouped_prefetch). That
  // form's loads and arithmetic are checked here; where its prefetches point cannot change a
  // product (a prefetch never faults), only the speed that benchmarks/run_all.sh measures.
  auto from_memory = std::make_shared<WeightArena>(1);
  auto in_cache = std::make_shared<WeightArena>(std::int64_t{1} << 40);
  const std::int64_t out = 200, in = 640;  // 7 tiles, 10 spans: leads past the tile's end
  for (const GroupFormat f : kFormats) {
    CAPTURE(f.bits);
    CAPTURE(f.offsets);
    const GroupMatrix m(out, in, f, 17);
    const GroupedWeights streamed(out, in, f, m.source(), from_memory, 1);
    const GroupedWeights cached(out, in, f, m.source(), in_cache, 1);
    CHECK(streamed.streamed_from_memory());
    CHECK_FALSE(cached.streamed_from_memory());
    for (const int terms : {1, 2})
      for (const std::int64_t rows : {1, 2, 3, 4}) {
        CAPTURE(terms);
        CAPTURE(rows);
        const auto x = random_floats(static_cast<std::size_t>(rows * in), 19, -2.0f, 2.0f);
        GroupedActivations a;
        quantize_grouped_activations(x.data(), rows, in, in, streamed.padded_in(), a, 1, terms);
        const std::vector<float> expected = reference(m, a);
        for (const CpuTier tier : available_tiers()) {
          CAPTURE(std::string(to_string(tier)));
          for (const int threads : {1, 2}) {
            CHECK(bit_mismatches(product(streamed, a, tier, threads), expected) == 0);
            CHECK(same_bytes(product(streamed, a, tier, threads), product(cached, a, tier, threads)));
          }
        }
      }
  }
}

TEST_CASE("grouped gemm: a tier this CPU lacks is refused") {
  auto arena = std::make_shared<WeightArena>();
  const GroupMatrix m(16, 64, GroupFormat{4, false}, 3);
  const GroupedWeights w(16, 64, m.format, m.source(), arena, 1);
  GroupedActivations a;
  const auto x = random_floats(64, 5);
  quantize_grouped_activations(x.data(), 1, 64, 64, w.padded_in(), a, 1);
  std::vector<float> y(16);
  int refused = 0;
  for (const CpuTier tier : kAllCpuTiers)
    if (!tier_available(tier)) {
      CHECK_THROWS_AS(gemm_grouped(w, a, y.data(), false, 1, 0, w.tiles(), tier), ember::Error);
      ++refused;
    }
  CHECK(tier_available(grouped_gemm_tier()));
  if (refused == 0) MESSAGE("every tier is available here: nothing to refuse");
}

TEST_CASE("grouped gemm: a row alone equals the same row in a batch, on one thread or two") {
  auto arena = std::make_shared<WeightArena>();
  const std::int64_t out = 200, in = 640, rows = 23;
  for (const GroupFormat f : {GroupFormat{4, true}, GroupFormat{8, false}})
    for (const int terms : {1, 2}) {
      CAPTURE(f.bits);
      CAPTURE(terms);
      const GroupMatrix m(out, in, f, 11);
      const GroupedWeights w(out, in, f, m.source(), arena, 1);
      const auto x = random_floats(static_cast<std::size_t>(rows * in), 5, -3.0f, 3.0f);
      GroupedActivations batch;
      quantize_grouped_activations(x.data(), rows, in, in, w.padded_in(), batch, 2, terms);
      std::vector<float> all(static_cast<std::size_t>(rows * out));
      gemm_grouped(w, batch, all.data(), false, 2);
      for (const std::int64_t r : {0, 6, 22}) {
        GroupedActivations one;
        quantize_grouped_activations(x.data() + r * in, 1, in, in, w.padded_in(), one, 1, terms);
        std::vector<float> alone(static_cast<std::size_t>(out));
        gemm_grouped(w, one, alone.data(), false, 1);
        CHECK(bit_mismatches(alone, std::vector<float>(all.begin() + r * out, all.begin() + (r + 1) * out)) == 0);
      }
    }
}

TEST_CASE("grouped linear: the product of the weights, and y_old + product when accumulating") {
  CpuContext ctx(2);
  const std::int64_t out = 77, in = 256, rows = 6;
  for (const GroupFormat f : kFormats) {
    CAPTURE(f.bits);
    CAPTURE(f.offsets);
    const GroupMatrix m(out, in, f, 13);
    const auto linear = make_grouped_linear(ctx, out, in, f, m.source());
    CHECK(linear->implementation(ctx, 1) ==
          std::string(f.bits == 4 ? "w4a8:" : "w8a8-g32:") + to_string(grouped_gemm_tier()));
    const auto x = random_floats(static_cast<std::size_t>(rows * in), 17, -1.0f, 1.0f);
    std::vector<double> exact(static_cast<std::size_t>(rows * out));
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t n = 0; n < out; ++n) {
        double s = 0;
        for (std::int64_t k = 0; k < in; ++k) s += double{m.weight(n, k)} * x[static_cast<std::size_t>(i * in + k)];
        exact[static_cast<std::size_t>(i * out + n)] = s;
      }
    std::vector<float> y(static_cast<std::size_t>(rows * out));
    linear->forward(ctx, x.data(), rows, y.data());
    // INT8 activations per group of 32: about 2^-8 of each group's range; two terms: ~2^-15.
    CHECK(ember::test::relative_error(y, exact) < 0.01);
    const auto two_terms = make_grouped_linear(ctx, out, in, f, m.source(), ActivationQuant::residual);
    std::vector<float> y2(y.size());
    two_terms->forward(ctx, x.data(), rows, y2.data());
    CHECK(ember::test::relative_error(y2, exact) < 1e-4);
    std::vector<float> acc(y.size(), 0.5f), once = y;
    linear->forward(ctx, x.data(), rows, acc.data(), true);
    for (std::size_t i = 0; i < y.size(); ++i) once[i] = 0.5f + y[i];
    CHECK(bit_mismatches(acc, once) == 0);
  }
}

TEST_CASE("grouped linear: outputs in slices of 32 equal the whole product bit for bit") {
  CpuContext ctx(2);
  const std::int64_t out = 300, in = 128;
  const GroupMatrix w(out, in, GroupFormat{8, false}, 19);
  const auto linear = make_grouped_linear(ctx, out, in, w.format, w.source(), ActivationQuant::residual);
  for (const std::int64_t rows : {1, 9}) {
    CAPTURE(rows);
    CHECK(linear->output_granule(rows) == 32);
    const auto x = random_floats(static_cast<std::size_t>(rows * in), 23, -1.0f, 1.0f);
    std::vector<float> whole(static_cast<std::size_t>(rows * out)), sliced(whole.size(), -1.0f);
    linear->forward(ctx, x.data(), rows, whole.data());
    for (std::int64_t begin = 0; begin < out; begin += 64)
      linear->forward_outputs(ctx, x.data(), rows, sliced.data(), begin, std::min(out, begin + 64));
    CHECK(bit_mismatches(sliced, whole) == 0);
    // Accumulating, the later slices on the input the first one quantized (a product in parts).
    const auto base = random_floats(whole.size(), 29, -1.0f, 1.0f);
    std::vector<float> added = base, added_sliced = base;
    linear->forward(ctx, x.data(), rows, added.data(), /*accumulate=*/true);
    for (std::int64_t begin = 0; begin < out; begin += 64)
      linear->forward_outputs(ctx, x.data(), rows, added_sliced.data(), begin, std::min(out, begin + 64), true,
                              begin == 0 ? LinearInput::fresh : LinearInput::as_before);
    CHECK(bit_mismatches(added_sliced, added) == 0);
    CHECK_THROWS_AS(
        linear->forward_outputs(ctx, x.data(), rows + 1, sliced.data(), 64, 128, false, LinearInput::as_before),
        ember::Error);  // other rows than the ones quantized
    CHECK_THROWS_AS(linear->forward_outputs(ctx, x.data(), rows, sliced.data(), 16, 64), ember::Error);
    CHECK_THROWS_AS(linear->forward_outputs(ctx, x.data(), rows, sliced.data(), 256, 290), ember::Error);
  }
}

TEST_CASE("grouped gemm: activations per group of 32, zero past the inputs; shapes that do not fit refused") {
  const std::int64_t in = 96, padded = 128;
  auto x = random_floats(static_cast<std::size_t>(2 * in), 19, -4.0f, 4.0f);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // row 0, group 1: all zero
  GroupedActivations a;
  quantize_grouped_activations(x.data(), 2, in, in, padded, a, 1);
  REQUIRE(a.groups() == 4);
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t g = 0; g < 3; ++g) {
      std::int32_t sum = 0;
      for (std::int64_t k = 0; k < kWeightGroup; ++k) {
        const auto i = static_cast<std::size_t>(r * in + g * kWeightGroup + k);
        const std::int8_t q = a.q[static_cast<std::size_t>(r * a.q_stride() + g * kWeightGroup + k)];
        const float s = a.scales[static_cast<std::size_t>(r * 4 + g)];
        CHECK(std::fabs(q * s - x[i]) <= s / 2 * 1.0001f);
        sum += q;
      }
      CHECK(a.sums[static_cast<std::size_t>(r * 4 + g)] == sum);
    }
  CHECK(a.scales[1] == 0.0f);
  for (std::int64_t r = 0; r < 2; ++r) {
    CHECK(a.scales[static_cast<std::size_t>(r * 4 + 3)] == 0.0f);
    CHECK(a.sums[static_cast<std::size_t>(r * 4 + 3)] == 0);
    for (std::int64_t k = in; k < padded; ++k) CHECK(a.q[static_cast<std::size_t>(r * a.q_stride() + k)] == 0);
  }
  // 128 inputs are two 64-byte lines: the rows are three lines apart (q_stride()).
  CHECK(a.q_stride() == 192);
  CHECK_THROWS(quantize_grouped_activations(x.data(), 2, 90, 90, 96, a, 1));
  auto arena = std::make_shared<WeightArena>();
  const GroupMatrix m(16, 64, GroupFormat{4, false}, 1);
  CHECK_THROWS(GroupedWeights(16, 48, m.format, m.source(), arena, 1));
  CHECK_THROWS(GroupedWeights(16, 64, GroupFormat{6, false}, m.source(), arena, 1));
  CHECK_THROWS(quantize_grouped_activations(x.data(), 2, in, in, padded, a, 1, 3));
}

TEST_CASE("grouped activations by group: each row's sum (two terms joined) and scale, group by group") {
  const std::int64_t rows = 5, in = 96;
  const auto x = random_floats(static_cast<std::size_t>(rows * in), 23, -3.0f, 3.0f);
  auto arena = std::make_shared<WeightArena>();
  const GroupMatrix m(16, in, GroupFormat{4, false}, 3);
  const GroupedWeights w(16, in, m.format, m.source(), arena, 1);
  for (const int terms : {1, 2}) {
    CAPTURE(terms);
    GroupedActivations a;
    quantize_grouped_activations(x.data(), rows, in, in, w.padded_in(), a, 1, terms);
    const std::int64_t groups = a.groups();
    REQUIRE(a.sums_by_group.size() == static_cast<std::size_t>(rows * groups));
    REQUIRE(a.scales_by_group.size() == static_cast<std::size_t>(rows * groups));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t g = 0; g < groups; ++g) {
        const auto term = [&](int t) { return static_cast<std::size_t>((r * terms + t) * groups + g); };
        const std::int32_t sum = terms == 2 ? kLowTermSteps * a.sums[term(0)] + a.sums[term(1)] : a.sums[term(0)];
        CHECK(a.sums_by_group[static_cast<std::size_t>(g * rows + r)] == sum);
        CHECK(a.scales_by_group[static_cast<std::size_t>(g * rows + r)] == a.scales[term(terms - 1)]);
      }
    // Rows filled by hand without their copy by group are refused, not read past the arrays.
    std::vector<float> y(static_cast<std::size_t>(rows * 16));
    gemm_grouped(w, a, y.data(), false, 1);
    a.sums_by_group.clear();
    CHECK_THROWS_AS(gemm_grouped(w, a, y.data(), false, 1), ember::Error);
  }
}

TEST_CASE("grouped activations: every tier's quantizer gives the scalar form's bytes, scales and sums") {
  // Random groups, each at its own magnitude, and in row 0 the cases a quantizer can get wrong,
  // each a group of its own, set after the scaling.
  const std::int64_t rows = 16, groups = 64, in = groups * kWeightGroup, padded = (groups + 4) * kWeightGroup;
  auto x = random_floats(static_cast<std::size_t>(rows * in), 31, -3.0f, 3.0f);
  const auto group = [&](std::int64_t g, std::int64_t r = 0) { return x.begin() + r * in + g * kWeightGroup; };
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < groups; ++g) {
      const float magnitude = std::exp2(exponent(rng));
      for (std::int64_t k = 0; k < kWeightGroup; ++k) group(g, r)[k] *= magnitude;
    }
  const float inf = std::numeric_limits<float>::infinity();
  // 0: ties at half a step (the maximum 127 makes the scale 1).
  for (std::int64_t k = 0; k < kWeightGroup; ++k) group(0)[k] = static_cast<float>(k) * 4.0f - 62.5f;
  group(0)[31] = 127.0f;
  std::fill(group(1), group(2), 0.0f);  // 1: all zero
  group(2)[5] = inf;                    // 2, 3: an infinity (scale 0, like an all-zero group)
  group(3)[7] = -inf;
  group(4)[9] = std::numeric_limits<float>::quiet_NaN();  // 4: a NaN among finite values
  for (std::int64_t k = 0; k < kWeightGroup; ++k) {
    group(5)[k] = 3e38f * (k % 2 == 0 ? 1.0f : -0.7f);          // 5: near FP32's largest
    group(6)[k] = 1e-38f * static_cast<float>(k % 7) - 3e-38f;  // 6: 127 / max overflows: scale 0
    group(7)[k] = 1e-30f * static_cast<float>(k % 9) - 4e-30f;  // 7: small, the reciprocal finite
    group(8)[k] = std::fabs(group(8)[k]);                       // 8: one sign
  }
  group(9)[0] = 1e6f;  // 9: one large value among small ones
  GroupedActivations expected;
  quantize_grouped_activations(x.data(), rows, in, in, padded, expected, 1, 1, CpuTier::scalar);
  for (const std::int64_t g : {1, 2, 3, 6}) CHECK(expected.scales[static_cast<std::size_t>(g)] == 0.0f);
  for (const std::int64_t g : {4, 5, 7}) CHECK(expected.scales[static_cast<std::size_t>(g)] > 0.0f);
  CHECK(expected.q[4 * kWeightGroup + 9] == -127);  // the NaN
  index_by_group(expected);  // the copy by group made apart from the quantizer, which writes its own
  for (const CpuTier tier : available_tiers()) {
    CAPTURE(to_string(tier));
    GroupedActivations got;  // fresh: a tier that wrote nothing must not pass on the last one's values
    quantize_grouped_activations(x.data(), rows, in, in, padded, got, 2, 1, tier);
    CHECK(got.q == expected.q);
    CHECK(bit_mismatches(got.scales, expected.scales) == 0);
    CHECK(got.sums == expected.sums);
    // The copy by group, written row by row by the two threads.
    CHECK(got.sums_by_group == expected.sums_by_group);
    CHECK(bit_mismatches(got.scales_by_group, expected.scales_by_group) == 0);
  }
}

TEST_CASE("grouped gemm batch: each product equals its own gemm_grouped bit for bit, on every tier") {
  auto arena = std::make_shared<WeightArena>();
  const std::int64_t out = 96, in = 320;
  const std::int64_t rows[] = {1, 0, 3, 1, 5};  // an expert no row chose among them
  const std::int64_t total = 10;
  for (const GroupFormat f : {GroupFormat{4, false}, GroupFormat{4, true}})
    for (const int terms : {1, 2}) {
      CAPTURE(f.offsets);
      CAPTURE(terms);
      std::vector<GroupMatrix> m;
      std::vector<GroupedWeights> w;
      w.reserve(5);
      for (std::uint32_t e = 0; e < 5; ++e) m.emplace_back(out, in, f, 40 + e);
      for (const GroupMatrix& g : m) w.emplace_back(out, in, f, g.source(), arena, 1);
      const auto x = random_floats(static_cast<std::size_t>(total * in), 41, -2.0f, 2.0f);
      GroupedActivations a;
      quantize_grouped_activations(x.data(), total, in, in, w[0].padded_in(), a, 2, terms);
      for (const CpuTier tier : available_tiers()) {
        CAPTURE(to_string(tier));
        std::vector<float> batch(static_cast<std::size_t>(total * out), -1.0f);
        std::vector<GroupedProduct> products;
        for (std::int64_t e = 0, row = 0; e < 5; row += rows[e], ++e)
          products.push_back({&w[static_cast<std::size_t>(e)], &a, row, rows[e], batch.data() + row * out, false});
        gemm_grouped_batch(products.data(), static_cast<std::int64_t>(products.size()), 2, tier);
        for (std::int64_t e = 0, row = 0; e < 5; row += rows[e], ++e) {
          GroupedActivations own;  // the expert's rows quantized on their own, as its Linear would
          quantize_grouped_activations(x.data() + row * in, rows[e], in, in, w[0].padded_in(), own, 1, terms);
          const std::vector<float> alone = product(w[static_cast<std::size_t>(e)], own, tier, 1);
          CHECK(bit_mismatches(
                    alone, std::vector<float>(batch.begin() + row * out, batch.begin() + (row + rows[e]) * out)) == 0);
        }
      }
      GroupedProduct past_the_rows{&w[0], &a, 8, 3, nullptr, false};
      CHECK_THROWS_AS(gemm_grouped_batch(&past_the_rows, 1, 1), ember::Error);
    }
}

TEST_CASE("stacked linears: each linear's rows equal its own forward() bit for bit, grouped or not") {
  CpuContext ctx(2);
  const std::int64_t out = 64, in = 256;
  const std::int64_t rows[] = {2, 1, 0, 4};
  const std::int64_t total = 7;
  const auto x = random_floats(static_cast<std::size_t>(total * in), 43, -1.0f, 1.0f);
  std::vector<GroupMatrix> m;
  for (std::uint32_t e = 0; e < 4; ++e) m.emplace_back(out, in, GroupFormat{4, false}, 50 + e);
  const auto fp32_weights = random_floats(static_cast<std::size_t>(out * in), 45, -0.1f, 0.1f);
  for (const int kind : {0, 1, 2}) {  // grouped with one term, with two, FP32 (one forward() each)
    CAPTURE(kind);
    std::vector<std::unique_ptr<Linear>> linears;
    for (const GroupMatrix& g : m)
      linears.push_back(kind == 2
                            ? make_fp32_linear(ctx, fp32_weights.data(), out, in)
                            : make_grouped_linear(ctx, out, in, g.format, g.source(),
                                                  kind == 1 ? ActivationQuant::residual : ActivationQuant::per_row));
    std::vector<Linear*> pointers;
    for (const auto& l : linears) pointers.push_back(l.get());
    StackedScratch scratch;
    std::vector<float> stacked(static_cast<std::size_t>(total * out), -1.0f);
    forward_stacked(ctx, pointers.data(), rows, 4, x.data(), stacked.data(), scratch);
    std::vector<float> own(stacked.size(), -1.0f);
    for (std::int64_t e = 0, row = 0; e < 4; row += rows[e], ++e)
      linears[static_cast<std::size_t>(e)]->forward(ctx, x.data() + row * in, rows[e], own.data() + row * out);
    CHECK(bit_mismatches(stacked, own) == 0);
  }
  const auto wider =
      make_grouped_linear(ctx, out, 2 * in, GroupFormat{4, false}, GroupMatrix(out, 2 * in, {4, false}, 9).source());
  StackedScratch scratch;
  std::vector<float> y(static_cast<std::size_t>(total * out));
  std::vector<std::unique_ptr<Linear>> two;
  two.push_back(make_grouped_linear(ctx, out, in, m[0].format, m[0].source()));
  Linear* mixed[] = {two[0].get(), wider.get()};
  CHECK_THROWS_AS(forward_stacked(ctx, mixed, rows, 2, x.data(), y.data(), scratch), ember::Error);
}

TEST_CASE("gathered linears: rows picked from x, each distinct row quantized once, equal the stacked product") {
  CpuContext ctx(2);
  const std::int64_t out = 64, in = 256, x_rows = 3;
  // The last linear's 6 rows go through the 256-bit tiers' panels (more than 4 term rows).
  const std::int64_t rows[] = {2, 1, 6};
  const std::int32_t gather[] = {0, 2, 2, 1, 2, 0, 0, 1, 2};  // a row shared by several linears, as a token's experts
  const auto x = random_floats(static_cast<std::size_t>(x_rows * in), 47, -1.0f, 1.0f);
  std::vector<float> stacked_x;
  for (const std::int32_t g : gather) stacked_x.insert(stacked_x.end(), x.begin() + g * in, x.begin() + (g + 1) * in);
  std::vector<GroupMatrix> m;
  for (std::uint32_t e = 0; e < 3; ++e) m.emplace_back(out, in, GroupFormat{4, true}, 60 + e);
  const auto fp32_weights = random_floats(static_cast<std::size_t>(out * in), 49, -0.1f, 0.1f);
  for (const int kind : {0, 1, 2}) {  // grouped with one term, with two, FP32
    CAPTURE(kind);
    std::vector<std::unique_ptr<Linear>> linears;
    for (const GroupMatrix& g : m)
      linears.push_back(kind == 2
                            ? make_fp32_linear(ctx, fp32_weights.data(), out, in)
                            : make_grouped_linear(ctx, out, in, g.format, g.source(),
                                                  kind == 1 ? ActivationQuant::residual : ActivationQuant::per_row));
    std::vector<Linear*> pointers;
    for (const auto& l : linears) pointers.push_back(l.get());
    StackedScratch scratch;
    std::vector<float> gathered(static_cast<std::size_t>(9 * out), -1.0f), stacked(gathered.size(), -2.0f);
    forward_gathered(ctx, pointers.data(), rows, 3, x.data(), x_rows, gather, gathered.data(), scratch);
    forward_stacked(ctx, pointers.data(), rows, 3, stacked_x.data(), stacked.data(), scratch);
    CHECK(bit_mismatches(gathered, stacked) == 0);
    const std::int32_t outside[] = {0, 3, 1, 1, 1, 1, 1, 1, 1};
    CHECK_THROWS_AS(
        forward_gathered(ctx, pointers.data(), rows, 3, x.data(), x_rows, outside, gathered.data(), scratch),
        ember::Error);
  }
}
