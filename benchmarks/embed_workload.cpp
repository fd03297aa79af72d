#include "embed_workload.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <stdexcept>

namespace ember::bench {

std::vector<std::string> embed_texts(const std::string& texts_file) {
  std::ifstream in(texts_file);
  if (!in) throw std::runtime_error("cannot read " + texts_file);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  for (const auto& c : j.at("cases")) texts.push_back(c.at("text").get<std::string>());
  return texts;
}

EmbedRun run_embed(const std::string& model, const EngineOptions& options, const std::vector<std::string>& texts,
                   int repeats) {
  Engine engine = Engine::open(model, options);
  EmbedRun run;
  run.texts = static_cast<int>(texts.size());
  for (const Embedding& e : engine.embed(texts)) run.tokens += e.tokens;  // also the warm-up
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    engine.embed(texts);
    run.seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = run.seconds;
  std::sort(sorted.begin(), sorted.end());
  run.median_s = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  run.tokens_per_s = run.median_s > 0 ? run.tokens / run.median_s : 0;
  return run;
}

}  // namespace ember::bench
