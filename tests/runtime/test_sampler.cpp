#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/token_mask.hpp"
#include "runtime/sampler.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using ember::SamplingParams;
using ember::runtime::Sampler;

namespace {

SamplingParams greedy_params() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

// Sampling with no truncation: the plain softmax at the given temperature.
SamplingParams plain_params(float temperature, std::uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.seed = seed;
  return p;
}

std::vector<double> softmax(const std::vector<float>& z, double temperature = 1) {
  const double m = *std::max_element(z.begin(), z.end());
  std::vector<double> p(z.size());
  double s = 0;
  for (std::size_t i = 0; i < z.size(); ++i) s += p[i] = std::exp((z[i] - m) / temperature);
  for (double& x : p) x /= s;
  return p;
}

// Draws n samples and returns the histogram.
std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int> counts(logits.size(), 0);
  const std::vector<std::int32_t> history;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = logits;
    ++counts[static_cast<std::size_t>(s.sample(row.data(), history))];
  }
  return counts;
}

// Pearson chi-square of observed counts against expected probabilities (cells with p > 0).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double chi = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) continue;
    const double e = p[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

std::vector<float> random_logits(int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> z(static_cast<std::size_t>(n));
  for (float& x : z) x = d(rng);
  return z;
}

}  // namespace

TEST_CASE("greedy picks the argmax, ties go to the lowest id") {
  Sampler s(greedy_params(), 6);
  std::vector<float> z{0.5f, 2.0f, -1.0f, 3.5f, 3.5f, 1.0f};
  CHECK(s.sample(z.data(), {}) == 3);
  std::vector<float> big = random_logits(49152, 7);
  const auto expected = std::max_element(big.begin(), big.end()) - big.begin();
  Sampler s2(greedy_params(), 49152);
  CHECK(s2.sample(big.data(), {}) == expected);
  // Rows longer than the argmax's lanes: the tie is taken at its lowest id whichever lane holds
  // it, NaN in a lane is passed over, and a maximum in the tail past the last whole lane counts.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [first, second] : {std::pair{37, 5}, std::pair{5, 37}, std::pair{16, 17}}) {
    std::vector<float> row(51, 1.0f);
    row[2] = nan;
    row[static_cast<std::size_t>(first)] = row[static_cast<std::size_t>(second)] = 4.0f;
    Sampler s3(greedy_params(), 51);
    CHECK(s3.sample(row.data(), {}) == std::min(first, second));
  }
  std::vector<float> tail(51, 1.0f);
  tail[50] = 2.0f;
  tail[0] = nan;
  Sampler s4(greedy_params(), 51);
  CHECK(s4.sample(tail.data(), {}) == 50);
}

TEST_CASE("NaN logits are never chosen; a row without a finite value is an internal error") {
  Sampler s(greedy_params(), 3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> z{nan, -5.0f, nan};
  CHECK(s.sample(z.data(), {}) == 1);
  Sampler t(plain_params(1.0f, 1), 3);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> row{nan, -5.0f, -std::numeric_limits<float>::infinity()};
    CHECK(t.sample(row.data(), {}) == 1);
  }
  std::vector<float> none{nan, nan, -std::numeric_limits<float>::infinity()};
  try {
    s.sample(none.data(), {});
    FAIL("expected an error");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::internal);
  }
}

TEST_CASE("settings that push a logit past the largest float, or every one to -infinity") {
  const float inf = std::numeric_limits<float>::infinity();
  // A tiny repetition penalty divides a seen positive logit to +infinity; two biases of 3e38 on
  // one token add up to it: either stays the largest number, and that token is chosen.
  SamplingParams tiny = greedy_params();
  tiny.repetition_penalty = 1e-38f;
  Sampler penalised(tiny, 4);
  std::vector<float> row{1.0f, 10.0f, 2.0f, 3.0f};
  CHECK(penalised.sample(row.data(), {1}) == 1);
  CHECK(row[1] == std::numeric_limits<float>::max());
  SamplingParams biased = greedy_params();
  biased.logit_bias = {{2, 3e38f}, {2, 3e38f}};
  Sampler twice(biased, 4);
  row = {1.0f, 10.0f, 2.0f, 3.0f};
  CHECK(twice.sample(row.data(), {}) == 2);
  // A temperature whose reciprocal overflows is greedy, not 0 * infinity weights (which drew the
  // last candidate).
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    Sampler cold(plain_params(1e-40f, seed), 4);
    row = {1.0f, 10.0f, 2.0f, 3.0f};
    CHECK(cold.sample(row.data(), {}) == 1);
  }
  // Every token biased to -infinity: the request's own doing, invalid_argument (not internal).
  SamplingParams excluded = greedy_params();
  for (std::int32_t t = 0; t < 4; ++t) excluded.logit_bias.push_back({t, -inf});
  Sampler none(excluded, 4);
  row = {1.0f, 10.0f, 2.0f, 3.0f};
  try {
    none.sample(row.data(), {});
    FAIL("expected an error");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::invalid_argument);
  }
}

TEST_CASE("top_k = 1 equals greedy at any temperature") {
  SamplingParams p = plain_params(1.5f, 42);
  p.top_k = 1;
  Sampler s(p, 49152);
  Sampler g(greedy_params(), 49152);
  for (std::uint64_t row = 0; row < 20; ++row) {
    std::vector<float> a = random_logits(49152, row), b = a;
    CHECK(s.sample(a.data(), {}) == g.sample(b.data(), {}));
  }
}

TEST_CASE("sampled frequencies match the softmax (chi-square bound)") {
  const std::vector<float> z{1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f, -3.0f, 0.25f};
  const int n = 20000;
  // 7 degrees of freedom: the 99.9% quantile of chi-square(7) is 24.3.
  for (const float t : {1.0f, 0.7f, 2.0f}) {
    Sampler s(plain_params(t, 1234), static_cast<int>(z.size()));
    const std::vector<int> counts = histogram(s, z, n);
    const double chi = chi_square(counts, softmax(z, t), n);
    INFO("temperature ", t, " chi-square ", chi);
    CHECK(chi < 24.3);
  }
  // A wrong distribution (temperature 1 law tested against temperature 2 draws) must fail the
  // same bound, or the test above could not catch anything.
  Sampler s(plain_params(2.0f, 1234), static_cast<int>(z.size()));
  CHECK(chi_square(histogram(s, z, n), softmax(z, 1.0), n) > 100);
}

TEST_CASE("same seed gives the same tokens, different seeds differ") {
  const std::vector<float> z = random_logits(1000, 3);
  auto run = [&](std::uint64_t seed) {
    SamplingParams p = plain_params(1.0f, seed);
    Sampler s(p, 1000);
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> row = z;
      out.push_back(s.sample(row.data(), {}));
    }
    return out;
  };
  CHECK(run(5) == run(5));
  CHECK(run(5) != run(6));
}

TEST_CASE("top_k keeps exactly the k best and samples them by softmax") {
  const std::vector<float> z{0.0f, 3.0f, 1.0f, 2.9f, -2.0f, 2.0f};
  SamplingParams p = plain_params(1.0f, 9);
  p.top_k = 3;  // keeps ids 1, 3, 5
  Sampler s(p, 6);
  const int n = 20000;
  const std::vector<int> counts = histogram(s, z, n);
  CHECK(counts[0] + counts[2] + counts[4] == 0);
  const std::vector<double> kept = softmax({3.0f, 2.9f, 2.0f});
  std::vector<double> expected(6, 0.0);
  expected[1] = kept[0], expected[3] = kept[1], expected[5] = kept[2];
  CHECK(chi_square(counts, expected, n) < 13.8);  // chi-square(2) 99.9%
}

TEST_CASE("top_p keeps the smallest set reaching the mass") {
  // probabilities 0.5, 0.25, 0.125, 0.125 (as logits of their logs)
  const std::vector<float> z{std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)};
  SamplingParams p = plain_params(1.0f, 11);
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.75: ids 1 and 3
  Sampler s(p, 4);
  const std::vector<int> counts = histogram(s, z, 6000);
  CHECK(counts[0] == 0);
  CHECK(counts[2] == 0);
  CHECK(counts[1] > 3600);  // 2/3 of 6000 = 4000
  CHECK(counts[3] > 1600);  // 1/3 of 6000 = 2000

  p.top_p = 0.5f;  // the best token alone reaches 0.5
  Sampler one(p, 4);
  const std::vector<int> only = histogram(one, z, 500);
  CHECK(only[1] == 500);
}

TEST_CASE("top_p on a large vocabulary matches a full-sort reference") {
  const int v = 49152;
  const std::vector<float> z = random_logits(v, 21);
  const std::vector<double> prob = softmax(z);
  std::vector<int> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
  double mass = 0;
  std::size_t keep = 0;
  while (mass < 0.9) mass += prob[static_cast<std::size_t>(order[keep++])];
  REQUIRE(keep > 64);  // the doubling windows of the partial sort are exercised

  // The kept tokens in 8 bins by rank, each with its share of the kept mass: a cut that keeps
  // too few (or drops a window's tokens) leaves a bin short, one that keeps too many samples a
  // token outside them.
  const std::size_t bins = 8;
  std::vector<int> bin_of(v, -1);
  std::vector<double> expected(bins, 0.0);
  for (std::size_t r = 0; r < keep; ++r) {
    const auto id = static_cast<std::size_t>(order[r]);
    bin_of[id] = static_cast<int>(r * bins / keep);
    expected[r * bins / keep] += prob[id] / mass;
  }
  SamplingParams p = plain_params(1.0f, 5);
  p.top_p = 0.9f;
  Sampler s(p, v);
  const int n = 1000;
  std::vector<int> counts(bins, 0);
  int outside = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<float> row = z;
    const int bin = bin_of[static_cast<std::size_t>(s.sample(row.data(), {}))];
    if (bin < 0)
      ++outside;
    else
      ++counts[static_cast<std::size_t>(bin)];
  }
  CHECK(outside == 0);
  CHECK(chi_square(counts, expected, n) < 24.3);  // chi-square(7) 99.9%
}

TEST_CASE("min_p drops tokens below min_p * p(best)") {
  // p ratios to the best: 1, 0.5, 0.2, 0.05
  const std::vector<float> z{std::log(1.0f), std::log(0.5f), std::log(0.2f), std::log(0.05f)};
  SamplingParams p = plain_params(1.0f, 13);
  p.min_p = 0.3f;  // keeps 0 and 1
  Sampler s(p, 4);
  const std::vector<int> counts = histogram(s, z, 3000);
  CHECK(counts[2] == 0);
  CHECK(counts[3] == 0);
  CHECK(counts[0] > 1800);  // 2/3 of 3000
  CHECK(counts[1] > 800);

  p.min_p = 0.1f;  // keeps 0, 1, 2
  Sampler t(p, 4);
  const std::vector<int> c2 = histogram(t, z, 3000);
  CHECK(c2[3] == 0);
  CHECK(c2[2] > 0);
}

TEST_CASE("repetition, presence and frequency penalties change exactly the seen logits") {
  SamplingParams p = greedy_params();
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.penalty_last_n = 4;
  Sampler s(p, 6);
  std::vector<float> z{4.0f, -2.0f, 1.0f, 3.0f, 0.5f, 2.0f};
  // id 5 is outside the last 4 of history; id 0 seen twice, id 1 once, id 3 once.
  const std::vector<std::int32_t> history{5, 0, 1, 0, 3};
  s.sample(z.data(), history);
  CHECK(z[0] == doctest::Approx(4.0 / 2 - 0.5 - 2 * 0.25));  // 1.0
  CHECK(z[1] == doctest::Approx(-2.0 * 2 - 0.5 - 0.25));     // -4.75
  CHECK(z[2] == doctest::Approx(1.0));
  CHECK(z[3] == doctest::Approx(3.0 / 2 - 0.5 - 0.25));  // 0.75
  CHECK(z[4] == doctest::Approx(0.5));
  CHECK(z[5] == doctest::Approx(2.0));  // outside the window

  // With the penalties the argmax moves from id 0 to id 5.
  std::vector<float> again{4.0f, -2.0f, 1.0f, 3.0f, 0.5f, 2.0f};
  Sampler g(p, 6);
  CHECK(g.sample(again.data(), history) == 5);

  // penalty_last_n = -1 covers the whole history; 0 disables the penalties.
  p.penalty_last_n = -1;
  Sampler all(p, 6);
  std::vector<float> z2{4.0f, -2.0f, 1.0f, 3.0f, 0.5f, 2.0f};
  all.sample(z2.data(), history);
  CHECK(z2[5] == doctest::Approx(2.0 / 2 - 0.5 - 0.25));
  p.penalty_last_n = 0;
  Sampler off(p, 6);
  std::vector<float> z3{4.0f, -2.0f, 1.0f, 3.0f, 0.5f, 2.0f};
  off.sample(z3.data(), history);
  CHECK(z3[0] == 4.0f);

  // A history id outside the vocabulary is the caller's error, reported, not read out of bounds.
  p.penalty_last_n = 64;
  Sampler bad(p, 6);
  std::vector<float> z4(6, 0.0f);
  const std::vector<std::int32_t> wrong{1, 6};
  CHECK_THROWS_AS(bad.sample(z4.data(), wrong), ember::Error);
}

TEST_CASE("logprob is log softmax of the penalised row, before temperature and truncation") {
  const std::vector<float> z{1.0f, 0.0f, 2.0f, -1.0f, 0.5f};
  SamplingParams p = plain_params(0.5f, 17);
  p.top_k = 2;
  p.repetition_penalty = 1.5f;
  Sampler s(p, 5);
  const std::vector<std::int32_t> history{2};
  // after the penalty: id 2 -> 2 / 1.5
  std::vector<float> pen = z;
  pen[2] = 2.0f / 1.5f;
  const std::vector<double> ref = softmax(pen);
  for (int i = 0; i < 20; ++i) {
    std::vector<float> row = z;
    float lp = 0;
    const std::int32_t id = s.sample(row.data(), history, &lp);
    CHECK((id == 0 || id == 2));  // top_k = 2 of the penalised row
    CHECK(lp == doctest::Approx(std::log(ref[static_cast<std::size_t>(id)])).epsilon(1e-5));
  }
  Sampler g(greedy_params(), 5);
  std::vector<float> row = z;
  float lp = 0;
  CHECK(g.sample(row.data(), {}, &lp) == 2);
  CHECK(lp == doctest::Approx(std::log(softmax(z)[2])).epsilon(1e-6));
}

namespace {

template <class F>
SamplingParams with(F mutate) {
  SamplingParams p;
  mutate(p);
  return p;
}

ember::ErrorCode code_of(const SamplingParams& p) {
  try {
    ember::runtime::validate(p);
  } catch (const ember::Error& e) {
    return e.code();
  }
  return ember::ErrorCode::internal;  // "did not throw" shows up as a wrong code
}

}  // namespace

// Each case checks the throw and that the message names the offending field.
#define CHECK_REJECTS(field, mutation)                                                                  \
  do {                                                                                                  \
    const SamplingParams bad_params = with([&](SamplingParams& p) { mutation; });                       \
    CHECK_THROWS_WITH_AS(ember::runtime::validate(bad_params), doctest::Contains(field), ember::Error); \
    CHECK(code_of(bad_params) == ember::ErrorCode::invalid_argument);                                   \
  } while (0)

TEST_CASE("validate rejects each bad field with invalid_argument naming it") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  CHECK_NOTHROW(ember::runtime::validate(SamplingParams{}));
  CHECK_REJECTS("max_tokens", p.max_tokens = -1);
  CHECK_REJECTS("temperature", p.temperature = nan);
  CHECK_REJECTS("temperature", p.temperature = -0.1f);
  CHECK_REJECTS("temperature", p.temperature = inf);
  CHECK_REJECTS("top_k", p.top_k = -1);
  CHECK_REJECTS("top_p", p.top_p = 0.0f);
  CHECK_REJECTS("top_p", p.top_p = 1.01f);
  CHECK_REJECTS("top_p", p.top_p = nan);
  CHECK_REJECTS("min_p", p.min_p = -0.01f);
  CHECK_REJECTS("min_p", p.min_p = 1.5f);
  CHECK_REJECTS("min_p", p.min_p = nan);
  CHECK_REJECTS("repetition_penalty", p.repetition_penalty = 0.0f);
  CHECK_REJECTS("repetition_penalty", p.repetition_penalty = -1.0f);
  CHECK_REJECTS("repetition_penalty", p.repetition_penalty = nan);
  CHECK_REJECTS("presence_penalty", p.presence_penalty = nan);
  CHECK_REJECTS("frequency_penalty", p.frequency_penalty = nan);
  CHECK_REJECTS("frequency_penalty", p.frequency_penalty = -inf);
  CHECK_REJECTS("penalty_last_n", p.penalty_last_n = -2);
  CHECK_REJECTS("stop[1]", (p.stop = {"ok", ""}));
  // The boundaries themselves are valid.
  CHECK_NOTHROW(ember::runtime::validate(with([](SamplingParams& p) {
    p.temperature = 0, p.top_p = 1, p.min_p = 1, p.penalty_last_n = -1, p.max_tokens = 0;
    p.top_k = 0, p.presence_penalty = -2, p.frequency_penalty = 2;
  })));
  // The Sampler validates too, and checks its vocabulary size.
  CHECK_THROWS_AS(Sampler(with([](SamplingParams& p) { p.top_p = 2; }), 10), ember::Error);
  CHECK_THROWS_WITH_AS(Sampler(SamplingParams{}, 0), doctest::Contains("vocab_size"), ember::Error);
}

// ---- constrained sampling: asking the grammar about the best candidates == masking the row --

namespace {

// Bytes, JSON-ish pieces and 3000 random words (so that the sampler's scan of the best 256
// candidates can come up short and fall back to the mask), then an end token.
std::shared_ptr<const ember::grammar::TokenTrie> constrained_vocab() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* w : {"{\"", "\":", "\",", "\"}", "true", "false", "null", " \"", "12", "give", "attack", "\"say\"",
                        "\"action\"", "\"count\"", "}", "{", ": \"", "\", \""})
    pieces.push_back(w);
  std::mt19937_64 rng(7);
  const std::string alphabet = "abcdefgh \"{}:,0123456789";
  for (int i = 0; i < 3000; ++i) {
    std::string w;
    for (std::size_t n = 1 + rng() % 6; n > 0; --n) w += alphabet[rng() % alphabet.size()];
    pieces.push_back(w);
  }
  pieces.push_back("<eos>");
  std::vector<bool> usable(pieces.size(), true);
  usable[0] = false;  // a control token: never allowed
  const auto eos = static_cast<std::int32_t>(pieces.size() - 1);
  return std::make_shared<const ember::grammar::TokenTrie>(pieces, usable, std::vector<std::int32_t>{eos});
}

}  // namespace

TEST_CASE("a constrained sample is the same token with or without the whole mask") {
  const auto trie = constrained_vocab();
  const auto grammar =
      std::make_shared<const ember::grammar::Grammar>(ember::grammar::parse_gbnf(ember::grammar::json_schema_to_gbnf(
          R"({"type": "object", "properties": {"say": {"type": "string", "maxLength": 12},
        "action": {"enum": ["give", "attack"]}, "count": {"type": "integer", "minimum": 0, "maximum": 20}},
        "required": ["say", "action", "count"]})")));
  std::vector<SamplingParams> settings;
  settings.push_back(greedy_params());
  settings.push_back(SamplingParams{});  // the defaults: top_k 40, top_p 0.95, min_p 0.05, T 0.8
  SamplingParams p = plain_params(1.3f, 0);
  p.top_k = 5;
  settings.push_back(p);
  p.top_k = 300;  // more than the scan: the quickselect of top-p over many survivors
  p.top_p = 0.9f;
  settings.push_back(p);
  p = SamplingParams{};
  p.repetition_penalty = 1.3f;
  p.logit_bias = {{'"', 2.0f}, {'}', -std::numeric_limits<float>::infinity()}};
  settings.push_back(p);
  p = greedy_params();
  p.frequency_penalty = 0.5f;
  settings.push_back(p);

  const int vocab = trie->vocab_size();
  std::size_t checked = 0, masks_fast = 0, masks_plain = 0, tokens = 0;
  for (std::size_t k = 0; k < settings.size(); ++k) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      CAPTURE(k);
      CAPTURE(seed);
      SamplingParams sp = settings[k];
      sp.seed = seed;
      Sampler fast(sp, vocab), plain(sp, vocab);
      ember::grammar::TokenConstraint a(grammar, trie), b(grammar, trie);
      std::mt19937_64 rng(seed * 100 + k);
      std::vector<std::int32_t> history;
      std::string text;
      for (int step = 0; step < 80; ++step) {
        // Random logits, with a bonus on the allowed tokens half of the time (a model that
        // mostly follows the format) so that both the quick answer and the fallback happen.
        std::vector<float> row = random_logits(vocab, rng());
        if (rng() % 2 == 0) {
          const ember::grammar::TokenMask& m = b.mask();
          for (std::int32_t id = 0; id < vocab; ++id)
            if ((m[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1) row[static_cast<std::size_t>(id)] += 6;
        }
        std::vector<float> row2 = row;
        const std::int32_t x = fast.sample(row.data(), history, nullptr, nullptr, &a);
        const std::int32_t y = plain.sample(row2.data(), history, nullptr, nullptr, &b, /*mask_always=*/true);
        REQUIRE(x == y);
        ++tokens;
        if (trie->is_end_of_generation(x)) break;
        a.accept(x);
        b.accept(y);
        history.push_back(x);
        text += trie->piece(x);
        if (a.complete()) break;
      }
      CHECK(a.matcher().advance(a.matcher().start(), text) != ember::grammar::Matcher::kDead);
      checked += a.tokens_checked();
      masks_fast += a.masks_computed();
      masks_plain += b.masks_computed();
    }
  }
  // The quick path answered most steps without a mask, and the fallback ran too.
  CHECK(checked > tokens);
  CHECK(masks_fast > 0);
  CHECK(masks_fast < masks_plain);
  MESSAGE("tokens ", tokens, ", masks computed: ", masks_fast, " checking candidates, ", masks_plain,
          " masking always");
}

TEST_CASE("logprobs and top_k off take the whole mask") {
  const auto trie = constrained_vocab();
  const auto grammar =
      std::make_shared<const ember::grammar::Grammar>(ember::grammar::parse_gbnf(R"(root ::= "give" | "attack")"));
  const int vocab = trie->vocab_size();
  for (const bool with_logprob : {true, false}) {
    SamplingParams sp = with_logprob ? greedy_params() : plain_params(1.0f, 3);
    Sampler s(sp, vocab);
    ember::grammar::TokenConstraint c(grammar, trie);
    std::vector<float> row = random_logits(vocab, 5);
    float lp = 0;
    const std::int32_t id = s.sample(row.data(), {}, with_logprob ? &lp : nullptr, nullptr, &c);
    CHECK(c.masks_computed() == 1);
    const std::string piece = trie->piece(id);
    CHECK((std::string("give").rfind(piece, 0) == 0 || std::string("attack").rfind(piece, 0) == 0));
    if (with_logprob) CHECK(lp <= 0);
  }
}
