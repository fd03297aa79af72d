// SentencePiece BPE on a small hand-made vocabulary: score-ordered merges, the space prefix,
// byte fallback, and decoding.
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

using namespace ember::tokenizer;

namespace {

struct Fixture {
  Vocab vocab;
  TokenId id(const std::string& text) const {
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
      if (vocab.tokens[i] == text) return static_cast<TokenId>(i);
    }
    FAIL("no token " << text);
    return -1;
  }
  TokenId byte(unsigned b) const { return id(fmt::format("<0x{:02X}>", b)); }
};

Fixture make_vocab() {
  Fixture f;
  Vocab& v = f.vocab;
  v.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, TokenType::unknown);
  add("<s>", 0, TokenType::control);
  add("</s>", 0, TokenType::control);
  for (unsigned b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::byte);
  // Single characters first, then merges; the score decides which pair merges first.
  for (const char* c : {"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d"}) add(c, -10, TokenType::normal);
  add("ll", -1.0f, TokenType::normal);
  add("\xE2\x96\x81h", -2.0f, TokenType::normal);
  add("he", -3.0f, TokenType::normal);
  add("\xE2\x96\x81he", -1.5f, TokenType::normal);
  add("llo", -1.2f, TokenType::normal);
  add("\xE2\x96\x81hello", -0.5f, TokenType::normal);
  add("or", -1.0f, TokenType::normal);
  add("ld", -1.1f, TokenType::normal);
  add("\xE2\x96\x81w", -2.0f, TokenType::normal);
  add("\xE2\x96\x81wor", -1.3f, TokenType::normal);
  add("\xE2\x96\x81world", -0.4f, TokenType::normal);
  v.bos = 1;
  v.eos = 2;
  v.unknown = 0;
  return f;
}

}  // namespace

TEST_CASE("SentencePiece merges the highest-scoring pair first, with a space prefix") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  CHECK(tok->encode("hello world", false) ==
        std::vector<TokenId>{f.id("\xE2\x96\x81hello"), f.id("\xE2\x96\x81world")});
  // "he" (-3) loses to "▁h" (-2): the word starts "▁h" + "e" -> "▁he".
  CHECK(tok->encode("he", false) == std::vector<TokenId>{f.id("\xE2\x96\x81he")});
  CHECK(tok->add_bos());
  CHECK(tok->encode("hello", false, /*add_bos=*/true) == std::vector<TokenId>{1, f.id("\xE2\x96\x81hello")});
  CHECK(tok->decode(tok->encode("hello world", false)) == "hello world");
}

TEST_CASE("SentencePiece byte fallback spells unknown characters with <0xNN> tokens") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  CHECK(tok->encode("hi", false) == std::vector<TokenId>{f.id("\xE2\x96\x81h"), f.byte('i')});
  CHECK(tok->encode("\xC3\xA9", false) == std::vector<TokenId>{f.id("\xE2\x96\x81"), f.byte(0xC3), f.byte(0xA9)});
  CHECK(tok->decode(tok->encode("hi \xC3\xA9", false)) == "hi \xC3\xA9");
  CHECK(tok->token_to_piece(f.byte(0x41)) == "A");
}

TEST_CASE("SentencePiece special tokens: each text run after a special token gets the prefix") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  CHECK(tok->encode("<s>hello</s>", true) == std::vector<TokenId>{1, f.id("\xE2\x96\x81hello"), 2});
  CHECK(tok->decode({1, f.id("\xE2\x96\x81hello"), 2}) == "hello");
  CHECK(tok->decode({1, f.id("\xE2\x96\x81hello"), 2}, true) == "<s>hello</s>");
  Vocab no_prefix = f.vocab;
  no_prefix.add_space_prefix = false;
  // Without the prefix "▁hello" is out of reach: "ll" (-1), "llo" (-1.2), then "he" (-3).
  CHECK(Tokenizer::from_vocab(no_prefix)->encode("hello", false) == std::vector<TokenId>{f.id("he"), f.id("llo")});
}

TEST_CASE("SentencePiece vocabulary without scores is rejected") {
  Fixture f = make_vocab();
  f.vocab.scores.clear();
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
}
