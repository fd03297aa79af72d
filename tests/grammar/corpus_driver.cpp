// grammar_corpus_driver MODEL CORPUS.json OUT.jsonl [SEEDS]
//
// Generates from every entry of a corpus on a model: a JSON Schema ("schema",
// tests/data/grammar/schemas.json) or a GBNF grammar ("gbnf", tests/data/grammar/grammars.json),
// greedy, then sampled (temperature 0.7) with seeds 1..SEEDS (default 2) unless the entry
// says "sampled": false. All requests are
// submitted at once and decoded together (constrained requests in continuous batching), and
// one JSON line per output is written: {"name", "seed", "text", "finish_reason"}.
// validate_corpus.py checks the schemas' outputs with Python's jsonschema, validate_gbnf.py the
// grammars' with recognisers of its own.
#include <ember/ember.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: grammar_corpus_driver MODEL CORPUS.json OUT.jsonl [SEEDS]\n";
    return 2;
  }
  const int seeds = argc > 4 ? std::stoi(argv[4]) : 2;
  std::ifstream in(argv[2]);
  // ordered_json: a schema's property order is the order its properties are generated in.
  const nlohmann::ordered_json corpus = nlohmann::ordered_json::parse(in);
  ember::EngineOptions o;
  o.threads = 2;
  o.max_sequences = 32;
  o.kv_cache_bytes = 128u << 20;
  ember::Engine engine = ember::Engine::open(argv[1], o);

  struct Job {
    std::string name;
    std::uint64_t seed;
    ember::RequestHandle handle;
  };
  std::vector<Job> jobs;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& entry : corpus) {
    const bool sampled = entry.value("sampled", true);  // false: greedy only
    for (int seed = 0; seed <= (sampled ? seeds : 0); ++seed) {
      ember::Request r;
      const bool gbnf = entry.contains("gbnf");
      r.messages = {{"system", gbnf ? "You answer in the form asked for." : "You answer with JSON only."},
                    {"user", entry["prompt"].get<std::string>()}};
      if (gbnf)
        r.sampling.grammar = entry["gbnf"].get<std::string>();
      else
        r.sampling.json_schema = entry["schema"].dump();
      r.sampling.temperature = seed == 0 ? 0.0f : 0.7f;
      r.sampling.seed = static_cast<std::uint64_t>(seed);
      r.sampling.max_tokens = 384;
      jobs.push_back({entry["name"].get<std::string>(), static_cast<std::uint64_t>(seed), engine.submit(r)});
    }
  }
  std::ofstream out(argv[3]);
  int tokens = 0;
  for (Job& j : jobs) {
    const ember::Completion c = j.handle.wait();
    tokens += c.generated_tokens;
    nlohmann::json line = {{"name", j.name},
                           {"seed", j.seed},
                           {"text", c.text},
                           {"finish_reason", ember::to_string(c.finish_reason)},
                           {"error", c.error}};
    out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << "grammar_corpus_driver: " << jobs.size() << " outputs, " << tokens << " tokens in " << s << " s\n";
  return 0;
}
