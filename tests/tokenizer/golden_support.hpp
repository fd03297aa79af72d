// The llama.cpp tokenizer goldens (tests/reference/make_tokenizer_goldens.py) and the checks
// every model's golden test runs against them: token ids of the whole corpus in both special
// modes, BOS handling, decoding, end-of-generation ids and token types.
#pragma once

#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

namespace ember::test {

using tokenizer::TokenId;

inline nlohmann::json read_tokenizer_json(const std::string& name) {
  std::ifstream in(data_path("tokenizer/" + name));
  REQUIRE_MESSAGE(in.good(), "cannot read tests/data/tokenizer/" << name);
  return nlohmann::json::parse(in);
}

inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// {"text": ...} or {"hex": ...} as bytes.
inline std::string golden_bytes(const nlohmann::json& j) {
  return j.contains("text") ? j["text"].get<std::string>() : from_hex(j.at("hex").get<std::string>());
}

struct GoldenCase {
  std::string bytes;
  bool valid_utf8 = true;
  std::vector<TokenId> plain, special;
  std::string plain_text, special_text;  // llama_detokenize of plain / special (rendered)
};

struct ModelGoldens {
  nlohmann::json json;
  std::vector<GoldenCase> cases;
};

inline ModelGoldens load_goldens(const std::string& golden_file) {
  ModelGoldens g;
  const nlohmann::json corpus = read_tokenizer_json("corpus.json");
  g.json = read_tokenizer_json(golden_file);
  const auto& strings = corpus.at("strings");
  const auto& ids = g.json.at("cases");
  REQUIRE(strings.size() == ids.size());
  for (std::size_t i = 0; i < strings.size(); ++i) {
    GoldenCase c;
    c.valid_utf8 = strings[i].contains("text");
    c.bytes = golden_bytes(strings[i]);
    c.plain = ids[i].at("plain").get<std::vector<TokenId>>();
    c.special = ids[i].at("special").get<std::vector<TokenId>>();
    c.plain_text = ids[i].contains("plain_text") ? golden_bytes(ids[i]["plain_text"]) : c.bytes;
    c.special_text = ids[i].contains("special_text") ? golden_bytes(ids[i]["special_text"]) : c.bytes;
    g.cases.push_back(std::move(c));
  }
  return g;
}

// Token ids of every corpus string, both special modes, and the BOS cases: all must equal
// llama.cpp's. Returns the number of (string, mode) pairs that matched.
inline int check_token_ids(const tokenizer::Tokenizer& tok, const ModelGoldens& g, const char* model) {
  int matched_plain = 0, matched_special = 0;
  for (std::size_t i = 0; i < g.cases.size(); ++i) {
    const GoldenCase& c = g.cases[i];
    const auto plain = tok.encode(c.bytes, /*parse_special=*/false);
    const auto special = tok.encode(c.bytes, /*parse_special=*/true);
    matched_plain += plain == c.plain;
    matched_special += special == c.special;
    CHECK_MESSAGE(plain == c.plain, std::string(model) << ": plain mismatch at corpus index " << i);
    CHECK_MESSAGE(special == c.special, std::string(model) << ": parse_special mismatch at corpus index " << i);
  }
  const auto& with_bos = g.json.at("with_bos");
  int matched_bos = 0;
  for (std::size_t i = 0; i < with_bos.size(); ++i) {
    const auto ids = tok.encode(g.cases[i].bytes, /*parse_special=*/true, /*add_bos=*/true);
    const bool ok = ids == with_bos[i].get<std::vector<TokenId>>();
    matched_bos += ok;
    CHECK_MESSAGE(ok, std::string(model) << ": add_bos mismatch at " << i);
  }
  std::printf(
      "%s tokenizer goldens: parse_special=false %d/%zu, parse_special=true %d/%zu, "
      "add_bos %d/%zu identical to llama.cpp\n",
      model, matched_plain, g.cases.size(), matched_special, g.cases.size(), matched_bos, with_bos.size());
  return matched_plain + matched_special + matched_bos;
}

// decode of llama.cpp's ids equals llama_detokenize (control tokens hidden, then rendered).
inline void check_decode(const tokenizer::Tokenizer& tok, const ModelGoldens& g, const char* model) {
  int matched = 0;
  for (std::size_t i = 0; i < g.cases.size(); ++i) {
    const GoldenCase& c = g.cases[i];
    const bool ok =
        tok.decode(c.plain) == c.plain_text && tok.decode(c.special, /*render_special=*/true) == c.special_text;
    matched += ok;
    CHECK_MESSAGE(ok, std::string(model) << ": decode differs from llama_detokenize at corpus index " << i);
  }
  std::printf("%s decode: %d/%zu identical to llama_detokenize\n", model, matched, g.cases.size());
}

// Special ids, end of generation and every token's type (llama.cpp retypes some by text).
inline void check_special_tokens(const tokenizer::Tokenizer& tok, const tokenizer::Vocab& gguf, const ModelGoldens& g) {
  CHECK(tok.vocab_size() == g.json.at("vocab_size").get<int>());
  CHECK(tok.bos() == g.json.at("bos").get<int>());
  CHECK(tok.eos() == g.json.at("eos").get<int>());
  CHECK(tok.add_bos() == g.json.at("add_bos").get<bool>());
  CHECK(tok.end_of_generation_tokens() == g.json.at("eog").get<std::vector<TokenId>>());
  const auto eog = g.json.at("eog").get<std::vector<TokenId>>();
  int eog_wrong = 0;
  for (TokenId id = 0; id < tok.vocab_size(); ++id) {
    eog_wrong += tok.is_end_of_generation(id) != std::binary_search(eog.begin(), eog.end(), id);
  }
  CHECK(eog_wrong == 0);
  std::vector<tokenizer::TokenType> expected = gguf.types;
  for (const auto& change : g.json.at("type_changes")) {
    expected.at(change[0].get<std::size_t>()) = static_cast<tokenizer::TokenType>(change[1].get<int>());
  }
  int wrong = 0;
  for (TokenId id = 0; id < tok.vocab_size(); ++id) {
    const auto want = expected[static_cast<std::size_t>(id)];
    if (tok.token_type(id) != want && ++wrong <= 10) {
      FAIL_CHECK("token " << id << " '" << tok.token_text(id) << "' has type " << static_cast<int>(tok.token_type(id))
                          << ", llama.cpp " << static_cast<int>(want));
    }
  }
  CHECK(wrong == 0);
}

}  // namespace ember::test
