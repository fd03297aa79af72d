// The default model's tokenizer against llama.cpp: every corpus string, with and without
// parse_special, must give exactly the ids in tests/data/tokenizer/smollm2_goldens.json
// (written by tests/reference/make_tokenizer_goldens.py).
#include "model/gguf.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

using namespace ember;
using tokenizer::TokenId;

namespace {

nlohmann::json read_json(const std::string& name) {
  std::ifstream in(test::data_path("tokenizer/" + name));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

struct Case {
  std::string bytes;
  bool valid_utf8;
  std::vector<TokenId> plain, special;
};

std::vector<Case> load_cases() {
  const nlohmann::json corpus = read_json("corpus.json");
  const nlohmann::json goldens = read_json("smollm2_goldens.json");
  const auto& strings = corpus.at("strings");
  const auto& ids = goldens.at("cases");
  REQUIRE(strings.size() == ids.size());
  std::vector<Case> cases;
  for (std::size_t i = 0; i < strings.size(); ++i) {
    Case c;
    c.valid_utf8 = strings[i].contains("text");
    c.bytes = c.valid_utf8 ? strings[i]["text"].get<std::string>()
                           : from_hex(strings[i]["hex"].get<std::string>());
    c.plain = ids[i].at("plain").get<std::vector<TokenId>>();
    c.special = ids[i].at("special").get<std::vector<TokenId>>();
    cases.push_back(std::move(c));
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
  const std::vector<Case> cases = load_cases();
  REQUIRE(cases.size() >= 300);
  int matched_plain = 0, matched_special = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto plain = tok->encode(c.bytes, /*parse_special=*/false);
    const auto special = tok->encode(c.bytes, /*parse_special=*/true);
    matched_plain += plain == c.plain;
    matched_special += special == c.special;
    CHECK_MESSAGE(plain == c.plain, "plain mismatch at corpus index " << i);
    CHECK_MESSAGE(special == c.special, "parse_special mismatch at corpus index " << i);
  }
  std::printf("tokenizer goldens: parse_special=false %d/%zu matched, parse_special=true %d/%zu matched\n",
              matched_plain, cases.size(), matched_special, cases.size());
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
