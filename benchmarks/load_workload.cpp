#include "load_workload.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Resets the peak resident memory (VmHWM) to the current one (Linux 4.0 and later); false where
// the kernel refuses, and the peak is then the process's whole life's.
bool reset_peak_rss() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  clear_refs << "5" << std::flush;
  return clear_refs.good();
}

LoadRun open_once(const std::string& model, const EngineOptions& base, const std::string& cache_dir) {
  LoadRun run;
  EngineOptions options = base;
  options.weight_cache_dir = cache_dir;
  // A phase's time runs from its first report to the next phase's first report.
  std::string phase;
  Clock::time_point phase_start;
  options.on_load_progress = [&](LoadPhase p, float) {
    const std::string name = to_string(p);
    if (name != phase) {
      const auto now = Clock::now();
      if (!phase.empty()) run.phase_ms[phase] += std::chrono::duration<double, std::milli>(now - phase_start).count();
      phase = name;
      phase_start = now;
    }
    return true;
  };
  const bool peak_reset = reset_peak_rss();
  const auto t0 = Clock::now();
  Engine engine = Engine::open(model, options);
  run.open_ms = ms_since(t0);
  run.peak_rss_mb = peak_reset ? status_mb("VmHWM") : 0;
  run.resident_mb = status_mb("VmRSS");
  if (!phase.empty())
    run.phase_ms[phase] += std::chrono::duration<double, std::milli>(Clock::now() - phase_start).count();
  // ember-generate's default question: a ~40-token chat prompt, so the first prefill takes the
  // oneDNN path (prompts of up to 8 tokens would take the GEMV and skip its JIT compilation).
  SamplingParams sampling;
  sampling.max_tokens = 1;
  sampling.temperature = 0;
  engine.chat({{"user", "Write a short poem about the sea."}}, sampling);
  run.first_token_ms = ms_since(t0);
  return run;
}

}  // namespace

double status_mb(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  return 0;
}

LoadResult run_load(const std::string& model, const EngineOptions& base, int repeats) {
  namespace fs = std::filesystem;
  LoadResult result;
  for (int r = 0; r < repeats; ++r) {
    const fs::path dir = fs::temp_directory_path() / ("ember-bench-load-" + std::to_string(std::random_device{}()));
    result.cold.push_back(open_once(model, base, dir.string()));
    result.warm.push_back(open_once(model, base, dir.string()));
    fs::remove_all(dir);
  }
  return result;
}

}  // namespace ember::bench
