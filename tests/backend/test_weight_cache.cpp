// The packed-weight cache (backend/cpu/weight_cache.hpp) under the INT8 backend: a warm load
// gives bit-identical logits to a cold one, and a damaged, truncated or foreign cache file is
// logged, ignored and rewritten, never trusted.
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/weight_cache.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace ember {
namespace {

// The options with `precision`: the CPU backend's matrix products (int8 or fp32).
backend::BackendOptions at_precision(backend::BackendOptions options, Precision precision) {
  options.precision = precision;
  return options;
}

namespace fs = std::filesystem;

struct Loaded {
  std::vector<float> logits;
  std::vector<std::string> log;
};

// Opens the INT8 backend on `model` with the cache in `dir` ("" = off) and returns the logits of
// every row of a fixed prompt, and the log lines.
Loaded load_and_run(const std::string& model, const std::string& dir) {
  const auto file = model::GgufFile::open(model);
  const model::ModelConfig config = model::read_model_config(*file);
  Loaded out;
  backend::BackendOptions options;
  options.threads = 2;
  options.tokenize = [vocab = config.vocab](std::string_view) {
    std::vector<std::int32_t> tokens;
    for (int i = 0; i < 48; ++i) tokens.push_back(3 + (i * 37) % (vocab - 3));
    return tokens;
  };
  options.weight_cache_dir = dir;
  options.log = [&](LogLevel, std::string_view m) { out.log.emplace_back(m); };
  auto backend = backend::cpu::make_cpu_backend(file, config, at_precision(options, Precision::int8));
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(5 + (i * 11) % (config.vocab - 5));
  test::SequenceRunner runner(*backend, 40);
  out.logits = runner.append(prompt, /*all_rows=*/true, /*chunk=*/7);
  return out;
}

bool logged(const Loaded& l, const std::string& needle) {
  for (const auto& line : l.log)
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

fs::path only_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  return files[0];
}

TEST_CASE("weight cache: warm logits are bit-identical to cold ones and to no cache") {
  const std::string model = test::synthetic_model_file(42, 256);
  const fs::path dir = test::temp_dir("ember-weight-cache");
  const Loaded none = load_and_run(model, "");
  const Loaded cold = load_and_run(model, dir.string());
  CHECK(logged(cold, "no weight cache at"));
  CHECK(logged(cold, "weight cache written"));
  const fs::path cache = only_file(dir);
  CHECK(cache.extension() == ".ember-weights");
  const Loaded warm = load_and_run(model, dir.string());
  CHECK(logged(warm, "weights read from the cache"));
  CHECK_FALSE(logged(warm, "written"));
  REQUIRE(!none.logits.empty());
  CHECK(cold.logits == none.logits);
  CHECK(warm.logits == cold.logits);
  fs::remove_all(dir);
}

TEST_CASE("weight cache: a Llama 3 model's RoPE scaling survives the cache and keys it") {
  // Calibration runs a forward pass, so the prepared weights depend on the RoPE frequencies; the
  // factors themselves stay in the model config, read from the file at every open.
  const fs::path models = test::temp_dir("ember-weight-cache-models");
  model::SyntheticModelSpec spec;
  spec.seed = 42;
  const std::string plain = (models / "plain.gguf").string(), llama3 = (models / "llama3.gguf").string();
  model::write_synthetic_model(spec, plain);
  spec.config.rope_freq_factors = model::SyntheticModelSpec::llama3_rope_factors(spec.config, 8.0f, 1.0f, 4.0f, 32);
  spec.config.rope_scaling_factor = 2.0f;
  model::write_synthetic_model(spec, llama3);
  const fs::path dir = test::temp_dir("ember-weight-cache");
  const Loaded none = load_and_run(llama3, "");
  const Loaded cold = load_and_run(llama3, dir.string());
  const Loaded warm = load_and_run(llama3, dir.string());
  CHECK(logged(warm, "weights read from the cache"));
  CHECK(cold.logits == none.logits);
  CHECK(warm.logits == cold.logits);
  const Loaded unscaled = load_and_run(plain, dir.string());  // same weights, plain RoPE
  CHECK_FALSE(logged(unscaled, "weights read from the cache"));
  CHECK(unscaled.logits != warm.logits);
  fs::remove_all(dir);
  fs::remove_all(models);
}

// Damages the cache file with `damage`, then checks the next load ignores it (logging why),
// computes the same logits, and leaves a valid file that the load after reads.
template <class Damage>
void check_rejected(Damage damage, const std::string& reason) {
  const std::string model = test::synthetic_model_file(42, 256);
  const fs::path dir = test::temp_dir("ember-weight-cache");
  const Loaded cold = load_and_run(model, dir.string());
  const fs::path cache = only_file(dir);
  damage(cache);
  const Loaded damaged = load_and_run(model, dir.string());
  CAPTURE(reason);
  CHECK(logged(damaged, "weight cache ignored"));
  CHECK(logged(damaged, reason));
  CHECK(logged(damaged, "weight cache written"));
  CHECK(damaged.logits == cold.logits);
  const Loaded again = load_and_run(model, dir.string());
  CHECK(logged(again, "weights read from the cache"));
  CHECK(again.logits == cold.logits);
  fs::remove_all(dir);
}

void flip_byte(const fs::path& path, std::uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST_CASE("weight cache: a gemma3 model (q/k norm, post-norms read from the model) is bit-identical warm") {
  const fs::path models = test::temp_dir("ember-weight-cache-models");
  model::SyntheticModelSpec spec;
  spec.seed = 42;
  spec.config = model::SyntheticModelSpec::architecture_config("gemma3");
  const std::string gemma = (models / "gemma3.gguf").string();
  model::write_synthetic_model(spec, gemma);
  const fs::path dir = test::temp_dir("ember-weight-cache");
  const Loaded none = load_and_run(gemma, "");
  const Loaded cold = load_and_run(gemma, dir.string());
  const Loaded warm = load_and_run(gemma, dir.string());
  CHECK(logged(warm, "weights read from the cache"));
  REQUIRE(!none.logits.empty());
  CHECK(cold.logits == none.logits);
  CHECK(warm.logits == cold.logits);
  fs::remove_all(dir);
  fs::remove_all(models);
}

TEST_CASE("weight cache: a flipped byte in the weights is caught by the checksum") {
  check_rejected([](const fs::path& p) { flip_byte(p, fs::file_size(p) / 2); }, "checksum mismatch");
}

TEST_CASE("weight cache: a flipped byte in the header is caught") {
  check_rejected([](const fs::path& p) { flip_byte(p, 20); }, "weight cache '");
}

TEST_CASE("weight cache: a truncated file is caught") {
  check_rejected([](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 1000); }, "truncated");
  check_rejected([](const fs::path& p) { fs::resize_file(p, 10); }, "too small");
}

TEST_CASE("weight cache: a file of another model or build under the same name is caught") {
  check_rejected(
      [](const fs::path& p) {
        // Another model's cache renamed to this model's name: valid in itself, but its key differs.
        const fs::path other_dir = test::temp_dir("ember-weight-cache-other");
        load_and_run(test::synthetic_model_file(43, 256), other_dir.string());
        fs::copy_file(only_file(other_dir), p, fs::copy_options::overwrite_existing);
        fs::remove_all(other_dir);
      },
      "written for another model or build");
  check_rejected(
      [](const fs::path& p) { std::ofstream(p, std::ios::binary | std::ios::trunc) << std::string(4096, 'x'); },
      "bad magic");
}

TEST_CASE("weight cache: an unwritable directory only costs the cache, with a warning") {
  const fs::path dir = test::temp_dir("ember-weight-cache");
  const fs::path blocker = dir / "a-file";
  std::ofstream(blocker) << "not a directory";
  const Loaded l = load_and_run(test::synthetic_model_file(42, 256), (blocker / "cache").string());
  CHECK(logged(l, "weight cache not written"));
  CHECK(!l.logits.empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ember
