// A real model against llama.cpp (goldens made by tests/reference/make_model_goldens.py):
// teacher-forced next-token agreement and KL divergence, greedy continuations, and the INT8
// path's perplexity against the FP32 path's. Built twice: for the default model (SmolLM2, golden
// prefix smollm2) and, with EMBER_GOLDEN_GEMMA3, for Gemma 3 270M (prefix gemma3).
#include "backend/cpu/cpu_backend.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

namespace ember {
namespace {

// The options with `precision`: the CPU backend's matrix products (int8 or fp32).
backend::BackendOptions at_precision(backend::BackendOptions options, Precision precision) {
  options.precision = precision;
  return options;
}

using nlohmann::json;

json load_golden(const std::string& name) {
  std::ifstream in(test::data_path("reference/" + name));
  REQUIRE_MESSAGE(in.good(), "missing golden file tests/data/reference/", name);
  return json::parse(in);
}

// One row of logits per position of the golden text, with each row's log of the softmax
// normaliser (computed once: Gemma 3's rows are 262,144 wide, and the scoring of them, not the
// forward passes, would otherwise be most of this test's time).
struct Logits {
  std::vector<float> values;
  std::vector<double> logsumexp;
  int vocab = 0;

  std::size_t positions() const { return logsumexp.size(); }
  const float* row(std::size_t i) const { return values.data() + i * static_cast<std::size_t>(vocab); }
  double log_p(std::size_t i, std::int32_t id) const { return row(i)[id] - logsumexp[i]; }
};

// The logits of every position of the golden text (teacher forcing), one row per position.
Logits teacher_forced_logits(backend::Backend& b, const std::vector<std::int32_t>& tokens, int vocab,
                             KvCacheType kv = KvCacheType::f16) {
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16, kv);
  Logits l;
  l.vocab = vocab;
  l.values = runner.append(std::vector<std::int32_t>(tokens.begin(), tokens.end() - 1), /*all_rows=*/true, 256);
  l.logsumexp.resize(l.values.size() / static_cast<std::size_t>(vocab));
  const auto rows = static_cast<std::ptrdiff_t>(l.positions());
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t i = 0; i < rows; ++i) {
    const float* row = l.row(static_cast<std::size_t>(i));
    const float max = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);  // float exp: a relative 1e-7
    l.logsumexp[static_cast<std::size_t>(i)] = max + std::log(sum);
  }
  return l;
}

struct Model {
  std::shared_ptr<const model::GgufFile> file;
  model::ModelConfig config;
  std::vector<std::int32_t> golden_tokens;
  // fp32: the CPU backend's FP32 path (Precision::fp32; the readable reference computes the
  // same function, arch_golden_test checks it against llama.cpp for every architecture); int8:
  // the file's default weight format; w8a8: WeightFormat::w8a8 (every matrix requantized to
  // INT8 per output row but a Q8_0 lm_head).
  std::unique_ptr<backend::Backend> fp32, int8, w8a8;

  // The golden text's logits with the f16 KV cache, computed once per backend: both teacher-forced
  // test cases compare against them.
  const Logits& f16_logits(backend::Backend& b) {
    auto [it, fresh] = f16_runs.try_emplace(&b);
    if (fresh) it->second = teacher_forced_logits(b, golden_tokens, config.vocab);
    return it->second;
  }

 private:
  std::map<const backend::Backend*, Logits> f16_runs;
};

// What each model must reach. Against llama.cpp on F32 weights (the same function as ember's
// fp32 path) the bounds are the issues' targets; against llama.cpp on the quantized file (which
// quantizes every activation to 8 bits for its dot products, an approximation of its own) they
// sit a little under what was measured, so a regression shows.
struct Bounds {
  double fp32_top1, int8_top1, fp32_kl, int8_kl;  // vs llama.cpp on F32 weights
  double fp32_q_top1, int8_q_top1, int8_q_kl;     // vs llama.cpp on the quantized file
  double default_top1, default_kl;                // the file's default INT8 format, vs F32 weights
  double w8a8_top1, w8a8_kl;                      // WeightFormat::w8a8, vs F32 weights
};

#if defined(EMBER_GOLDEN_GEMMA3)
constexpr const char* kPrefix = "gemma3";
std::string require_model() { return test::require_gemma3_model(); }
// The bounds sit at or just under what was measured (docs/benchmarks.md#golden-bounds); the
// default's top-1 bound against F32 weights is llama.cpp's own agreement with them on the file.
constexpr Bounds kBounds{0.99, 0.94, 0.001, 0.01, 0.95, 0.935, 0.015, 0.959, 0.006, 0.94, 0.01};
#else
constexpr const char* kPrefix = "smollm2";
std::string require_model() { return test::require_default_model(); }
// The bounds of both formats are the speed issue's: the default at least llama.cpp's on this
// Q4_1 file, w8a8 at least llama.cpp's on its Q8_0 requantization (docs/benchmarks.md#golden-bounds).
constexpr Bounds kBounds{0.97, 0.94, 0.001, 0.01, 0.965, 0.935, 0.01, 0.967, 0.0025, 0.969, 0.0034};
#endif

std::string golden_name(const char* suffix) { return std::string(kPrefix) + suffix; }

Model& default_model() {
  static Model m = [] {
    Model model;
    model.file = model::GgufFile::open(require_model());
    model.config = model::read_model_config(*model.file);
    model.golden_tokens =
        load_golden(golden_name("_f32_teacher_forced.json"))["tokens"].get<std::vector<std::int32_t>>();
    backend::BackendOptions options;
    options.threads = 2;
    model.fp32 = backend::cpu::make_cpu_backend(model.file, model.config, at_precision(options, Precision::fp32));
    // The INT8 backend exactly as the engine builds it: smoothing calibrated on the built-in text.
    const auto tokenizer = tokenizer::Tokenizer::from_gguf(*model.file);
    options.tokenize = [tokenizer](std::string_view text) {
      return tokenizer->encode(text, true, tokenizer->add_bos());
    };
    model.int8 = backend::cpu::make_cpu_backend(model.file, model.config, at_precision(options, Precision::int8));
    options.weight_format = WeightFormat::w8a8;
    model.w8a8 = backend::cpu::make_cpu_backend(model.file, model.config, at_precision(options, Precision::int8));
    return model;
  }();
  return m;
}

struct TeacherForced {
  double top1 = 0;        // fraction of positions whose argmax equals llama.cpp's
  int clear_misses = 0;   // disagreements where llama.cpp's own top-2 logits are >= 0.3 apart
  double kl = 0;          // mean KL(llama.cpp || ember) over llama.cpp's top-k support
  double perplexity = 0;  // ember's own perplexity of the text
  int positions = 0;
};

TeacherForced score(const Logits& logits, const json& golden) {
  const auto tokens = golden["tokens"].get<std::vector<std::int32_t>>();
  const auto& positions = golden["positions"];
  TeacherForced r;
  r.positions = static_cast<int>(positions.size());
  double nll = 0;
  int agree = 0;
  for (int i = 0; i < r.positions; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const auto& p = positions[at];
    const auto ids = p["ids"].get<std::vector<std::int32_t>>();
    const auto ref_logits = p["logits"].get<std::vector<double>>();
    const double ref_lse = p["logsumexp"].get<double>();
    const bool same = test::argmax(logits.row(at), logits.vocab) == ids[0];
    agree += same;
    if (!same && ref_logits[0] - ref_logits[1] >= 0.3) ++r.clear_misses;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const double log_p = ref_logits[k] - ref_lse;
      r.kl += std::exp(log_p) * (log_p - logits.log_p(at, ids[k]));
    }
    nll -= logits.log_p(at, tokens[at + 1]);
  }
  r.top1 = static_cast<double>(agree) / r.positions;
  r.kl /= r.positions;
  r.perplexity = std::exp(nll / r.positions);
  return r;
}

void report(const std::string& path, const std::string& reference, const TeacherForced& t) {
  MESSAGE(path, " vs ", reference, ": top-1 agreement ", t.top1 * 100, " % over ", t.positions, " positions (",
          t.clear_misses, " misses where llama.cpp is not near a tie), mean KL ", t.kl, ", perplexity ", t.perplexity);
}

// Two references (tests/reference/make_model_goldens.py): llama.cpp on an F32 copy of the
// model's weights computes the same function as ember's FP32 path, so it is the one the targets
// of the issues are checked against. llama.cpp on the quantized file itself quantizes every
// activation to 8 bits (Q8_1) for its dot products, an approximation of its own: agreement with
// it is reported and guarded, and its misses sit at its near-ties.
TEST_CASE("teacher-forced agreement with llama.cpp, KL divergence and perplexity") {
  Model& m = default_model();
  const json exact = load_golden(golden_name("_f32_teacher_forced.json"));
  const json quantized = load_golden(golden_name("_teacher_forced.json"));
  REQUIRE(exact["positions"].size() >= 1000);
  REQUIRE(exact["tokens"] == quantized["tokens"]);
  const Logits& fp32_logits = m.f16_logits(*m.fp32);
  const TeacherForced fp32 = score(fp32_logits, exact), fp32_q = score(fp32_logits, quantized);
  report("fp32", "llama.cpp on F32 weights", fp32);
  report("fp32", "llama.cpp on the quantized file", fp32_q);
  CHECK(fp32.top1 >= kBounds.fp32_top1);
  CHECK(fp32.kl < kBounds.fp32_kl);
  CHECK(fp32_q.top1 >= kBounds.fp32_q_top1);
  // Both INT8 weight formats (the file's default, w4a8 where its matrices are 4-bit, and w8a8).
  const auto check_int8 = [&](const Logits& logits, const std::string& format, bool file_default) {
    const std::string name = "int8 " + format;
    CAPTURE(name);
    const TeacherForced int8 = score(logits, exact), int8_q = score(logits, quantized);
    report(name, "llama.cpp on F32 weights", int8);
    report(name, "llama.cpp on the quantized file", int8_q);
    CHECK(int8.top1 >= kBounds.int8_top1);
    CHECK(int8.kl < kBounds.int8_kl);
    CHECK(int8_q.top1 >= kBounds.int8_q_top1);
    CHECK(int8_q.kl < kBounds.int8_q_kl);
    CHECK(std::fabs(int8.perplexity / fp32.perplexity - 1.0) <= 0.03);
    CHECK(int8.top1 >= (file_default ? kBounds.default_top1 : kBounds.w8a8_top1));
    CHECK(int8.kl < (file_default ? kBounds.default_kl : kBounds.w8a8_kl));
  };
  check_int8(m.f16_logits(*m.int8), m.int8->weight_format(), true);
  check_int8(teacher_forced_logits(*m.w8a8, m.golden_tokens, m.config.vocab), m.w8a8->weight_format(), false);
}

// Per position, over the whole vocabulary: does `b`'s argmax equal `a`'s, and KL(a || b).
struct Divergence {
  double top1 = 0, kl = 0;
};

Divergence divergence(const Logits& a, const Logits& b) {
  const auto positions = static_cast<std::ptrdiff_t>(a.positions());
  const int vocab = a.vocab;
  double top1 = 0, kl = 0;
#pragma omp parallel for schedule(static) reduction(+ : top1, kl)
  for (std::ptrdiff_t p = 0; p < positions; ++p) {
    const auto i = static_cast<std::size_t>(p);
    const float *ra = a.row(i), *rb = b.row(i);
    top1 += test::argmax(ra, vocab) == test::argmax(rb, vocab);
    // log p_a - log p_b = (a - b) - (lse_a - lse_b), without cancelling the two normalisers.
    const double lse_a = a.logsumexp[i], lse_gap = lse_a - b.logsumexp[i];
    const auto lse_a_f = static_cast<float>(lse_a);
    double row_kl = 0;
    for (int v = 0; v < vocab; ++v) {
      row_kl += static_cast<double>(std::exp(ra[v] - lse_a_f)) * (static_cast<double>(ra[v]) - rb[v] - lse_gap);
    }
    kl += row_kl;
  }
  return {top1 / static_cast<double>(positions), kl / static_cast<double>(positions)};
}

// The int8 KV cache against the f16 one, issue 21's targets: top-1 agreement with llama.cpp on F32
// weights close to the f16 cache's, and mean KL(f16 cache || int8 cache) over the full vocabulary
// at most 0.002, llama.cpp's q8_0 KV against its f16 cache (docs/benchmarks.md#golden-int8-kv).
// On the FP32 path the KL is the KV cache's own error and guards it (a cache without the
// Hadamard rotation fails it); its top-1 fall is a handful of flips at near-ties of llama.cpp's,
// which move with oneDNN's FP32 kernel, another one on each x86 tier: its bound holds at every
// tier. On the INT8 path every activation is rounded to 8 bits, and any change of the K/V moves
// some of those roundings: its KL bound is the or the path's own noise (an f32 cache
// against the f16 one), whichever is larger.
TEST_CASE("int8 KV cache: teacher-forced quality against the f16 cache") {
  Model& m = default_model();
  const json exact = load_golden(golden_name("_f32_teacher_forced.json"));
  const auto run = [&](backend::Backend& b, KvCacheType kv) {
    return teacher_forced_logits(b, m.golden_tokens, m.config.vocab, kv);
  };
  for (backend::Backend* b : {m.fp32.get(), m.int8.get()}) {
    const std::string path = b == m.fp32.get() ? "fp32 weights" : "int8 weights";
    const Logits& f16_logits = m.f16_logits(*b);
    const Logits int8_logits = run(*b, KvCacheType::int8);
    const TeacherForced f16 = score(f16_logits, exact), int8 = score(int8_logits, exact);
    const Divergence d = divergence(f16_logits, int8_logits);
    report(path + ", f16 KV", "llama.cpp on F32 weights", f16);
    report(path + ", int8 KV", "llama.cpp on F32 weights", int8);
    MESSAGE(path, ": int8 KV against f16 KV: top-1 agreement ", d.top1 * 100, " %, mean KL ", d.kl);
    if (b == m.fp32.get()) {
      CHECK(d.kl <= 0.0003);
      CHECK(f16.top1 - int8.top1 <= 0.011);
      CHECK(int8.clear_misses == f16.clear_misses);  // no flip where llama.cpp is decided
    } else {  // at the INT8 path's own noise: that of an f32 cache against the f16 one
      const Divergence floor = divergence(run(*b, KvCacheType::f32), f16_logits);
      MESSAGE(path, ": f16 KV against f32 KV: top-1 agreement ", floor.top1 * 100, " %, mean KL ", floor.kl);
      CHECK(f16.top1 - int8.top1 <= 0.008);
      CHECK(d.kl <= std::max(0.002, 1.25 * floor.kl));
    }
  }
}

// Greedy decoding reproduces llama.cpp's continuation exactly as long as, at every step, the
// argmax of the logits after the prompt and the continuation so far is the continuation's next
// token: so one teacher-forced pass over prompt + continuation (one batch of rows, not 48
// single-token steps) finds where, if anywhere, ember's greedy output would leave it. On the
// CPU backend's FP32 path: the engine's Precision::fp32.
TEST_CASE("greedy continuations equal llama.cpp's (F32 weights) up to near-ties") {
  Model& m = default_model();
  const json golden = load_golden(golden_name("_f32_greedy.json"));
  const auto& cases = golden["cases"];
  REQUIRE(cases.size() >= 20);
  const int vocab = m.config.vocab;
  int exact = 0, near_tie = 0, total_tokens = 0;
  for (const auto& c : cases) {
    const auto prompt = c["prompt_tokens"].get<std::vector<std::int32_t>>();
    const auto expected = c["continuation"].get<std::vector<std::int32_t>>();
    test::SequenceRunner runner(*m.fp32, static_cast<int>(prompt.size() + expected.size()) + 16);
    // The prompt but its last token, then that token and the continuation with all their rows.
    if (prompt.size() > 1) runner.append(std::vector<std::int32_t>(prompt.begin(), prompt.end() - 1));
    std::vector<std::int32_t> forced{prompt.back()};
    forced.insert(forced.end(), expected.begin(), expected.end() - 1);
    const auto logits = runner.append(forced, /*all_rows=*/true);
    const float* first = logits.data();  // predicts expected[0]
    std::size_t i = 0;
    for (; i < expected.size(); ++i) {
      float gap = 0;
      const std::int32_t next = test::argmax(first + i * static_cast<std::size_t>(vocab), vocab, &gap);
      if (next != expected[i]) {
        // A divergence is acceptable only where ember's own top-2 logits nearly tie.
        INFO("prompt: ", c["prompt"].get<std::string>(), " step ", i, " ember ", next, " llama.cpp ", expected[i],
             " ember top-2 gap ", gap);
        CHECK(gap < 0.3f);
        CHECK(c["top2_gaps"][i].get<float>() < 0.3f);  // and llama.cpp's: a near-tie for both
        ++near_tie;
        break;
      }
    }
    total_tokens += static_cast<int>(i);
    exact += i == expected.size();
  }
  MESSAGE(exact, " of ", cases.size(), " greedy continuations equal llama.cpp's for all ",
          cases[0]["continuation"].size(), " tokens; ", near_tie, " diverge at a near-tie (ember top-2 gap < 0.3); ",
          total_tokens, " tokens matched in total");
  // Near-ties move with the FP32 kernels of each ISA, a few continuations at most; a model that
  // runs wrong diverges everywhere, at gaps of every size.
  const auto cases_count = static_cast<int>(cases.size());
  CHECK(exact >= cases_count - 4);
  CHECK(total_tokens >= cases_count * static_cast<int>(cases[0]["continuation"].size()) * 4 / 5);
}

}  // namespace
}  // namespace ember
