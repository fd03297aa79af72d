// Byte-level BPE on a small hand-made vocabulary: merge order, special tokens, fallbacks.
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

using namespace ember::tokenizer;

namespace {

// The GPT-2 byte-to-unicode table, written independently of the library's.
std::string byte_char(unsigned b) {
  unsigned n = 0;
  for (unsigned c = 0; c < b; ++c) {
    if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++n;
  }
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  std::string s;
  append_utf8(s, printable ? b : 256 + n);
  return s;
}

struct Fixture {
  Vocab vocab;
  TokenId id(const std::string& text) const {
    for (std::size_t i = 0; i < vocab.tokens.size(); ++i) {
      if (vocab.tokens[i] == text) return static_cast<TokenId>(i);
    }
    FAIL("no token " << text);
    return -1;
  }
};

Fixture make_vocab(std::string pre = "gpt2") {
  Fixture f;
  Vocab& v = f.vocab;
  v.pre = std::move(pre);
  v.tokens = {"<|end|>", "<user>"};
  v.types = {TokenType::control, TokenType::user_defined};
  for (unsigned b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_char(b));
    v.types.push_back(TokenType::normal);
  }
  for (const char* t : {"ll", "he", "hell", "hello", "\xC4\xA0w", "\xC4\xA0wo"}) {  // Ġ = space
    v.tokens.push_back(t);
    v.types.push_back(TokenType::normal);
  }
  v.merges = {"l l", "h e", "he ll", "hell o", "\xC4\xA0 w", "\xC4\xA0w o"};
  v.eos = 0;
  return f;
}

}  // namespace

TEST_CASE("BPE merges lowest rank first until no ranked pair is left") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  CHECK(tok->encode("hello", false) == std::vector<TokenId>{f.id("hello")});
  CHECK(tok->encode("hel", false) == std::vector<TokenId>{f.id("he"), f.id("l")});
  CHECK(tok->encode("hello wo", false) == std::vector<TokenId>{f.id("hello"), f.id("\xC4\xA0wo")});
  CHECK(tok->encode("", false).empty());
  CHECK(tok->decode(tok->encode("hello wo\n\xF0\x9F\x98\x80", false)) == "hello wo\n\xF0\x9F\x98\x80");
}

TEST_CASE("special tokens: control only with parse_special, user-defined always") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  const auto with = tok->encode("he<|end|>he", true);
  CHECK(with == std::vector<TokenId>{f.id("he"), 0, f.id("he")});
  const auto without = tok->encode("he<|end|>he", false);
  CHECK(without.size() == 9);  // he, <, |, e, n, d, |, >, he: no merges exist for them
  CHECK(without.front() == f.id("he"));
  CHECK(tok->decode(without) == "he<|end|>he");
  CHECK(tok->encode("a<user>b", false) == std::vector<TokenId>{f.id("a"), 1, f.id("b")});
  CHECK(tok->decode(with) == "hehe");  // control tokens render empty
  CHECK(tok->decode(with, /*render_special=*/true) == "he<|end|>he");
  CHECK(tok->is_end_of_generation(0));
}

TEST_CASE("invalid UTF-8 never throws and is tokenized as U+FFFD") {
  const Fixture f = make_vocab();
  const auto tok = Tokenizer::from_vocab(f.vocab);
  const auto ids = tok->encode(
      "a\xFF"
      "b",
      false);
  CHECK(tok->decode(ids) ==
        "a\xEF\xBF\xBD"
        "b");
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, static_cast<char>(b));
    CHECK_NOTHROW(tok->encode(s + s + "\xC3", true));
  }
}

TEST_CASE("Llama 3 pre-tokenizer keeps whole-word vocabulary entries (ignore_merges)") {
  Fixture f = make_vocab("llama-bpe");
  f.vocab.tokens.push_back("hlo");  // reachable by no merge
  f.vocab.types.push_back(TokenType::normal);
  const auto tok = Tokenizer::from_vocab(f.vocab);
  CHECK(tok->encode("hlo", false) == std::vector<TokenId>{f.id("hlo")});
  CHECK(tok->add_bos());  // the Llama 3 default when the file does not say
  const auto gpt2 = Tokenizer::from_vocab([&] {
    Vocab v = f.vocab;
    v.pre = "gpt2";
    return v;
  }());
  CHECK(gpt2->encode("hlo", false).size() == 3);
}

TEST_CASE("bad vocabularies are rejected with typed errors") {
  Fixture f = make_vocab("no-such-pre");
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
  f = make_vocab();
  f.vocab.model = "wordpiece";
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
  f = make_vocab();
  f.vocab.eos = 100000;
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
  f = make_vocab();
  f.vocab.types.pop_back();
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
  f = make_vocab();
  f.vocab.merges.push_back("nospace");
  CHECK_THROWS_AS(Tokenizer::from_vocab(f.vocab), ember::Error);
  try {
    f = make_vocab("no-such-pre");
    Tokenizer::from_vocab(f.vocab);
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::unsupported);
    CHECK(std::string(e.what()).find("smollm") != std::string::npos);
  }
}
