#include <ember/ember.hpp>
#include "kernel_test_util.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/simd.hpp"
#include "tests/support/test_support.hpp"
#include "util/fp16.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

using namespace ember::kernels::cpu;
using ember::KvCacheType;
using ember::test::random_floats;

namespace {

// Every VecOps implementation this CPU runs: the kernel is tested on each, not only the fastest.
std::vector<const VecOps*> all_ops() {
  std::vector<const VecOps*> ops;
  for (CpuTier tier : kAllCpuTiers)
    if (tier_available(tier) && (ops.empty() || ops.back() != &vec_ops(tier))) ops.push_back(&vec_ops(tier));
  return ops;
}

// One sequence: its full K/V history (dense [len, kv_heads*head_dim]) and which positions
// have query rows in this call (the last `rows` positions: prefill chunk or one decode row).
struct SeqSpec {
  int len;
  int rows;
};

struct Case {
  int heads, kv_heads, head_dim, block_size;
  KvCacheType dtype;
  std::vector<SeqSpec> seqs;
  int window = 0;      // AttentionOptions::window
  float scale = 0.0f;  // AttentionOptions::scale
};

// The scale of an int8 group: max |x| / 127 in half precision.
float group_scale(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return ember::fp16_to_float(ember::float_to_fp16(amax / 127.0f));
}

// What a cache of `type` gives back for each value of `x` (rows of heads of head_dim values):
// f16-rounded, or int8 steps of each group of 32 values of a head, quantized in the rotated basis
// the cache stores (rotate_kv_groups) and rotated back, as attention sees them.
std::vector<float> stored_values(std::vector<float> x, KvCacheType type, int head_dim) {
  if (type == KvCacheType::f16)
    for (float& v : x) v = ember::fp16_to_float(ember::float_to_fp16(v));
  if (type == KvCacheType::int8)
    for (std::size_t head = 0; head < x.size(); head += static_cast<std::size_t>(head_dim)) {
      ember::kernels::rotate_kv_groups(x.data() + head, head_dim);
      for (int at = 0; at < head_dim; at += ember::kernels::kKvInt8Group) {
        float* group = x.data() + head + static_cast<std::size_t>(at);
        const int n = std::min(ember::kernels::kKvInt8Group, head_dim - at);
        const float scale = group_scale(group, n), inv = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (int i = 0; i < n; ++i) group[i] = std::clamp(std::nearbyint(group[i] * inv), -127.0f, 127.0f) * scale;
      }
      ember::kernels::rotate_kv_groups(x.data() + head, head_dim);
    }
  return x;
}

// A block id far past any pool: a block_table entry the kernel must not follow (it would read
// terabytes past the cache and crash).
constexpr std::int32_t kUnreadBlock = 1 << 28;

void run_case(const Case& c, std::uint32_t seed) {
  CAPTURE(c.heads);
  CAPTURE(c.kv_heads);
  CAPTURE(c.head_dim);
  CAPTURE(c.block_size);
  CAPTURE(static_cast<int>(c.dtype));
  CAPTURE(c.window);
  CAPTURE(c.scale);
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

  const std::size_t cache_bytes = static_cast<std::size_t>(total_blocks) * static_cast<std::size_t>(c.block_size) *
                                  static_cast<std::size_t>(ember::kernels::kv_token_bytes(layout));
  std::vector<unsigned char> k_cache(cache_bytes), v_cache(cache_bytes);

  std::vector<std::vector<std::int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  std::vector<std::int32_t> positions;
  std::vector<std::vector<float>> ks, vs;
  std::size_t next_block = 0;
  int row = 0;
  for (std::size_t s = 0; s < c.seqs.size(); ++s) {
    const SeqSpec& spec = c.seqs[s];
    const int nblocks = (spec.len + c.block_size - 1) / c.block_size;
    tables.emplace_back(pool.begin() + static_cast<std::ptrdiff_t>(next_block),
                        pool.begin() + static_cast<std::ptrdiff_t>(next_block + static_cast<std::size_t>(nblocks)));
    next_block += static_cast<std::size_t>(nblocks);
    ks.push_back(
        random_floats(static_cast<std::size_t>(spec.len * kv_width), seed * 10 + static_cast<std::uint32_t>(s) * 2));
    vs.push_back(random_floats(static_cast<std::size_t>(spec.len * kv_width),
                               seed * 10 + static_cast<std::uint32_t>(s) * 2 + 1));
    // Store the whole history through store_kv (slot = block * block_size + offset).
    std::vector<std::int32_t> slots(static_cast<std::size_t>(spec.len));
    for (int t = 0; t < spec.len; ++t)
      slots[static_cast<std::size_t>(t)] =
          tables.back()[static_cast<std::size_t>(t / c.block_size)] * c.block_size + t % c.block_size;
    store_kv(ks.back().data(), vs.back().data(), kv_width, spec.len, slots.data(), layout, k_cache.data(),
             v_cache.data());
    for (int t = spec.len - spec.rows; t < spec.len; ++t) positions.push_back(t);
    seqs.push_back({row, spec.rows, nullptr, nblocks});
    row += spec.rows;
    // The blocks wholly before the first row's window (so before every row's) are not to be
    // read: their table entries lead nowhere.
    const int first_visible = c.window > 0 ? std::max(0, spec.len - spec.rows - c.window + 1) : 0;
    for (int b = 0; (b + 1) * c.block_size <= first_visible; ++b)
      tables.back()[static_cast<std::size_t>(b)] = kUnreadBlock;
  }
  for (std::size_t s = 0; s < seqs.size(); ++s) seqs[s].block_table = tables[s].data();

  // Dense reference in double on the values the cache holds (f16-rounded when f16, int8 steps of
  // max |x| / 127 of the token's head when int8): every key t <= p, less those llama.cpp's
  // is_masked_swa (LLAMA_SWA_TYPE_STANDARD) masks: p - t >= window.
  for (auto* history : {&ks, &vs})
    for (auto& values : *history) values = stored_values(values, c.dtype, c.head_dim);
  const auto stored = [](float v) { return static_cast<double>(v); };
  const std::int64_t ldq = q_width + 5, ldo = q_width + 3;
  const auto q = random_floats(static_cast<std::size_t>(row * ldq), seed + 99);
  const double scale =
      c.scale != 0.0f ? static_cast<double>(c.scale) : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  std::vector<double> want(static_cast<std::size_t>(row * q_width));
  const int group = c.heads / c.kv_heads;
  for (std::size_t s = 0; s < seqs.size(); ++s)
    for (int r = seqs[s].row_begin; r < seqs[s].row_begin + seqs[s].row_count; ++r)
      for (int h = 0; h < c.heads; ++h) {
        const int kvh = h / group;
        const int p = positions[static_cast<std::size_t>(r)];
        std::vector<double> w(static_cast<std::size_t>(p + 1), 0.0);
        double mx = -1e300;
        for (int t = 0; t <= p; ++t) {
          if (c.window > 0 && p - t >= c.window) continue;
          double d = 0.0;
          for (int i = 0; i < c.head_dim; ++i)
            d += q[static_cast<std::size_t>(r * ldq + h * c.head_dim + i)] *
                 stored(ks[s][static_cast<std::size_t>(t * kv_width + kvh * c.head_dim + i)]);
          w[static_cast<std::size_t>(t)] = d * scale;
          mx = std::max(mx, d * scale);
        }
        double sum = 0.0;
        for (int t = 0; t <= p; ++t) {
          if (c.window > 0 && p - t >= c.window) continue;
          sum += (w[static_cast<std::size_t>(t)] = std::exp(w[static_cast<std::size_t>(t)] - mx));
        }
        for (int i = 0; i < c.head_dim; ++i) {
          double o = 0.0;
          for (int t = 0; t <= p; ++t)  // w is 0 where masked
            o += w[static_cast<std::size_t>(t)] / sum *
                 stored(vs[s][static_cast<std::size_t>(t * kv_width + kvh * c.head_dim + i)]);
          want[static_cast<std::size_t>(r * q_width + h * c.head_dim + i)] = o;
        }
      }

  for (const VecOps* ops : all_ops()) {
    CAPTURE(std::string(to_string(ops->tier)));
    std::vector<float> out(static_cast<std::size_t>(row * ldo), 7.0f);
    CpuContext ctx(2);
    AttentionWorkspace workspace;
    AttentionOptions options;
    options.window = c.window;
    options.scale = c.scale;
    options.ops = ops;
    paged_attention(q.data(), ldq, positions.data(), seqs.data(), static_cast<int>(seqs.size()), c.heads, layout,
                    k_cache.data(), v_cache.data(), out.data(), ldo, ctx, workspace, options);
    double worst = 0.0;
    for (int r = 0; r < row; ++r)
      for (std::int64_t i = 0; i < q_width; ++i)
        worst = ember::test::worse(worst, std::abs(want[static_cast<std::size_t>(r * q_width + i)] -
                                                   out[static_cast<std::size_t>(r * ldo + i)]));
    CHECK(worst < 2e-5);
    for (int r = 0; r < row; ++r)  // the padding past heads*head_dim is not written
      for (std::int64_t i = q_width; i < ldo; ++i) REQUIRE(out[static_cast<std::size_t>(r * ldo + i)] == 7.0f);
  }
}

}  // namespace

TEST_CASE("paged attention equals dense attention: shuffled blocks, mixed prefill and decode, GQA") {
  for (KvCacheType dtype : {KvCacheType::f16, KvCacheType::f32, KvCacheType::int8}) {
    // prefill from scratch (37 rows), a decode row at 51 tokens, a chunked prefill (10 rows on
    // top of 20 cached), a single-token sequence.
    const std::vector<SeqSpec> mixed = {{37, 37}, {51, 1}, {30, 10}, {1, 1}};
    run_case({9, 3, 64, 16, dtype, mixed}, 1);                 // the default model's attention shape
    run_case({4, 4, 40, 5, dtype, mixed}, 2);                  // no GQA, odd head_dim and block size
    run_case({8, 1, 128, 32, dtype, {{70, 3}, {33, 33}}}, 3);  // multi-query
  }
}

// A window's first visible key falls anywhere in a block and in a chunk of kKeyChunk keys, and a
// prefill tile's rows each start one key later: windows below, at and above the block size and
// the chunk, multiples of the block, and ones past the whole sequence (no mask at all).
TEST_CASE("paged attention with a sliding window equals dense attention masked like llama.cpp's") {
  // A long prefill chunk (40 rows over 300 positions: 19 blocks of 16), decode rows deep in long
  // sequences, a short prefill from scratch, a single-token sequence, a chunk of 9 rows.
  const std::vector<SeqSpec> mixed = {{300, 40}, {260, 1}, {45, 45}, {1, 1}, {130, 9}};
  for (KvCacheType dtype : {KvCacheType::f16, KvCacheType::f32, KvCacheType::int8})
    for (int window : {1, 7, 16, 17, 32, 48, 64, 301, 100000}) {
      run_case({9, 3, 64, 16, dtype, mixed, window}, 4);                // the default model's shape
      run_case({4, 4, 40, 5, dtype, mixed, window}, 5);                 // no GQA, 60 blocks of 5
      run_case({8, 2, 128, 32, dtype, mixed, window}, 6);               // group of 4, blocks of 32
      run_case({8, 1, 32, 24, dtype, {{97, 20}, {49, 1}}, window}, 7);  // multi-query, 24 = 16 + 8
    }
  for (KvCacheType dtype : {KvCacheType::f16, KvCacheType::f32, KvCacheType::int8}) {
    // Gemma 3's window over 2000 cached tokens: decode rows and a prefill chunk.
    run_case({8, 4, 64, 16, dtype, {{2000, 1}, {1500, 12}, {513, 1}, {512, 1}}, 512}, 8);
    // Window multiples of blocks of 5 and of 8.
    run_case({4, 2, 40, 5, dtype, {{203, 31}, {90, 1}}, 25}, 9);
    run_case({4, 2, 40, 8, dtype, {{203, 31}, {90, 1}}, 64}, 10);
  }
}

TEST_CASE("paged attention's softmax scale: q.k times the given factor, 0 meaning 1/sqrt(head_dim)") {
  const std::vector<SeqSpec> mixed = {{120, 20}, {77, 1}};
  for (KvCacheType dtype : {KvCacheType::f16, KvCacheType::f32, KvCacheType::int8})
    for (float scale : {0.05f, 0.125f, 0.3f, 1.0f / 16.0f}) {
      run_case({9, 3, 64, 16, dtype, mixed, 0, scale}, 11);
      run_case({9, 3, 64, 16, dtype, mixed, 33, scale}, 12);  // with a window
    }
}

TEST_CASE("paged attention rejects positions outside the block table, bad head counts and options") {
  CpuContext ctx(1);
  const KvLayout layout{4, 2, 8, KvCacheType::f32};
  std::vector<float> kv(2 * 4 * 2 * 8), q(4 * 8), out(4 * 8);
  const std::int32_t table[1] = {1};
  const std::int32_t pos_ok[1] = {3}, pos_bad[1] = {4};
  const AttentionSeq seq{0, 1, table, 1};
  AttentionWorkspace ws;
  paged_attention(q.data(), 32, pos_ok, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws);
  CHECK_THROWS_AS(
      paged_attention(q.data(), 32, pos_bad, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws),
      ember::Error);
  CHECK_THROWS_AS(
      paged_attention(q.data(), 32, pos_ok, &seq, 1, 3, layout, kv.data(), kv.data(), out.data(), 32, ctx, ws),
      ember::Error);
  CHECK_THROWS_AS(paged_attention(q.data(), 32, pos_ok, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx,
                                  ws, {.window = -1}),
                  ember::Error);
  for (float scale : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    CHECK_THROWS_AS(paged_attention(q.data(), 32, pos_ok, &seq, 1, 4, layout, kv.data(), kv.data(), out.data(), 32, ctx,
                                    ws, {.scale = scale}),
                    ember::Error);
}

// Batch invariance at the kernel: each query's halves and their merge depend only on its own
// position (and the window), so a row gives the same bits as one row of a 70-row prefill on 2
// threads, as a decode row alone on 1 thread, next to another sequence's rows, and with other
// neighbours in its tile. With a window a prefill tile's rows start their keys at 8 different
// places, mostly inside a block; blocks of 32 and 24 hold more than one chunk of kKeyChunk keys,
// so a row's chunks (which group its V rows, and so the order of its sums) must be the block's
// fixed ones, not ones counted from the first key any row of the tile sees.
TEST_CASE("paged attention gives a row the same bits alone, in a prefill chunk and in a batch") {
  const int heads = 9, kv_heads = 3, d = 64, len = 70;
  const std::int64_t kv_width = kv_heads * d, q_width = heads * d;
  const auto ks = random_floats(static_cast<std::size_t>(len * kv_width), 11);
  const auto vs = random_floats(static_cast<std::size_t>(len * kv_width), 12);
  const auto q = random_floats(static_cast<std::size_t>(len * q_width), 13);
  std::vector<std::int32_t> positions(len);
  std::iota(positions.begin(), positions.end(), 0);
  AttentionWorkspace ws;
  CpuContext two(2), one(1);
  for (KvCacheType dtype : {KvCacheType::f16, KvCacheType::int8})
    for (int block_size : {16, 32, 24}) {
      CAPTURE(block_size);
      CAPTURE(static_cast<int>(dtype));
      const int blocks = (len + block_size - 1) / block_size;
      const KvLayout layout{block_size, kv_heads, d, dtype};
      // Sequence A owns blocks blocks..2*blocks-1 in reverse order, sequence B (a copy of A) blocks
      // 0..blocks-1.
      std::vector<std::int32_t> table_a(static_cast<std::size_t>(blocks)), table_b(table_a.size());
      std::iota(table_a.rbegin(), table_a.rend(), blocks);
      std::iota(table_b.begin(), table_b.end(), 0);
      std::vector<unsigned char> k_cache(
          static_cast<std::size_t>(2 * blocks * block_size * ember::kernels::kv_token_bytes(layout)));
      std::vector<unsigned char> v_cache(k_cache.size());
      for (const auto* table : {&table_a, &table_b}) {
        std::vector<std::int32_t> slots(len);
        for (int t = 0; t < len; ++t)
          slots[static_cast<std::size_t>(t)] =
              (*table)[static_cast<std::size_t>(t / block_size)] * block_size + t % block_size;
        store_kv(ks.data(), vs.data(), kv_width, len, slots.data(), layout, k_cache.data(), v_cache.data());
      }
      for (const VecOps* ops : all_ops())
        for (int window : {0, 1, 7, 16, 17, 20, 33, 48}) {
          CAPTURE(std::string(to_string(ops->tier)));
          CAPTURE(window);
          const AttentionOptions options{window, 0.0f, ops};
          std::vector<float> prefill(static_cast<std::size_t>(len * q_width));
          const AttentionSeq whole{0, len, table_a.data(), blocks};
          paged_attention(q.data(), q_width, positions.data(), &whole, 1, heads, layout, k_cache.data(), v_cache.data(),
                          prefill.data(), q_width, two, ws, options);
          for (int r : {0, 5, 15, 16, 17, 23, 31, 40, 47, 48, 55, 63, 64, 69}) {  // every split of 1 to 5 blocks of 16
            CAPTURE(r);
            const auto expect = std::vector<float>(prefill.begin() + r * q_width, prefill.begin() + (r + 1) * q_width);
            std::vector<float> alone(static_cast<std::size_t>(q_width));
            const AttentionSeq decode{0, 1, table_a.data(), blocks};
            paged_attention(q.data() + r * q_width, q_width, &positions[static_cast<std::size_t>(r)], &decode, 1, heads,
                            layout, k_cache.data(), v_cache.data(), alone.data(), q_width, one, ws, options);
            CHECK(alone == expect);
            // Row 0: B's last 3 rows; row 3: this row of A.
            std::vector<float> batch_q(static_cast<std::size_t>(4 * q_width));
            std::copy(q.begin() + (len - 3) * q_width, q.end(), batch_q.begin());
            std::copy(q.begin() + r * q_width, q.begin() + (r + 1) * q_width, batch_q.begin() + 3 * q_width);
            const std::int32_t batch_positions[] = {len - 3, len - 2, len - 1, r};
            const AttentionSeq batch[] = {{0, 3, table_b.data(), blocks}, {3, 1, table_a.data(), blocks}};
            std::vector<float> batched(batch_q.size());
            paged_attention(batch_q.data(), q_width, batch_positions, batch, 2, heads, layout, k_cache.data(),
                            v_cache.data(), batched.data(), q_width, two, ws, options);
            CHECK(std::vector<float>(batched.begin() + 3 * q_width, batched.end()) == expect);
            CHECK(std::vector<float>(batched.begin() + 2 * q_width, batched.begin() + 3 * q_width) ==
                  std::vector<float>(prefill.end() - q_width, prefill.end()));
            // The last row of a chunk of up to 8 rows ending at r: its tile's other rows see earlier keys.
            const int chunk_rows = std::min(8, r + 1);
            std::vector<float> chunk(static_cast<std::size_t>(chunk_rows * q_width));
            const AttentionSeq part{0, chunk_rows, table_a.data(), blocks};
            const int first = r + 1 - chunk_rows;
            paged_attention(q.data() + first * q_width, q_width, &positions[static_cast<std::size_t>(first)], &part, 1,
                            heads, layout, k_cache.data(), v_cache.data(), chunk.data(), q_width, two, ws, options);
            CHECK(std::vector<float>(chunk.end() - q_width, chunk.end()) == expect);
          }
        }
    }
}

// The defaults are the options spelled out: a window reaching past position 0 masks nothing and
// the scale 1/sqrt(head_dim) is the default one, bit for bit.
TEST_CASE("paged attention: a window past the sequence and the default scale change no bit") {
  const int heads = 8, kv_heads = 2, d = 64, block_size = 16, len = 100, blocks = 7;
  const KvLayout layout{block_size, kv_heads, d, KvCacheType::f32};
  const std::int64_t kv_width = kv_heads * d, q_width = heads * d;
  std::vector<std::int32_t> table = {3, 0, 6, 1, 5, 2, 4};
  std::vector<float> k_cache(static_cast<std::size_t>(blocks * block_size * kv_width)), v_cache(k_cache.size());
  const auto ks = random_floats(static_cast<std::size_t>(len * kv_width), 21);
  const auto vs = random_floats(static_cast<std::size_t>(len * kv_width), 22);
  std::vector<std::int32_t> slots(len);
  for (int t = 0; t < len; ++t)
    slots[static_cast<std::size_t>(t)] = table[static_cast<std::size_t>(t / block_size)] * block_size + t % block_size;
  store_kv(ks.data(), vs.data(), kv_width, len, slots.data(), layout, k_cache.data(), v_cache.data());
  const auto q = random_floats(static_cast<std::size_t>(len * q_width), 23);
  std::vector<std::int32_t> positions(len);
  std::iota(positions.begin(), positions.end(), 0);
  const AttentionSeq seq{0, len, table.data(), blocks};
  AttentionWorkspace ws;
  CpuContext ctx(2);
  const auto run = [&](const AttentionOptions& options) {
    std::vector<float> out(static_cast<std::size_t>(len * q_width));
    paged_attention(q.data(), q_width, positions.data(), &seq, 1, heads, layout, k_cache.data(), v_cache.data(),
                    out.data(), q_width, ctx, ws, options);
    return out;
  };
  const auto plain = run({});
  CHECK(run({.window = len}) == plain);
  CHECK(run({.window = 1 << 30}) == plain);
  CHECK(run({.scale = 1.0f / std::sqrt(static_cast<float>(d))}) == plain);
  CHECK(run({.window = len - 1}) != plain);  // the last row loses position 0
  CHECK(run({.scale = 0.1f}) != plain);
}

// The int8 layout of kernels/kv_layout.hpp: per token and KV head, head_dim int8 values and then
// one half-precision scale per group of 32 (here 32 and 8 values), max |x| / 127 of the group as
// stored: a whole group rotated by the 32-point Hadamard transform, the short last one as it is;
// each value is within half a step (and the scale's rounding) of that, and a head of zeros stores
// zeros with scale 0.
TEST_CASE("int8 KV: store_kv writes each head as int8 steps with its groups' scales after them") {
  const int kv_heads = 3, d = 40, block_size = 4, blocks = 2;
  const KvLayout layout{block_size, kv_heads, d, KvCacheType::int8};
  CHECK(ember::kernels::kv_head_bytes(layout) == d + 2 * 2);
  CHECK(ember::kernels::kv_token_bytes(layout) == kv_heads * (d + 4));
  CHECK(ember::kernels::kv_head_bytes(KvCacheType::int8, 64) == 68);  // 0.53x an f16 head of 64
  const std::int64_t width = kv_heads * d;
  auto k = random_floats(static_cast<std::size_t>(2 * width), 31);
  auto v = random_floats(static_cast<std::size_t>(2 * width), 32);
  std::fill(v.begin() + d, v.begin() + 2 * d, 0.0f);  // row 0's second head: all zeros
  std::vector<unsigned char> k_cache(
      static_cast<std::size_t>(blocks * block_size * ember::kernels::kv_token_bytes(layout)));
  std::vector<unsigned char> v_cache(k_cache.size());
  const std::int32_t slots[2] = {5, -1};  // row 1 is skipped
  store_kv(k.data(), v.data(), width, 2, slots, layout, k_cache.data(), v_cache.data());
  for (const auto* pair : {&k, &v}) {
    const auto& cache = pair == &k ? k_cache : v_cache;
    for (int h = 0; h < kv_heads; ++h) {
      const unsigned char* slice = cache.data() + 5 * ember::kernels::kv_token_bytes(layout) + h * (d + 4);
      std::vector<float> head(pair->begin() + h * d, pair->begin() + (h + 1) * d);
      ember::kernels::rotate_kv_groups(head.data(), d);
      for (int g = 0; g < 2; ++g) {
        const int from = 32 * g, n = g == 0 ? 32 : 8;
        const float* x = head.data() + from;
        std::uint16_t half = 0;
        std::memcpy(&half, slice + d + 2 * g, sizeof half);
        const float scale = ember::fp16_to_float(half);
        CHECK(scale == group_scale(x, n));
        for (int i = 0; i < n; ++i) {
          const int q = static_cast<signed char>(slice[from + i]);
          CHECK(std::abs(q) <= 127);
          CHECK(std::fabs(q * scale - x[i]) <= 0.5f * scale + 1e-3f * std::fabs(x[i]) + 1e-7f);
        }
        if (pair == &v && h == 1) CHECK(scale == 0.0f);
      }
    }
  }
  // Nothing was written for the skipped row (slot 6 stays zero).
  const auto* untouched = k_cache.data() + 6 * ember::kernels::kv_token_bytes(layout);
  CHECK(std::all_of(untouched, untouched + ember::kernels::kv_token_bytes(layout),
                    [](unsigned char b) { return b == 0; }));
}

// The rotation of an int8 group: orthonormal (norms kept), its own inverse, and what it is for:
// one large channel among small ones no longer sets a step that erases the others.
TEST_CASE("int8 KV: the Hadamard rotation keeps norms, undoes itself and spreads a large channel") {
  const int d = 72;  // two whole groups and a short one, which stays as it is
  auto x = random_floats(static_cast<std::size_t>(d), 77);
  x[5] = 100.0f;  // a large key channel
  auto y = x;
  ember::kernels::rotate_kv_groups(y.data(), d);
  double norm_x = 0, norm_y = 0;
  for (int i = 0; i < 32; ++i) norm_x += x[i] * x[i], norm_y += y[i] * y[i];
  CHECK(norm_y == doctest::Approx(norm_x).epsilon(1e-5));
  CHECK(std::equal(x.begin() + 64, x.end(), y.begin() + 64));
  float largest = 0;
  for (int i = 0; i < 32; ++i) largest = std::max(largest, std::fabs(y[i]));
  CHECK(largest < 100.0f / 5.0f);  // about 100 / sqrt(32)
  ember::kernels::rotate_kv_groups(y.data(), d);
  for (int i = 0; i < d; ++i) CHECK(y[i] == doctest::Approx(x[i]).epsilon(1e-5));
  // Stored and read back: the small values of the first group keep far more of themselves.
  const std::vector<float> rotated = stored_values(x, KvCacheType::int8, d);
  double error_rotated = 0, error_plain = 0;
  const float step = group_scale(x.data(), 32);
  for (int i = 0; i < 32; ++i) {
    if (i == 5) continue;
    error_rotated += std::pow(rotated[i] - x[i], 2);
    error_plain += std::pow(std::clamp(std::nearbyint(x[i] / step), -127.0f, 127.0f) * step - x[i], 2);
  }
  CHECK(error_rotated < 0.25 * error_plain);
}

// The vector forms serve every tier that has them: MinGW-w64 builds ran the scalar loops on AVX2
// CPUs while the vector forms hid behind the ELF-only target_clones condition, and the tests
// above, comparing every form they get with scalar, could not see it.
TEST_CASE("attention's vector loops serve each tier the CPU has, on every GCC/Clang build") {
  CHECK(vec_ops(CpuTier::scalar).tier == CpuTier::scalar);
#if defined(__GNUC__) && defined(__x86_64__) && !defined(EMBER_NO_CLONES)
  if (tier_available(CpuTier::avx2)) CHECK(vec_ops(CpuTier::avx2).tier == CpuTier::avx2);
  if (tier_available(CpuTier::avx512_vnni)) CHECK(vec_ops(CpuTier::avx512_vnni).tier == CpuTier::avx512_vnni);
#endif
#if defined(__aarch64__)
  CHECK(vec_ops(CpuTier::neon).tier == CpuTier::neon);
#endif
}
