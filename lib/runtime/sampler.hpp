// Token sampling: turns one row of logits into the next token id under a request's
// SamplingParams. Pipeline (the order matters and is fixed):
//
//   logit_bias (added to the raw row; a grammar's mask, applied by the caller before sample(),
//   has already set the forbidden tokens to -infinity)
//   -> penalties (repetition, presence, frequency over the last penalty_last_n ids of `history`)
//   -> greedy argmax when temperature == 0, otherwise
//   -> top-k -> top-p -> min-p   (all three on the temperature-1 distribution)
//   -> temperature -> softmax over the survivors -> one draw from the request's RNG.
//
// Thread-safety: a Sampler is per-request state; one thread at a time may call sample().
#pragma once

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
  std::int32_t sample(float* logits, const std::vector<std::int32_t>& history,
                      float* logprob = nullptr, std::vector<TokenLogprob>* top = nullptr);

  int vocab_size() const { return vocab_size_; }

  struct Candidate {
    float logit;
    std::int32_t id;
    float weight;  // exp(logit - max), set where top-p needs it
  };

 private:
  void apply_penalties(float* logits, const std::vector<std::int32_t>& history);
  void collect_top_k(const float* logits, std::size_t k);
  std::size_t select(const float* logits, float max_logit, double* full_norm);
  std::int32_t draw(std::size_t count, float max_logit);
  double uniform01();  // [0, 1) with 53 random bits, identical on every standard library

  SamplingParams params_;
  int vocab_size_;
  std::mt19937_64 rng_;                     // fully specified by the standard: reproducible
  std::vector<Candidate> candidates_;       // scratch, reused across calls
  std::vector<float> weights_;              // scratch: tempered weights of the survivors
  std::vector<std::int32_t> window_;        // scratch for the penalty window
};

}  // namespace ember::runtime
