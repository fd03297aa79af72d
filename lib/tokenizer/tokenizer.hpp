// Tokenizers read from GGUF metadata: byte-level BPE (`tokenizer.ggml.model = gpt2`, with the
// pre-tokenizer `tokenizer.ggml.pre` names), SentencePiece BPE with byte fallback (`llama`) and
// WordPiece (`bert`, the BERT-family embedding models).
// Both reproduce llama.cpp's token ids, end-of-generation set and token types
// (tests/tokenizer/golden_test.cpp for SmolLM2, gemma3_test.cpp for Gemma 3 check it).
//
// The algorithms see only a Vocab (plain vectors); from_gguf() merely fills one from the file.
//
// Thread-safety: a Tokenizer is immutable after construction; encode/decode may run on any
// number of threads at once. An IncrementalDecoder belongs to one sequence (one thread at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.hpp"

namespace ember::model {
class GgufFile;
}

namespace ember::tokenizer {

using TokenId = std::int32_t;

enum class TokenType : std::int32_t {  // as stored in tokenizer.ggml.token_type
  undefined = 0,
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// The tokenizer.* metadata of a model, as plain values.
struct Vocab {
  std::string model = "gpt2";                          // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama"
                                                       // (SentencePiece) or "bert" (WordPiece)
  std::string pre;                                     // tokenizer.ggml.pre (gpt2 only); empty = "default"
  std::vector<std::string> tokens;                     // tokenizer.ggml.tokens
  std::vector<float> scores;                           // tokenizer.ggml.scores (llama: merge priority)
  std::vector<TokenType> types;                        // tokenizer.ggml.token_type; empty = all normal
  std::vector<std::string> merges;                     // tokenizer.ggml.merges "left right", rank = index (gpt2)
  TokenId bos = -1, eos = -1, eot = -1, unknown = -1;  // -1 = none
  // End of message and fill-in-the-middle ids (tokenizer.ggml.eom_token_id, fim_*_token_id):
  // llama.cpp finds them by text when the file does not name them (see special_tokens.hpp).
  TokenId eom = -1, fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  std::optional<bool> add_bos;  // tokenizer.ggml.add_bos_token; default by model
  // tokenizer.ggml.add_eos_token and add_sep_token: what llama.cpp puts between and after the
  // two texts of a pair (encode_pair); default false, and add_sep true for bert.
  std::optional<bool> add_eos, add_sep;
  std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (llama; default true)
  // WordPiece (bert) only: the separator ended every encode() that adds BOS
  // (tokenizer.ggml.seperator_token_id, the key's spelling; -1 = llama.cpp's default 102), and
  // the normalizer (tokenizer.ggml.normalizer.lowercase, default false; strip_accents, default
  // lowercase), as llama.cpp reads them.
  TokenId sep = -1;
  std::optional<bool> lowercase, strip_accents;
};

// Reads a Vocab from a GGUF file. Throws Error(invalid_model) for missing or inconsistent
// tokenizer metadata.
Vocab read_vocab(const model::GgufFile& file);

class Tokenizer {
 public:
  // Builds the tokenizer from the file's tokenizer.* metadata. Throws Error(unsupported) for an
  // unknown tokenizer model or pre-tokenizer, Error(invalid_model) for inconsistent metadata.
  static std::shared_ptr<const Tokenizer> from_gguf(const model::GgufFile& file);
  // The same from plain values (tests, tools, models from elsewhere); the rvalue form takes
  // the token texts over instead of copying them.
  static std::shared_ptr<const Tokenizer> from_vocab(const Vocab& vocab);
  static std::shared_ptr<const Tokenizer> from_vocab(Vocab&& vocab);

  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;  // the text index points into tokens_
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Text to ids. With `parse_special`, the text of control tokens (e.g. "<|im_end|>") becomes
  // those tokens; user-defined tokens are always recognised (as llama.cpp does); the text between
  // them is tokenized normally. Special tokens are cut out longest first, in llama.cpp's order.
  // `add_bos` prepends BOS when the model asks for it (tokenizer.ggml.add_bos_token), and for
  // WordPiece also appends the separator ([CLS] text [SEP], as llama.cpp's add_special). Never
  // throws on any bytes: invalid UTF-8 is handled as llama.cpp handles it (byte-level BPE: each
  // undecodable byte is tokenized as U+FFFD; SentencePiece: the bytes become byte tokens).
  std::vector<TokenId> encode(std::string_view text, bool parse_special, bool add_bos = false) const;
  // A pair of texts as one sequence (a reranker's query and document), as llama-server's
  // format_prompt_rerank builds it without a rerank template: [BOS] first [EOS] [SEP] second
  // [EOS], each special where the vocabulary adds it (add_bos, add_eos, add_sep; EOS is the
  // separator where there is no EOS). BERT: [CLS] first [SEP] second [SEP]. Special-token text
  // inside either text stays text.
  std::vector<TokenId> encode_pair(std::string_view first, std::string_view second) const;

  // The bytes of one token as it appears in text (control tokens give their text only when
  // `render_special`). Throws Error(invalid_argument) for an id outside the vocabulary.
  virtual std::string token_to_piece(TokenId id, bool render_special = false) const = 0;
  // The concatenated pieces (SentencePiece: without the space prefix added by encode).
  std::string decode(const std::vector<TokenId>& ids, bool render_special = false) const;

  int vocab_size() const { return static_cast<int>(tokens_.size()); }
  const std::string& token_text(TokenId id) const;  // raw vocabulary entry
  TokenType token_type(TokenId id) const;
  std::optional<TokenId> find_token(std::string_view text) const;  // exact vocabulary entry
  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  // End-of-generation tokens, llama.cpp's set: eos, eot, eom, and the tokens whose text ends a
  // turn in a known chat format (<|im_end|>, <|eot_id|>, <end_of_turn>, ...; special_tokens.cpp).
  bool is_end_of_generation(TokenId id) const;
  const std::vector<TokenId>& end_of_generation_tokens() const { return end_of_generation_; }
  bool add_bos() const { return add_bos_; }
  // How many of the 256 byte values have no token of their own (byte-level BPE: the GPT-2
  // byte-to-unicode text; SentencePiece: <0xAB> or the byte itself). Text containing such a
  // byte cannot round-trip (it becomes the unknown token or a multi-byte fallback); the engine
  // logs a warning at open naming the count.
  int missing_byte_tokens() const { return missing_byte_tokens_; }

 protected:
  // Takes the token texts out of `vocab` (the other fields stay for the derived class).
  explicit Tokenizer(Vocab& vocab);
  void check_id(TokenId id) const;
  // Tokenizes one run of plain text (no special tokens in it), appending to `out`.
  virtual void encode_text(std::string_view text, std::vector<TokenId>& out) const = 0;

  // The id of the vocabulary entry `text`, or -1 (later duplicates win, as in llama.cpp).
  TokenId lookup(std::string_view text) const { return index_.find(text); }

  std::vector<std::string> tokens_;
  std::vector<TokenType> types_;  // after llama.cpp's text rules (special_tokens.hpp)
  detail::TokenIndex index_;
  std::vector<TokenId> end_of_generation_;  // ascending
  // Control, user-defined and unknown tokens, longest text first, in llama.cpp's order; the
  // matcher's entry i is special_tokens_[i].
  std::vector<TokenId> special_tokens_;
  detail::SpecialTokenMatcher special_matcher_;
  TokenId bos_ = -1, eos_ = -1;
  TokenId end_token_ = -1;  // appended with BOS (WordPiece's separator); -1 = none
  bool add_bos_ = false;
  // encode_pair's specials (Vocab::add_bos as the file says it, add_eos, add_sep; sep_ -1 = none).
  std::optional<bool> file_add_bos_;
  bool add_eos_ = false, add_sep_ = false;
  TokenId sep_ = -1;
  bool strip_space_prefix_ = false;  // decode() drops the space encode() put in front
  int missing_byte_tokens_ = 0;      // set by the derived constructor
};

// Turns a stream of token ids into text pieces that are always complete UTF-8: bytes of a
// character split across tokens are held back until the character is complete; ill-formed bytes
// become U+FFFD.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}
  std::string push(TokenId id);  // the newly completed text (may be empty)
  std::string flush();           // what is held back (an incomplete character becomes U+FFFD)

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace ember::tokenizer
