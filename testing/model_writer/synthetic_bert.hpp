// Synthetic BERT encoders (llama.cpp's `bert` architecture and tensor names): random F32 weights
// and a small WordPiece vocabulary (single characters, word-start and continuation forms, and a
// few whole words), optionally with a reranker's classification head (cls.weight, cls.bias,
// cls.output.weight, cls.output.bias; pooling_type rank), so the encoder, the pair format and
// rank pooling can be checked against llama.cpp on the very same file without a download.
#pragma once

#include "model/ggml_types.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::model {

struct SyntheticBertSpec {
  std::string name = "ember-synthetic-bert";
  int layers = 2;
  int embedding = 64;
  int ffn = 128;
  int heads = 4;
  int context = 128;              // position_embd rows
  bool classifier = true;         // write the head and pooling_type rank (else mean, no head)
  int classifier_outputs = 1;     // cls.output.weight's rows (a label each)
  GgmlType type = GgmlType::F32;  // the matrices' type
  std::uint64_t seed = 43;
};

// The vocabulary's size (fixed by the built-in word list).
int synthetic_bert_vocab_size();

// Throws Error(invalid_argument) for a shape that does not hold together.
std::vector<std::uint8_t> make_synthetic_bert(const SyntheticBertSpec& spec);
void write_synthetic_bert(const SyntheticBertSpec& spec, const std::string& path);

}  // namespace ember::model
