#include "runtime/sampler.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::runtime {

namespace {

bool finite(float x) { return std::isfinite(x); }

}  // namespace

void validate(const SamplingParams& p) {
  constexpr ErrorCode bad = ErrorCode::invalid_argument;
  if (p.max_tokens < 0) fail(bad, "sampling.max_tokens must be >= 0, got {}", p.max_tokens);
  if (!finite(p.temperature) || p.temperature < 0)
    fail(bad, "sampling.temperature must be a finite number >= 0, got {}", p.temperature);
  if (p.top_k < 0) fail(bad, "sampling.top_k must be >= 0 (0 = off), got {}", p.top_k);
  // NaN fails every comparison, so each range test is written to accept only valid values.
  if (!(p.top_p > 0 && p.top_p <= 1)) fail(bad, "sampling.top_p must be in (0, 1], got {}", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) fail(bad, "sampling.min_p must be in [0, 1], got {}", p.min_p);
  if (!finite(p.repetition_penalty) || !(p.repetition_penalty > 0))
    fail(bad, "sampling.repetition_penalty must be a finite number > 0, got {}", p.repetition_penalty);
  if (!finite(p.presence_penalty))
    fail(bad, "sampling.presence_penalty must be finite, got {}", p.presence_penalty);
  if (!finite(p.frequency_penalty))
    fail(bad, "sampling.frequency_penalty must be finite, got {}", p.frequency_penalty);
  if (p.penalty_last_n < -1)
    fail(bad, "sampling.penalty_last_n must be >= -1 (-1 = all), got {}", p.penalty_last_n);
  for (std::size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].empty()) fail(bad, "sampling.stop[{}] is an empty string", i);
}

Sampler::Sampler(const SamplingParams& p, int vocab_size)
    : params_(p), vocab_size_(vocab_size), rng_(p.seed) {
  validate(p);
  if (vocab_size <= 0) fail(ErrorCode::invalid_argument, "vocab_size must be > 0, got {}", vocab_size);
  candidates_.reserve(static_cast<std::size_t>(vocab_size));
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(float* logits, const std::vector<std::int32_t>& history) {
  const bool active = params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                      params_.frequency_penalty != 0.0f;
  if (!active || params_.penalty_last_n == 0 || history.empty()) return;
  std::size_t n = history.size();
  if (params_.penalty_last_n > 0) n = std::min(n, static_cast<std::size_t>(params_.penalty_last_n));
  window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  for (std::int32_t id : window_)
    if (id < 0 || id >= vocab_size_)
      fail(ErrorCode::invalid_argument, "history token id {} outside the vocabulary [0, {})", id,
           vocab_size_);
  // Sorting the (short) window gives each distinct id with its count without a vocab-sized table.
  std::sort(window_.begin(), window_.end());
  for (std::size_t i = 0; i < window_.size();) {
    std::size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    float& z = logits[window_[i]];
    // CTRL / llama.cpp: shrink positive logits, push negative ones further down.
    if (params_.repetition_penalty != 1.0f)
      z = z > 0 ? z / params_.repetition_penalty : z * params_.repetition_penalty;
    // OpenAI: a flat presence term plus a per-occurrence frequency term.
    z -= static_cast<float>(j - i) * params_.frequency_penalty + params_.presence_penalty;
    i = j;
  }
}

// Leaves the survivors of top-k, top-p and min-p in candidates_[0, count) and returns count.
// Only as much of the candidate list is sorted as top-p needs: the kept set is a prefix of the
// descending order, so sorting grows in doubling windows until the mass is reached.
std::size_t Sampler::truncate(float max_logit) {
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  auto first = candidates_.begin();
  if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < candidates_.size()) {
    std::nth_element(first, first + params_.top_k, candidates_.end(), better);
    candidates_.resize(static_cast<std::size_t>(params_.top_k));
    first = candidates_.begin();
  }
  double z = 0;
  for (const Candidate& c : candidates_) z += std::exp(static_cast<double>(c.logit) - max_logit);

  // min-p keeps p_i >= min_p * p_max, i.e. logit_i - max >= log(min_p): also a prefix of the
  // descending order, so it only bounds where top-p may stop (p_max itself always survives).
  std::size_t count = candidates_.size();
  if (params_.min_p > 0) {
    const double threshold = std::log(static_cast<double>(params_.min_p));
    auto last = std::partition(first, candidates_.end(), [&](const Candidate& c) {
      return static_cast<double>(c.logit) - max_logit >= threshold;
    });
    count = static_cast<std::size_t>(last - first);
  }
  if (params_.top_p >= 1.0f) return count;

  // top-p on the top-k set's distribution: the smallest prefix whose mass reaches top_p.
  const double target = static_cast<double>(params_.top_p) * z;
  double mass = 0;
  std::size_t sorted = 0;
  while (sorted < count) {
    const std::size_t next = std::min(count, std::max<std::size_t>(64, 2 * sorted));
    if (next < count) std::nth_element(first + sorted, first + next, first + count, better);
    std::sort(first + sorted, first + next, better);
    for (std::size_t i = sorted; i < next; ++i) {
      mass += std::exp(static_cast<double>(first[i].logit) - max_logit);
      if (mass >= target) return i + 1;
    }
    sorted = next;
  }
  return count;  // rounding left the mass a hair short: keep everything min-p kept
}

std::int32_t Sampler::draw(std::size_t count, float max_logit) {
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  double total = 0;
  for (std::size_t i = 0; i < count; ++i) {
    total += std::exp((static_cast<double>(candidates_[i].logit) - max_logit) * inv_t);
  }
  const double u = uniform01() * total;
  double acc = 0;
  for (std::size_t i = 0; i < count; ++i) {
    acc += std::exp((static_cast<double>(candidates_[i].logit) - max_logit) * inv_t);
    if (u < acc) return candidates_[i].id;
  }
  return candidates_[count - 1].id;  // u landed in the rounding gap at the very end
}

std::int32_t Sampler::sample(float* logits, const std::vector<std::int32_t>& history,
                             float* logprob) {
  apply_penalties(logits, history);

  // Argmax (ties -> lowest id); NaN never compares greater, so NaN logits are never chosen.
  std::int32_t best = -1;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (std::int32_t i = 0; i < vocab_size_; ++i) {
    if (logits[i] > max_logit) max_logit = logits[i], best = i;
  }
  if (best < 0 || !finite(max_logit))
    fail(ErrorCode::internal, "logits row has no finite maximum (max = {})", max_logit);

  std::int32_t id = best;
  if (params_.temperature > 0) {
    candidates_.clear();
    for (std::int32_t i = 0; i < vocab_size_; ++i)
      if (finite(logits[i])) candidates_.push_back({logits[i], i});
    const std::size_t count = truncate(max_logit);
    id = draw(count, max_logit);
  }

  if (logprob != nullptr) {
    double z = 0;
    for (std::int32_t i = 0; i < vocab_size_; ++i)
      if (finite(logits[i])) z += std::exp(static_cast<double>(logits[i]) - max_logit);
    *logprob = static_cast<float>(static_cast<double>(logits[id]) - max_logit - std::log(z));
  }
  return id;
}

}  // namespace ember::runtime
