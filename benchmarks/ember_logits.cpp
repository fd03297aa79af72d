// ember-logits: teacher-forced logits of a token sequence, for comparing engines' quality.
//
//   ember-logits --tokens FILE --out FILE.npy [--model PATH] ...  (--help lists all)
//
// FILE is JSON: a list of token ids, or an object whose "tokens" member is one (the golden file
// tests/data/reference/smollm2_teacher_forced.json works as is). The model reads the tokens
// and the tool writes the logits predicting tokens[1..n] (n = --positions, default all) as a
// float32 .npy array of shape [n, vocab]. The backend is built the way the engine builds it
// (the INT8 path calibrated on the built-in text), driven directly because the public API does
// not return logits.
#include "../examples/common/cli.hpp"
#include "backend/backend.hpp"
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/reference.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "tests/support/sequence_runner.hpp"
#include "tokenizer/tokenizer.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

struct Args {
  std::string model, tokens_path, out_path;
  ember::Precision precision = ember::Precision::fp32;
  ember::KvCacheType kv_type = ember::KvCacheType::f16;
  int threads = 2;
  int positions = 0;  // 0 = all
};

Args parse(int argc, char** argv) {
  Args a;
  ember_examples::EngineFlags engine_flags;
  engine_flags.options.precision = a.precision;
  engine_flags.options.threads = a.threads;
  ember_examples::CommandLine cli(
      "ember-logits",
      "Teacher-forced logits of a token sequence, for comparing engines' quality: the model reads "
      "the tokens and the logits predicting tokens[1..n] are written as a float32 .npy array of "
      "shape [n, vocab].",
      "--tokens FILE --out FILE.npy [flags]");
  cli.option("--tokens", "FILE", "JSON: a list of token ids, or an object whose \"tokens\" member is one (required)",
             "", [&a](const std::string& v) { a.tokens_path = v; })
      .option("--out", "FILE.npy", "where the logits go (required)", "", [&a](const std::string& v) { a.out_path = v; })
      .option("--positions", "N", a.positions, "write the logits of the first N positions only; 0 = all");
  engine_flags.declare(cli, ember_examples::EngineFlags::model | ember_examples::EngineFlags::precision |
                                ember_examples::EngineFlags::threads | ember_examples::EngineFlags::kv_type);
  cli.parse(argc, argv);
  if (a.tokens_path.empty() || a.out_path.empty()) cli.fail("--tokens and --out are required");
  const ember::EngineOptions options = engine_flags.open_options(cli);
  a.model = engine_flags.model_path;
  a.precision = options.precision;
  a.kv_type = options.kv_cache_type;
  a.threads = options.threads;
  a.positions = std::max(0, a.positions);
  return a;
}

std::vector<std::int32_t> read_tokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) ember::fail(ember::ErrorCode::io, "cannot open token file {}", path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  const nlohmann::json& list = doc.is_object() ? doc.at("tokens") : doc;
  return list.get<std::vector<std::int32_t>>();
}

// A C-order float32 .npy file (format version 1.0): magic, header length, a Python dict
// literal padded with spaces to a multiple of 64 bytes, then the raw little-endian data.
void write_npy(const std::string& path, const std::vector<float>& data, std::size_t rows, std::size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const std::size_t preamble = 10;
  header.append(64 - (preamble + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) ember::fail(ember::ErrorCode::io, "cannot write {}", path);
  const auto length = static_cast<std::uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(length & 0xff));
  out.put(static_cast<char>(length >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) ember::fail(ember::ErrorCode::io, "writing {} failed", path);
}

std::unique_ptr<ember::backend::Backend> make_backend(const Args& args,
                                                      std::shared_ptr<const ember::model::GgufFile> file,
                                                      const ember::model::ModelConfig& config) {
  ember::backend::BackendOptions options;
  options.precision = args.precision;
  options.threads = args.threads;
  if (args.precision == ember::Precision::int8) {
    const auto tokenizer = ember::tokenizer::Tokenizer::from_gguf(*file);
    options.tokenize = [tokenizer](std::string_view text) {
      return tokenizer->encode(text, true, tokenizer->add_bos());
    };
  }
  // fp32 is the readable reference (the oracle the quality scripts compare against), which keeps
  // f16 or f32 K/V; an int8 cache at fp32 runs the CPU backend's FP32 path (the same function,
  // computed by the optimised kernels).
  if (args.precision == ember::Precision::fp32 && args.kv_type != ember::KvCacheType::int8)
    return ember::backend::cpu::make_reference_backend(std::move(file), config, options);
  return ember::backend::cpu::make_cpu_backend(std::move(file), config, options);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    auto tokens = read_tokens(args.tokens_path);
    if (tokens.size() < 2)
      ember::fail(ember::ErrorCode::invalid_argument, "{} holds fewer than 2 tokens", args.tokens_path);
    if (args.positions > 0 && static_cast<std::size_t>(args.positions) + 1 < tokens.size())
      tokens.resize(static_cast<std::size_t>(args.positions) + 1);
    const auto file = ember::model::GgufFile::open(args.model);
    const auto config = ember::model::read_model_config(*file);
    const auto backend = make_backend(args, file, config);
    const std::vector<std::int32_t> inputs(tokens.begin(), tokens.end() - 1);
    ember::test::SequenceRunner runner(*backend, static_cast<int>(tokens.size()) + 16, args.kv_type);
    const auto logits = runner.append(inputs, /*all_rows=*/true, 256);
    write_npy(args.out_path, logits, inputs.size(), static_cast<std::size_t>(config.vocab));
    std::fprintf(stderr, "ember-logits: %zu positions x %d logits -> %s\n", inputs.size(), config.vocab,
                 args.out_path.c_str());
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
  return 0;
}
