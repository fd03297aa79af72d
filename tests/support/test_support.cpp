#include "test_support.hpp"

#include "model_writer/gguf_writer.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>

namespace ember::test {

namespace {

// `file` in scripts/fetch-model.sh's cache (EMBER_MODEL_DIR, else ~/.cache/ember), or "".
std::string cached_model(const char* file) {
  std::filesystem::path dir;
  if (const char* d = std::getenv("EMBER_MODEL_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    dir = std::filesystem::path(home) / ".cache" / "ember";
  }
  auto candidate = dir / file;
  std::error_code ec;
  return std::filesystem::is_regular_file(candidate, ec) ? candidate.string() : std::string();
}

}  // namespace

std::string default_model_path() {
  if (const char* env = std::getenv("EMBER_MODEL"); env != nullptr && *env != '\0') return env;
  return cached_model("SmolLM2-135M-Instruct.Q4_1.gguf");
}

std::string gemma3_model_path() {
  if (const char* env = std::getenv("EMBER_GEMMA3_MODEL"); env != nullptr && *env != '\0') return env;
  return cached_model("gemma-3-270m-q4_k_m.gguf");
}

std::string require_gemma3_model() {
  std::string path = gemma3_model_path();
  if (path.empty()) {
    std::fprintf(stderr,
                 "SKIPPED: Gemma 3 270M is not available; run scripts/fetch-model.sh gemma3 or set "
                 "EMBER_GEMMA3_MODEL\n");
    std::exit(77);
  }
  return path;
}

std::string minilm_model_path() {
  if (const char* env = std::getenv("EMBER_MINILM_MODEL"); env != nullptr && *env != '\0') return env;
  return cached_model("all-MiniLM-L6-v2.F16.gguf");
}

std::string require_minilm_model() {
  std::string path = minilm_model_path();
  if (path.empty()) {
    std::fprintf(stderr,
                 "SKIPPED: all-MiniLM-L6-v2 is not available; run scripts/fetch-model.sh minilm or set "
                 "EMBER_MINILM_MODEL\n");
    std::exit(77);
  }
  return path;
}

Device test_device() {
  const char* device = std::getenv("EMBER_TEST_DEVICE");
  return device != nullptr && std::string(device) == "cuda" ? Device::cuda(0) : Device::cpu();
}

Precision baseline_precision() { return test_device().type == DeviceType::cuda ? Precision::fp16 : Precision::fp32; }

void require_test_device() {
  if (test_device().type == DeviceType::cpu) return;
  EngineOptions options;
  options.device = test_device();
  options.kv_cache_bytes = 1 << 20;
  try {
    Engine::open(synthetic_model_file(1), options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::unsupported) throw;
    std::fprintf(stderr, "SKIPPED: %s\n", e.what());
    std::exit(77);
  }
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

bool thread_sanitizer() {
#if defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

int compute_threads(int wanted) { return thread_sanitizer() ? 1 : wanted; }

std::filesystem::path data_path(const std::string& relative) {
  return std::filesystem::path(EMBER_TEST_DATA_DIR) / relative;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::filesystem::path temp_dir(const std::string& prefix) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(rd()) + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string synthetic_model_file(std::uint64_t seed, int context_length) {
  static std::mutex mutex;
  static std::map<std::pair<std::uint64_t, int>, std::string> files;
  std::lock_guard lock(mutex);
  auto& path = files[{seed, context_length}];
  if (path.empty()) {
    model::SyntheticModelSpec spec;
    spec.config = model::SyntheticModelSpec::tiny_config();
    spec.config.context_length = context_length;
    spec.seed = seed;
    path = (temp_dir("ember-synthetic") / ("tiny-" + std::to_string(seed) + ".gguf")).string();
    model::write_synthetic_model(spec, path);
  }
  return path;
}

std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(3, vocab - 1);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = dist(rng);
  return t;
}

Request greedy_request(const std::string& prompt, int max_tokens) {
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

}  // namespace ember::test
