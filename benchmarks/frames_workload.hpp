// The frame-budget workload of ember-bench: a game's loop that gives the engine a fixed share of
// every frame (Engine::step(budget)) while one long prompt prefills and several streams decode.
#pragma once

#include <ember/ember.hpp>

#include <string>
#include <vector>

namespace ember::bench {

struct FrameRun {
  double budget_ms = 0;                         // 0: unbudgeted (one step() call runs everything)
  int frames = 0;                               // step() calls
  double p50_ms = 0, p99_ms = 0, worst_ms = 0;  // step() wall time per call
  double tokens_per_s = 0;                      // rows computed / time inside step()
  double long_ttft_ms = 0;                      // the long prompt's time to first token, in wall time
};

// One run per budget: `streams` requests of 16-token prompts decoding `decode_tokens` each are
// submitted, the engine takes a few frames to start them, then a `long_prompt`-token prompt
// arrives; the run ends when every request has finished. The frame's rest is slept, as a game
// renders, and does not count in tokens_per_s. `options` gives the precision and weight format.
std::vector<FrameRun> run_frames(const std::string& model, EngineOptions options, int threads,
                                 const std::vector<double>& budgets_ms, int long_prompt = 2000, int streams = 8,
                                 int decode_tokens = 64);

}  // namespace ember::bench
