#include "frames_workload.hpp"

#include <ember/ember.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::vector<std::int32_t> prompt(const Engine& engine, int n, int salt) {
  std::string text;
  std::vector<std::int32_t> tokens;
  for (int i = 0; static_cast<int>(tokens.size()) < n; ++i) {
    text += "Chapter " + std::to_string(salt * 1000 + i) + ": the caravan crossed the salt flats at dawn. ";
    tokens = engine.tokenize(text);
  }
  tokens.resize(static_cast<std::size_t>(n));
  return tokens;
}

Request greedy(std::vector<std::int32_t> tokens, int max_tokens) {
  Request r;
  r.prompt_tokens = std::move(tokens);
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  return r;
}

FrameRun run_one(Engine& engine, double budget_ms, int long_prompt, int streams, int decode_tokens, int salt) {
  FrameRun run;
  run.budget_ms = budget_ms;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < streams; ++i)
    handles.push_back(engine.submit(greedy(prompt(engine, 16, salt * 100 + i), decode_tokens)));
  const auto budget = budget_ms > 0 ? std::chrono::microseconds(static_cast<long long>(budget_ms * 1000))
                                    : std::chrono::microseconds(std::chrono::hours(1));
  std::vector<double> step_ms;
  double inside_ms = 0;
  long long rows = 0;
  std::optional<RequestHandle> long_request;
  const std::vector<std::int32_t> long_tokens = prompt(engine, long_prompt, salt * 100 + 99);
  for (int frame = 0;; ++frame) {
    // The long prompt arrives once the streams are decoding (unbudgeted: at once).
    if (!long_request && (frame == 3 || budget_ms == 0)) {
      long_request = engine.submit(greedy(long_tokens, 16));
    }
    const auto start = Clock::now();
    const StepResult r = engine.step(budget);
    const double took = ms(Clock::now() - start);
    step_ms.push_back(took);
    inside_ms += took;
    rows += r.tokens;
    if (r.idle && long_request) break;
    if (budget_ms > 0) std::this_thread::sleep_until(start + budget);
  }
  const Completion c = long_request->wait();
  run.long_ttft_ms = c.timings.time_to_first_token_ms;
  for (auto& h : handles) h.wait();
  std::sort(step_ms.begin(), step_ms.end());
  run.frames = static_cast<int>(step_ms.size());
  run.p50_ms = step_ms[step_ms.size() / 2];
  run.p99_ms = step_ms[(step_ms.size() - 1) * 99 / 100];
  run.worst_ms = step_ms.back();
  run.tokens_per_s = rows / (inside_ms / 1000.0);
  return run;
}

}  // namespace

std::vector<FrameRun> run_frames(const std::string& model, EngineOptions options, int threads,
                                 const std::vector<double>& budgets_ms, int long_prompt, int streams,
                                 int decode_tokens) {
  options.threads = threads;
  options.context_length = std::max(4096, long_prompt + 64);
  options.prefix_cache = false;  // every run prefills its long prompt in full
  Engine engine = Engine::open(model, options);
  std::vector<FrameRun> runs;
  int salt = 1;
  for (double b : budgets_ms) runs.push_back(run_one(engine, b, long_prompt, streams, decode_tokens, salt++));
  return runs;
}

}  // namespace ember::bench
