// Every CUDA kernel against its CPU twin (kernels/cpu) on the same inputs.
#include "cuda_test_support.hpp"

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/quantize.hpp"
#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/ops.hpp"
#include "util/fp16.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace ember {
namespace {

namespace kc = kernels::cuda;
namespace kh = kernels::cpu;
using test::to_device;
using test::to_host;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

TEST_CASE("rmsnorm, silu_mul, add_bias, gather_rows and to_f16 match the CPU") {
  test::require_cuda_device();
  const std::int64_t rows = 7, cols = 576;
  const auto x = random_floats(rows * cols, 1, 3.0f), w = random_floats(cols, 2);
  std::vector<float> expect(x.size());
  kh::rmsnorm(x.data(), w.data(), rows, cols, 1e-5f, expect.data());
  auto dx = to_device(x), dw = to_device(w);
  auto dy = to_device(std::vector<float>(x.size()));
  kc::rmsnorm(dx.as<float>(), dw.as<float>(), rows, cols, 1e-5f, dy.as<float>(), nullptr);
  CHECK(max_abs_diff(to_host<float>(dy, x.size()), expect) < 1e-5);

  const auto gu = random_floats(rows * 2 * cols, 3, 4.0f);
  std::vector<float> act(rows * cols);
  kh::silu_mul(gu.data(), rows, cols, act.data());
  auto dgu = to_device(gu);
  kc::silu_mul(dgu.as<float>(), rows, cols, dy.as<float>(), nullptr);
  CHECK(max_abs_diff(to_host<float>(dy, act.size()), act) < 1e-5);

  kc::add_bias(dx.as<float>(), rows, cols, dw.as<float>(), nullptr);
  const auto biased = to_host<float>(dx, x.size());
  CHECK(biased[3 * cols + 5] == x[3 * cols + 5] + w[5]);

  const std::vector<std::int32_t> ids{6, 0, 6, 2};
  auto dids = to_device(ids);
  kc::gather_rows(dw.as<float>(), dids.as<std::int32_t>(), 4, 1, dy.as<float>(), nullptr);
  const auto gathered = to_host<float>(dy, 4);
  CHECK(gathered == std::vector<float>{w[6], w[0], w[6], w[2]});

  auto dh = to_device(std::vector<std::uint16_t>(x.size()));
  kc::to_f16(dgu.as<float>(), rows * cols, dh.as<std::uint16_t>(), nullptr);
  const auto halves = to_host<std::uint16_t>(dh, static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < halves.size(); ++i) REQUIRE(halves[i] == float_to_fp16(gu[i]));
}

TEST_CASE("the Gemma 3 and Qwen3 ops match the CPU: q/k norm, gelu_mul, scale, add") {
  test::require_cuda_device();
  const std::int64_t rows = 5;
  const int heads = 6, head_dim = 64;
  const std::int64_t ld = heads * head_dim + 40;  // a q part inside wider qkv rows
  const auto x = random_floats(rows * ld, 11, 3.0f), w = random_floats(head_dim, 12);
  std::vector<float> expect(x);
  kh::rmsnorm_heads(expect.data(), rows, ld, heads, head_dim, w.data(), 1e-6f, 1);
  auto dx = to_device(x), dw = to_device(w);
  kc::rmsnorm_heads(dx.as<float>(), rows, ld, heads, head_dim, dw.as<float>(), 1e-6f, nullptr);
  const auto normed = to_host<float>(dx, x.size());
  CHECK(max_abs_diff(normed, expect) < 1e-5);
  CHECK(normed[static_cast<std::size_t>(heads * head_dim)] ==
        x[static_cast<std::size_t>(heads * head_dim)]);  // past the heads: untouched

  const std::int64_t ffn = 640;
  const auto gu = random_floats(rows * 2 * ffn, 13, 4.0f);
  std::vector<float> act(static_cast<std::size_t>(rows * ffn));
  kh::gelu_mul(gu.data(), rows, ffn, act.data());
  auto dgu = to_device(gu), dact = to_device(std::vector<float>(act.size()));
  kc::gelu_mul(dgu.as<float>(), rows, ffn, dact.as<float>(), nullptr);
  CHECK(max_abs_diff(to_host<float>(dact, act.size()), act) < 1e-4);

  auto da = to_device(x);
  kc::scale(da.as<float>(), rows * ld, 24.0f, nullptr);
  kc::add(dx.as<float>(), da.as<float>(), rows * ld, nullptr);
  const auto sum = to_host<float>(da, x.size());
  for (std::size_t i = 0; i < sum.size(); i += 97) REQUIRE(sum[i] == x[i] * 24.0f + normed[i]);
}

TEST_CASE("rope matches the CPU in both layouts") {
  test::require_cuda_device();
  const int heads = 9, head_dim = 64, rope_dims = 64;
  const std::int64_t rows = 5, ld = heads * head_dim + 40;  // a strided q part of a fused row
  const std::vector<std::int32_t> positions{0, 1, 17, 300, 8191};
  for (auto layout : {kh::RopeLayout::interleaved, kh::RopeLayout::half}) {
    auto x = random_floats(rows * ld, 4);
    auto dx = to_device(x);
    auto dpos = to_device(positions);
    auto dcos = to_device(std::vector<float>(rows * rope_dims / 2)),
         dsin = to_device(std::vector<float>(rows * rope_dims / 2));
    kc::rope_angles(dpos.as<std::int32_t>(), rows, rope_dims, 10000.0f, nullptr, 1.0f, dcos.as<float>(),
                    dsin.as<float>(), nullptr);
    kc::rope(dx.as<float>(), rows, ld, heads, head_dim, rope_dims, dcos.as<float>(), dsin.as<float>(),
             layout == kh::RopeLayout::interleaved ? kc::RopeLayout::interleaved : kc::RopeLayout::half, nullptr);
    kh::rope(x.data(), rows, ld, heads, head_dim, rope_dims, positions.data(), 10000.0f, layout);
    CHECK(max_abs_diff(to_host<float>(dx, x.size()), x) < 1e-5);
  }
}

TEST_CASE("rope angles with frequency factors and linear scaling match the CPU") {
  test::require_cuda_device();
  const int rope_dims = 64;
  const std::int64_t rows = 5;
  const std::vector<std::int32_t> positions{0, 1, 17, 300, 8191};
  std::vector<float> factors(rope_dims / 2);
  for (std::size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * static_cast<float>(i);
  const kh::RopeAngles want = kh::rope_angles(positions.data(), rows, rope_dims, 500000.0f, factors.data(), 0.25f);
  auto dpos = to_device(positions), dfactors = to_device(factors);
  auto dcos = to_device(std::vector<float>(want.cos.size())), dsin = to_device(std::vector<float>(want.sin.size()));
  kc::rope_angles(dpos.as<std::int32_t>(), rows, rope_dims, 500000.0f, dfactors.as<float>(), 0.25f, dcos.as<float>(),
                  dsin.as<float>(), nullptr);
  CHECK(max_abs_diff(to_host<float>(dcos, want.cos.size()), want.cos) < 1e-6);
  CHECK(max_abs_diff(to_host<float>(dsin, want.sin.size()), want.sin) < 1e-6);
  const kh::RopeAngles plain = kh::rope_angles(positions.data(), rows, rope_dims, 500000.0f);
  CHECK(max_abs_diff(plain.cos, want.cos) > 1e-2);  // the factors and the scale change the angles
}

TEST_CASE("activation quantization is bit-identical to the CPU's") {
  test::require_cuda_device();
  const std::int64_t rows = 6, cols = 1536;
  auto x = random_floats(rows * cols, 5, 2.0f);
  for (std::int64_t c = 0; c < cols; ++c) x[static_cast<std::size_t>(2 * cols + c)] = 0.0f;  // an all-zero row
  std::vector<std::int8_t> q(x.size());
  std::vector<float> scales(rows);
  kh::quantize_rows_s8(x.data(), rows, cols, cols, q.data(), scales.data());
  auto dx = to_device(x);
  auto dq = to_device(std::vector<std::int8_t>(x.size()));
  auto ds = to_device(std::vector<float>(rows));
  kc::quantize_rows_s8(dx.as<float>(), rows, cols, dq.as<std::int8_t>(), ds.as<float>(), nullptr);
  CHECK(to_host<std::int8_t>(dq, q.size()) == q);
  CHECK(to_host<float>(ds, scales.size()) == scales);
  CHECK(scales[2] == 0.0f);
}

// The INT8 GEMM and its epilogue against the same arithmetic on the host: INT32 accumulation is
// exact, so only the final float products may differ, by rounding.
TEST_CASE("INT8 GEMM with per-row x per-column scales, FP16 GEMM") {
  test::require_cuda_device();
  const std::int64_t n = 960, k = 576;
  kc::Blas blas(nullptr);
  for (std::int64_t m : {1, 3, 64, 130}) {
    const auto x = random_floats(m * k, 6), w = random_floats(n * k, 7, 0.05f);
    std::vector<std::int8_t> xq(x.size()), wq(w.size());
    std::vector<float> xs(m), ws(n);
    kh::quantize_rows_s8(x.data(), m, k, k, xq.data(), xs.data());
    kh::quantize_weights_s8(w.data(), n, k, wq.data(), ws.data());
    const auto y0 = random_floats(m * n, 8);
    std::vector<float> expect(y0.size());
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        std::int32_t acc = 0;
        for (std::int64_t i = 0; i < k; ++i) acc += xq[r * k + i] * wq[c * k + i];
        expect[r * n + c] = y0[r * n + c] + static_cast<float>(acc) * ws[c] * xs[r];
      }
    auto dxq = to_device(xq), dwq = to_device(wq), dxs = to_device(xs), dws = to_device(ws), dy = to_device(y0);
    auto dacc = to_device(std::vector<std::int32_t>(m * n));
    kc::gemm_s8(blas, dxq.as<std::int8_t>(), dwq.as<std::int8_t>(), m, n, k, dacc.as<std::int32_t>());
    kc::dequantize_s32(dacc.as<std::int32_t>(), dxs.as<float>(), dws.as<float>(), m, n, dy.as<float>(), true, nullptr);
    CHECK(max_abs_diff(to_host<float>(dy, expect.size()), expect) < 1e-4);

    // FP16: inputs rounded to half, products summed in FP32.
    std::vector<std::uint16_t> xh(x.size()), wh(w.size());
    for (std::size_t i = 0; i < x.size(); ++i) xh[i] = float_to_fp16(x[i]);
    for (std::size_t i = 0; i < w.size(); ++i) wh[i] = float_to_fp16(w[i]);
    std::vector<float> expect16(m * n);
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double s = 0;
        for (std::int64_t i = 0; i < k; ++i)
          s += fp16_to_float(xh[r * k + i]) * static_cast<double>(fp16_to_float(wh[c * k + i]));
        expect16[r * n + c] = static_cast<float>(s);
      }
    auto dxh = to_device(xh), dwh = to_device(wh);
    kc::gemm_f16(blas, dxh.as<std::uint16_t>(), dwh.as<std::uint16_t>(), m, n, k, dy.as<float>(), false);
    CHECK(max_abs_diff(to_host<float>(dy, expect16.size()), expect16) < 1e-3);
  }
}

TEST_CASE("the fused INT8 GEMV equals the GEMM and its epilogue bit for bit, every row count") {
  test::require_cuda_device();
  const kc::Blas blas(nullptr);
  for (const std::int64_t k : {std::int64_t{1536}, std::int64_t{1540}}) {  // 16-byte and 4-byte lanes
    const std::int64_t n = 388, rows = 11;                                 // 8 + 3: two groups of rows
    std::mt19937 rng(static_cast<unsigned>(k));
    std::uniform_int_distribution<int> byte(-127, 127);
    std::vector<std::int8_t> q(static_cast<std::size_t>(rows * k)), w(static_cast<std::size_t>(n * k));
    for (auto& v : q) v = static_cast<std::int8_t>(byte(rng));
    for (auto& v : w) v = static_cast<std::int8_t>(byte(rng));
    const auto xs = random_floats(rows, 21, 0.01f), ws = random_floats(n, 22, 0.01f);
    const auto y0 = random_floats(rows * n, 23);
    auto dq = to_device(q), dw = to_device(w), dxs = to_device(xs), dws = to_device(ws);
    auto dacc = to_device(std::vector<std::int32_t>(static_cast<std::size_t>(rows * n)));
    for (const bool accumulate : {false, true})
      for (std::int64_t m = 1; m <= rows; ++m) {
        CAPTURE(k);
        CAPTURE(m);
        auto want = to_device(y0), got = to_device(y0);
        kc::gemm_s8(blas, dq.as<std::int8_t>(), dw.as<std::int8_t>(), m, n, k, dacc.as<std::int32_t>());
        kc::dequantize_s32(dacc.as<std::int32_t>(), dxs.as<float>(), dws.as<float>(), m, n, want.as<float>(),
                           accumulate, nullptr);
        kc::gemv_s8(dq.as<std::int8_t>(), dxs.as<float>(), dw.as<std::int8_t>(), dws.as<float>(), m, n, k,
                    got.as<float>(), accumulate, nullptr);
        const auto a = to_host<float>(want, y0.size()), b = to_host<float>(got, y0.size());
        REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        if (m < rows)
          CHECK(b[static_cast<std::size_t>(m * n)] == y0[static_cast<std::size_t>(m * n)]);  // rows past m untouched
      }
  }
}

// Two sequences over scattered blocks, a prefill chunk and a decode row, grouped-query heads;
// with a sliding window and a score scale of its own when `window` > 0.
void check_attention(KvCacheType dtype, int head_dim, int window = 0) {
  const int heads = 9, kv_heads = 3, block_size = 16, blocks = 12;
  const kh::KvLayout cpu_layout{block_size, kv_heads, head_dim, dtype};
  const kc::KvLayout gpu_layout = cpu_layout;  // one layout type for both devices
  const std::vector<std::int32_t> table_a{7, 2, 9, 4}, table_b{0, 11};
  // Rows 0..39: sequence A positions 10..49 (a chunk after a cached prefix); row 40: B at 20.
  std::vector<std::int32_t> positions, slots;
  for (int p = 0; p < 50; ++p) {  // the whole of A's KV, its first 10 written "earlier"
    positions.push_back(p);
    slots.push_back(table_a[static_cast<std::size_t>(p / block_size)] * block_size + p % block_size);
  }
  for (int p = 0; p <= 20; ++p) {
    positions.push_back(p);
    slots.push_back(table_b[static_cast<std::size_t>(p / block_size)] * block_size + p % block_size);
  }
  const std::int64_t rows = static_cast<std::int64_t>(positions.size()), width = heads * head_dim;
  const std::int64_t ldqkv = width + 2 * kv_heads * head_dim;
  const auto qkv = random_floats(rows * ldqkv, 9);
  const std::size_t elem = dtype == KvCacheType::f16 ? 2 : 4;
  const std::size_t cache_bytes = static_cast<std::size_t>(blocks * block_size * kv_heads * head_dim) * elem;
  std::vector<std::uint8_t> k_cache(cache_bytes), v_cache(cache_bytes);
  const float* k = qkv.data() + width;
  const float* v = k + kv_heads * head_dim;
  kh::store_kv(k, v, ldqkv, rows, slots.data(), cpu_layout, k_cache.data(), v_cache.data());

  auto dqkv = to_device(qkv), dslots = to_device(slots);
  auto dk = to_device(std::vector<std::uint8_t>(cache_bytes)), dv = to_device(std::vector<std::uint8_t>(cache_bytes));
  kc::store_kv(dqkv.as<float>() + width, dqkv.as<float>() + width + kv_heads * head_dim, ldqkv, rows,
               dslots.as<std::int32_t>(), gpu_layout, dk.get(), dv.get(), nullptr);
  CHECK(to_host<std::uint8_t>(dk, cache_bytes) == k_cache);
  CHECK(to_host<std::uint8_t>(dv, cache_bytes) == v_cache);

  // Attention for A's rows 10..49 and B's last row only (the others are left untouched).
  const kh::AttentionSeq seqs[] = {{10, 40, table_a.data(), 4}, {70, 1, table_b.data(), 2}};
  std::vector<float> expect(static_cast<std::size_t>(rows * width), -7.0f);
  kh::CpuContext ctx(1);
  kh::AttentionWorkspace workspace;
  kh::AttentionOptions options;
  options.window = window;
  options.scale = window > 0 ? 0.0625f : 0.0f;
  const float scale = window > 0 ? 0.0625f : 1.0f / std::sqrt(static_cast<float>(head_dim));
  kh::paged_attention(qkv.data(), ldqkv, positions.data(), seqs, 2, heads, cpu_layout, k_cache.data(), v_cache.data(),
                      expect.data(), width, ctx, workspace, options);
  std::vector<std::int32_t> tables(table_a);
  tables.insert(tables.end(), table_b.begin(), table_b.end());
  std::vector<std::int32_t> row_tables(static_cast<std::size_t>(rows), -1);
  for (int r = 10; r < 50; ++r) row_tables[static_cast<std::size_t>(r)] = 0;
  row_tables[70] = 4;
  auto dpos = to_device(positions), drt = to_device(row_tables), dtab = to_device(tables);
  auto dout = to_device(std::vector<float>(expect.size(), -7.0f));
  kc::paged_attention(dqkv.as<float>(), ldqkv, dpos.as<std::int32_t>(), drt.as<std::int32_t>(), dtab.as<std::int32_t>(),
                      rows, heads, gpu_layout, dk.get(), dv.get(), window, scale, dout.as<float>(), width, nullptr);
  const auto got = to_host<float>(dout, expect.size());
  CHECK(max_abs_diff(got, expect) < 1e-5);
  CHECK(got[0] == -7.0f);  // row 0 belongs to no sequence here
}

TEST_CASE("KV store and paged attention match the CPU (f16 and f32, GQA, head_dim 64 and 128)") {
  test::require_cuda_device();
  check_attention(KvCacheType::f16, 64);
  check_attention(KvCacheType::f32, 64);
  check_attention(KvCacheType::f16, 128);
}

TEST_CASE("paged attention with a sliding window and a scale of its own matches the CPU") {
  test::require_cuda_device();
  check_attention(KvCacheType::f16, 64, 7);  // windows inside a block and across blocks
  check_attention(KvCacheType::f32, 128, 20);
}

}  // namespace
}  // namespace ember
