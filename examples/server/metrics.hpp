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
  // A Prometheus histogram: counts per upper bound (not cumulative), their sum and count.
  template <std::size_t N>
  struct Histogram {
    std::array<double, N> bounds;  // seconds
    std::array<std::uint64_t, N> counts{};
    std::uint64_t count = 0;
    double sum = 0;
    void add(double seconds);
    void render(std::string& out, const char* name, const char* help) const;
  };

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> http_;  // (endpoint, status) -> count
  std::map<std::string, std::uint64_t> finish_reasons_;
  std::uint64_t prompt_tokens_ = 0, cached_prompt_tokens_ = 0, generated_tokens_ = 0;
  Histogram<10> ttft_{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0}};
  Histogram<10> tpot_{{0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64}};
  Histogram<11> e2e_{{0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0}};
};

}  // namespace server
