// Fuzz target: the GGUF reader on any bytes. When the image parses, every metadata getter, the
// model config, the weights map, a LoRA adapter and the tokenizer are read from it, and the first rows of
// every tensor are dequantized. Only ember::Error may come out; any other exception, a crash,
// a sanitizer report or an allocation over the fuzzer's cap is a finding.
#include "fuzz_support.hpp"
#include "model/decoder_tensors.hpp"
#include "model/gguf.hpp"
#include "model/lora_adapter.hpp"
#include "model/model_config.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

using namespace ember::model;

template <typename F>
void ignore_error(F&& f) {
  try {
    f();
  } catch (const ember::Error&) {
  }
}

void read_every_key(const GgufFile& file) {
  for (const auto& entry : file.metadata()) {
    const std::string& key = entry.first;  // not a structured binding: clang 14 cannot capture one
    FUZZ_CHECK(file.find(key) == &entry.second);
    ignore_error([&] { (void)file.get_string(key); });
    ignore_error([&] { (void)file.get_u32(key); });
    ignore_error([&] { (void)file.get_f32(key); });
    ignore_error([&] { (void)file.get_bool(key); });
    ignore_error([&] { (void)file.get_string_array(key); });
    ignore_error([&] { (void)file.get_f32_array(key); });
    ignore_error([&] { (void)file.get_i32_array(key); });
  }
}

// The first two rows of each tensor (a row is at most a few times the file's size, so this
// stays far below the fuzzer's allocation cap).
void dequantize_first_rows(const GgufFile& file) {
  std::vector<float> row;
  for (const GgufTensor& t : file.tensors()) {
    FUZZ_CHECK(file.data_offset() + t.offset + t.nbytes <= file.file_size());
    if (t.shape.empty() || t.shape[0] <= 0 || t.shape[0] > (1 << 22)) continue;
    row.assign(static_cast<std::size_t>(t.shape[0]), 0.0f);
    for (std::int64_t r = 0; r < std::min<std::int64_t>(t.rows(), 2); ++r) {
      ignore_error([&] { dequantize_row(t, r, row.data()); });
    }
    // A row past the end must be refused, not read.
    bool refused = false;
    try {
      dequantize_row(t, t.rows(), row.data());
    } catch (const ember::Error&) {
      refused = true;
    }
    FUZZ_CHECK(refused);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::shared_ptr<const GgufFile> file;
  try {
    file = GgufFile::parse(data, size, "fuzz.gguf");
  } catch (const ember::Error&) {
    return 0;
  }
  read_every_key(*file);
  dequantize_first_rows(*file);
  ignore_error([&] {
    const ModelConfig config = read_model_config(*file);
    FUZZ_CHECK(config.layers > 0 && config.embedding > 0 && config.vocab > 0);
    (void)map_decoder_tensors(*file, config);
  });
  // The same image as a LoRA adapter of itself (the header checks, the pairing of lora_a and
  // lora_b, the shape checks): only Errors.
  ignore_error([&] {
    const ModelConfig config = read_model_config(*file);
    const LoraAdapter adapter = read_lora_adapter(*file, config, map_decoder_tensors(*file, config));
    FUZZ_CHECK(adapter.tensor_count() > 0);
  });
  ignore_error([&] {
    const auto tokenizer = ember::tokenizer::Tokenizer::from_gguf(*file);
    const auto ids = tokenizer->encode("Hello, fuzz! <|im_end|> \xff", true, true);
    for (const auto id : ids) FUZZ_CHECK(id >= 0 && id < tokenizer->vocab_size());
    (void)tokenizer->decode(ids, true);
  });
  return 0;
}
