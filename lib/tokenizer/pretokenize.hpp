// Pre-tokenizers of byte-level BPE: split text into words before merges, as the regexes named
// by `tokenizer.ggml.pre` do. Each split is written by hand over code point classes (no regex
// engine) and mirrors llama.cpp's behaviour, including its quirks, so ids match llama.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace ember::tokenizer {

enum class PreTokenizer {
  standard,  // "default": punctuation runs, GPT-2 regex, number runs, ASCII digit triples
  gpt2,      // "gpt2": 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  smollm,    // "smollm", "starcoder", ...: every \p{N} isolated, then the GPT-2 regex
  llama3,    // "llama-bpe": (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  qwen2,     // "qwen2": the Llama 3 regex with single digits (\p{N})
};

// Maps a `tokenizer.ggml.pre` value (empty = "default"). Throws Error(unsupported) naming the
// supported values.
PreTokenizer pre_tokenizer_from_name(std::string_view name);

// Splits `cpts` into words; returns each word's length in code points (they sum to the size).
std::vector<std::size_t> pre_tokenize(PreTokenizer kind, const std::vector<std::uint32_t>& cpts);

}  // namespace ember::tokenizer
