// Internal: the concrete tokenizers behind Tokenizer::from_vocab.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <memory>
#include <string_view>

namespace ember::tokenizer::detail {

// The word-start mark of SentencePiece and WordPiece vocabularies (U+2581, LOWER ONE EIGHTH BLOCK).
inline constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

// Each takes the token texts out of `vocab`.
std::shared_ptr<const Tokenizer> make_bpe_tokenizer(Vocab& vocab);  // model "gpt2"
std::shared_ptr<const Tokenizer> make_spm_tokenizer(Vocab& vocab);  // model "llama"
std::shared_ptr<const Tokenizer> make_wpm_tokenizer(Vocab& vocab);  // model "bert"

}  // namespace ember::tokenizer::detail
