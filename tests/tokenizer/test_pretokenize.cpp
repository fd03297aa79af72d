#include "tokenizer/pretokenize.hpp"
#include "tokenizer/unicode.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace ember::tokenizer;

namespace {

std::vector<std::string> split(PreTokenizer kind, const std::string& text) {
  const auto cpts = decode_utf8(text);
  std::vector<std::string> words;
  std::size_t start = 0;
  for (std::size_t n : pre_tokenize(kind, cpts)) {
    std::string w;
    for (std::size_t i = start; i < start + n; ++i) append_utf8(w, cpts[i]);
    words.push_back(w);
    start += n;
  }
  REQUIRE(start == cpts.size());
  return words;
}

using Words = std::vector<std::string>;

}  // namespace

TEST_CASE("GPT-2 split: contractions, letters, numbers, punctuation, whitespace look-ahead") {
  CHECK(split(PreTokenizer::gpt2, "I'm here, aren't we?") == Words{"I", "'m", " here", ",", " aren", "'t", " we", "?"});
  CHECK(split(PreTokenizer::gpt2, "a   b") == Words{"a", "  ", " b"});
  CHECK(split(PreTokenizer::gpt2, "a   ") == Words{"a", "   "});
  CHECK(split(PreTokenizer::gpt2, "x 12345!!") == Words{"x", " 12345", "!!"});
  CHECK(split(PreTokenizer::gpt2, "日本語 テスト") == Words{"日本語", " テスト"});
  CHECK(split(PreTokenizer::gpt2, "").empty());
}

TEST_CASE("SmolLM2 split isolates every digit before the GPT-2 rules") {
  CHECK(split(PreTokenizer::smollm, "abc 123") == Words{"abc", " ", "1", "2", "3"});
  CHECK(split(PreTokenizer::smollm, "x²+1") == Words{"x", "²", "+", "1"});
}

TEST_CASE("Llama 3 split: digit triples, case-insensitive contractions, line breaks") {
  CHECK(split(PreTokenizer::llama3, "1234567") == Words{"123", "456", "7"});
  CHECK(split(PreTokenizer::llama3, "WE'LL go") == Words{"WE", "'LL", " go"});
  CHECK(split(PreTokenizer::llama3, "a\n\n  b") == Words{"a", "\n\n", " ", " b"});
  CHECK(split(PreTokenizer::llama3, "(hello)") == Words{"(hello", ")"});
  CHECK(split(PreTokenizer::llama3, "x.\n\ny") == Words{"x", ".\n\n", "y"});
  CHECK(split(PreTokenizer::qwen2, "1234") == Words{"1", "2", "3", "4"});
}

TEST_CASE("default split: punctuation runs, number runs and ASCII digit triples") {
  CHECK(split(PreTokenizer::standard, "hi!! 12345") == Words{"hi", "!!", " ", "123", "45"});
}

TEST_CASE("pre-tokenizer names") {
  CHECK(pre_tokenizer_from_name("smollm") == PreTokenizer::smollm);
  CHECK(pre_tokenizer_from_name("llama-bpe") == PreTokenizer::llama3);
  CHECK(pre_tokenizer_from_name("qwen2") == PreTokenizer::qwen2);
  CHECK(pre_tokenizer_from_name("") == PreTokenizer::standard);
  CHECK_THROWS_AS(pre_tokenizer_from_name("no-such-pre"), ember::Error);
}
