// The workloads of ember-bench that do less work per token (issue 21):
//
// edit (--workload edit): draftless speculation (SamplingParams::speculative_tokens) on and off,
// interleaved and repeated, on three requests: a ~400-token passage with the instruction to
// repeat it with a few words changed (chat template, greedy, at most 480 tokens), tg128 (128
// tokens after a 16-token prompt, as ember-bench's tg128: its prompt repeats a sentence, and so
// does the model), and a short story the model writes (chat, greedy, 128 tokens: little to look
// up). Per request and setting: decode tokens/s
// (generated tokens after the first over the decode time), draft tokens proposed and accepted,
// and whether speculation changed a single output token (it must not: greedy).
//
// longctx (--workload longctx): tg128 after a 4,096-token prompt with an f16 and an int8 KV
// cache of the same bytes, interleaved and repeated: decode tokens/s (every step reads the
// whole context's K/V), and how many tokens each pool holds. The prompt is prefilled once per
// engine and then served from the prefix cache, so the runs time the decodes.
#pragma once

#include <ember/ember.hpp>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ember::bench {

// A prompt of exactly n tokens, different for every salt so the prefix cache never helps
// (ember-bench's pp512 and tg128 prompts).
std::vector<std::int32_t> synthetic_prompt(const Engine& engine, int n, int salt);

struct RateStats {
  double median = 0, min = 0, max = 0;
};

struct SpeculationRow {
  std::string request;         // "edit", "tg128" or "story"
  int speculative_tokens = 0;  // 0: off
  RateStats decode_tokens_per_s;
  int generated = 0, proposed = 0, accepted = 0;  // of the last run
  bool same_tokens = true;                        // every run's output equals the run without speculation
};

std::vector<SpeculationRow> run_edit_workload(const std::string& model, int threads, int repeats,
                                              int speculative_tokens);

struct LongContextRow {
  KvCacheType kv_type = KvCacheType::f16;
  RateStats decode_tokens_per_s;
  int pool_tokens = 0;  // tokens the KV pool holds (blocks x block size)
  std::size_t kv_cache_bytes = 0;
};

std::vector<LongContextRow> run_long_context(const std::string& model, int threads, int repeats, int prompt_tokens);
// The longctx workload of ember-bench: run_long_context at 4,096 tokens, printed as a table, as JSON rows.
nlohmann::json long_context_report(const std::string& model, int threads, int repeats);

}  // namespace ember::bench
