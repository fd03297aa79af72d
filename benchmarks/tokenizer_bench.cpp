// Tokenizer throughput on the default model (SmolLM2, byte-level BPE with the smollm
// pre-tokenizer): encoding ~1 MB of mixed text, and streaming decode through IncrementalDecoder.
// Skipped (SkipWithError) when the model file is missing: set EMBER_MODEL or fetch the model.
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

using namespace ember;

namespace {

std::string model_path() {
  if (const char* env = std::getenv("EMBER_MODEL"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  if (home == nullptr) return {};
  auto path = std::filesystem::path(home) / ".cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::is_regular_file(path) ? path.string() : std::string();
}

// Loaded once for the whole program; nullptr when the model is missing.
const tokenizer::Tokenizer* default_tokenizer() {
  static const std::shared_ptr<const tokenizer::Tokenizer> tok = [] {
    const std::string path = model_path();
    if (path.empty()) return std::shared_ptr<const tokenizer::Tokenizer>();
    return tokenizer::Tokenizer::from_gguf(*model::GgufFile::open(path));
  }();
  return tok.get();
}

// ~1 MB of text in the proportions a chat service sees: mostly English prose, some code,
// numbers, other scripts and emoji. Fixed seed: the same text every run.
const std::string& mixed_text() {
  static const std::string text = [] {
    const char* pieces[] = {"The",
                            " quick",
                            " brown",
                            " fox",
                            " jumps",
                            " over",
                            " the",
                            " lazy",
                            " dog",
                            ".",
                            " It's",
                            " a",
                            " beautiful",
                            " day",
                            ",",
                            " isn't",
                            " it",
                            "?",
                            " We'll",
                            " see",
                            ".",
                            " information",
                            " tokenization",
                            " performance",
                            " measured",
                            " carefully",
                            "\n",
                            "\n\n",
                            "    ",
                            "def f(x):\n    return x * 2\n",
                            "for (int i = 0; i < n; ++i) {",
                            "}",
                            " 2024",
                            " 3.14159",
                            " 1,000,000",
                            " 42",
                            " 你好世界",
                            " こんにちは",
                            " 안녕하세요",
                            " Привет",
                            " مرحبا",
                            " नमस्ते",
                            " 😀",
                            " 👍🏽",
                            " naïve café",
                            "\t",
                            " (see §3)"};
    std::mt19937 rng(1234);
    std::uniform_int_distribution<std::size_t> pick(0, std::size(pieces) - 1);
    std::string s;
    s.reserve(1u << 20);
    while (s.size() < (1u << 20)) s += pieces[pick(rng)];
    return s;
  }();
  return text;
}

void BM_EncodeMixed1MB(benchmark::State& state) {
  const tokenizer::Tokenizer* tok = default_tokenizer();
  if (tok == nullptr) {
    state.SkipWithError("default model not found (set EMBER_MODEL)");
    return;
  }
  const std::string& text = mixed_text();
  std::size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, /*parse_special=*/false);
    tokens += ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeMixed1MB)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  const tokenizer::Tokenizer* tok = default_tokenizer();
  if (tok == nullptr) {
    state.SkipWithError("default model not found (set EMBER_MODEL)");
    return;
  }
  const auto ids = tok->encode(mixed_text().substr(0, 1u << 16), false);
  for (auto _ : state) {
    tokenizer::IncrementalDecoder decoder(*tok);
    std::size_t bytes = 0;
    for (tokenizer::TokenId id : ids) bytes += decoder.push(id).size();
    bytes += decoder.flush().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ids.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

}  // namespace
