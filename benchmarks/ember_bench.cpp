// ember-bench: end-to-end throughput of the public API on a model, as ratios you can trust:
// every configuration runs in the same process, interleaved, repeated, and reported as median,
// min and max.
//
//   ember-bench [--model PATH] [--device cpu|cuda] [--workload W[,...]] ...  (--help lists all)
//
// pp512: prompt processing of 512 tokens (tokens/s of the prefill step).
// tg128: generation of 128 tokens after a 16-token prompt (tokens/s of the decode steps).
// tg128x32: 32 such requests at once; aggregate generated tokens/s over the wall time.
// --device cuda runs on the first GPU; "both" precisions are int8 and the device's baseline
// (fp32 on the CPU, fp16 on CUDA).
// It also measures this machine's memory read bandwidth and reports the generation ceiling it
// implies: bandwidth / weight bytes read per generated token. The bandwidth is measured two
// independent ways side by side (bandwidth_probe.hpp) just before each tg128 run, paired with it,
// and at the end; the ceiling is the best of all those readings, with a warning when the two ways
// disagree or a run beats the ceiling (--no-bandwidth skips that, and its 1 GiB buffer, when peak
// memory is being measured).
// shared: N requests (default 32) arriving together, each a 512-token common system prompt plus
// 32 unique tokens, 64 generated tokens each, under four configurations: (a) fp32 one at a time
// without prefix cache (the plain-engine baseline), (b) int8 one at a time, (c) int8 with
// continuous batching, (d) int8 with batching and the prefix cache; then the time to first token
// of a 1,024-token prompt on a prefix-cache miss and on a hit, and decode-only throughput of N
// streams against one. --configs picks some of the configurations (e.g. "ad"); the last two
// checks run only when all four are chosen.
// chat: one conversation of 8 turns (--turns) (64-token system prompt; per turn 48 user tokens
// and a 32-token reply), each turn's prompt the whole conversation so far, under the same
// configuration letters (batching does not matter for one conversation; (d) reuses the prefix).
// frames: a game loop's Engine::step(budget) once per frame, unbudgeted and with 16, 8 and 4 ms:
// eight streams decode 64 tokens each while a 2,000-token prompt prefills; per budget the
// step() wall time (p50, p99, worst), the rows per second inside step() and the long prompt's
// time to first token.
// json: structured output (json_workload.hpp): schema compile time, per-token mask cost (mean,
// p99) against the model's vocabulary, and decode tokens/s with and without a JSON Schema at
// batch 1 and with 16 streams.
// edit, longctx: speculation on and off (on the edit passage and tg128), f16 against int8 KV
// at 4,096 tokens of context (speculation_workload.hpp).
// newlen: a prefill of a length the engine has not seen before against the same prefill
// repeated (prefix cache off), for each --precision, after warming up on other lengths: what a
// chat pays when each turn's prompt has a new length.
// load: cold start. Engine::open() (int8) with an empty packed-weight cache (the weights are
// prepared and the cache written) and again with that cache, interleaved, with the time of each
// load phase and from open() to the first token of a short prompt. Process start-up (dynamic
// linking) is not included: time `ember-generate --weight-cache DIR --max-tokens 1` for that.
// embed: Engine::embed of the 200 golden sentences of all-MiniLM-L6-v2 (embed_workload.hpp) at
// each --precision, with --model the embedding model; tokens/s from the median of --repeats.
#include "bandwidth_probe.hpp"
#include "bench_args.hpp"
#include "embed_workload.hpp"
#include "frames_workload.hpp"
#include "json_workload.hpp"
#include "load_workload.hpp"
#include "routing_profile.hpp"
#include "serving_workload.hpp"
#include "speculation_workload.hpp"

#include <ember/ember.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

using ember::bench::Args;

using ember::bench::synthetic_prompt;

// tg128x32: `streams` requests decoded together; aggregate generated tokens per second.
double run_streams(ember::Engine& engine, int streams, int salt, const std::vector<ember::AdapterScale>& adapters) {
  std::vector<ember::RequestHandle> handles;
  const auto start = Clock::now();
  for (int i = 0; i < streams; ++i) {
    ember::Request request;
    request.sampling.temperature = 0;
    request.sampling.ignore_eos = true;
    request.sampling.max_tokens = 128;
    request.sampling.adapters = adapters;
    request.prompt_tokens = synthetic_prompt(engine, 16, salt * 100 + i);
    handles.push_back(engine.submit(request));
  }
  int generated = 0;
  for (auto& h : handles) generated += h.wait().generated_tokens;
  return generated / std::chrono::duration<double>(Clock::now() - start).count();
}

// `adapters`: what each request runs with (--lora).
double run_once(ember::Engine& engine, const std::string& workload, int salt,
                const std::vector<ember::AdapterScale>& adapters) {
  if (workload == "tg128x32") return run_streams(engine, 32, salt, adapters);
  ember::Request request;
  request.sampling.adapters = adapters;
  request.sampling.temperature = 0;
  request.sampling.ignore_eos = true;
  const int prompt_len = workload == "pp512" ? 512 : 16;
  request.prompt_tokens = synthetic_prompt(engine, prompt_len, salt);
  request.sampling.max_tokens = workload == "pp512" ? 1 : 128;
  const ember::Completion c = engine.generate(request);
  if (workload == "pp512") return c.prompt_tokens / (c.timings.prefill_ms / 1000.0);
  return (c.generated_tokens - 1) / (c.timings.decode_ms / 1000.0);
}

// Passes of each bandwidth method (bandwidth_probe.hpp): before each tg128 run (short beside the
// run itself, docs/benchmarks.md#bench-bandwidth-passes), and once at the end.
constexpr int kPairedPasses = 3;
constexpr int kFinalPasses = 8;

// Weight bytes a decode step reads: what the engine says its matrices take, or where it does not
// say, every matrix once (1 byte a weight in INT8, 2 in FP16, 4 in FP32; the per-channel scales
// are negligible); plus one embedding row.
double weight_bytes_per_token(const ember::ModelInfo& info, const std::string& precision) {
  const double d = info.embedding;
  if (info.decode_weight_bytes > 0) return static_cast<double>(info.decode_weight_bytes) + d;
  const double matrices = static_cast<double>(info.parameters) - d * info.vocab;  // not the embedding table
  const double lm_head = d * info.vocab;
  const double bytes_per_weight = precision == "fp32" ? 4.0 : precision == "fp16" ? 2.0 : 1.0;
  return (matrices + lm_head) * bytes_per_weight;
}

struct Stats {
  double median, min, max;
};

Stats stats_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

ember::EngineOptions options_for(const std::string& precision) {
  ember::EngineOptions options;
  options.precision = precision == "fp32"   ? ember::Precision::fp32
                      : precision == "fp16" ? ember::Precision::fp16
                                            : ember::Precision::int8;
  if (precision == "w8a8") options.weight_format = ember::WeightFormat::w8a8;
  return options;
}

// The ceiling of one tg128 configuration, printed under its row and added to its JSON entry `j`:
// its runs (tokens/s) against `reading` (the best of `passes` passes a method) and each against
// the reading just before it (`before`), and a warning if any run beat its ceiling.
void add_ceiling(nlohmann::json& j, const std::vector<double>& runs, double bytes,
                 const ember::bench::BandwidthProbe& probe, const ember::bench::BandwidthReading& reading, int passes,
                 const std::vector<ember::bench::BandwidthReading>& before, const std::string& what) {
  const double bandwidth = reading.ceiling();
  const Stats s = stats_of(runs);
  j["bandwidth_bytes_per_s"] = bandwidth;  // the probe's ceiling: the larger of its two methods
  j["bandwidth_probe"] = ember::bench::to_json(probe, reading, passes);
  j["bandwidth_ceiling_tokens_per_s"] = bandwidth / bytes;
  j["fraction_of_ceiling"] = s.median / (bandwidth / bytes);
  std::vector<double> fractions, ceilings, openmp, pinned;  // run i against the reading before it
  int disagreeing = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fractions.push_back(runs[i] * bytes / before[i].ceiling());
    ceilings.push_back(before[i].ceiling());
    openmp.push_back(before[i].openmp);
    pinned.push_back(before[i].pinned);
    disagreeing += before[i].disagreement() > ember::bench::kBandwidthDisagreement;
  }
  const Stats paired = stats_of(fractions), o = stats_of(openmp), q = stats_of(pinned);
  j["fraction_of_ceiling_paired"] = {{"median", paired.median}, {"min", paired.min}, {"max", paired.max}};
  j["bandwidth_before_each_run"] = ceilings;
  j["bandwidth_before_each_run_openmp"] = openmp;
  j["bandwidth_before_each_run_pinned"] = pinned;
  j["bandwidth_passes_before_each_run"] = kPairedPasses;
  std::printf(
      "         %.1f MB of weights per token; read bandwidth %.1f GB/s -> ceiling %.0f tokens/s; "
      "reached %.0f %%\n",
      bytes / 1e6, bandwidth / 1e9, bandwidth / bytes, 100.0 * s.median / (bandwidth / bytes));
  std::printf(
      "         each run against the bandwidth measured just before it: median %.0f %% "
      "(min %.0f, max %.0f)\n",
      100.0 * paired.median, 100.0 * paired.min, 100.0 * paired.max);
  std::printf(
      "         bandwidth before the runs (best of %d passes each): OpenMP median %.1f GB/s "
      "[%.1f, %.1f], pinned %.1f [%.1f, %.1f]; %d of %zu readings disagree by > %.0f %%\n",
      kPairedPasses, o.median / 1e9, o.min / 1e9, o.max / 1e9, q.median / 1e9, q.min / 1e9, q.max / 1e9, disagreeing,
      runs.size(), 100 * ember::bench::kBandwidthDisagreement);
  std::vector<std::string> warnings;
  if (const std::string w = ember::bench::disagreement_warning(reading); !w.empty()) warnings.push_back(w);
  // The reported ceiling is the best of every reading (the paired ones included): a run faster
  // than it means the probe under-measures this machine.
  const double worst = s.max * bytes / bandwidth;
  if (const std::string w = ember::bench::over_ceiling_warning(what, worst, bytes); !w.empty()) {
    std::printf("         %s\n", w.c_str());
    warnings.push_back(w);
  }
  j["warnings"] = warnings;
}

}  // namespace

nlohmann::json result_json(const Args& args, const std::string& workload, const std::string& config,
                           const ember::bench::ServingResult& r) {
  return {{"engine", "ember"},
          {"workload", workload},
          {"configuration", config},
          {"threads", args.threads},
          {"requests", r.requests},
          {"ttft_ms", {{"mean", r.mean_ttft_ms}, {"p99", r.p99_ttft_ms}}},
          {"response_ms", {{"mean", r.mean_response_ms}, {"p50", r.p50_response_ms}, {"p99", r.p99_response_ms}}},
          {"tpot_ms", r.mean_tpot_ms},
          {"requests_per_s", r.requests / r.wall_s},
          {"generated_tokens_per_s", r.generated_tokens_per_s},
          {"wall_s", r.wall_s},
          {"split_ms",
           {{"queue", r.mean_queue_ms},
            {"prefill", r.mean_prefill_ms},
            {"decode", r.mean_decode_ms},
            {"response", r.mean_delivery_ms}}},
          {"reused_prompt_fraction", r.reused_prompt_fraction}};
}

// The shared-prompt or chat workload under the configurations named by --configs.
nlohmann::json run_serving(const Args& args, const std::string& workload) {
  using ember::bench::ServingConfig;
  const ServingConfig all[] = {
      {"(a) fp32, one at a time, no prefix cache", ember::Precision::fp32, false, false},
      {"(b) int8, one at a time, no prefix cache", ember::Precision::int8, false, false},
      {"(c) int8 + continuous batching", ember::Precision::int8, true, false},
      {"(d) int8 + batching + prefix cache", ember::Precision::int8, true, true},
      {"(e) (d) + speculative_tokens " + std::to_string(args.speculative_tokens), ember::Precision::int8, true, true,
       args.speculative_tokens},
  };
  ember::bench::ServingShape shape;
  shape.requests = args.requests;
  ember::bench::ChatShape chat;
  chat.turns = args.turns;
  if (workload == "shared")
    std::printf("shared prompt: %d requests x (%d common + %d unique prompt tokens, %d generated), %d threads\n",
                shape.requests, shape.system_tokens, shape.unique_tokens, shape.generated_tokens, args.threads);
  else
    std::printf("chat: %d turns (%d-token system prompt; %d user tokens and a %d-token reply a turn), %d threads\n",
                chat.turns, chat.system_tokens, chat.user_tokens, chat.reply_tokens, args.threads);
  std::printf("%-44s %10s %10s %12s %12s %10s | %8s %8s %8s %8s %6s\n", "configuration", "TTFT mean", "TTFT p99",
              "resp. mean", "resp. p99", "gen tok/s", "queue", "prefill", "decode", "deliver", "reuse");
  nlohmann::json out = nlohmann::json::array();
  std::map<char, ember::bench::ServingResult> results;
  for (const char letter : args.configs) {
    const ServingConfig& c = all[letter - 'a'];
    const auto r = workload == "shared" ? ember::bench::run_shared_prompt(args.model, args.threads, c, shape)
                                        : ember::bench::run_chat(args.model, args.threads, c, chat);
    results[letter] = r;
    std::printf("%-44s %8.0fms %8.0fms %10.0fms %10.0fms %10.1f | %6.0fms %6.0fms %6.0fms %6.2fms %5.0f%%\n",
                c.name.c_str(), r.mean_ttft_ms, r.p99_ttft_ms, r.mean_response_ms, r.p99_response_ms,
                r.generated_tokens_per_s, r.mean_queue_ms, r.mean_prefill_ms, r.mean_decode_ms, r.mean_delivery_ms,
                100 * r.reused_prompt_fraction);
    out.push_back(result_json(args, workload, c.name, r));
  }
  if (results.count('d') && results.count('e'))
    std::printf("(e) throughput / (d) = %.3fx (target >= 0.97x)\n",
                results['e'].generated_tokens_per_s / results['d'].generated_tokens_per_s);
  if (results.count('a') && results.count('d'))
    std::printf("(d) mean response / (a) = %.3f (target <= 0.25)\n",
                results['d'].mean_response_ms / results['a'].mean_response_ms);
  if (workload == "shared" && results.count('b') && results.count('c')) {
    // (b) and (c) prefill the same prompt tokens, and (b)'s prefills run back to back at the
    // full prompt-processing rate: even if (c) decoded in no time at all, its wall time could not
    // fall below (b)'s total prefill time. That bounds the ratio whatever the decoding does.
    const ember::bench::ServingResult& b = results['b'];
    const double b_prefill_s = b.mean_prefill_ms * b.requests / 1000.0;
    std::printf(
        "(c) throughput / (b) = %.2fx (target >= 6x; at most %.2fx even if (c) decoded for free: "
        "(b) spends %.1f of its %.1f s prefilling what (c) prefills too)\n",
        results['c'].generated_tokens_per_s / b.generated_tokens_per_s, b.wall_s / b_prefill_s, b_prefill_s, b.wall_s);
  }
  if (workload == "shared" && args.configs == "abcd") {
    // (c) and (b) both process 32 x 544 prompt tokens, which bounds (c)/(b) far below 6x on a
    // machine whose prompt processing is compute bound; `--workload tg128,tg128x32` shows what
    // batching adds to decoding alone.
    const auto [miss, hit] = ember::bench::prefix_hit_ttft(args.model, args.threads, 1024);
    std::printf("1,024-token prompt: TTFT %.1f ms on a prefix-cache miss, %.1f ms on a hit (%.1fx, target >= 10x)\n",
                miss, hit, miss / hit);
    out.push_back({{"engine", "ember"},
                   {"workload", "prefix_hit_1024"},
                   {"threads", args.threads},
                   {"ttft_miss_ms", miss},
                   {"ttft_hit_ms", hit},
                   {"ratio", miss / hit}});
  }
  return out;
}

nlohmann::json run_load(const Args& args) {
  ember::EngineOptions options = options_for(args.precisions.front());
  options.threads = args.threads;
  const auto result = ember::bench::run_load(args.model, options, args.repeats);
  nlohmann::json out = nlohmann::json::array();
  std::printf("cold start (%s, %d threads, %d repeats; median [min, max] ms)\n", args.precisions.front().c_str(),
              args.threads, args.repeats);
  const std::pair<const char*, const std::vector<ember::bench::LoadRun>*> kinds[] = {{"cold (no cache)", &result.cold},
                                                                                     {"warm (cache)", &result.warm}};
  for (const auto& [kind, runs] : kinds) {
    std::vector<double> open, first, peak, resident;
    std::map<std::string, std::vector<double>> phases;
    for (const auto& r : *runs) {
      open.push_back(r.open_ms);
      first.push_back(r.first_token_ms);
      peak.push_back(r.peak_rss_mb);
      resident.push_back(r.resident_mb);
      for (const auto& [phase, ms] : r.phase_ms) phases[phase].push_back(ms);
    }
    const Stats o = stats_of(open), f = stats_of(first), p = stats_of(peak), res = stats_of(resident);
    std::printf("%-16s open %7.0f [%.0f, %.0f]  open to first token %7.0f [%.0f, %.0f]\n", kind, o.median, o.min, o.max,
                f.median, f.min, f.max);
    std::printf(
        "%16s peak RSS during open %.0f MiB, resident after open %.0f MiB (medians; peak / "
        "resident %.2f)\n",
        "", p.median, res.median, res.median > 0 ? p.median / res.median : 0.0);
    nlohmann::json phase_json;
    std::printf("%16s", "");
    for (const auto& [phase, values] : phases) {
      phase_json[phase] = stats_of(values).median;
      std::printf(" %s %.0f", phase.c_str(), stats_of(values).median);
    }
    std::printf("\n");
    out.push_back({{"engine", "ember"},
                   {"workload", "load"},
                   {"cache", kind},
                   {"threads", args.threads},
                   {"precision", args.precisions.front()},
                   {"open_ms", {{"median", o.median}, {"min", o.min}, {"max", o.max}}},
                   {"open_to_first_token_ms", {{"median", f.median}, {"min", f.min}, {"max", f.max}}},
                   {"phase_ms_median", phase_json},
                   {"open_runs_ms", open},
                   {"peak_rss_mib", {{"median", p.median}, {"min", p.min}, {"max", p.max}}},
                   {"resident_after_open_mib", {{"median", res.median}, {"min", res.min}, {"max", res.max}}}});
  }
  return out;
}

// The embedding workload (embed_workload.hpp) on --model (an embedding model: scripts/
// fetch-model.sh minilm), at each --precision.
nlohmann::json run_embed(const Args& args) {
  const std::vector<std::string> texts =
      ember::bench::embed_texts(std::string(EMBER_SOURCE_DIR) + "/tests/data/reference/minilm_embeddings.json");
  nlohmann::json out = nlohmann::json::array();
  std::printf("embed (%d threads, %zu sentences, %d repeats; median)\n", args.threads, texts.size(), args.repeats);
  for (const std::string& p : args.precisions) {
    ember::EngineOptions options = options_for(p);
    options.threads = args.threads;
    const auto r = ember::bench::run_embed(args.model, options, texts, args.repeats);
    std::printf("%-6s %6d tokens  %8.1f ms  %9.1f tokens/s\n", p.c_str(), r.tokens, r.median_s * 1000, r.tokens_per_s);
    out.push_back({{"engine", "ember"},
                   {"workload", "embed"},
                   {"precision", p},
                   {"threads", args.threads},
                   {"texts", r.texts},
                   {"tokens", r.tokens},
                   {"seconds", r.seconds},
                   {"median_s", r.median_s},
                   {"tokens_per_s", r.tokens_per_s}});
  }
  return out;
}

// The frame-budget workload (frames_workload.hpp): unbudgeted, then budgets of 16, 8 and 4 ms,
// at --precision (int8 unless one is named).
nlohmann::json run_frames(const Args& args) {
  const std::string precision = args.both_precisions ? "int8" : args.precisions.front();
  const auto runs = ember::bench::run_frames(args.model, options_for(precision), args.threads, {0, 16, 8, 4});
  nlohmann::json out = nlohmann::json::array();
  std::printf("frames (%s, %d threads): a 2,000-token prompt prefilling while 8 streams decode 64 tokens\n",
              precision.c_str(), args.threads);
  std::printf("%-12s %7s %9s %9s %9s %12s %10s %14s\n", "budget", "frames", "p50 ms", "p99 ms", "worst ms", "tokens/s",
              "vs none", "long TTFT ms");
  const double unbudgeted = runs.empty() ? 0 : runs[0].tokens_per_s;
  for (const auto& r : runs) {
    const std::string name = r.budget_ms > 0 ? std::to_string(static_cast<int>(r.budget_ms)) + " ms" : "none";
    std::printf("%-12s %7d %9.2f %9.2f %9.2f %12.1f %9.2fx %14.0f\n", name.c_str(), r.frames, r.p50_ms, r.p99_ms,
                r.worst_ms, r.tokens_per_s, unbudgeted > 0 ? r.tokens_per_s / unbudgeted : 0.0, r.long_ttft_ms);
    out.push_back({{"engine", "ember"},
                   {"workload", "frames"},
                   {"precision", precision},
                   {"threads", args.threads},
                   {"budget_ms", r.budget_ms},
                   {"frames", r.frames},
                   {"step_ms", {{"p50", r.p50_ms}, {"p99", r.p99_ms}, {"worst", r.worst_ms}}},
                   {"tokens_per_s", r.tokens_per_s},
                   {"long_prompt_ttft_ms", r.long_ttft_ms}});
  }
  return out;
}

// The structured-output workload (json_workload.hpp).
nlohmann::json run_json(const Args& args) {
  const auto r = ember::bench::run_json_workload(args.model, args.threads, args.repeats);
  std::printf("json (int8, %d threads): %s, vocabulary %d (%zu trie nodes, built in %.1f ms)\n", args.threads,
              r.model.c_str(), r.vocab, r.trie_nodes, r.trie_build_ms);
  std::printf("schema compile: mean %.2f ms, max %.2f ms\n", r.compile_ms_mean, r.compile_ms_max);
  std::printf("mask per token: mean %.1f us, p50 %.1f us, p99 %.1f us over %d steps; %d uncached, mean %.1f us\n",
              r.mask_us_mean, r.mask_us_p50, r.mask_us_p99, r.mask_steps, r.uncached_steps, r.uncached_mask_us_mean);
  std::printf(
      "sampler step asking the grammar about its pick (greedy, no mask): mean %.1f us, p50 %.1f us, p99 %.1f us"
      " (without a grammar: p50 %.1f us)\n",
      r.check_us_mean, r.check_us_p50, r.check_us_p99, r.free_step_us_p50);
  std::printf(
      "decode tokens/s  batch 1: %.1f free, %.1f with schema (%.2fx)   16 streams: %.1f free, %.1f with schema "
      "(%.2fx)\n",
      r.tps_b1_free, r.tps_b1_schema, r.tps_b1_schema / r.tps_b1_free, r.tps_b16_free, r.tps_b16_schema,
      r.tps_b16_schema / r.tps_b16_free);
  std::printf("median of paired schema / free ratios: batch 1 %.2fx, 16 streams %.2fx\n", r.ratio_b1, r.ratio_b16);
  std::printf(
      "uniqueItems checked while decoding (%d steps): mask per token mean %.1f us (grammar alone %.1f us), "
      "sampler step p50 %.1f us (%.1f us)\n",
      r.unique_steps, r.unique_mask_us_mean, r.unique_plain_mask_us_mean, r.unique_check_us_p50,
      r.unique_plain_check_us_p50);
  return {{"engine", "ember"},
          {"workload", "json"},
          {"model", r.model},
          {"threads", args.threads},
          {"vocab", r.vocab},
          {"trie_nodes", r.trie_nodes},
          {"trie_build_ms", r.trie_build_ms},
          {"compile_ms", {{"mean", r.compile_ms_mean}, {"max", r.compile_ms_max}}},
          {"mask_us",
           {{"mean", r.mask_us_mean},
            {"p50", r.mask_us_p50},
            {"p99", r.mask_us_p99},
            {"uncached_mean", r.uncached_mask_us_mean},
            {"steps", r.mask_steps},
            {"uncached_steps", r.uncached_steps}}},
          {"check_us",
           {{"mean", r.check_us_mean},
            {"p50", r.check_us_p50},
            {"p99", r.check_us_p99},
            {"free_step_p50", r.free_step_us_p50}}},
          {"paired_ratio", {{"batch1", r.ratio_b1}, {"streams16", r.ratio_b16}}},
          {"unique_items_us",
           {{"mask_mean", r.unique_mask_us_mean},
            {"plain_mask_mean", r.unique_plain_mask_us_mean},
            {"check_p50", r.unique_check_us_p50},
            {"plain_check_p50", r.unique_plain_check_us_p50}}},
          {"tokens_per_s",
           {{"batch1_free", r.tps_b1_free},
            {"batch1_schema", r.tps_b1_schema},
            {"streams16_free", r.tps_b16_free},
            {"streams16_schema", r.tps_b16_schema}}}};
}

// Speculation on and off (speculation_workload.hpp).
nlohmann::json run_edit(const Args& args) {
  const auto rows = ember::bench::run_edit_workload(args.model, args.threads, args.repeats, args.speculative_tokens);
  std::printf("edit and tg128 (int8, %d threads, %d repeats): decode tokens/s, speculation off and on\n", args.threads,
              args.repeats);
  std::printf("%-7s %-11s %10s %10s %10s %10s %10s %10s %9s %8s\n", "request", "speculative", "median", "min", "max",
              "vs off", "generated", "proposed", "accepted", "same");
  nlohmann::json out = nlohmann::json::array();
  std::map<std::string, double> off;
  for (const auto& r : rows) {
    if (r.speculative_tokens == 0) off[r.request] = r.decode_tokens_per_s.median;
    const double ratio = r.decode_tokens_per_s.median / off[r.request];
    std::printf("%-7s %-11d %10.1f %10.1f %10.1f %9.2fx %10d %10d %9d %8s\n", r.request.c_str(), r.speculative_tokens,
                r.decode_tokens_per_s.median, r.decode_tokens_per_s.min, r.decode_tokens_per_s.max, ratio, r.generated,
                r.proposed, r.accepted, r.same_tokens ? "yes" : "NO");
    out.push_back({{"engine", "ember"},
                   {"workload", "edit"},
                   {"request", r.request},
                   {"threads", args.threads},
                   {"speculative_tokens", r.speculative_tokens},
                   {"decode_tokens_per_s",
                    {{"median", r.decode_tokens_per_s.median},
                     {"min", r.decode_tokens_per_s.min},
                     {"max", r.decode_tokens_per_s.max}}},
                   {"vs_off", ratio},
                   {"generated", r.generated},
                   {"proposed", r.proposed},
                   {"accepted", r.accepted},
                   {"same_tokens", r.same_tokens}});
  }
  return out;
}

// f16 against int8 KV at a long context (speculation_workload.hpp).
// Prefill time of new lengths, first and repeated (the workload list at the top).
nlohmann::json run_new_lengths(const Args& args) {
  const int lengths[] = {281, 283, 301, 347, 389, 433};
  std::printf("newlen: prefill of a length not seen before, then the same length again (%d threads)\n", args.threads);
  std::printf("%-6s %7s %12s %12s %8s\n", "prec", "tokens", "first ms", "repeat ms", "ratio");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : args.precisions) {
    ember::EngineOptions options = options_for(p);
    options.threads = args.threads;
    options.prefix_cache = false;
    ember::Engine engine = ember::Engine::open(args.model, options);
    const auto prefill_ms = [&](int n, int salt) {
      ember::Request r;
      r.prompt_tokens = synthetic_prompt(engine, n, salt);
      r.sampling.max_tokens = 1;
      return engine.generate(r).timings.prefill_ms;
    };
    for (int warm : {64, 512, 16}) prefill_ms(warm, 1);
    std::vector<double> ratios;
    for (int n : lengths) {
      const double first = prefill_ms(n, 2), repeat = prefill_ms(n, 3);
      ratios.push_back(first / repeat);
      std::printf("%-6s %7d %12.1f %12.1f %7.2fx\n", p.c_str(), n, first, repeat, first / repeat);
      out.push_back({{"engine", "ember"},
                     {"workload", "newlen"},
                     {"precision", p},
                     {"threads", args.threads},
                     {"prompt_tokens", n},
                     {"first_ms", first},
                     {"repeat_ms", repeat}});
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("%-6s median first / repeat %.2fx, worst %.2fx\n", p.c_str(), ratios[ratios.size() / 2], ratios.back());
  }
  return out;
}

int main(int argc, char** argv) {
  const Args args = ember::bench::parse_args(argc, argv);
  const std::string& first = args.workloads[0];
  if (args.workloads.size() == 1 &&
      (first == "shared" || first == "chat" || first == "load" || first == "frames" || first == "json" ||
       first == "edit" || first == "longctx" || first == "newlen" || first == "embed")) {
    try {
      const nlohmann::json out = first == "load"     ? run_load(args)
                                 : first == "frames" ? run_frames(args)
                                 : first == "json"   ? run_json(args)
                                 : first == "embed"  ? run_embed(args)
                                 : first == "edit"   ? run_edit(args)
                                 : first == "longctx"
                                     ? ember::bench::long_context_report(args.model, args.threads, args.repeats)
                                 : first == "newlen" ? run_new_lengths(args)
                                                     : run_serving(args, first);
      if (!args.json_path.empty()) ember::bench::write_json(args.json_path, out.dump(2));
      return 0;
    } catch (const ember::Error& e) {
      std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
      return 1;
    }
  }
  try {
    std::map<std::string, ember::Engine> engines;
    for (const auto& p : args.precisions) {
      ember::EngineOptions options = options_for(p);
      options.device = args.device;
      options.threads = args.threads;
      options.max_sequences = 32;    // tg128x32 decodes its 32 streams in one batch
      options.prefix_cache = false;  // measure compute, not reuse
      const auto opening = Clock::now();
      engines.emplace(p, ember::Engine::open(args.model, options));
      // How long the open took, and the process's peak resident memory so far (with the first
      // precision: the open's own peak, the bandwidth buffer not yet allocated).
      std::printf("open %s: %.1f s, peak RSS %.0f MiB\n", p.c_str(),
                  std::chrono::duration<double>(Clock::now() - opening).count(), ember::bench::status_mb("VmHWM"));
      std::fflush(stdout);
    }
    std::vector<ember::AdapterScale> adapters;  // the same id in every engine: each loads it first
    if (!args.lora.empty())
      for (auto& [p, engine] : engines) adapters = {{engine.load_adapter(args.lora), 1.0f}};
    const bool on_cpu = args.device.type == ember::DeviceType::cpu;
    const bool ceiling = on_cpu && args.bandwidth;  // host memory only
    std::optional<ember::bench::BandwidthProbe> probe;
    if (ceiling) probe.emplace(args.threads);
    // Interleaved: repeat r runs every (workload, precision) before repeat r+1 starts, so machine
    // drift hits all configurations alike. One warm-up run each first. Each tg128 run is paired
    // with a bandwidth measurement just before it: on a shared machine the bandwidth drifts within
    // a minute (docs/benchmarks.md#bench-bandwidth-passes), so a ceiling measured at another
    // moment says little about a run.
    std::map<std::pair<std::string, std::string>, std::vector<double>> runs;
    std::map<std::pair<std::string, std::string>, ember::bench::RoutingProfile> routing;
    std::map<std::pair<std::string, std::string>, std::vector<ember::bench::BandwidthReading>> bandwidths;
    for (int r = -1; r < args.repeats; ++r)
      for (const auto& w : args.workloads)
        for (const auto& p : args.precisions) {
          const bool paired = probe && w == "tg128" && r >= 0;
          const auto bandwidth_now = paired ? probe->measure(kPairedPasses) : ember::bench::BandwidthReading{};
          const ember::EngineStats before = engines.at(p).stats();
          const double tps = run_once(engines.at(p), w, r + 2, adapters);
          if (r < 0) continue;
          const ember::EngineStats after = engines.at(p).stats();
          routing[{w, p}].add(before, after);
          runs[{w, p}].push_back(tps);
          if (paired) bandwidths[{w, p}].push_back(bandwidth_now);
        }
    // The ceiling is the most the machine was seen to read: each method's best pass, at the end
    // and before every run (on a shared machine a single moment's reading may be a low one).
    auto reading = probe ? probe->measure(kFinalPasses) : ember::bench::BandwidthReading{};
    int passes = kFinalPasses;
    for (const auto& [key, before] : bandwidths)
      for (const auto& b : before) {
        reading.keep_best(b);
        passes += kPairedPasses;
      }
    if (probe) {
      std::printf("%s\n", ember::bench::describe(*probe, reading, passes).c_str());
      const std::string warning = ember::bench::disagreement_warning(reading);
      if (!warning.empty()) std::printf("%s\n", warning.c_str());
    }
    const char* device = on_cpu ? "cpu" : "cuda";
    nlohmann::json out = nlohmann::json::array();
    if (on_cpu) std::printf("cpu tier: %s\n", engines.begin()->second.info().cpu_tier.c_str());
    std::printf("%-8s %-6s %-7s %10s %10s %10s\n", "engine", "prec", "work", "median", "min", "max");
    for (const auto& [key, values] : runs) {
      const Stats s = stats_of(values);
      std::printf("%-8s %-6s %-7s %10.1f %10.1f %10.1f tokens/s\n", "ember", key.second.c_str(), key.first.c_str(),
                  s.median, s.min, s.max);
      nlohmann::json j = {
          {"engine", "ember"},       {"workload", key.first},
          {"precision", key.second}, {"weight_format", engines.at(key.second).info().weight_format},
          {"device", device},        {"cpu_tier", engines.at(key.second).info().cpu_tier},
          {"threads", args.threads}, {"tokens_per_s", {{"median", s.median}, {"min", s.min}, {"max", s.max}}},
          {"runs", values}};
      routing[key].report(j, engines.at(key.second).info().experts);
      if (key.first == "tg128" && ceiling) {
        const double bytes = weight_bytes_per_token(engines.at(key.second).info(), key.second);
        j["weight_bytes_per_token"] = bytes;
        add_ceiling(j, values, bytes, *probe, reading, passes, bandwidths[key], key.second + " tg128");
      }
      out.push_back(j);
    }
    for (const auto& w : args.workloads)
      for (const char* baseline : {"w8a8", "fp32", "fp16"})
        if (runs.count({w, "int8"}) && runs.count({w, baseline}))
          std::printf("%s: int8 / %s = %.2fx\n", w.c_str(), baseline,
                      stats_of(runs[{w, "int8"}]).median / stats_of(runs[{w, baseline}]).median);
    if (!args.json_path.empty()) ember::bench::write_json(args.json_path, out.dump(2));
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
  return 0;
}
