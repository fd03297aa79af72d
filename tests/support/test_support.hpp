// Shared helpers of ember's tests.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <ember/ember.hpp>

namespace ember::test {

// The default model: $EMBER_MODEL, else the fetch script's cache location, else empty.
std::string default_model_path();

// Exits the test program with ctest's skip code (77) and a message when the default model is
// missing: a skip, never a pass that checked nothing.
std::string require_default_model();

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

// A synthetic model (model::SyntheticModelSpec::tiny_config(), random weights from `seed`) written
// once per process and seed to a temporary file; returns its path.
std::string synthetic_model_file(std::uint64_t seed, int context_length = 256);

// A fresh temporary directory, removed by the caller (or left for inspection).
std::filesystem::path temp_dir(const std::string& prefix);

}  // namespace ember::test
