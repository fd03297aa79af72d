// Token masks: the trie walk gives exactly the tokens a brute-force check of every token's bytes
// gives, end tokens follow the grammar's end, and a whole constrained "generation" stays in the
// language. The real vocabularies (SmolLM2's 49k, Gemma 3's 262k) are checked when present.
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/token_mask.hpp"
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace ember::grammar;

namespace {

std::shared_ptr<const Grammar> compile(const std::string& gbnf) {
  return std::make_shared<const Grammar>(parse_gbnf(gbnf));
}

// A toy vocabulary: single bytes, some words, pieces crossing JSON structure, an end token.
std::shared_ptr<const TokenTrie> toy_trie() {
  std::vector<std::string> pieces;
  for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
  for (const char* w : {"{\"", "\":",  "\",", "\"}",      "true", "tr", "false", "null", " \"", "12",   "3.",
                        ".5",  "name", "na",  "\"name\"", "}",    "{}", "[1",    ",2]",  "é",   "\xC3", "\xA9"})
    pieces.push_back(w);
  pieces.push_back("<eos>");
  std::vector<bool> usable(pieces.size(), true);
  const auto eos = static_cast<std::int32_t>(pieces.size() - 1);
  return std::make_shared<const TokenTrie>(pieces, usable, std::vector<std::int32_t>{eos});
}

// What the mask must be: a token is allowed when its bytes keep a parse alive.
std::vector<bool> brute_force(Matcher& m, Matcher::State s, const TokenTrie& trie) {
  std::vector<bool> ok(static_cast<std::size_t>(trie.vocab_size()));
  for (std::int32_t id = 0; id < trie.vocab_size(); ++id)
    ok[static_cast<std::size_t>(id)] =
        trie.usable(id) && !trie.piece(id).empty() && m.advance(s, trie.piece(id)) != Matcher::kDead;
  return ok;
}

void check_mask_matches(TokenConstraint& c, Matcher& reference, Matcher::State s, const TokenTrie& trie) {
  const std::vector<bool> want = brute_force(reference, s, trie);
  const TokenMask& got = c.mask();
  int mismatches = 0;
  for (std::int32_t id = 0; id < trie.vocab_size(); ++id) {
    const bool bit = (got[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1;
    if (bit != want[static_cast<std::size_t>(id)]) ++mismatches;
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("the trie holds every usable token once, in preorder") {
  const auto trie = toy_trie();
  CHECK(trie->vocab_size() == 256 + 22 + 1);
  CHECK(trie->token_ids_.size() == 256 + 22);  // the end token is kept out of the trie
  for (std::size_t i = 1; i < trie->node_count(); ++i) {
    CHECK(trie->parent_[i] < static_cast<std::int32_t>(i));
    CHECK(trie->subtree_end_[i] > static_cast<std::int32_t>(i));
  }
}

TEST_CASE("masks equal the brute-force check through a whole JSON document") {
  const auto trie = toy_trie();
  const auto g = compile(json_schema_to_gbnf(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "ok": {"type": "boolean"}}, "required": ["name", "ok"]})"));
  TokenConstraint c(g, trie);
  Matcher reference(g);
  const std::string doc = R"({"name": "é", "ok": true})";
  // Feed the document one byte token at a time, checking the mask at each state.
  auto s = reference.start();
  for (char ch : doc) {
    check_mask_matches(c, reference, s, *trie);
    CHECK_FALSE(c.can_end());
    const auto id = static_cast<std::int32_t>(static_cast<unsigned char>(ch));
    REQUIRE(c.allows(id));
    c.accept(id);
    s = reference.advance(s, static_cast<std::uint8_t>(ch));
  }
  CHECK(c.can_end());
  CHECK(c.complete());
  CHECK(c.allows(trie->vocab_size() - 1));  // <eos> once the document is complete
  CHECK_FALSE(c.allows('}'));
  CHECK_THROWS_AS(c.accept('x'), ember::Error);
}

TEST_CASE("apply() leaves exactly the allowed logits and the end token when it may end") {
  const auto trie = toy_trie();
  TokenConstraint c(compile(R"(root ::= "tr" "ue"?)"), trie);
  std::vector<float> logits(static_cast<std::size_t>(trie->vocab_size()), 1.0f);
  c.apply(logits.data());
  int finite = 0;
  for (float z : logits) finite += std::isfinite(z);
  CHECK(finite == 3);                            // "t", "tr", "true"
  CHECK(std::isinf(logits.back()));              // cannot end yet
  c.accept(static_cast<std::int32_t>(256 + 5));  // "tr"
  CHECK(c.can_end());
  std::fill(logits.begin(), logits.end(), 2.0f);
  c.apply(logits.data());
  CHECK(logits.back() == 2.0f);  // <eos> keeps its logit
  CHECK(std::isfinite(logits['u']));
  CHECK(std::isinf(logits['t']));
}

TEST_CASE("masks are cached per state") {
  const auto trie = toy_trie();
  TokenConstraint c(compile(json_schema_to_gbnf(R"({"type": "string"})")), trie);
  c.accept('"');
  c.mask();
  const std::size_t computed = c.masks_computed();
  for (int i = 0; i < 50; ++i) {
    c.accept('a');  // inside the string the state repeats after every character
    c.mask();
  }
  CHECK(c.masks_computed() == computed);
}

TEST_CASE("real vocabularies: masks match brute force and cost little") {
  for (const std::string& path : {ember::test::default_model_path(), ember::test::gemma3_model_path()}) {
    if (path.empty()) continue;
    CAPTURE(path);
    const auto file = ember::model::GgufFile::open(path);
    const auto tok = ember::tokenizer::Tokenizer::from_gguf(*file);
    std::vector<std::string> pieces;
    std::vector<bool> usable;
    for (std::int32_t id = 0; id < tok->vocab_size(); ++id) {
      pieces.push_back(tok->token_to_piece(id));
      const auto t = tok->token_type(id);
      usable.push_back(t == ember::tokenizer::TokenType::normal || t == ember::tokenizer::TokenType::byte ||
                       t == ember::tokenizer::TokenType::user_defined);
    }
    const auto trie = std::make_shared<const TokenTrie>(pieces, usable, tok->end_of_generation_tokens());
    const auto g = compile(json_schema_to_gbnf(
        R"({"type": "object", "properties": {"say": {"type": "string"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["say", "n"]})"));
    TokenConstraint c(g, trie);
    Matcher reference(g);
    // Random walk: at each state pick a random allowed token, checking the mask each time.
    std::mt19937 rng(7);
    auto s = reference.start();
    double worst_ms = 0;
    for (int step = 0; step < 12 && !c.complete(); ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      const TokenMask& m = c.mask();
      worst_ms =
          std::max(worst_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      check_mask_matches(c, reference, s, *trie);
      std::vector<std::int32_t> allowed;
      for (std::int32_t id = 0; id < trie->vocab_size(); ++id)
        if ((m[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1) allowed.push_back(id);
      REQUIRE_FALSE(allowed.empty());
      const std::int32_t id = allowed[rng() % allowed.size()];
      c.accept(id);
      s = reference.advance(s, trie->piece(id));
    }
    MESSAGE("worst uncached mask: " << worst_ms << " ms over " << trie->node_count() << " trie nodes");
    CHECK(worst_ms < 500);  // generous: the machine is shared; typical figures are in docs
  }
}

TEST_CASE("the shortest document in bytes and in tokens") {
  // {"name":true} is the shortest, 13 bytes; the toy vocabulary writes it in 5 tokens:
  // "{\"", "name", "\":", "true", "}".
  CompiledGrammar g(compile(R"(root ::= "{\"" ("name" | "longer-name") "\":" " "? ("true" | "false") "}")"),
                    toy_trie());
  CHECK(g.shortest_document_bytes() == 13);
  CHECK(g.shortest_document_tokens() == 5);
  CHECK(g.shortest_document_tokens() == 5);  // memoised, the same
  CompiledGrammar empty(compile(R"(root ::= "x"?)"), toy_trie());
  CHECK(empty.shortest_document_bytes() == 0);
  CHECK(empty.shortest_document_tokens() == 0);
}
