// Internal: the special tokens of a vocabulary, as llama.cpp sees them.
//
// llama.cpp does not take the GGUF token types and special ids as they are: its vocabulary
// loader (src/llama-vocab.cpp, llama_vocab::impl::load) also decides by token text which tokens
// end generation and changes some token types (a "<end_of_turn>" stored as a normal token
// becomes a control token, and so on). Those decisions change what encode and decode produce,
// so ember repeats them, here and nowhere else.
#pragma once

#include "tokenizer/token_index.hpp"
#include "tokenizer/tokenizer.hpp"

#include <vector>

namespace ember::tokenizer::detail {

// Applies llama.cpp's text rules to `types` (indexed by token id) and returns the
// end-of-generation ids, ascending. `tokens` are the token texts and `index` their index; of
// `vocab` only the special ids are read.
std::vector<TokenId> apply_llama_cpp_special_rules(const Vocab& vocab, const std::vector<std::string>& tokens,
                                                   const TokenIndex& index, std::vector<TokenType>& types);

}  // namespace ember::tokenizer::detail
