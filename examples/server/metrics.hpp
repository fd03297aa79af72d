// Counters of ember-server, rendered as Prometheus text for GET /metrics. Thread-safe: the HTTP
// threads record, the scraper renders.
#pragma once

#include <ember/ember.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace server {

class Metrics {
 public:
  // One HTTP exchange, after its response was written. Unknown paths count as "other" so a
  // scanner cannot grow the label set.
  void record_http(const std::string& path, int status);
  // One finished completion (its tokens, time to first token and finish reason).
  void record_completion(const ember::Completion& c);

  std::string render(const ember::EngineStats& engine) const;

 private:
  // Upper bounds of the time-to-first-token histogram, in seconds.
  static constexpr std::array<double, 10> kTtftBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,
                                                          0.25,  0.5,  1.0,   2.5,  5.0};
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> http_;  // (endpoint, status) -> count
  std::map<std::string, std::uint64_t> finish_reasons_;
  std::uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, generated_tokens_ = 0;
  std::array<std::uint64_t, kTtftBuckets.size()> ttft_counts_{};  // not cumulative
  std::uint64_t ttft_count_ = 0;
  double ttft_sum_s_ = 0;
};

}  // namespace server
