// The structured-output workload of ember-bench (--workload json): what a JSON Schema costs.
//
// Per schema (four: an NPC reply, a person, an event with formats, a tool call): the time to
// compile it (schema -> GBNF -> grammar -> constraint), then the per-token mask cost, measured
// by replaying the tokens of a greedy constrained generation through a TokenConstraint against
// the model's vocabulary (apply() on a logits row plus accept(), each token timed; a step whose
// state was seen before is a cache hit), and the cost of what the sampler does instead on most
// steps: the same replay through Sampler::sample with the grammar, greedy, the generated token
// on top of the row (the grammar is asked about that one token, no mask). Then decode tokens/s with and without the schema, at
// batch 1 (greedy, each constrained run against an unconstrained one of the same length) and
// with 16 streams (16 sampled requests at once; each free stream generates as many tokens as
// the constrained stream of its seed), interleaved and repeated. Apart: what checking
// uniqueItems while decoding adds per token (JsonRun::unique_*).
#pragma once

#include <string>
#include <vector>

namespace ember::bench {

struct JsonRun {
  std::string model;
  int vocab = 0;
  std::size_t trie_nodes = 0;
  double trie_build_ms = 0;
  double compile_ms_mean = 0, compile_ms_max = 0;             // per schema
  double mask_us_mean = 0, mask_us_p50 = 0, mask_us_p99 = 0;  // per token, all steps
  double uncached_mask_us_mean = 0;                           // steps that computed a new mask
  int mask_steps = 0, uncached_steps = 0;
  double check_us_mean = 0, check_us_p50 = 0, check_us_p99 = 0;  // sampler step asking about its pick only
  double free_step_us_p50 = 0;                                   // the same sampler step without a grammar
  double tps_b1_free = 0, tps_b1_schema = 0;                     // median decode tokens/s, one stream
  double tps_b16_free = 0, tps_b16_schema = 0;                   // median aggregate tokens/s, 16 streams
  double ratio_b1 = 0, ratio_b16 = 0;                            // median of paired schema / free ratios
  // A fifth schema with uniqueItems arrays, outside the figures above: its greedy run replayed
  // with the decode-time check (unique_items.hpp) and through the grammar alone.
  double unique_mask_us_mean = 0, unique_plain_mask_us_mean = 0;  // apply() + accept() per token
  double unique_check_us_p50 = 0, unique_plain_check_us_p50 = 0;  // the sampler's greedy step
  int unique_steps = 0;
};

JsonRun run_json_workload(const std::string& model, int threads, int repeats);

}  // namespace ember::bench
