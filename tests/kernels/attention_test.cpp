#include "kernel_test_util.hpp"
#include <ember/ember.hpp>
#include "kernels/cpu/attention.hpp"
#include "util/fp16.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace ember::kernels::cpu;
using ember::test::random_floats;

namespace {

// One sequence: its full K/V history (dense [len, kv_heads*head_dim]) and which positions
// have query rows in this call (the last `rows` positions: prefill chunk or one decode row).
struct SeqSpec {
  int len;
  int rows;
};

struct Case {
  int heads, kv_heads, head_dim, block_size;
  KvDType dtype;
  std::vector<SeqSpec> seqs;
};

void run_case(const Case& c, std::uint32_t seed) {
  const KvLayout layout{c.block_size, c.kv_heads, c.head_dim, c.dtype};
  const std::int64_t kv_width = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  const std::int64_t q_width = static_cast<std::int64_t>(c.heads) * c.head_dim;
  int total_blocks = 0;
  for (const auto& s : c.seqs) total_blocks += (s.len + c.block_size - 1) / c.block_size;
  total_blocks += 3;  // unused blocks in the pool
  // Shuffled block ids: sequences own scattered, non-contiguous blocks.
  std::vector<std::int32_t> pool(static_cast<std::size_t>(total_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);

  const std::size_t elem = c.dtype == KvDType::f16 ? 2 : 4;
  const std::size_t cache_values = static_cast<std::size_t>(total_blocks) * static_cast<std::size_t>(c.block_size * kv_width);
  std::vector<unsigned char> k_cache(cache_values * elem), v_cache(cache_values * elem);

  std::vector<std::vector<std::int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  std::vector<std::int32_t> positions;
  std::vector<std::vector<float>> ks, vs;
  std::size_t next_block = 0;
  int row = 0;
  for (std::size_t s = 0; s < c.seqs.size(); ++s) {
    const SeqSpec& spec = c.seqs[s];
    const int nblocks = (spec.len + c.block_size - 1) / c.block_size;
    tables.emplace_back(pool.begin() + static_cast<std::ptrdiff_t>(next_block), pool.begin() + static_cast<std::ptrdiff_t>(next_block + static_cast<std::size_t>(nblocks)));
    next_block += static_cast<std::size_t>(nblocks);
    ks.push_back(random_floats(static_cast<std::size_t>(spec.len * kv_width), seed * 10 + static_cast<std::uint32_t>(s) * 2));
    vs.push_back(random_floats(static_cast<std::size_t>(spec.len * kv_width), seed * 10 + static_cast<std::uint32_t>(s) * 2 + 1));
    // Store the whole history through store_kv (slot = block * block_size + offset).
    std::vector<std::int32_t> slots(static_cast<std::size_t>(spec.len));
    for (int t = 0; t < spec.len; ++t)
      slots[static_cast<std::size_t>(t)] = tables.back()[static_cast<std::size_t>(t / c.block_size)] * c.block_size + t % c.block_size;
    store_kv(ks.back().data(), vs.back().data(), kv_width, spec.len, slots.data(), layout, k_cache.data(), v_cache.data());
    for (int t = spec.len - spec.rows; t < spec.len; ++t) positions.push_back(t);
    seqs.push_back({row, spec.rows, nullptr, nblocks});
    row += spec.rows;
  }
  for (std::size_t s = 0; s < seqs.size(); ++s) seqs[s].block_table = tables[s].data();

  const std::int64_t ldq = q_width + 5, ldo = q_width + 3;
  const auto q = random_floats(static_cast<std::size_t>(row * ldq), seed + 99);
  std::vector<float> out(static_cast<std::size_t>(row * ldo), 7.0f);
  CpuContext ctx(2);
  AttentionWorkspace workspace;
  paged_attention(q.data(), ldq, positions.data(), seqs.data(), static_cast<int>(seqs.size()), c.heads, layout,
                  k_cache.data(), v_cache.data(), out.data(), ldo, ctx, workspace);

  // Dense reference in double on the values the cache holds (f16-rounded when f16).
  const auto stored = [&](float v) {
    return c.dtype == KvDType::f16 ? static_cast<double>(ember::fp16_to_float(ember::float_to_fp16(v))) : static_cast<double>(v);
  };
  double worst = 0.0;
  const int group = c.heads / c.kv_heads;
  for (std::size_t s = 0; s < seqs.size(); ++s)
    for (int r = seqs[s].row_begin; r < seqs[s].row_begin + seqs[s].row_count; ++r)
      for (int h = 0; h < c.heads; ++h) {
        const int kvh = h / group;
        const int n = positions[static_cast<std::size_t>(r)] + 1;
        std::vector<double> p(static_cast<std::size_t>(n));
        for (int t = 0; t < n; ++t) {
          double d = 0.0;
          for (int i = 0; i < c.head_dim; ++i)
            d += q[static_cast<std::size_t>(r * ldq + h * c.head_dim + i)] * stored(ks[s][static_cast<std::size_t>(t * kv_width + kvh * c.head_dim + i)]);
          p[static_cast<std::size_t>(t)] = d / std::sqrt(static_cast<double>(c.head_dim));
        }
        const double mx = *std::max_element(p.begin(), p.end());
        double sum = 0.0;
        for (auto& v : p) sum += (v = std::exp(v - mx));
        for (int i = 0; i < c.head_dim; ++i) {
          double o = 0.0;
          for (int t = 0; t < n; ++t) o += p[static_cast<std::size_t>(t)] / sum * stored(vs[s][static_cast<std::size_t>(t * kv_width + kvh * c.head_dim + i)]);
          worst = std::max(worst, std::abs(o - out[static_cast<std::size_t>(r * ldo + h * c.head_dim + i)]));
        }
      }
  CHECK(worst < 2e-5);
  for (int r = 0; r < row; ++r)  // the padding past heads*head_dim is not written
    for (std::int64_t i = q_width; i < ldo; ++i) REQUIRE(out[static_cast<std::size_t>(r * ldo + i)] == 7.0f);
}

}  // namespace

TEST_CASE("paged attention equals dense attention: shuffled blocks, mixed prefill and decode, GQA") {
  for (KvDType dtype : {KvDType::f16, KvDType::f32}) {
    CAPTURE(static_cast<int>(dtype));
    // prefill from scratch (37 rows), a decode row at 51 tokens, a chunked prefill (10 rows on
    // top of 20 cached), a single-token sequence.
    const std::vector<SeqSpec> mixed = {{37, 37}, {51, 1}, {30, 10}, {1, 1}};
    run_case({9, 3, 64, 16, dtype, mixed}, 1);   // the default model's attention shape
    run_case({4, 4, 40, 5, dtype, mixed}, 2);    // no GQA, odd head_dim and block size
    run_case({8, 1, 128, 32, dtype, {{70, 3}, {33, 33}}}, 3);  // multi-query
  }
}

TEST_CASE("paged attention rejects positions outside the block table and bad head counts") {
  CpuContext ctx(1);
  const KvLayout layout{4, 2, 8, KvDType::f32};
  std::vector<float> kv(2 * 4 * 2 * 8), q(4 * 8), out(4 * 8);
  const std::int32_t table[1] = {1};
  const std::int32_t pos_ok[1] = {3}, pos_bad[1] = {4};
  const AttentionSeq seq{0, 1, table, 1};
  AttentionWorkspace ws;
  paged_attention(q.data(), 32, pos_ok, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws);
  CHECK_THROWS_AS(paged_attention(q.data(), 32, pos_bad, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws), ember::Error);
  CHECK_THROWS_AS(paged_attention(q.data(), 32, pos_ok, &seq, 1, 3, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws), ember::Error);
}

// Batch invariance at the kernel: each query's halves and their merge depend only on its own
// position, so a row gives the same bits as one row of a 70-row prefill on 2 threads, as a
// decode row alone on 1 thread, and next to another sequence's rows.
TEST_CASE("paged attention gives a row the same bits alone, in a prefill chunk and in a batch") {
  const int heads = 9, kv_heads = 3, d = 64, block_size = 16, len = 70, blocks = 5;
  const KvLayout layout{block_size, kv_heads, d, KvDType::f16};
  const std::int64_t kv_width = kv_heads * d, q_width = heads * d;
  // Sequence A owns blocks 5..9 in reverse order, sequence B (a copy of A) blocks 0..4.
  std::vector<std::int32_t> table_a = {9, 8, 7, 6, 5}, table_b = {0, 1, 2, 3, 4};
  std::vector<std::uint16_t> k_cache(static_cast<std::size_t>(2 * blocks * block_size * kv_width));
  std::vector<std::uint16_t> v_cache(k_cache.size());
  const auto ks = random_floats(static_cast<std::size_t>(len * kv_width), 11);
  const auto vs = random_floats(static_cast<std::size_t>(len * kv_width), 12);
  for (const auto* table : {&table_a, &table_b}) {
    std::vector<std::int32_t> slots(len);
    for (int t = 0; t < len; ++t) slots[static_cast<std::size_t>(t)] = (*table)[static_cast<std::size_t>(t / block_size)] * block_size + t % block_size;
    store_kv(ks.data(), vs.data(), kv_width, len, slots.data(), layout, k_cache.data(), v_cache.data());
  }
  const auto q = random_floats(static_cast<std::size_t>(len * q_width), 13);
  std::vector<std::int32_t> positions(len);
  std::iota(positions.begin(), positions.end(), 0);

  AttentionWorkspace ws;
  CpuContext two(2), one(1);
  std::vector<float> prefill(static_cast<std::size_t>(len * q_width));
  const AttentionSeq whole{0, len, table_a.data(), blocks};
  paged_attention(q.data(), q_width, positions.data(), &whole, 1, heads, layout, k_cache.data(),
                  v_cache.data(), prefill.data(), q_width, two, ws);
  for (int r : {0, 15, 16, 31, 47, 48, 63, 64, 69}) {  // every split of 1 to 5 blocks
    CAPTURE(r);
    const auto expect = std::vector<float>(prefill.begin() + r * q_width, prefill.begin() + (r + 1) * q_width);
    std::vector<float> alone(static_cast<std::size_t>(q_width));
    const AttentionSeq decode{0, 1, table_a.data(), blocks};
    paged_attention(q.data() + r * q_width, q_width, &positions[static_cast<std::size_t>(r)], &decode, 1, heads,
                    layout, k_cache.data(), v_cache.data(), alone.data(), q_width, one, ws);
    CHECK(alone == expect);
    // Row 0: B's last 3 rows; row 3: this row of A.
    std::vector<float> batch_q(static_cast<std::size_t>(4 * q_width));
    std::copy(q.begin() + (len - 3) * q_width, q.end(), batch_q.begin());
    std::copy(q.begin() + r * q_width, q.begin() + (r + 1) * q_width, batch_q.begin() + 3 * q_width);
    const std::int32_t batch_positions[] = {len - 3, len - 2, len - 1, r};
    const AttentionSeq batch[] = {{0, 3, table_b.data(), blocks}, {3, 1, table_a.data(), blocks}};
    std::vector<float> batched(batch_q.size());
    paged_attention(batch_q.data(), q_width, batch_positions, batch, 2, heads, layout, k_cache.data(),
                    v_cache.data(), batched.data(), q_width, two, ws);
    CHECK(std::vector<float>(batched.begin() + 3 * q_width, batched.end()) == expect);
    CHECK(std::vector<float>(batched.begin() + 2 * q_width, batched.begin() + 3 * q_width) ==
          std::vector<float>(prefill.end() - q_width, prefill.end()));
  }
}
