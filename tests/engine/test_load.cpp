// Engine::open() as a host sees it: load progress (phases, a monotone fraction ending at 1),
// cancellation from the progress callback at every point, and the packed-weight cache through
// EngineOptions (same tokens and log-probabilities cold and warm). Built twice: load_test runs
// the synthetic-model cases, load_model_test (EMBER_LOAD_TEST_DEFAULT_MODEL) only the default
// model's, so that its skip without the model never hides the others' results.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>

namespace ember {
namespace {

namespace fs = std::filesystem;

#ifndef EMBER_LOAD_TEST_DEFAULT_MODEL

EngineOptions small_options() {
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 4u << 20;
  return o;
}

struct Report {
  LoadPhase phase;
  float fraction;
};

std::vector<Report> load_reports(const std::string& model, EngineOptions options) {
  std::vector<Report> reports;
  options.on_load_progress = [&](LoadPhase p, float f) {
    reports.push_back({p, f});
    return true;
  };
  Engine::open(model, options);
  return reports;
}

void check_monotone_to_one(const std::vector<Report>& reports) {
  REQUIRE(!reports.empty());
  float last = 0;
  for (const Report& r : reports) {
    CHECK(r.fraction >= last);
    CHECK(r.fraction <= 1.0f);
    last = r.fraction;
  }
  CHECK(reports.back().fraction == 1.0f);
}

TEST_CASE("load progress: every phase in order, per layer, monotone, ending at 1") {
  const std::string model = test::synthetic_model_file(42, 256);
  const auto reports = load_reports(model, small_options());
  check_monotone_to_one(reports);
  std::vector<LoadPhase> order;
  for (const Report& r : reports)
    if (order.empty() || order.back() != r.phase) order.push_back(r.phase);
  const std::vector<LoadPhase> expected = {LoadPhase::reading, LoadPhase::tokenizer, LoadPhase::weights,
                                           LoadPhase::cache};
  CHECK(order == expected);
  const int layers = Engine::open(model, small_options()).info().layers;
  int weight_reports = 0;
  for (const Report& r : reports) weight_reports += r.phase == LoadPhase::weights;
  CHECK(weight_reports == layers + 2);  // the phase's start, one per layer, the lm_head
  CHECK(std::string(to_string(LoadPhase::quantization)) == "quantization");
}

TEST_CASE("load progress: the FP32 path reports its weights and ends at 1 too") {
  EngineOptions o = small_options();
  o.precision = Precision::fp32;
  const auto reports = load_reports(test::synthetic_model_file(42, 256), o);
  check_monotone_to_one(reports);
  std::set<LoadPhase> phases;
  for (const Report& r : reports) phases.insert(r.phase);
  CHECK(phases == std::set<LoadPhase>{LoadPhase::reading, LoadPhase::tokenizer, LoadPhase::weights});
}

// Cancels at call k for every k: open() throws Error(cancelled), the callback is not called
// again, and (under the ASan build of the suite) nothing leaks.
void check_cancel_everywhere(const std::string& model, const EngineOptions& base) {
  const std::size_t calls = load_reports(model, base).size();
  for (std::size_t k = 1; k <= calls; ++k) {
    CAPTURE(k);
    EngineOptions o = base;
    std::size_t seen = 0;
    o.on_load_progress = [&](LoadPhase, float) { return ++seen < k; };
    try {
      Engine::open(model, o);
      FAIL("open() was not cancelled");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::cancelled);
      CHECK(std::string(e.what()).find("cancelled by the progress callback") != std::string::npos);
    }
    CHECK(seen == k);
  }
}

TEST_CASE("load progress: returning false cancels open() at any point") {
  check_cancel_everywhere(test::synthetic_model_file(42, 256), small_options());
}

TEST_CASE("load progress: cancelling a warm (cached) load, and a progress that still ends at 1") {
  const fs::path dir = test::temp_dir("ember-load-cancel");
  EngineOptions o = small_options();
  o.weight_cache_dir = dir.string();
  const std::string model = test::synthetic_model_file(42, 256);
  Engine::open(model, o);  // writes the cache
  const auto warm = load_reports(model, o);
  check_monotone_to_one(warm);
  std::set<LoadPhase> phases;
  for (const Report& r : warm) phases.insert(r.phase);
  CHECK(phases == std::set<LoadPhase>{LoadPhase::reading, LoadPhase::tokenizer, LoadPhase::cache});
  check_cancel_everywhere(model, o);
  fs::remove_all(dir);
}

#endif  // EMBER_LOAD_TEST_DEFAULT_MODEL

struct Run {
  Completion completion;
  std::vector<std::string> log;
};

Run generate_once(const std::string& model, EngineOptions o, int max_tokens) {
  Run run;
  o.log = [&](LogLevel, std::string_view m) { run.log.emplace_back(m); };
  Engine engine = Engine::open(model, o);
  Request r;
  r.prompt = "The lighthouse keeper wrote down the ships";
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;
  run.completion = engine.generate(r);
  return run;
}

bool logged(const Run& r, const std::string& needle) {
  for (const auto& line : r.log)
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

void check_cold_warm(const std::string& model, EngineOptions o, int max_tokens) {
  const fs::path dir = test::temp_dir("ember-load-cache");
  const Run plain = generate_once(model, o, max_tokens);
  o.weight_cache_dir = (dir / "nested").string();  // created by open()
  const Run cold = generate_once(model, o, max_tokens);
  const Run warm = generate_once(model, o, max_tokens);
  CHECK(logged(cold, "weight cache written"));
  CHECK(logged(warm, "weights read from the cache"));
  REQUIRE(cold.completion.tokens.size() == static_cast<std::size_t>(max_tokens));
  CHECK(cold.completion.tokens == plain.completion.tokens);
  CHECK(warm.completion.tokens == cold.completion.tokens);
  CHECK(warm.completion.logprobs == cold.completion.logprobs);  // bitwise: the same weights
  CHECK(warm.completion.text == cold.completion.text);
  fs::remove_all(dir);
}

#ifndef EMBER_LOAD_TEST_DEFAULT_MODEL

TEST_CASE("weight cache: the same tokens and log-probabilities with a cold and a warm cache") {
  check_cold_warm(test::synthetic_model_file(42, 256), small_options(), 24);
}

TEST_CASE("weight cache: a log callback that throws loses its lines, not the load") {
  const fs::path dir = test::temp_dir("ember-load-cache");
  const std::string model = test::synthetic_model_file(42, 256);
  const Run plain = generate_once(model, small_options(), 8);
  EngineOptions o = small_options();
  o.weight_cache_dir = dir.string();
  int calls = 0;
  o.log = [&](LogLevel, std::string_view) {
    ++calls;
    throw std::runtime_error("the host's log failed");
  };
  for (const char* pass : {"cold", "warm"}) {
    CAPTURE(pass);
    const int before = calls;
    Engine engine = Engine::open(model, o);  // writes the cache, then reads it
    CHECK(calls > before);
    Request r;
    r.prompt = "The lighthouse keeper wrote down the ships";
    r.sampling.temperature = 0;
    r.sampling.max_tokens = 8;
    r.sampling.ignore_eos = true;
    CHECK(engine.generate(r).tokens == plain.completion.tokens);
  }
  CHECK_FALSE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST_CASE("weight cache: FP32 engines neither read nor write it") {
  const fs::path dir = test::temp_dir("ember-load-cache");
  EngineOptions o = small_options();
  o.precision = Precision::fp32;
  o.weight_cache_dir = dir.string();
  Engine::open(test::synthetic_model_file(42, 256), o);
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}

#else

TEST_CASE("weight cache: the default model, cold and warm") {
  const std::string model = test::require_default_model();
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 16u << 20;
  o.weight_format = WeightFormat::w8a8;  // the cache holds w8a8 matrices, which this file's default has none of
  check_cold_warm(model, o, 16);
}

TEST_CASE("weight cache: a file whose matrices all keep their groups has nothing to cache") {
  const fs::path dir = test::temp_dir("ember-load-cache");
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 16u << 20;
  o.weight_cache_dir = dir.string();
  const Engine engine = Engine::open(test::require_default_model(), o);
  if (engine.info().weight_format == "w8a8") {
    MESSAGE("skipped: this CPU has no AVX-512 VNNI, so every matrix is w8a8");
  } else {
    CHECK(engine.info().weight_format == "w4a8+w8a8-g32");  // Q4_1 layers, the tied Q8_0 embedding
    CHECK(fs::is_empty(dir));
  }
  fs::remove_all(dir);
}

#endif  // EMBER_LOAD_TEST_DEFAULT_MODEL

}  // namespace
}  // namespace ember
