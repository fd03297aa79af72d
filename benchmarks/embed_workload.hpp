// The embedding workload of ember-bench: Engine::embed over the 200 sentences of the
// all-MiniLM-L6-v2 golden (tests/data/reference/minilm_embeddings.json), all in one call
// (batched by the engine), timed `repeats` times per precision; tokens/s from the median.
// tests/reference/make_embed_goldens.py --bench N times llama.cpp on the same sentences.
#pragma once

#include <ember/ember.hpp>

#include <string>
#include <vector>

namespace ember::bench {

struct EmbedRun {
  int texts = 0, tokens = 0;
  std::vector<double> seconds;  // one per repeat
  double median_s = 0, tokens_per_s = 0;
};

// The golden's sentences (`texts_file`: its path).
std::vector<std::string> embed_texts(const std::string& texts_file);
EmbedRun run_embed(const std::string& model, const EngineOptions& options, const std::vector<std::string>& texts,
                   int repeats);

}  // namespace ember::bench
