// IncrementalDecoder: pieces are always complete UTF-8, split characters are held back.
#include "tokenizer/tokenizer.hpp"

#include <doctest/doctest.h>

#include <fmt/format.h>

using namespace ember::tokenizer;

namespace {

// A vocabulary of byte tokens only (SentencePiece), so any byte sequence is one token per byte.
std::shared_ptr<const Tokenizer> byte_tokenizer() {
  Vocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>"};
  v.types = {TokenType::unknown, TokenType::control};
  for (unsigned b = 0; b < 256; ++b) {
    v.tokens.push_back(fmt::format("<0x{:02X}>", b));
    v.types.push_back(TokenType::byte);
  }
  v.tokens.push_back("ok");
  v.types.push_back(TokenType::normal);
  v.scores.assign(v.tokens.size(), 0.0f);
  return Tokenizer::from_vocab(v);
}

TokenId byte_id(unsigned char b) { return 2 + b; }

}  // namespace

TEST_CASE("an emoji split over four tokens comes out whole, once") {
  const auto tok = byte_tokenizer();
  IncrementalDecoder dec(*tok);
  const std::string emoji = "\xF0\x9F\x98\x80";
  CHECK(dec.push(byte_id('a')) == "a");
  CHECK(dec.push(byte_id(0xF0)).empty());
  CHECK(dec.push(byte_id(0x9F)).empty());
  CHECK(dec.push(byte_id(0x98)).empty());
  CHECK(dec.push(byte_id(0x80)) == emoji);
  CHECK(dec.flush().empty());
}

TEST_CASE("CJK and ZWJ sequences stream byte by byte into the same text") {
  const auto tok = byte_tokenizer();
  const std::string text = "\xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 ok";
  IncrementalDecoder dec(*tok);
  std::string out;
  for (unsigned char b : text) {
    const std::string piece = dec.push(byte_id(b));
    // Every piece on its own is complete UTF-8.
    for (std::size_t i = 0; i < piece.size();) {
      const auto lead = static_cast<unsigned char>(piece[i]);
      const std::size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      REQUIRE(i + n <= piece.size());
      i += n;
    }
    out += piece;
  }
  out += dec.flush();
  CHECK(out == text);
}

TEST_CASE("flush turns an incomplete character into U+FFFD; ill-formed bytes are replaced") {
  const auto tok = byte_tokenizer();
  IncrementalDecoder dec(*tok);
  CHECK(dec.push(byte_id(0xE6)).empty());
  CHECK(dec.push(byte_id(0x97)).empty());
  CHECK(dec.flush() == "\xEF\xBF\xBD");
  CHECK(dec.push(byte_id(0xFF)) == "\xEF\xBF\xBD");
  CHECK(dec.push(byte_id(0xE6)).empty());
  CHECK(dec.push(byte_id('x')) == "\xEF\xBF\xBDx");  // a lead byte interrupted by ASCII
  CHECK(dec.push(1).empty());                        // control token: no text
  IncrementalDecoder special(*tok, /*render_special=*/true);
  CHECK(special.push(1) == "<s>");
}
