// Internal: the concrete tokenizers behind Tokenizer::from_vocab.
#pragma once

#include "tokenizer/tokenizer.hpp"

#include <memory>

namespace ember::tokenizer::detail {

// Each takes the token texts out of `vocab`.
std::shared_ptr<const Tokenizer> make_bpe_tokenizer(Vocab& vocab);  // model "gpt2"
std::shared_ptr<const Tokenizer> make_spm_tokenizer(Vocab& vocab);  // model "llama"
std::shared_ptr<const Tokenizer> make_wpm_tokenizer(Vocab& vocab);  // model "bert"

}  // namespace ember::tokenizer::detail
