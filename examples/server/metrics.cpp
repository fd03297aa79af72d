#include "metrics.hpp"

#include <cstdio>

namespace server {
namespace {

const char* known_path(const std::string& path) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == p) return p;
  return "other";
}

void line(std::string& out, const char* name, const std::string& labels, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, " %.17g\n", value);
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Metrics::record_http(const std::string& path, int status) {
  std::lock_guard lock(mutex_);
  ++http_[{known_path(path), status}];
}

void Metrics::record_completion(const ember::Completion& c) {
  std::lock_guard lock(mutex_);
  ++finish_reasons_[ember::to_string(c.finish_reason)];
  prompt_tokens_ += static_cast<std::uint64_t>(c.prompt_tokens);
  cached_prompt_tokens_ += static_cast<std::uint64_t>(c.cached_prompt_tokens);
  generated_tokens_ += static_cast<std::uint64_t>(c.generated_tokens);
  e2e_.add(c.timings.total_ms / 1000.0);
  if (c.generated_tokens == 0) return;  // no first token, no time to it
  ttft_.add(c.timings.time_to_first_token_ms / 1000.0);
  if (c.generated_tokens > 1) tpot_.add(c.timings.time_per_output_token_ms / 1000.0);
}

template <std::size_t N>
void Metrics::Histogram<N>::add(double seconds) {
  ++count;
  sum += seconds;
  for (std::size_t b = 0; b < N; ++b)
    if (seconds <= bounds[b]) {
      ++counts[b];
      break;
    }
}

template <std::size_t N>
void Metrics::Histogram<N>::render(std::string& out, const char* name, const char* help) const {
  header(out, name, "histogram", help);
  const std::string base(name);
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < N; ++b) {
    cumulative += counts[b];
    char le[32];
    std::snprintf(le, sizeof le, "le=\"%g\"", bounds[b]);
    line(out, (base + "_bucket").c_str(), le, double(cumulative));
  }
  line(out, (base + "_bucket").c_str(), "le=\"+Inf\"", double(count));
  line(out, (base + "_sum").c_str(), "", sum);
  line(out, (base + "_count").c_str(), "", double(count));
}

std::string Metrics::render(const ember::EngineStats& engine) const {
  std::lock_guard lock(mutex_);
  std::string out;
  header(out, "ember_http_requests_total", "counter", "HTTP requests by endpoint and status.");
  for (const auto& [key, count] : http_)
    line(out, "ember_http_requests_total",
         "endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"", double(count));
  header(out, "ember_completions_total", "counter", "Finished completions by finish reason.");
  for (const auto& [reason, count] : finish_reasons_)
    line(out, "ember_completions_total", "finish_reason=\"" + reason + "\"", double(count));
  header(out, "ember_prompt_tokens_total", "counter", "Prompt tokens of finished completions.");
  line(out, "ember_prompt_tokens_total", "", double(prompt_tokens_));
  header(out, "ember_prompt_tokens_cached_total", "counter",
         "Prompt tokens of finished completions served from the prefix cache.");
  line(out, "ember_prompt_tokens_cached_total", "", double(cached_prompt_tokens_));
  header(out, "ember_generated_tokens_total", "counter", "Generated tokens.");
  line(out, "ember_generated_tokens_total", "", double(generated_tokens_));

  ttft_.render(out, "ember_time_to_first_token_seconds", "Submit to first generated token.");
  tpot_.render(out, "ember_time_per_output_token_seconds",
               "Decode time per generated token after the first (completions of 2+ tokens).");
  e2e_.render(out, "ember_request_duration_seconds", "Submit to completion, every finished completion.");
  header(out, "ember_prefix_cache_hit_ratio", "gauge",
         "Prompt tokens reused from the prefix cache / prompt tokens, since start.");
  line(out, "ember_prefix_cache_hit_ratio", "",
       engine.prompt_tokens > 0 ? double(engine.prompt_tokens_reused) / engine.prompt_tokens : 0);
  header(out, "ember_engine_steps_total", "counter",
         "Engine steps; fewer steps than generated tokens means requests were batched.");
  line(out, "ember_engine_steps_total", "", double(engine.steps));
  header(out, "ember_requests_running", "gauge", "Sequences running in the engine.");
  line(out, "ember_requests_running", "", engine.running);
  header(out, "ember_requests_queued", "gauge", "Requests waiting for room.");
  line(out, "ember_requests_queued", "", engine.queued);
  header(out, "ember_kv_blocks_free", "gauge", "Free blocks of the KV cache.");
  line(out, "ember_kv_blocks_free", "", engine.kv_blocks_free);
  header(out, "ember_kv_blocks_total", "gauge", "Blocks of the KV cache.");
  line(out, "ember_kv_blocks_total", "", engine.kv_blocks_total);
  return out;
}

}  // namespace server
