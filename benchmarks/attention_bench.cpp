// Paged attention (kernels/cpu/attention.hpp) at the default model's shape: 9 query heads,
// 3 KV heads, head_dim 64, 16-token blocks. Decode: B sequences, one row each over 512 cached
// tokens. Prefill: one 512-row sequence attending causally (512x512). f16 and f32 KV.
// With a sliding window (Gemma 3's 512 keys): decode rows over 4096 cached tokens, and a
// 512-row prefill chunk at positions 3584..4095; each row sees 512 keys, so these should cost
// about what decode_ctx512 and twice what prefill_512x512 do, not the 8x (decode) or ~15x
// (prefill) that reading every cached key would.
// Counter KvBytes: K and V bytes read per second. Threads: $EMBER_BENCH_THREADS, default 2.
#include "bench_threads.hpp"
#include "kernels/cpu/attention.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ember::kernels::cpu;
using ember::KvCacheType;

constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64, kBlock = 16, kContext = 512;
constexpr int kLongContext = 4096, kWindow = 512;

using ember::bench::bench_threads;

// seqs sequences of `context` tokens each in a shuffled pool; rows_per_seq query rows at the
// last positions of each; window: AttentionOptions::window.
void bm_attention(benchmark::State& state, KvCacheType dtype, int seqs, int rows_per_seq, int context = kContext,
                  int window = 0) {
  const KvLayout layout{kBlock, kKvHeads, kHeadDim, dtype};
  const int blocks_per_seq = context / kBlock;
  const int total_blocks = seqs * blocks_per_seq;
  const std::size_t values = static_cast<std::size_t>(total_blocks) * kBlock * kKvHeads * kHeadDim;
  const std::size_t elem = dtype == KvCacheType::f16 ? 2 : 4;
  std::vector<unsigned char> k(values * elem), v(values * elem);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  {  // fill through store_kv so f16 holds real halves
    std::vector<float> kv(static_cast<std::size_t>(kKvHeads * kHeadDim) * 2);
    for (std::int32_t slot = 0; slot < total_blocks * kBlock; ++slot) {
      for (auto& x : kv) x = dist(rng);
      store_kv(kv.data(), kv.data() + kKvHeads * kHeadDim, kKvHeads * kHeadDim, 1, &slot, layout, k.data(), v.data());
    }
  }
  std::vector<std::int32_t> pool(static_cast<std::size_t>(total_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<AttentionSeq> batch;
  std::vector<std::int32_t> positions;
  for (int s = 0; s < seqs; ++s) {
    batch.push_back({s * rows_per_seq, rows_per_seq, pool.data() + s * blocks_per_seq, blocks_per_seq});
    for (int r = 0; r < rows_per_seq; ++r) positions.push_back(context - rows_per_seq + r);
  }
  const std::int64_t width = kHeads * kHeadDim;
  const auto rows = static_cast<std::size_t>(seqs * rows_per_seq);
  std::vector<float> q(rows * static_cast<std::size_t>(width)), out(q.size());
  for (auto& x : q) x = dist(rng);
  CpuContext ctx(bench_threads());
  AttentionWorkspace workspace;
  AttentionOptions options;
  options.window = window;
  for (auto _ : state) {
    paged_attention(q.data(), width, positions.data(), batch.data(), seqs, kHeads, layout, k.data(), v.data(),
                    out.data(), width, ctx, workspace, options);
    benchmark::DoNotOptimize(out.data());
  }
  // Every row reads K and V of the positions it sees once per KV head (query heads of a group
  // share the read).
  double kv_reads = 0.0;
  for (std::int32_t p : positions) {
    const double seen = window > 0 ? std::min(p + 1, window) : p + 1.0;
    kv_reads += seen * kKvHeads * kHeadDim * 2.0 * static_cast<double>(elem);
  }
  state.counters["KvBytes"] =
      benchmark::Counter(kv_reads, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1024);
  state.counters["Rows"] = benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kIsIterationInvariantRate);
}

const bool registered = [] {
  for (KvCacheType dt : {KvCacheType::f16, KvCacheType::f32}) {
    const std::string tag = dt == KvCacheType::f16 ? "f16" : "f32";
    for (int seqs : {1, 8})
      benchmark::RegisterBenchmark(("decode_ctx512_" + tag + "/seqs:" + std::to_string(seqs)).c_str(),
                                   [dt, seqs](benchmark::State& st) { bm_attention(st, dt, seqs, 1); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    benchmark::RegisterBenchmark(("prefill_512x512_" + tag).c_str(),
                                 [dt](benchmark::State& st) { bm_attention(st, dt, 1, kContext); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    const std::string win = "_win" + std::to_string(kWindow) + "_" + tag;
    for (int seqs : {1, 8})
      benchmark::RegisterBenchmark(
          ("decode_ctx" + std::to_string(kLongContext) + win + "/seqs:" + std::to_string(seqs)).c_str(),
          [dt, seqs](benchmark::State& st) { bm_attention(st, dt, seqs, 1, kLongContext, kWindow); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    benchmark::RegisterBenchmark(
        ("prefill_512x" + std::to_string(kLongContext) + win).c_str(),
        [dt](benchmark::State& st) { bm_attention(st, dt, 1, kContext, kLongContext, kWindow); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
