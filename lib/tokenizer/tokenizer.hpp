// Tokenizers read from GGUF metadata: byte-level BPE (`tokenizer.ggml.model = gpt2`, with the
// pre-tokenizer `tokenizer.ggml.pre` names) and SentencePiece BPE with byte fallback (`llama`).
//
// Thread-safety: a Tokenizer is immutable after construction; encode/decode may run on any
// number of threads at once. An IncrementalDecoder belongs to one sequence (one thread at a time).
#pragma once

#include "model/gguf.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer {

using TokenId = std::int32_t;

enum class TokenType : std::int32_t {  // as stored in tokenizer.ggml.token_type
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

class Tokenizer {
 public:
  // Builds the tokenizer from the file's tokenizer.* metadata. Throws Error(unsupported) for an
  // unknown tokenizer model or pre-tokenizer, Error(invalid_model) for inconsistent metadata.
  static std::shared_ptr<const Tokenizer> from_gguf(const model::GgufFile& file);

  virtual ~Tokenizer() = default;

  // Text to ids. With `parse_special`, the text of special/control tokens (e.g. "<|im_end|>")
  // becomes those tokens; without it, that text is tokenized like any other. `add_bos` prepends
  // BOS when the model asks for it (tokenizer.ggml.add_bos_token). Never throws on any bytes:
  // invalid UTF-8 is handled as llama.cpp handles it.
  virtual std::vector<TokenId> encode(std::string_view text, bool parse_special,
                                      bool add_bos = false) const = 0;

  // The bytes of one token as it appears in text (control tokens give their text only when
  // `render_special`). Throws Error(invalid_argument) for an id outside the vocabulary.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;
  std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  const std::string& token_text(TokenId id) const;  // raw vocabulary entry
  TokenType token_type(TokenId id) const;
  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  // End-of-generation tokens: eos plus e.g. <|im_end|>, <|eot_id|>, <end_of_turn>.
  bool is_end_of_generation(TokenId id) const;
  bool add_bos() const { return add_bos_; }

 protected:
  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;
  std::vector<TokenId> end_of_generation_;
  TokenId bos_ = -1, eos_ = -1;
  bool add_bos_ = false;
};

// Turns a stream of token ids into text pieces that are always complete UTF-8: bytes of a
// character split across tokens are held back until the character is complete.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string push(TokenId id);  // the newly completed text (may be empty)
  std::string flush();           // what is held back (invalid UTF-8 becomes U+FFFD)

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace ember::tokenizer
