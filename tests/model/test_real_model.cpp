// The default model (SmolLM2-135M-Instruct Q4_1): its config, weights map and a dequantized
// row. Skipped (exit 77) when the model is not downloaded.
#include "model/decoder_tensors.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace ember::model;

TEST_CASE("SmolLM2-135M config, tensors and weights") {
  const auto f = GgufFile::open(ember::test::require_default_model());
  CHECK(f->version() == 3);
  CHECK(f->tensors().size() == 272);
  const ModelConfig c = read_model_config(*f);
  CHECK(c.architecture == "llama");
  CHECK(c.layers == 30);
  CHECK(c.embedding == 576);
  CHECK(c.ffn == 1536);
  CHECK(c.heads == 9);
  CHECK(c.kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.rope_dims == 64);
  CHECK(c.vocab == 49152);
  CHECK(c.rope_base == 100000.0f);
  CHECK(c.rms_eps == doctest::Approx(1e-5));
  CHECK(c.context_length == 8192);
  CHECK(c.tied_embeddings);
  CHECK(c.rope_layout == RopeLayout::interleaved);

  const DecoderTensors w = map_decoder_tensors(*f, c);
  CHECK(w.token_embd->type == GgmlType::Q8_0);
  CHECK(w.output == w.token_embd);
  CHECK(w.layers[29].w_down->type == GgmlType::Q4_1);
  CHECK(w.layers[0].wk->shape == std::vector<std::int64_t>{576, 192});

  CHECK(f->get_string_array("tokenizer.ggml.tokens").size() == 49152);
  CHECK(f->get_string_array("tokenizer.ggml.merges").size() == 48900);
  CHECK(f->get_string("tokenizer.ggml.pre") == "smollm");

  // Embedding rows are finite, not all zero, and of the magnitude of a trained embedding.
  std::vector<float> row(576);
  dequantize_row(*w.token_embd, 1, row.data());
  double sq = 0;
  for (float x : row) {
    REQUIRE(std::isfinite(x));
    sq += double{x} * x;
  }
  const double rms = std::sqrt(sq / 576);
  CHECK(rms > 1e-3);
  CHECK(rms < 10);
  const auto norm = dequantize_tensor(*w.output_norm);
  CHECK(norm.size() == 576);
}
