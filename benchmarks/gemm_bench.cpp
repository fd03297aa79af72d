// INT8 vs FP32 Linear (oneDNN matmul through kernels/cpu/linear.hpp) on the default model's
// shapes (SmolLM2-135M: width 576, ffn 1536, vocab 49152), decode M = 1..64 (twice 32 rows for two-term inputs), 128 and prefill M = 512.
// "int8/" is what the engine runs (the VNNI GEMV for M <= 8 where the CPU has it, see
// kernels/cpu/gemv_int8.hpp); "int8_onednn/" forces oneDNN for every M, the GEMV's baseline.
// Counters: OPS (2*M*in*out per second, shown as G/s) and WeightBytes (weights read per second).
// "int8/decode_step" runs every Linear of one decode step in the engine's order (30 layers of
// qkv, wo, gate_up, down, then lm_head; two-term inputs where the engine has them) on M rows:
// 134.5 MB of INT8 weights per iteration, more than the caches hold, so at M = 1 WeightBytes is
// the rate decode streams its weights at (compare it with ember-bench's bandwidth probe). Tokens
// (M an iteration) is the most tokens/s M streams could decode were the products all of a step:
// the ceiling of tg128 at M = 1 and of tg128x32 at M = 32.
// "w4a8/" is the grouped kernel (kernels/cpu/gemm_grouped.hpp) on random nibbles, for every M,
// also on the shapes of a Llama-3.2-1B layer ("1b_" names); "w8a8-g32/" the same kernel on
// 8-bit groups with two-term activations, as the engine runs a Q8_0 lm_head;
// "w4a8/decode_step" is decode_step's sequence of Linears as the engine runs a Q4 file's (w4a8
// layers, a w8a8-g32 lm_head).
// "peak/vpmaddubsw" (x86): that instruction alone, the most a core issues per second, on 1 and 2
// threads: the multiply port of the avx2 tier's many-row products (tg128x32, prefill), whose
// 4-bit panels issue 8 of it and one vpmaddwd (the same pipe) a row and group of 8 outputs, and
// whose two-term lm_head one vpmaddwd per 16 multiply-adds. Their adds and float epilogue share
// the vector ports, so they run well below this rate (docs/benchmarks.md#avx2-floor-s37).
// Threads: $EMBER_BENCH_THREADS, default 2.
#include "bench_threads.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/linear.hpp"

#include <benchmark/benchmark.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace {

using namespace ember::kernels::cpu;

struct Shape {
  const char* name;
  std::int64_t in, out;
};

constexpr Shape kShapes[] = {
    {"qkv_576x960", 576, 960},
    {"o_576x576", 576, 576},
    {"gate_up_576x3072", 576, 3072},
    {"down_1536x576", 1536, 576},
    {"lm_head_576x49152", 576, 49152},
    {"1b_qkv_2048x3072", 2048, 3072},
    {"1b_o_2048x2048", 2048, 2048},
    {"1b_gate_up_2048x16384", 2048, 16384},
    {"1b_down_8192x2048", 8192, 2048},
    // A Qwen3-30B-A3B expert's gate|up and down: prefill gives each a few dozen rows.
    {"30b_expert_gate_up_2048x1536", 2048, 1536},
    {"30b_expert_down_768x2048", 768, 2048},
};

using ember::bench::bench_threads;

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

enum class Kind { int8, int8_onednn, fp32, w4a8, w8a8_g32 };

// Random values, one scale and offset for every group: the kernel's speed does not depend on
// them.
GroupedRowSource random_groups(std::int64_t in, int bits) {
  return [in, bits](std::int64_t row, std::uint8_t* values, float* scales, float* offsets) {
    std::mt19937 rng(static_cast<unsigned>(row));
    for (std::int64_t i = 0; i < in * bits / 8; ++i) values[i] = static_cast<std::uint8_t>(rng());
    for (std::int64_t g = 0; g < in / kWeightGroup; ++g) {
      scales[g] = 0.01f;
      offsets[g] = -0.08f;
    }
  };
}

std::unique_ptr<Linear> make(Kind kind, CpuContext& ctx, const std::vector<float>& w, Shape s) {
  switch (kind) {
    case Kind::w4a8: return make_grouped_linear(ctx, s.out, s.in, GroupFormat{4, false}, random_groups(s.in, 4));
    case Kind::w8a8_g32:
      return make_grouped_linear(ctx, s.out, s.in, GroupFormat{8, false}, random_groups(s.in, 8),
                                 ActivationQuant::residual);
    case Kind::int8: return make_int8_linear(ctx, w.data(), s.out, s.in);
    case Kind::int8_onednn: return make_int8_linear_onednn_only(ctx, w.data(), s.out, s.in);
    case Kind::fp32: break;
  }
  return make_fp32_linear(ctx, w.data(), s.out, s.in);
}

void bm_linear(benchmark::State& state, Shape shape, Kind kind) {
  const std::int64_t m = state.range(0);
  CpuContext ctx(bench_threads());
  const auto w = random_vector(static_cast<std::size_t>(shape.in * shape.out), 1);
  const auto x = random_vector(static_cast<std::size_t>(m * shape.in), 2);
  std::vector<float> y(static_cast<std::size_t>(m * shape.out));
  auto lin = make(kind, ctx, w, shape);
  lin->forward(ctx, x.data(), m, y.data());  // primitive creation outside the timing
  for (auto _ : state) {
    lin->forward(ctx, x.data(), m, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const double ops = 2.0 * static_cast<double>(m * shape.in * shape.out);
  const auto weight_bytes = static_cast<double>(lin->decode_bytes());
  state.counters["OPS"] = benchmark::Counter(ops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["WeightBytes"] = benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate,
                                                     benchmark::Counter::OneK::kIs1024);
  state.SetLabel(lin->implementation(ctx, m));
}

void bm_decode_step(benchmark::State& state, Kind kind) {
  const std::int64_t m = state.range(0);
  CpuContext ctx(bench_threads());
  struct Step {
    std::unique_ptr<Linear> linear;
    bool accumulate;
  };
  std::vector<Step> steps;
  double weight_bytes = 0;
  const auto add = [&](Shape s, ActivationQuant activations, bool accumulate) {
    const auto w = random_vector(static_cast<std::size_t>(s.in * s.out), static_cast<unsigned>(steps.size() + 1));
    if (kind == Kind::w4a8) {  // the lm_head (a Q8_0 tensor in a Q4 file) in 8-bit groups
      const Kind as = s.out == kShapes[4].out ? Kind::w8a8_g32 : Kind::w4a8;
      steps.push_back({make(as, ctx, w, s), accumulate});
    } else {
      steps.push_back({make_int8_linear(ctx, w.data(), s.out, s.in, activations), accumulate});
    }
    weight_bytes += static_cast<double>(steps.back().linear->decode_bytes());
  };
  for (int layer = 0; layer < 30; ++layer) {
    add(kShapes[0], ActivationQuant::residual, false);  // qkv
    add(kShapes[1], ActivationQuant::per_row, true);    // wo, into the residual stream
    add(kShapes[2], ActivationQuant::per_row, false);   // gate_up
    add(kShapes[3], ActivationQuant::residual, true);   // down, into the residual stream
  }
  add(kShapes[4], ActivationQuant::residual, false);  // lm_head
  const auto x = random_vector(static_cast<std::size_t>(m * 1536), 2);
  std::vector<float> y(static_cast<std::size_t>(m * 49152));
  for (Step& step : steps)
    step.linear->forward(ctx, x.data(), m, y.data(), step.accumulate);  // scratch, outside the timing
  for (auto _ : state) {
    for (Step& step : steps) step.linear->forward(ctx, x.data(), m, y.data(), step.accumulate);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["WeightBytes"] = benchmark::Counter(weight_bytes, benchmark::Counter::kIsIterationInvariantRate,
                                                     benchmark::Counter::OneK::kIs1000);
  state.counters["Tokens"] = benchmark::Counter(static_cast<double>(m), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(steps.front().linear->implementation(ctx, m));
}

#if defined(__x86_64__) || defined(_M_X64)
// kRounds rounds of twelve independent chains (more than the instruction's latency times the
// pipes it issues on), with acc's values in and out. Named variables, not an array: GCC kept an
// array of them on the stack, and each round's reload waited on the last round's store, which
// halved the rate measured (docs/benchmarks.md#peak-probe-s37). The empty asm after each keeps
// it in a register and in the loop.
constexpr int kChains = 12;
constexpr std::int64_t kRounds = 1 << 16;

[[gnu::target("avx2"), gnu::always_inline]] inline void maddubs_step(__m256i& a, __m256i b) {
  a = _mm256_maddubs_epi16(a, b);
  asm volatile("" : "+x"(a));
}

[[gnu::target("avx2"), gnu::noinline]] void maddubs_rounds(__m256i* acc) {
  const __m256i b = _mm256_set1_epi8(3);
  __m256i a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7],
          a8 = acc[8], a9 = acc[9], a10 = acc[10], a11 = acc[11];
  for (std::int64_t r = 0; r < kRounds; ++r) {
    maddubs_step(a0, b), maddubs_step(a1, b), maddubs_step(a2, b), maddubs_step(a3, b);
    maddubs_step(a4, b), maddubs_step(a5, b), maddubs_step(a6, b), maddubs_step(a7, b);
    maddubs_step(a8, b), maddubs_step(a9, b), maddubs_step(a10, b), maddubs_step(a11, b);
  }
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5;
  acc[6] = a6, acc[7] = a7, acc[8] = a8, acc[9] = a9, acc[10] = a10, acc[11] = a11;
}

[[gnu::target("avx2")]] void bm_maddubs_peak(benchmark::State& state) {
  if (!tier_available(CpuTier::avx2)) {
    state.SkipWithError("this CPU has no AVX2");
    return;
  }
  __m256i acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_epi8(static_cast<char>(i + 1));
  for (auto _ : state) maddubs_rounds(acc);
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations() * kRounds * kChains);
}
#endif

const bool registered = [] {
#if defined(__x86_64__) || defined(_M_X64)
  benchmark::RegisterBenchmark("peak/vpmaddubsw", bm_maddubs_peak)->Threads(1)->Threads(2)->UseRealTime();
#endif
  for (const auto& [kind, name] :
       {std::pair{Kind::int8, "int8/decode_step"}, std::pair{Kind::w4a8, "w4a8/decode_step"}})
    benchmark::RegisterBenchmark(name, bm_decode_step, kind)
        ->Arg(1)
        ->Arg(32)
        ->ArgName("M")
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  constexpr std::pair<Kind, const char*> kKinds[] = {{Kind::int8, "int8/"},
                                                     {Kind::int8_onednn, "int8_onednn/"},
                                                     {Kind::fp32, "fp32/"},
                                                     {Kind::w4a8, "w4a8/"},
                                                     {Kind::w8a8_g32, "w8a8-g32/"}};
  for (const Shape& s : kShapes)
    for (const auto& [kind, prefix] : kKinds) {
      auto* b = benchmark::RegisterBenchmark((std::string(prefix) + s.name).c_str(),
                                             [s, kind = kind](benchmark::State& st) { bm_linear(st, s, kind); });
      if (std::string(s.name).rfind("30b_", 0) == 0) {
        for (int m : {24, 32, 40, 48}) b->Arg(m);  // 512 rows x top-8 over 128 experts: 32 a expert
      } else if (kind == Kind::int8_onednn) {
        for (int m : {1, 8, 32, 64, 128}) b->Arg(m);  // the GEMV's range and just above it
      } else {
        for (int m : {1, 2, 4, 8, 16, 32, 64, 128, 512}) b->Arg(m);
      }
      b->ArgName("M")->Unit(benchmark::kMicrosecond)->UseRealTime();
    }
  return true;
}();

}  // namespace
