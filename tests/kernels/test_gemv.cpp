// The decode GEMV that Int8Linear runs (kernels/cpu/gemv_int8.hpp) against its references:
// oneDNN's matmul at the avx512_vnni tier, where oneDNN still runs the rows past the GEMV, and the
// scalar tier's GEMV below it, where ember's kernel runs every row. Outputs must be bitwise equal,
// which is what ember's batch invariance rests on (a row computed alone, by the GEMV, equals the
// same row in a batch).
#include "kernel_test_util.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/gemv_int8.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/quantize.hpp"
#include "util/check.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__linux__)
#include <unistd.h>
#endif

using namespace ember::kernels::cpu;
using ember::test::bit_mismatches;
using ember::test::random_floats;

namespace {

// Whether oneDNN runs the rows past the GEMV (so the two can be compared bit for bit): at the
// avx512_vnni tier, in a build with oneDNN. Below it ember's kernel runs every row and oneDNN's
// INT8 matmul is its slow reference kernel, which may saturate: no reference of ember's.
bool gemv_expected() { return onednn_available() && tier_available(CpuTier::avx512_vnni); }

// The GEMV's weights of make_int8_linear(w), quantized as there.
std::unique_ptr<const GemvWeightsS8> gemv_weights(CpuContext& ctx, const std::vector<float>& w, std::int64_t out,
                                                  std::int64_t in) {
  const QuantizedWeights qw = quantize_int8_weights(ctx, w.data(), out, in);
  return std::make_unique<const GemvWeightsS8>(qw.q.data(), qw.scales.data(), out, in, std::make_shared<WeightArena>());
}

// y (+)= the product of m rows of x as Int8Linear forms it when its GEMV runs every row
// (kernels/cpu/linear.cpp), on the scalar tier: rows quantized as there, and a two-term row's
// terms computed apart and added to y in order, (y + t1) + t2.
void scalar_int8_linear(const GemvWeightsS8& gemv, const float* x, std::int64_t m, float* y, bool accumulate,
                        ActivationQuant a) {
  const std::int64_t out = gemv.out(), in = gemv.in();
  const std::int64_t terms = a == ActivationQuant::residual ? 2 : 1;
  std::vector<std::int8_t> q(static_cast<std::size_t>(terms * m * in));
  std::vector<float> scales(static_cast<std::size_t>(terms * m));
  if (terms == 1)
    quantize_rows_s8(x, m, in, in, q.data(), scales.data());
  else
    quantize_rows_s8_residual(x, m, in, in, q.data(), scales.data(), q.data() + m * in, scales.data() + m);
  std::vector<std::uint8_t> xu(static_cast<std::size_t>(terms * m * gemv.padded_in()));
  gemv_activations(q.data(), terms * m, in, gemv.padded_in(), xu.data());
  if (terms == 1) {
    gemv_int8(gemv, xu.data(), scales.data(), m, y, accumulate, 1, 0, gemv.tiles(), CpuTier::scalar);
    return;
  }
  std::vector<float> t(static_cast<std::size_t>(2 * m * out));
  gemv_int8(gemv, xu.data(), scales.data(), 2 * m, t.data(), false, 1, 0, gemv.tiles(), CpuTier::scalar);
  for (std::int64_t i = 0; i < m * out; ++i)
    y[i] = (accumulate ? y[i] + t[static_cast<std::size_t>(i)] : t[static_cast<std::size_t>(i)]) +
           t[static_cast<std::size_t>(m * out + i)];
}

enum class Pattern { random, max_weights_min_acts, min_weights_max_acts, random_signs_at_max };

// w [out, in] and x [4, in] for one pattern. The extremes make every quantized value +-127
// (-128 inputs quantize to -127), so the INT32 sums reach 127 * 127 * in.
void make_inputs(Pattern p, std::int64_t out, std::int64_t in, std::vector<float>& w, std::vector<float>& x) {
  const auto nw = static_cast<std::size_t>(out * in);
  const auto nx = static_cast<std::size_t>(kGemvMaxRows * in);
  switch (p) {
    case Pattern::random:
      w = random_floats(nw, 11, -0.1f, 0.1f);
      x = random_floats(nx, 12, -3.0f, 3.0f);
      break;
    case Pattern::max_weights_min_acts:
      w.assign(nw, 127.0f);
      x.assign(nx, -128.0f);
      break;
    case Pattern::min_weights_max_acts:
      w.assign(nw, -128.0f);
      x.assign(nx, 127.0f);
      break;
    case Pattern::random_signs_at_max:
      w = random_floats(nw, 13);
      x = random_floats(nx, 14);
      for (auto& v : w) v = v < 0.0f ? -0.5f : 0.5f;
      for (auto& v : x) v = v < 0.0f ? -2.0f : 2.0f;
      break;
  }
}

}  // namespace

TEST_CASE("int8 linear: the decode GEMV is bitwise equal to oneDNN, or below avx512_vnni to the scalar tier") {
  CpuContext ctx(2);
  MESSAGE("tier ", std::string(to_string(active_tier())),
          std::string(gemv_expected() ? ": against oneDNN" : ": ember's kernel for every m, against the scalar tier"));
  struct Shape {
    std::int64_t in, out;
  };
  for (const Shape s : {Shape{576, 960}, Shape{576, 576}, Shape{576, 3072}, Shape{1536, 576}, Shape{576, 49152},
                        Shape{65, 17}, Shape{3, 33}, Shape{66, 1100}}) {
    // The scalar reference of the lm_head's shape takes seconds a call (minutes under ASan);
    // "every available tier equals the scalar reference" below covers the GEMV's wide shapes.
    if (!gemv_expected() && s.out > 4096) continue;
    for (Pattern p :
         {Pattern::random, Pattern::max_weights_min_acts, Pattern::min_weights_max_acts, Pattern::random_signs_at_max})
      for (ActivationQuant a : {ActivationQuant::per_row, ActivationQuant::residual}) {
        CAPTURE(s.in);
        CAPTURE(s.out);
        CAPTURE(static_cast<int>(p));
        CAPTURE(static_cast<int>(a));
        std::vector<float> w, x;
        make_inputs(p, s.out, s.in, w, x);
        auto fast = make_int8_linear(ctx, w.data(), s.out, s.in, a);
        const auto reference = gemv_expected() ? nullptr : gemv_weights(ctx, w, s.out, s.in);
        // Below avx512_vnni oneDNN is asked only what it would run (each m builds new
        // primitives, slow under ASan with the AVX2 ISA): one pattern, the small shapes.
        const bool ask_onednn = onednn_available() && (gemv_expected() || (p == Pattern::random && s.out <= 1100));
        auto onednn = ask_onednn ? make_int8_linear_onednn_only(ctx, w.data(), s.out, s.in, a) : nullptr;
        const auto base = random_floats(static_cast<std::size_t>(kGemvMaxRows * s.out), 15, -5.0f, 5.0f);
        // The edges: one row, a partial and a whole row tile (4), the next tile, where two-term
        // inputs stop fitting one GEMV call (2m > kGemvMaxRows) and the GEMV's last row count.
        for (std::int64_t m : {1, 3, 4, 5, 9, 32, 33, 64}) {
          for (bool accumulate : {false, true}) {
            CAPTURE(m);
            CAPTURE(accumulate);
            const std::string impl = fast->implementation(ctx, m, accumulate);
            CHECK(impl == std::string("gemv:") + to_string(active_tier()));
            if (onednn && (gemv_expected() || m <= 5))
              CHECK(onednn->implementation(ctx, m, accumulate).rfind("gemv", 0) != 0);
            std::vector<float> y_fast(base.begin(), base.begin() + m * s.out), y_want = y_fast;
            fast->forward(ctx, x.data(), m, y_fast.data(), accumulate);
            if (gemv_expected())
              onednn->forward(ctx, x.data(), m, y_want.data(), accumulate);
            else
              scalar_int8_linear(*reference, x.data(), m, y_want.data(), accumulate, a);
            CHECK(bit_mismatches(y_fast, y_want) == 0);
          }
        }
      }
  }
}

TEST_CASE("int8 linear: a row alone (GEMV) equals the same row in a batch past the GEMV (oneDNN)") {
  const std::int64_t in = 1536, out = 576, batch = kGemvMaxRows + 8;
  const auto w = random_floats(static_cast<std::size_t>(out * in), 21, -0.05f, 0.05f);
  auto x = random_floats(static_cast<std::size_t>(batch * in), 22, -4.0f, 4.0f);
  for (std::int64_t k = 0; k < in; ++k) x[static_cast<std::size_t>(5 * in + k)] = 0.0f;  // scale 0
  for (int threads : {1, 2})
    for (ActivationQuant a : {ActivationQuant::per_row, ActivationQuant::residual}) {
      CAPTURE(threads);
      CAPTURE(static_cast<int>(a));
      CpuContext ctx(threads);
      auto lin = make_int8_linear(ctx, w.data(), out, in, a);
      std::vector<float> y_batch(static_cast<std::size_t>(batch * out));
      lin->forward(ctx, x.data(), batch, y_batch.data());
      for (std::int64_t i = 0; i < batch; ++i) {
        CAPTURE(i);
        std::vector<float> y_row(static_cast<std::size_t>(out));
        lin->forward(ctx, x.data() + i * in, 1, y_row.data());
        const std::vector<float> expected(y_batch.begin() + i * out, y_batch.begin() + (i + 1) * out);
        CHECK(bit_mismatches(y_row, expected) == 0);
      }
    }
}

TEST_CASE("int8 linear: outputs in slices of its granule equal the whole product bit for bit") {
  const std::int64_t in = 192, out = 1000, rows = kGemvMaxRows + 8;
  const auto w = random_floats(static_cast<std::size_t>(out * in), 31, -0.05f, 0.05f);
  const auto x = random_floats(static_cast<std::size_t>(rows * in), 32, -4.0f, 4.0f);
  CpuContext ctx(2);
  for (ActivationQuant a : {ActivationQuant::per_row, ActivationQuant::residual}) {
    auto lin = make_int8_linear(ctx, w.data(), out, in, a);
    // One row, two-term rows in one GEMV call and not (2m > kGemvMaxRows), and oneDNN's m.
    for (const std::int64_t m : {std::int64_t{1}, std::int64_t{5}, std::int64_t{40}, rows}) {
      CAPTURE(static_cast<int>(a));
      CAPTURE(m);
      const std::int64_t unit = lin->output_granule(m);
      if (!gemv_expected() || m <= kGemvMaxRows)
        CHECK((unit % 16 == 0 && unit < out));  // GEMV tiles: whole blocks of 16 outputs
      else
        CHECK(unit == out);  // oneDNN computes every output at once
      std::vector<float> whole(static_cast<std::size_t>(m * out)), sliced(whole.size(), -1.0f);
      lin->forward(ctx, x.data(), m, whole.data());
      for (std::int64_t begin = 0; begin < out; begin += 3 * unit)
        lin->forward_outputs(ctx, x.data(), m, sliced.data(), begin, std::min(out, begin + 3 * unit));
      CHECK(bit_mismatches(sliced, whole) == 0);
      // Accumulating, the later slices on the input the first one quantized (a product in parts).
      const auto base = random_floats(whole.size(), 33, -1.0f, 1.0f);
      std::vector<float> added = base, added_sliced = base;
      lin->forward(ctx, x.data(), m, added.data(), /*accumulate=*/true);
      for (std::int64_t begin = 0; begin < out; begin += 3 * unit)
        lin->forward_outputs(ctx, x.data(), m, added_sliced.data(), begin, std::min(out, begin + 3 * unit), true,
                             begin == 0 ? LinearInput::fresh : LinearInput::as_before);
      CHECK(bit_mismatches(added_sliced, added) == 0);
      if (unit < out) {
        CHECK_THROWS_AS(lin->forward_outputs(ctx, x.data(), m, sliced.data(), unit / 2, unit), ember::Error);
        CHECK_THROWS_AS(lin->forward_outputs(ctx, x.data(), m, sliced.data(), 0, unit + 1), ember::Error);
      } else {
        CHECK_THROWS_AS(lin->forward_outputs(ctx, x.data(), m, sliced.data(), 0, out / 2), ember::Error);
      }
      CHECK_THROWS_AS(lin->forward_outputs(ctx, x.data(), m, sliced.data(), 0, out + 1), ember::Error);
    }
  }
}

TEST_CASE("gemv activations are q + 128 with the padding at 128") {
  const std::int8_t q[6] = {-127, -1, 0, 1, 127, 5};
  std::uint8_t xu[8] = {};
  gemv_activations(q, 1, 5, 8, xu);
  const std::uint8_t expected[8] = {1, 127, 128, 129, 255, 128, 128, 128};
  for (int k = 0; k < 8; ++k) CHECK(int{xu[k]} == int{expected[k]});
}

TEST_CASE("gemv rejects no rows and bad weights, and takes more rows than kGemvMaxRows") {
  const std::int8_t q[4] = {1, 2, 3, 4};
  const float scale = 1.0f;
  GemvWeightsS8 w(q, &scale, 1, 4, std::make_shared<WeightArena>());
  CHECK(w.padded_in() == 4);
  CHECK(w.blocks() == 1);
  CHECK(w.compensation()[0] == 128 * 10);
  std::uint8_t xu[4 * (kGemvMaxRows + 1)];
  std::fill(std::begin(xu), std::end(xu), std::uint8_t{129});  // q = 1
  float xs[kGemvMaxRows + 1], y[kGemvMaxRows + 1] = {};
  std::fill(std::begin(xs), std::end(xs), 0.5f);
  gemv_int8(w, xu, xs, kGemvMaxRows + 1, y, false, 1);
  for (float v : y) CHECK(v == 5.0f);
  CHECK_THROWS_AS(gemv_int8(w, xu, xs, 0, y, false, 1), ember::Error);
  CHECK_THROWS_AS(GemvWeightsS8(q, &scale, 0, 4, std::make_shared<WeightArena>()), ember::Error);
  CHECK_THROWS_AS(GemvWeightsS8(q, &scale, 1, 4, nullptr), ember::Error);
}

// Every tier of the GEMV against the scalar reference, bit for bit: full-range weights and
// activations (the AVX2 tier's pair sums at their largest), odd shapes (partial blocks, input
// padding), row counts across the tiers' row passes, tile ranges, accumulating or not.
TEST_CASE("gemv: every available tier equals the scalar reference bit for bit") {
  MESSAGE("active tier ", std::string(to_string(active_tier())),
          " (this CPU: ", std::string(to_string(detected_tier())), ")");
  const auto arena = std::make_shared<WeightArena>();
  struct Shape {
    std::int64_t in, out;
  };
  for (const Shape s :
       {Shape{576, 960}, Shape{1536, 576}, Shape{65, 17}, Shape{3, 33}, Shape{66, 1100}, Shape{128, 3072}})
    for (int pattern = 0; pattern < 3; ++pattern) {
      CAPTURE(s.in);
      CAPTURE(s.out);
      CAPTURE(pattern);
      const std::int64_t max_m = 70;
      std::vector<std::int8_t> q(static_cast<std::size_t>(s.out * s.in));
      std::vector<std::uint8_t> xu_q(static_cast<std::size_t>(max_m * s.in));
      std::uint32_t state = 12345u + static_cast<std::uint32_t>(pattern);
      auto next = [&state] { return state = state * 1664525u + 1013904223u, state >> 8; };
      for (auto& v : q)
        v = static_cast<std::int8_t>(pattern == 0   ? static_cast<int>(next() % 255) - 127
                                     : pattern == 1 ? 127
                                                    : (next() & 1 ? 127 : -127));
      for (auto& v : xu_q) v = static_cast<std::uint8_t>(pattern == 1 ? 0 : next() % 256);  // q + 128, any byte
      const auto scales = random_floats(static_cast<std::size_t>(s.out), 41, 0.001f, 0.1f);
      const auto x_scales = random_floats(static_cast<std::size_t>(max_m), 42, 0.001f, 0.1f);
      const GemvWeightsS8 w(q.data(), scales.data(), s.out, s.in, arena);
      std::vector<std::uint8_t> xu(static_cast<std::size_t>(max_m * w.padded_in()), 128);
      for (std::int64_t i = 0; i < max_m; ++i)
        std::copy_n(xu_q.begin() + i * s.in, s.in, xu.begin() + i * w.padded_in());
      const auto base = random_floats(static_cast<std::size_t>(max_m * s.out), 43, -5.0f, 5.0f);
      for (std::int64_t m : {1, 2, 3, 4, 5, 9, 33, 70})
        for (bool accumulate : {false, true}) {
          CAPTURE(m);
          CAPTURE(accumulate);
          std::vector<float> want(base.begin(), base.begin() + m * s.out);
          gemv_int8(w, xu.data(), x_scales.data(), m, want.data(), accumulate, 2, 0, w.tiles(), CpuTier::scalar);
          for (CpuTier tier : kAllCpuTiers) {
            if (tier == CpuTier::scalar || !tier_available(tier)) continue;
            CAPTURE(to_string(tier));
            std::vector<float> got(base.begin(), base.begin() + m * s.out);
            gemv_int8(w, xu.data(), x_scales.data(), m, got.data(), accumulate, 2, 0, w.tiles(), tier);
            REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
            // A range of tiles leaves the other columns alone.
            if (w.tiles() > 2) {
              std::vector<float> part(base.begin(), base.begin() + m * s.out);
              gemv_int8(w, xu.data(), x_scales.data(), m, part.data(), accumulate, 1, 1, 2, tier);
              const std::int64_t c0 = w.tile_blocks() * 16, c1 = std::min(s.out, 2 * c0);
              std::int64_t wrong = 0;
              for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t c = 0; c < s.out; ++c) {
                  const auto at = static_cast<std::size_t>(i * s.out + c);
                  wrong += part[at] != (c >= c0 && c < c1 ? want[at] : base[at]);
                }
              REQUIRE(wrong == 0);
            }
          }
        }
    }
}

TEST_CASE("gemv tiles narrow for matrices with few blocks, and interleave their blocks") {
  const auto arena = std::make_shared<WeightArena>();
  struct Case {
    std::int64_t out, tile_blocks, tiles, last_blocks;
  };
  // 36 blocks (wo, down): 1-block tiles; 69: 2-block tiles, the last with 1; 192 (gate_up): 4.
  for (const Case c : {Case{576, 1, 36, 1}, Case{1100, 2, 35, 1}, Case{3072, 4, 48, 4}}) {
    CAPTURE(c.out);
    std::vector<std::int8_t> q(static_cast<std::size_t>(c.out * 8));
    for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<std::int8_t>(i % 251 - 125);
    const std::vector<float> scales(static_cast<std::size_t>(c.out), 1.0f);
    const GemvWeightsS8 w(q.data(), scales.data(), c.out, 8, arena);
    CHECK(w.tile_blocks() == c.tile_blocks);
    CHECK(w.tiles() == c.tiles);
    CHECK(w.blocks_in(w.tiles() - 1) == c.last_blocks);
    // Row n, input k of tile t: group k / 4, block n / 16 within the tile, lane n % 16, byte k % 4.
    for (const std::int64_t n : {std::int64_t{0}, std::int64_t{17}, c.out - 1})
      for (const std::int64_t k : {0, 3, 4, 7}) {
        const std::int64_t t = n / 16 / w.tile_blocks(), b = n / 16 % w.tile_blocks();
        const std::int8_t* at = w.tile(t) + ((k / 4) * w.blocks_in(t) + b) * 64 + (n % 16) * 4 + k % 4;
        CHECK(int{*at} == int{q[static_cast<std::size_t>(n * 8 + k)]});
      }
  }
}

TEST_CASE("the weight arena outgrows the cache it is weighed against once it holds more bytes than it") {
  WeightArena arena(std::int64_t{1} << 20);
  CHECK_FALSE(arena.outgrows_cache());
  arena.allocate(std::size_t{512} << 10);
  CHECK_FALSE(arena.outgrows_cache());
  arena.allocate(std::size_t{512} << 10);  // exactly the cache: it still fits
  CHECK_FALSE(arena.outgrows_cache());
  arena.allocate(64);
  CHECK(arena.outgrows_cache());
  WeightArena unknown(0);  // a cache of unknown size is never outgrown
  unknown.allocate(std::size_t{4} << 20);
  CHECK_FALSE(unknown.outgrows_cache());
}

TEST_CASE("decode prefetches into L1 only weights that come from memory") {
  CHECK_FALSE(grouped_prefetch(false).into_l1);
  CHECK(grouped_prefetch(true).into_l1);
}

TEST_CASE("the last-level cache's size is near the L3 the C library reports, where it reports one") {
  const std::int64_t bytes = cpu_last_level_cache_bytes();
  MESSAGE("last-level cache: ", bytes, " bytes");
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GLIBC__) && defined(_SC_LEVEL3_CACHE_SIZE)
  // glibc reads other cpuid leaves on some CPUs (leaf 2's descriptors on old Intel parts,
  // 0x80000006 on AMD), which may count a socket's L3 where leaf 0x8000001D counts a core
  // complex's: the same order of size, not always the same number.
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  MESSAGE("the C library's L3: ", l3, " bytes");
  if (l3 > 0) {
    CHECK(bytes >= l3 / 16);
    CHECK(bytes <= std::int64_t{l3} * 16);
  }
#else
  MESSAGE("no C library report to compare with on this platform");
#endif
}

TEST_CASE("the weight arena hands out aligned, zeroed, disjoint blocks, larger than a chunk too") {
  WeightArena arena;
  std::int8_t* a = arena.allocate(100);
  std::int8_t* b = arena.allocate(1);
  std::int8_t* big = arena.allocate(std::size_t{40} << 20);  // more than one 32 MB chunk
  std::int8_t* c = arena.allocate(64);
  for (const std::int8_t* p : {a, b, big, c}) CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  CHECK(b >= a + 100);
  bool zero = true;
  for (std::size_t i = 0; i < (std::size_t{40} << 20); i += 4096) zero = zero && big[i] == 0;
  CHECK(zero);
  std::memset(a, 1, 100);
  std::memset(c, 2, 64);
  CHECK(int{b[0]} == 0);
  const bool c_inside_big = c >= big && c < big + (std::size_t{40} << 20);
  CHECK_FALSE(c_inside_big);
}
