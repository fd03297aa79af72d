// The default model's tokenizer against llama.cpp: every corpus string, with and without
// parse_special, must give exactly the ids in tests/data/tokenizer/smollm2_goldens.json
// (written by tests/reference/make_tokenizer_goldens.py), decode must give llama_detokenize's
// text, and the end-of-generation set and token types must be llama.cpp's.
#include "golden_support.hpp"
#include "model/gguf.hpp"

using namespace ember;
using tokenizer::TokenId;

namespace {

struct Case {
  std::string bytes;
  bool valid_utf8;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  for (const auto& c : test::load_goldens("smollm2_goldens.json").cases) {
    cases.push_back({c.bytes, c.valid_utf8});
  }
  return cases;
}

std::shared_ptr<const tokenizer::Tokenizer> default_tokenizer() {
  const std::string path = test::require_default_model();
  auto file = model::GgufFile::open(path);
  return tokenizer::Tokenizer::from_gguf(*file);
}

}  // namespace

TEST_CASE("SmolLM2 token ids equal llama.cpp's for the whole corpus, both special modes") {
  const auto tok = default_tokenizer();
  const test::ModelGoldens g = test::load_goldens("smollm2_goldens.json");
  REQUIRE(g.cases.size() >= 300);
  test::check_token_ids(*tok, g, "SmolLM2");
}

TEST_CASE("SmolLM2 decode of llama.cpp's ids equals llama_detokenize") {
  test::check_decode(*default_tokenizer(), test::load_goldens("smollm2_goldens.json"), "SmolLM2");
}

TEST_CASE("SmolLM2 special ids, end of generation and token types are llama.cpp's") {
  const auto file = model::GgufFile::open(test::require_default_model());
  const auto tok = tokenizer::Tokenizer::from_gguf(*file);
  test::check_special_tokens(*tok, tokenizer::read_vocab(*file), test::load_goldens("smollm2_goldens.json"));
}

TEST_CASE("decode(encode(s)) == s for every valid UTF-8 corpus string") {
  const auto tok = default_tokenizer();
  int round_trips = 0, valid = 0;
  for (const Case& c : load_cases()) {
    if (!c.valid_utf8) {
      // As in llama.cpp, the text is read with lenient decoding (an undecodable byte becomes
      // U+FFFD; overlong forms and surrogates are taken as code points) and tokenized re-encoded.
      std::string expected;
      for (std::uint32_t cp : tokenizer::decode_utf8(c.bytes)) tokenizer::append_utf8(expected, cp);
      CHECK(tok->decode(tok->encode(c.bytes, false)) == expected);
      continue;
    }
    ++valid;
    const bool ok = tok->decode(tok->encode(c.bytes, false)) == c.bytes &&
                    tok->decode(tok->encode(c.bytes, true), /*render_special=*/true) == c.bytes;
    round_trips += ok;
    CHECK_MESSAGE(ok, "round trip failed for '" << c.bytes << "'");
  }
  std::printf("tokenizer round trips: %d/%d\n", round_trips, valid);
}

TEST_CASE("SmolLM2 metadata: special ids, end of generation, rendering of control tokens") {
  const auto tok = default_tokenizer();
  CHECK(tok->vocab_size() == 49152);
  CHECK(tok->bos() == 1);
  CHECK(tok->eos() == 2);
  CHECK_FALSE(tok->add_bos());
  CHECK(tok->is_end_of_generation(2));  // <|im_end|>
  CHECK(tok->is_end_of_generation(0));  // <|endoftext|>
  CHECK_FALSE(tok->is_end_of_generation(1));
  CHECK(tok->token_type(1) == tokenizer::TokenType::control);
  CHECK(tok->token_to_piece(1).empty());
  CHECK(tok->token_to_piece(1, /*render_special=*/true) == "<|im_start|>");
  CHECK(tok->encode("Hello", false, /*add_bos=*/true) == tok->encode("Hello", false));
  CHECK_THROWS_AS(tok->token_to_piece(49152), Error);
  CHECK_THROWS_AS(tok->token_to_piece(-1), Error);
}

TEST_CASE("streaming every corpus string through IncrementalDecoder gives valid pieces, same text") {
  const auto tok = default_tokenizer();
  int split_characters = 0;  // tokens that ended inside a character (emoji, CJK, ...)
  for (const Case& c : load_cases()) {
    if (!c.valid_utf8) continue;
    tokenizer::IncrementalDecoder decoder(*tok);
    std::string streamed;
    for (TokenId id : tok->encode(c.bytes, false)) {
      const std::string piece = decoder.push(id);
      split_characters += piece.empty() && !tok->token_to_piece(id).empty();
      CHECK(tokenizer::sanitize_utf8(piece) == piece);
      streamed += piece;
    }
    streamed += decoder.flush();
    CHECK(streamed == c.bytes);
  }
  CHECK(split_characters > 20);  // the corpus really exercises held-back bytes
  std::printf("incremental decoder: %d tokens held back inside a character\n", split_characters);
}
