// Shared helpers of ember's tests.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ember::test {

// The default model: $EMBER_MODEL, else the fetch script's cache location, else empty.
std::string default_model_path();

// Exits the test program with ctest's skip code (77) and a message when the default model is
// missing: a skip, never a pass that checked nothing.
std::string require_default_model();

// A file under tests/data.
std::filesystem::path data_path(const std::string& relative);

// A synthetic model (model::SyntheticModelSpec::tiny_config(), random weights from `seed`) written
// once per process and seed to a temporary file; returns its path.
std::string synthetic_model_file(std::uint64_t seed, int context_length = 256);

// A fresh temporary directory, removed by the caller (or left for inspection).
std::filesystem::path temp_dir(const std::string& prefix);

}  // namespace ember::test
