// Token sampling: turns one row of logits into the next token id under a request's
// SamplingParams. Pipeline (the order matters and is fixed):
//
//   grammar mask (the tokens a constrained request's grammar forbids get -infinity)
//   -> logit_bias (added to the row)
//   -> penalties (repetition, presence, frequency over the last penalty_last_n ids of `history`)
//   -> greedy argmax when temperature == 0, otherwise
//   -> top-k -> top-p -> min-p   (all three on the temperature-1 distribution)
//   -> temperature -> softmax over the survivors -> one draw from the request's RNG.
//
// The grammar mask without computing it: the mask, the bias and the penalties each change
// every token on its own, and -infinity stays -infinity through the other two, so they may run
// in any order. Greedy decoding needs only the best allowed token and top-k sampling only the k
// best allowed ones (in order), so when no logprob is asked for, the sampler takes the row's
// best candidates in order, asks the grammar about each (TokenConstraint::allows, a walk of the
// token's bytes) until it has k, and samples them exactly as it would after the mask. When
// too few of the best 256 (or 4k) are allowed, it takes the k best of the state's mask, read
// bit by bit (such states allow few tokens: their masks are short trie walks, and cached). Both ways give the same token from the same RNG draw (tests/runtime/
// test_sampler.cpp compares them); the measured effect is in docs/benchmarks.md.
//
// Thread-safety: a Sampler is per-request state; one thread at a time may call sample().
#pragma once

#include "grammar/token_mask.hpp"

#include <ember/ember.hpp>

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace ember::runtime {

// Throws Error(invalid_argument) naming the first bad field of `p` (see the checks in
// sampler.cpp: NaN or out-of-range numbers, negative counts, empty stop strings). With
// vocab_size > 0 the logit_bias token ids are checked against it too.
void validate(const SamplingParams& p, int vocab_size = 0);

class Sampler {
 public:
  // Validates `p` and seeds the RNG with p.seed. Throws Error(invalid_argument) for bad
  // parameters or vocab_size <= 0.
  Sampler(const SamplingParams& p, int vocab_size);

  // Picks the next token from one row of `vocab_size` raw logits. `logits` is scratch: the
  // penalties are applied to it in place. `history` is prompt + generated ids (penalties only).
  // If `logprob` is given it receives log softmax(z)[id], where z is the row after the penalties
  // and before temperature and truncation: the model's own (penalised) log-probability of the
  // chosen token, comparable across sampling settings. Throws Error(invalid_argument) for a
  // history id outside [0, vocab_size) and Error(internal) for a row without a finite maximum.
  // If `top` is given it receives the params' top_logprobs best tokens of that same
  // distribution, best first (ties to the lower id).
  // `constraint` (a constrained request's grammar state, or null) restricts the choice to the
  // tokens its grammar allows now; it is not advanced. `mask_always` computes the whole mask
  // every time (the plain path, kept for tests and measurements).
  std::int32_t sample(float* logits, const std::vector<std::int32_t>& history, float* logprob = nullptr,
                      std::vector<TokenLogprob>* top = nullptr, grammar::TokenConstraint* constraint = nullptr,
                      bool mask_always = false);

  int vocab_size() const { return vocab_size_; }

  struct Candidate {
    float logit;
    std::int32_t id;
    float weight;  // exp(logit - max), set where top-p needs it
  };

 private:
  void apply_penalties(float* logits, const std::vector<std::int32_t>& history);
  void collect_top_k(const float* logits, std::size_t k);
  void offer(const float* logits, std::int32_t i, std::size_t k);
  std::size_t select(const float* logits, float max_logit, double* full_norm);
  std::size_t select_from_top_k(float max_logit);
  std::size_t cut_top_p(double norm);
  std::int32_t sample_allowed(const float* logits, grammar::TokenConstraint& constraint);
  std::int32_t draw(std::size_t count, float max_logit);
  double uniform01();  // [0, 1) with 53 random bits, identical on every standard library

  SamplingParams params_;
  int vocab_size_;
  // Greedy: temperature 0, or one so small that 1 / T overflows (every weight but the best's
  // would be 0 * infinity).
  bool greedy_;
  std::mt19937_64 rng_;                // fully specified by the standard: reproducible
  std::vector<Candidate> candidates_;  // scratch, reused across calls
  std::vector<float> weights_;         // scratch: tempered weights of the survivors
  std::vector<std::int32_t> window_;   // scratch for the penalty window
};

}  // namespace ember::runtime
