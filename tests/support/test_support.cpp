#include "test_support.hpp"

#include <cstdio>
#include <random>

namespace ember::test {

std::string default_model_path() {
  if (const char* env = std::getenv("EMBER_MODEL"); env != nullptr && *env != '\0') return env;
  std::filesystem::path dir;
  if (const char* d = std::getenv("EMBER_MODEL_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::filesystem::path(home) / ".cache" / "ember";
  }
  auto candidate = dir / "SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  return std::filesystem::is_regular_file(candidate, ec) ? candidate.string() : std::string();
}

std::string require_default_model() {
  std::string path = default_model_path();
  if (path.empty()) {
    std::fprintf(stderr,
                 "SKIPPED: the default model is not available; run scripts/fetch-model.sh or set "
                 "EMBER_MODEL\n");
    std::exit(77);
  }
  return path;
}

std::filesystem::path data_path(const std::string& relative) {
  return std::filesystem::path(EMBER_TEST_DATA_DIR) / relative;
}

std::filesystem::path temp_dir(const std::string& prefix) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() /
             (prefix + "-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ember::test
