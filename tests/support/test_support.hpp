// Shared helpers of ember's tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ember/ember.hpp>

namespace ember::test {

// The worse of a running worst error and a new one, NaN once either is: std::max(worst, NaN)
// keeps `worst`, so a bound checked on it would pass a NaN result.
inline double worse(double worst, double error) { return std::isnan(error) || error > worst ? error : worst; }

// The default model: $EMBER_MODEL, else the fetch script's cache location, else empty.
std::string default_model_path();

// Exits the test program with ctest's skip code (77) and a message when the default model is
// missing: a skip, never a pass that checked nothing.
std::string require_default_model();
// Gemma 3 270M (scripts/fetch-model.sh gemma3): $EMBER_GEMMA3_MODEL, else the fetched file in the
// model cache; "" when absent. require_...() exits with 77 (ctest's SKIP) instead.
std::string gemma3_model_path();
std::string require_gemma3_model();
// all-MiniLM-L6-v2 (scripts/fetch-model.sh minilm): $EMBER_MINILM_MODEL, else the fetched file;
// the same conventions.
std::string minilm_model_path();
std::string require_minilm_model();

// The device the engine tests run on: Device::cuda() when $EMBER_TEST_DEVICE is "cuda" (ctest
// registers CUDA twins of device-independent tests that way), else the CPU.
Device test_device();
// The non-INT8 precision of test_device(): fp32 on the CPU, fp16 on CUDA.
Precision baseline_precision();
// Exits with ctest's skip code (77) and the reason when test_device() cannot open a model (no
// GPU, or ember built without CUDA).
void require_test_device();

// A file under tests/data.
std::filesystem::path data_path(const std::string& relative);
// A whole file's bytes; throws std::runtime_error naming the file when it cannot be read.
std::string read_file(const std::filesystem::path& path);

// A synthetic model (model::SyntheticModelSpec::tiny_config(), random weights from `seed`) written
// once per process and seed to a temporary file; returns its path.
std::string synthetic_model_file(std::uint64_t seed, int context_length = 256);

// Compute threads for a test's engine: `wanted`, or 1 under ThreadSanitizer. libgomp is not
// TSan-instrumented, so an OpenMP region that forks threads shows up as races inside OpenMP; with
// one compute thread no region forks and every report is about ember's own threads (the
// background thread, host threads, handles).
int compute_threads(int wanted);
// Whether this build runs under ThreadSanitizer: a test's single-threaded numeric cases on the
// real model (minutes there, and nothing for TSan to see) skip.
bool thread_sanitizer();

// A fresh temporary directory, removed by the caller (or left for inspection).
std::filesystem::path temp_dir(const std::string& prefix);

// n token ids drawn uniformly from [3, vocab) (past the usual special ids), reproducible by seed.
std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint64_t seed);

// A request for `prompt` decoded greedily for exactly `max_tokens` tokens (end of sequence ignored).
Request greedy_request(const std::string& prompt, int max_tokens);

}  // namespace ember::test
