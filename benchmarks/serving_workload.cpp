#include "serving_workload.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

// `n` tokens of varied text; `salt` changes every token so different salts share no prefix.
std::vector<std::int32_t> text_tokens(const Engine& engine, int n, int salt) {
  std::string text;
  std::vector<std::int32_t> tokens;
  for (int i = 0; static_cast<int>(tokens.size()) < n; ++i) {
    text += "Record " + std::to_string(salt) + "." + std::to_string(i) +
            ": the harbour master noted the wind, the tide and every ship that came in. ";
    tokens = engine.tokenize(text);
  }
  tokens.resize(static_cast<std::size_t>(n));
  return tokens;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Engine open_engine(const std::string& model, int threads, const ServingConfig& config, int max_sequences) {
  EngineOptions options;
  options.precision = config.precision;
  options.threads = threads;
  options.prefix_cache = config.prefix_cache;
  options.max_sequences = config.batching ? max_sequences : 1;
  options.max_batch_tokens = 512;
  options.kv_cache_bytes = std::size_t{1} << 30;
  return Engine::open(model, options);
}

Request greedy_request(std::vector<std::int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  return r;
}

// Means and percentiles of the completions' timings; throughput over `wall` seconds.
ServingResult summarize(const std::vector<Completion>& completions, double wall) {
  ServingResult result;
  std::vector<double> ttft, response, queue, prefill, decode, delivery, tpot;
  double generated = 0, prompt = 0, reused = 0;
  for (const Completion& c : completions) {
    ttft.push_back(c.timings.time_to_first_token_ms);
    response.push_back(c.timings.total_ms);
    queue.push_back(c.timings.queue_ms);
    prefill.push_back(c.timings.prefill_ms);
    decode.push_back(c.timings.decode_ms);
    delivery.push_back(c.timings.response_ms);
    tpot.push_back(c.timings.time_per_output_token_ms);
    generated += c.generated_tokens;
    prompt += c.prompt_tokens;
    reused += c.cached_prompt_tokens;
  }
  result.requests = static_cast<int>(completions.size());
  result.mean_ttft_ms = mean(ttft);
  result.p99_ttft_ms = percentile(ttft, 0.99);
  result.mean_response_ms = mean(response);
  result.p50_response_ms = percentile(response, 0.5);
  result.p99_response_ms = percentile(response, 0.99);
  result.mean_queue_ms = mean(queue);
  result.mean_prefill_ms = mean(prefill);
  result.mean_decode_ms = mean(decode);
  result.mean_delivery_ms = mean(delivery);
  result.mean_tpot_ms = mean(tpot);
  result.wall_s = wall;
  result.generated_tokens_per_s = generated / wall;
  result.reused_prompt_fraction = reused / prompt;
  return result;
}

}  // namespace

ServingResult run_shared_prompt(const std::string& model, int threads, const ServingConfig& config,
                                const ServingShape& shape) {
  Engine engine = open_engine(model, threads, config, shape.requests);
  const auto system = text_tokens(engine, shape.system_tokens, 0);
  std::vector<Request> requests;
  for (int i = 0; i < shape.requests; ++i) {
    auto prompt = system;
    const auto unique = text_tokens(engine, shape.unique_tokens, i + 1);
    prompt.insert(prompt.end(), unique.begin(), unique.end());
    requests.push_back(greedy_request(std::move(prompt), shape.generated_tokens));
    requests.back().sampling.speculative_tokens = config.speculative_tokens;
  }

  const auto t0 = Clock::now();
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) handles.push_back(engine.submit(r));
  while (!engine.step(std::chrono::seconds(1)).idle) {
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<Completion> completions;
  for (auto& h : handles) completions.push_back(h.wait());
  return summarize(completions, wall);
}

ServingResult run_chat(const std::string& model, int threads, const ServingConfig& config, const ChatShape& shape) {
  Engine engine = open_engine(model, threads, config, 1);
  std::vector<std::int32_t> conversation = text_tokens(engine, shape.system_tokens, 0);
  std::vector<Completion> completions;
  const auto t0 = Clock::now();
  for (int turn = 0; turn < shape.turns; ++turn) {
    const auto user = text_tokens(engine, shape.user_tokens, 100 + turn);
    conversation.insert(conversation.end(), user.begin(), user.end());
    completions.push_back(engine.generate(greedy_request(conversation, shape.reply_tokens)));
    const auto& reply = completions.back().tokens;
    conversation.insert(conversation.end(), reply.begin(), reply.end());
  }
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return summarize(completions, wall);
}

std::pair<double, double> prefix_hit_ttft(const std::string& model, int threads, int prompt_tokens) {
  EngineOptions options;
  options.threads = threads;
  options.max_batch_tokens = 2048;
  Engine engine = Engine::open(model, options);
  const Request r = greedy_request(text_tokens(engine, prompt_tokens, 7), 1);
  const double miss = engine.generate(r).timings.time_to_first_token_ms;
  const double hit = engine.generate(r).timings.time_to_first_token_ms;
  return {miss, hit};
}

}  // namespace ember::bench
