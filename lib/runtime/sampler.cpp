#include "runtime/sampler.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace ember::runtime {

namespace {

bool finite(float x) { return std::isfinite(x); }

// The row's largest logit and the lowest id that has it (-1 and -infinity if none is greater
// than -infinity; NaN never compares greater, so it is never chosen). One running maximum is a
// chain of dependent compares, a few cycles an element on a 49,152-token row between two decode
// steps; sixteen independent lanes make it a vector compare, then the first id holding the
// maximum is found. The result is the one-maximum loop's.
struct RowMax {
  float logit = -std::numeric_limits<float>::infinity();
  std::int32_t id = -1;
};
RowMax row_max(const float* logits, std::int32_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, -std::numeric_limits<float>::infinity());
  std::int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = logits[i + l] > lane[l] ? logits[i + l] : lane[l];
  RowMax m;
  for (int l = 0; l < kLanes; ++l)
    if (lane[l] > m.logit) m.logit = lane[l];
  for (; i < n; ++i)
    if (logits[i] > m.logit) m.logit = logits[i];
  if (m.logit == -std::numeric_limits<float>::infinity()) return m;  // nothing greater than -infinity
  for (std::int32_t j = 0; j < n; ++j)
    if (logits[j] == m.logit) return {m.logit, j};
  return m;  // not reached: the maximum is one of the row's values
}

}  // namespace

void validate(const SamplingParams& p, int vocab_size) {
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
  if (!finite(p.presence_penalty)) fail(bad, "sampling.presence_penalty must be finite, got {}", p.presence_penalty);
  if (!finite(p.frequency_penalty)) fail(bad, "sampling.frequency_penalty must be finite, got {}", p.frequency_penalty);
  if (p.penalty_last_n < -1) fail(bad, "sampling.penalty_last_n must be >= -1 (-1 = all), got {}", p.penalty_last_n);
  for (std::size_t i = 0; i < p.stop.size(); ++i)
    if (p.stop[i].empty()) fail(bad, "sampling.stop[{}] is an empty string", i);
  if (p.top_logprobs < 0 || p.top_logprobs > 20)
    fail(bad, "sampling.top_logprobs must be in [0, 20], got {}", p.top_logprobs);
  for (std::size_t i = 0; i < p.logit_bias.size(); ++i) {
    const LogitBias& b = p.logit_bias[i];
    if (std::isnan(b.bias) || b.bias == std::numeric_limits<float>::infinity())
      fail(bad, "sampling.logit_bias[{}].bias must be finite or -infinity, got {}", i, b.bias);
    if (b.token < 0 || (vocab_size > 0 && b.token >= vocab_size))
      fail(bad, "sampling.logit_bias[{}].token = {} is outside the vocabulary [0, {})", i, b.token, vocab_size);
  }
  if (!p.grammar.empty() && !p.json_schema.empty())
    fail(bad, "sampling.grammar and sampling.json_schema are both set: give one");
  if ((!p.grammar.empty() || !p.json_schema.empty()) && p.ignore_eos)
    fail(bad, "sampling.ignore_eos cannot be combined with a grammar or json_schema (the grammar decides the end)");
}

Sampler::Sampler(const SamplingParams& p, int vocab_size)
    : params_(p), vocab_size_(vocab_size), greedy_(p.temperature == 0 || !finite(1.0f / p.temperature)), rng_(p.seed) {
  validate(p, vocab_size);
  if (vocab_size <= 0) fail(ErrorCode::invalid_argument, "vocab_size must be > 0, got {}", vocab_size);
}

double Sampler::uniform01() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(float* logits, const std::vector<std::int32_t>& history) {
  const bool active =
      params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!active || params_.penalty_last_n == 0 || history.empty()) return;
  std::size_t n = history.size();
  if (params_.penalty_last_n > 0) n = std::min(n, static_cast<std::size_t>(params_.penalty_last_n));
  window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
  for (std::int32_t id : window_)
    if (id < 0 || id >= vocab_size_)
      fail(ErrorCode::invalid_argument, "history token id {} outside the vocabulary [0, {})", id, vocab_size_);
  // Sorting the (short) window gives each distinct id with its count without a vocab-sized table.
  std::sort(window_.begin(), window_.end());
  for (std::size_t i = 0; i < window_.size();) {
    std::size_t j = i;
    while (j < window_.size() && window_[j] == window_[i]) ++j;
    float& z = logits[window_[i]];
    // CTRL / llama.cpp: shrink positive logits, push negative ones further down.
    if (params_.repetition_penalty != 1.0f) z = z > 0 ? z / params_.repetition_penalty : z * params_.repetition_penalty;
    // OpenAI: a flat presence term plus a per-occurrence frequency term.
    z -= static_cast<float>(j - i) * params_.frequency_penalty + params_.presence_penalty;
    z = std::min(z, std::numeric_limits<float>::max());  // an overflow to +infinity stays a number
    i = j;
  }
}

namespace {

// Candidate order: higher logit first, ties to the lower id (deterministic on every library).
bool better(const Sampler::Candidate& a, const Sampler::Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// min-p keeps p_i >= min_p * p_max, i.e. z_i - max >= log(min_p): a prefix of the descending
// order that contains the best token, so it only bounds where top-p may stop.
double log_of_min_p(const SamplingParams& p) {
  return p.min_p > 0 ? std::log(static_cast<double>(p.min_p)) : -std::numeric_limits<double>::infinity();
}

// How many of the row's best candidates the constrained path asks the grammar about before it
// computes the whole mask instead: at least this many, or 4 per top_k place.
constexpr std::size_t kAllowedScan = 256;

}  // namespace

// Fills candidates_ with the k best finite logits. A bounded heap whose top is the worst kept
// candidate: most of a 49152-entry row is rejected by one comparison, far cheaper than
// nth_element over a copy of the whole row.
void Sampler::collect_top_k(const float* logits, std::size_t k) {
  candidates_.clear();
  for (std::int32_t i = 0; i < vocab_size_; ++i) offer(logits, i, k);
}

// Keeps token `i` in the bounded heap of the k best finite candidates if it belongs there.
void Sampler::offer(const float* logits, std::int32_t i, std::size_t k) {
  if (!finite(logits[i])) return;
  const Candidate c{logits[i], i, 0.0f};
  if (candidates_.size() < k) {
    candidates_.push_back(c);
    std::push_heap(candidates_.begin(), candidates_.end(), better);
  } else if (better(c, candidates_.front())) {
    std::pop_heap(candidates_.begin(), candidates_.end(), better);
    candidates_.back() = c;
    std::push_heap(candidates_.begin(), candidates_.end(), better);
  }
}

// Leaves the survivors of top-k, top-p and min-p in candidates_[0, count) and returns count.
// `full_norm` receives sum(exp(z - max)) over the whole row when it was computed on the way
// (top_k off and top_p on), else 0.
std::size_t Sampler::select(const float* logits, float max_logit, double* full_norm) {
  const bool use_top_p = params_.top_p < 1.0f;
  const double log_min_p = log_of_min_p(params_);
  const auto passes_min_p = [&](float z) { return static_cast<double>(z) - max_logit >= log_min_p; };
  *full_norm = 0;
  if (params_.top_k > 0 && params_.top_k < vocab_size_) {
    collect_top_k(logits, static_cast<std::size_t>(params_.top_k));
    // Best first, so that the survivors' order is the same however they were found (the
    // constrained path finds them without the heap).
    std::sort(candidates_.begin(), candidates_.end(), better);
    return select_from_top_k(max_logit);
  }
  double norm = 0;
  candidates_.clear();
  for (std::int32_t i = 0; i < vocab_size_; ++i) {
    if (!finite(logits[i])) continue;
    const float weight = use_top_p ? std::exp(logits[i] - max_logit) : 0.0f;
    norm += weight;
    if (passes_min_p(logits[i])) candidates_.push_back({logits[i], i, weight});
  }
  *full_norm = norm;
  return use_top_p ? cut_top_p(norm) : candidates_.size();
}

// candidates_ holds the top-k set, best first: min-p and top-p on it.
std::size_t Sampler::select_from_top_k(float max_logit) {
  const double log_min_p = log_of_min_p(params_);
  double norm = 0;  // top-p mass is measured on the top-k set's temperature-1 distribution
  const bool use_top_p = params_.top_p < 1.0f;
  if (use_top_p)
    for (Candidate& c : candidates_) norm += c.weight = std::exp(c.logit - max_logit);
  // Sorted best first, the survivors of min-p are a prefix.
  const auto last = std::find_if(candidates_.begin(), candidates_.end(), [&](const Candidate& c) {
    return static_cast<double>(c.logit) - max_logit < log_min_p;
  });
  candidates_.erase(last, candidates_.end());
  return use_top_p ? cut_top_p(norm) : candidates_.size();
}

std::size_t Sampler::cut_top_p(double norm) {
  const std::size_t count = candidates_.size();

  // top-p: the smallest prefix of the descending order whose mass reaches top_p. A quickselect
  // on mass finds it without sorting: halve [lo, hi) around its median until the cut lies in a
  // small window, then sort only that window. [0, lo) is kept (unsorted) and better than the
  // rest. Expected O(count) comparisons; the weights were computed once, with the norm.
  const double target = static_cast<double>(params_.top_p) * norm;
  const auto first = candidates_.begin();
  const auto mass_of = [&](std::size_t from, std::size_t to) {
    double m = 0;
    for (std::size_t i = from; i < to; ++i) m += first[i].weight;
    return m;
  };
  double mass = 0;  // of [0, lo)
  std::size_t lo = 0, hi = count;
  while (hi - lo > 64) {
    const std::size_t mid = lo + (hi - lo) / 2;
    std::nth_element(first + lo, first + mid, first + hi, better);
    const double upper = mass_of(lo, mid);
    if (mass + upper >= target) {
      hi = mid;
    } else {
      mass += upper;
      lo = mid;
    }
  }
  std::sort(first + lo, first + hi, better);
  for (std::size_t i = lo; i < hi; ++i) {
    mass += first[i].weight;
    if (mass >= target) return i + 1;
  }
  return hi;  // rounding: the window's sum fell a hair short of what the halving measured
}

std::int32_t Sampler::draw(std::size_t count, float max_logit) {
  const float inv_t = 1.0f / params_.temperature;
  weights_.resize(count);
  double total = 0;
  for (std::size_t i = 0; i < count; ++i) total += weights_[i] = std::exp((candidates_[i].logit - max_logit) * inv_t);
  const double u = uniform01() * total;
  double acc = 0;
  for (std::size_t i = 0; i < count; ++i) {
    acc += weights_[i];
    if (u < acc) return candidates_[i].id;
  }
  return candidates_[count - 1].id;  // u landed in the rounding gap at the very end
}

// The constrained choice from the best allowed candidates (see sampler.hpp), on a row that has
// its bias and penalties but no mask. Returns -1 when it cannot decide without the mask: too
// few of the scanned candidates are allowed, or the row's maximum is not finite (the plain
// path's answer, an error or not, then stands).
std::int32_t Sampler::sample_allowed(const float* logits, grammar::TokenConstraint& constraint) {
  const RowMax peak = row_max(logits, vocab_size_);
  const float max_logit = peak.logit;
  const std::int32_t best = peak.id;
  if (best < 0 || !finite(max_logit)) return -1;
  // Greedy and the row's argmax allowed: it is the masked row's argmax too (ties: every lower
  // id has a smaller logit).
  if (greedy_ && constraint.allows(best)) return best;
  const std::size_t k = greedy_ ? 1 : static_cast<std::size_t>(params_.top_k);
  const std::size_t scan = std::min(static_cast<std::size_t>(vocab_size_), std::max(kAllowedScan, 4 * k));
  collect_top_k(logits, scan);
  std::sort(candidates_.begin(), candidates_.end(), better);
  const bool whole_row = candidates_.size() < scan;  // every finite logit is a candidate
  std::size_t kept = 0;
  for (std::size_t i = 0; i < candidates_.size() && kept < k; ++i)
    if (constraint.allows(candidates_[i].id)) candidates_[kept++] = candidates_[i];
  if (kept < k && !whole_row) {
    // Few tokens pass here (a state inside the JSON structure): the k best of the state's
    // mask, read bit by bit, without writing the row or passing over it again. The mask of
    // such a state is a short walk of the trie (it prunes at the first byte) and is cached.
    const grammar::TokenMask& mask = constraint.mask();
    candidates_.clear();
    for (std::size_t w = 0; w < mask.size(); ++w)
      for (std::uint64_t bits = mask[w]; bits != 0; bits &= bits - 1)
        if (const auto id = static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
            constraint.fits(id))
          offer(logits, id, k);
    if (constraint.can_end())
      for (std::int32_t id : constraint.end_tokens()) offer(logits, id, k);
    std::sort(candidates_.begin(), candidates_.end(), better);
    kept = candidates_.size();
  }
  if (kept == 0) return -1;
  candidates_.resize(kept);
  if (greedy_) return candidates_[0].id;
  const float max_allowed = candidates_[0].logit;
  return draw(select_from_top_k(max_allowed), max_allowed);
}

std::int32_t Sampler::sample(float* logits, const std::vector<std::int32_t>& history, float* logprob,
                             std::vector<TokenLogprob>* top, grammar::TokenConstraint* constraint, bool mask_always) {
  // The log-probabilities need the masked row's whole sum, and top_k off (or as large as the
  // vocabulary) samples from all of it: those take the mask.
  const bool whole_row_needed = logprob != nullptr || (top != nullptr && params_.top_logprobs > 0) ||
                                (!greedy_ && !(params_.top_k > 0 && params_.top_k < vocab_size_));
  const bool check_candidates = constraint != nullptr && !mask_always && !whole_row_needed;
  if (constraint != nullptr && !check_candidates) constraint->apply(logits);
  for (const LogitBias& b : params_.logit_bias)  // biases that add up past the largest float stay a number
    logits[b.token] = std::min(logits[b.token] + b.bias, std::numeric_limits<float>::max());
  apply_penalties(logits, history);
  if (check_candidates) {
    const std::int32_t id = sample_allowed(logits, *constraint);
    if (id >= 0) {
      if (top != nullptr) top->clear();
      return id;
    }
    constraint->apply(logits);  // the plain path from here; -infinity is kept by what follows
  }

  // Argmax (ties -> lowest id); NaN logits are never chosen.
  // Named, not a structured binding: log_p below captures max_logit, which Clang before 16
  // refuses for a binding.
  const RowMax peak = row_max(logits, vocab_size_);
  const float max_logit = peak.logit;
  const std::int32_t best = peak.id;
  if (best < 0 || !finite(max_logit)) {
    // Every logit -infinity is the request's doing (its logit_bias, with a grammar); NaN or
    // +infinity from the model is not.
    if (max_logit == -std::numeric_limits<float>::infinity() &&
        std::none_of(logits, logits + vocab_size_, [](float z) { return std::isnan(z); }))
      fail(ErrorCode::invalid_argument,
           "no token can be sampled: logit_bias and the grammar exclude every one (-infinity)");
    fail(ErrorCode::internal, "logits row has no finite maximum (max = {})", max_logit);
  }

  std::int32_t id = best;
  double norm = 0;  // sum(exp(z - max)) over the row, when select() computed it
  if (!greedy_) {
    id = draw(select(logits, max_logit, &norm), max_logit);
  }

  if (logprob != nullptr || (top != nullptr && params_.top_logprobs > 0)) {
    double z = norm;
    if (z == 0)
      for (std::int32_t i = 0; i < vocab_size_; ++i)
        if (finite(logits[i])) z += std::exp(logits[i] - max_logit);
    const double log_z = std::log(z);
    const auto log_p = [&](std::int32_t i) {
      return static_cast<float>(static_cast<double>(logits[i]) - max_logit - log_z);
    };
    if (logprob != nullptr) *logprob = log_p(id);
    if (top != nullptr) {
      // The chosen token is already in candidates_ when sampling ran; the alternatives are
      // collected afresh from the whole row (the sampled survivors may be fewer than n).
      collect_top_k(logits, static_cast<std::size_t>(params_.top_logprobs));
      std::sort(candidates_.begin(), candidates_.end(), better);
      top->clear();
      for (const Candidate& c : candidates_) top->push_back({c.id, log_p(c.id)});
    }
  } else if (top != nullptr) {
    top->clear();
  }
  return id;
}

}  // namespace ember::runtime
