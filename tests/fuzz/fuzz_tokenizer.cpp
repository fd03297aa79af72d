// Fuzz target: the tokenizers on arbitrary bytes and arbitrary ids.
//
// Input: one flags byte, then the payload.
//   flags % 5        which tokenizer: the synthetic model's byte-level BPE with its own
//                    pre-tokenizer ("smollm"), the same vocabulary with the "default", "llama3"
//                    and "qwen2" pre-tokenizers, or a small SentencePiece vocabulary
//   flags & 0x08     parse_special;   flags & 0x10  add_bos;   flags & 0x20  render_special
// The payload is encoded as text, then read as little-endian int32 ids and decoded (whole, one
// piece at a time, and through an IncrementalDecoder). Checked: ids are in range, a byte-level
// BPE round trip of valid UTF-8 gives the text back, an id outside the vocabulary is an
// Error(invalid_argument), and streamed text is always valid UTF-8 and, when the pieces are,
// equal to them (not to decode(): SentencePiece's decode drops the first space prefix).
#include "fuzz_support.hpp"
#include "model/gguf.hpp"
#include "model_writer/gguf_writer.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace ember::tokenizer;

Vocab small_spm_vocab() {
  Vocab v;
  v.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  static const char* const hex = "0123456789ABCDEF";
  for (unsigned b = 0; b < 256; ++b) {
    add(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">", 0, TokenType::byte);
  }
  float score = -1.0f;
  for (const char* piece : {"\xE2\x96\x81", "a", "b", "e", "h", "l", "o", "\xE2\x96\x81h", "he", "ll", "llo",
                            "\xE2\x96\x81hello", "<tool>"}) {
    add(piece, score, TokenType::normal);
    score -= 0.5f;
  }
  v.types.back() = TokenType::user_defined;
  v.bos = 1;
  v.eos = 2;
  v.unknown = 0;
  return v;
}

struct Tokenizers {
  std::array<std::shared_ptr<const Tokenizer>, 5> all;
  Tokenizers() {
    ember::model::SyntheticModelSpec spec;
    const auto image = ember::model::make_synthetic_model(spec);
    const auto file = ember::model::GgufFile::parse(image.data(), image.size());
    all[0] = Tokenizer::from_gguf(*file);
    Vocab vocab = read_vocab(*file);
    const char* pres[] = {"default", "llama3", "qwen2"};
    for (int i = 0; i < 3; ++i) {
      vocab.pre = pres[i];
      all[static_cast<std::size_t>(i) + 1] = Tokenizer::from_vocab(vocab);
    }
    all[4] = Tokenizer::from_vocab(small_spm_vocab());
  }
};

bool in_range(const Tokenizer& t, TokenId id) { return id >= 0 && id < t.vocab_size(); }

void check_encode(const Tokenizer& t, bool byte_level, std::string_view text, bool parse_special, bool add_bos) {
  const std::vector<TokenId> ids = t.encode(text, parse_special, add_bos);
  for (const TokenId id : ids) FUZZ_CHECK(in_range(t, id));
  if (!text.empty()) FUZZ_CHECK(!ids.empty());
  const std::string back = t.decode(ids, /*render_special=*/true);
  // Byte-level BPE loses nothing: valid UTF-8 comes back byte for byte (special tokens render
  // as their text; BOS, when added, renders too, so it is left out).
  if (byte_level && !add_bos && ember::fuzz::is_valid_utf8(text)) FUZZ_CHECK(back == text);
}

std::vector<TokenId> read_ids(std::string_view bytes) {
  std::vector<TokenId> ids(bytes.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  return ids;
}

void check_decode(const Tokenizer& t, const std::vector<TokenId>& ids, bool render_special) {
  bool all_in_range = true;
  std::string pieces;  // what a stream of these ids spells (decode() may drop a space prefix)
  for (const TokenId id : ids) {
    if (in_range(t, id)) {
      pieces += t.token_to_piece(id, render_special);
      continue;
    }
    all_in_range = false;
    bool refused = false;
    try {
      (void)t.token_to_piece(id, render_special);
    } catch (const ember::Error& e) {
      refused = e.code() == ember::ErrorCode::invalid_argument;
    }
    FUZZ_CHECK(refused);
  }
  std::string whole;
  try {
    whole = t.decode(ids, render_special);
    FUZZ_CHECK(all_in_range);
  } catch (const ember::Error& e) {
    FUZZ_CHECK(!all_in_range && e.code() == ember::ErrorCode::invalid_argument);
  }
  IncrementalDecoder stream(t, render_special);
  std::string streamed;
  for (const TokenId id : ids) {
    try {
      const std::string piece = stream.push(id);
      FUZZ_CHECK(ember::fuzz::is_valid_utf8(piece));
      streamed += piece;
    } catch (const ember::Error& e) {
      FUZZ_CHECK(!in_range(t, id) && e.code() == ember::ErrorCode::invalid_argument);
    }
  }
  const std::string tail = stream.flush();
  FUZZ_CHECK(ember::fuzz::is_valid_utf8(tail));
  streamed += tail;
  if (all_in_range && ember::fuzz::is_valid_utf8(pieces)) FUZZ_CHECK(streamed == pieces);
  if (all_in_range) FUZZ_CHECK(whole.size() <= pieces.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Tokenizers tokenizers;
  ember::fuzz::InputReader in(data, size);
  const std::uint8_t flags = in.byte();
  const std::size_t which = flags % 5;
  const Tokenizer& t = *tokenizers.all[which];
  const std::string_view payload = in.rest();
  check_encode(t, which < 4, payload, (flags & 0x08) != 0, (flags & 0x10) != 0);
  check_decode(t, read_ids(payload), (flags & 0x20) != 0);
  return 0;
}
