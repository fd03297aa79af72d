// A mixture-of-experts layer's decode step on the grouped kernel, without a model file: a pool of
// experts (OLMoE-1B-7B's 64 of gate|up 2048 -> 2048 and down 1024 -> 2048, or Qwen3-30B-A3B's
// 128 of 2048 -> 1536 and 768 -> 2048, random 4-bit groups), more than the caches hold, and per
// iteration one row through 8 of them chosen at random, as CpuOps::routed_feed_forward runs them
// (forward_gathered for gate|up, silu_mul, forward_stacked for down). WeightBytes is the rate the
// chosen experts' weights stream at; "bandwidth_probe" is ember-bench's probe in the same
// process, the ceiling to compare it with. "experts_only" runs the two products on activations
// quantized once (gemm_grouped_batch alone).
// Threads: $EMBER_BENCH_THREADS, default 2.
#include "bandwidth_probe.hpp"
#include "bench_threads.hpp"
#include "kernels/cpu/linear.hpp"
#include "kernels/cpu/ops.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace ember::kernels::cpu;

using ember::bench::bench_threads;

struct MoeShape {
  const char* name;
  std::int64_t width, ffn;
  int experts, used;
};

constexpr MoeShape kOlmoe{"olmoe", 2048, 1024, 64, 8};
constexpr MoeShape kQwen30b{"30b", 2048, 768, 128, 8};

GroupedRowSource random_groups(std::int64_t in, unsigned seed) {
  return [in, seed](std::int64_t row, std::uint8_t* values, float* scales, float* offsets) {
    std::minstd_rand rng(static_cast<unsigned>(row) * 7919u + seed);
    for (std::int64_t i = 0; i < in / 2; ++i) values[i] = static_cast<std::uint8_t>(rng() >> 7);
    for (std::int64_t g = 0; g < in / kWeightGroup; ++g) {
      scales[g] = 0.01f;
      offsets[g] = -0.08f;
    }
  };
}

struct Pool {
  std::vector<std::unique_ptr<Linear>> gate_up, down;
};

Pool make_pool(CpuContext& ctx, const MoeShape& s) {
  Pool p;
  for (int e = 0; e < s.experts; ++e) {
    p.gate_up.push_back(make_grouped_linear(ctx, 2 * s.ffn, s.width, GroupFormat{4, false},
                                            random_groups(s.width, static_cast<unsigned>(2 * e))));
    p.down.push_back(make_grouped_linear(ctx, s.width, s.ffn, GroupFormat{4, false},
                                         random_groups(s.ffn, static_cast<unsigned>(2 * e + 1))));
  }
  return p;
}

// `used` distinct experts of `experts`, in increasing order (the order routing runs them in).
void choose(std::minstd_rand& rng, int experts, int used, std::vector<int>& chosen) {
  std::vector<bool> taken(static_cast<std::size_t>(experts));
  chosen.clear();
  while (static_cast<int>(chosen.size()) < used) {
    const int e = static_cast<int>(rng() % static_cast<unsigned>(experts));
    if (!taken[static_cast<std::size_t>(e)]) taken[static_cast<std::size_t>(e)] = true, chosen.push_back(e);
  }
  std::sort(chosen.begin(), chosen.end());
}

void bm_moe_decode(benchmark::State& state, MoeShape s, bool experts_only) {
  CpuContext ctx(bench_threads());
  Pool pool = make_pool(ctx, s);
  std::mt19937 init(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> h(static_cast<std::size_t>(s.width)), gate_up(static_cast<std::size_t>(s.used * 2 * s.ffn)),
      act(static_cast<std::size_t>(s.used * s.ffn)), out(static_cast<std::size_t>(s.used * s.width));
  for (float& v : h) v = dist(init);
  std::vector<std::int64_t> rows(static_cast<std::size_t>(s.used), 1);
  std::vector<std::int32_t> gather(static_cast<std::size_t>(s.used), 0);
  std::vector<Linear*> gu(static_cast<std::size_t>(s.used)), dn(static_cast<std::size_t>(s.used));
  std::vector<int> chosen;
  StackedScratch scratch;
  GroupedActivations hq, aq;
  std::minstd_rand rng(11);
  double bytes = 0;
  for (auto _ : state) {
    choose(rng, s.experts, s.used, chosen);
    for (int j = 0; j < s.used; ++j) {
      gu[static_cast<std::size_t>(j)] =
          pool.gate_up[static_cast<std::size_t>(chosen[static_cast<std::size_t>(j)])].get();
      dn[static_cast<std::size_t>(j)] = pool.down[static_cast<std::size_t>(chosen[static_cast<std::size_t>(j)])].get();
      bytes += static_cast<double>(gu[static_cast<std::size_t>(j)]->decode_bytes() +
                                   dn[static_cast<std::size_t>(j)]->decode_bytes());
    }
    if (experts_only) {
      forward_stacked(ctx, gu.data(), rows.data(), s.used, gate_up.data(), gate_up.data(), scratch);
      forward_stacked(ctx, dn.data(), rows.data(), s.used, act.data(), out.data(), scratch);
    } else {
      forward_gathered(ctx, gu.data(), rows.data(), s.used, h.data(), 1, gather.data(), gate_up.data(), scratch);
      silu_mul(gate_up.data(), s.used, s.ffn, act.data(), ctx.threads);
      forward_stacked(ctx, dn.data(), rows.data(), s.used, act.data(), out.data(), scratch);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["WeightBytes"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

void bm_probe(benchmark::State& state) {
  ember::bench::BandwidthProbe probe(bench_threads());
  double best = 0;
  for (auto _ : state) best = std::max(best, probe.measure(3).ceiling());
  state.counters["ReadBytes"] =
      benchmark::Counter(best, benchmark::Counter::kDefaults, benchmark::Counter::OneK::kIs1000);
}

const bool registered = [] {
  benchmark::RegisterBenchmark("bandwidth_probe", bm_probe)
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const MoeShape& s : {kOlmoe, kQwen30b}) {
    benchmark::RegisterBenchmark((std::string("moe_decode/") + s.name).c_str(), bm_moe_decode, s, false)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((std::string("experts_only/") + s.name).c_str(), bm_moe_decode, s, true)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
