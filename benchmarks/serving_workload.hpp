// The shared-prompt serving workload of ember-bench: many requests arrive together, each a long
// common system prompt plus a few unique tokens, and are served under one configuration.
#pragma once

#include <ember/ember.hpp>

#include <string>

namespace ember::bench {

struct ServingConfig {
  std::string name;
  Precision precision = Precision::int8;
  bool batching = true;  // false: one request at a time (max_sequences = 1)
  bool prefix_cache = true;
  int speculative_tokens = 0;  // SamplingParams::speculative_tokens of every request
};

struct ServingShape {
  int requests = 32;
  int system_tokens = 512;
  int unique_tokens = 32;
  int generated_tokens = 64;
};

// A chat session: a system prompt, then `turns` times a user message and a generated reply;
// each turn's prompt is the whole conversation so far (replies included).
struct ChatShape {
  int turns = 8;
  int system_tokens = 64;
  int user_tokens = 48;
  int reply_tokens = 32;
};

struct ServingResult {
  double mean_ttft_ms = 0, p99_ttft_ms = 0;
  double mean_response_ms = 0, p50_response_ms = 0, p99_response_ms = 0;
  double generated_tokens_per_s = 0;  // aggregate, over the wall time of the whole workload
  double wall_s = 0;
  double mean_queue_ms = 0, mean_prefill_ms = 0, mean_decode_ms = 0, mean_delivery_ms = 0;
  double reused_prompt_fraction = 0;  // prompt tokens served by the prefix cache
  double mean_tpot_ms = 0;            // decode time per generated token after the first
  int requests = 0;
};

// All requests are submitted at t0 and the calling thread runs the engine until every one has
// finished; times are measured from t0, so queueing counts as it would for a user.
ServingResult run_shared_prompt(const std::string& model, int threads, const ServingConfig& config,
                                const ServingShape& shape);

// One conversation of `shape.turns` requests on one engine (config.batching is irrelevant);
// each request's times are measured from its own submission.
ServingResult run_chat(const std::string& model, int threads, const ServingConfig& config, const ChatShape& shape);

// Time to first token of a `prompt_tokens`-token prompt on a cold prefix cache and again once
// the same prompt is cached (int8). Returns {miss_ms, hit_ms}.
std::pair<double, double> prefix_hit_ttft(const std::string& model, int threads, int prompt_tokens);

}  // namespace ember::bench
