// llama.cpp's text rules for special tokens (lib/tokenizer/special_tokens.cpp) on hand-made
// vocabularies, and the two text indexes encode relies on (lib/tokenizer/token_index.hpp). The
// real vocabularies are checked against llama.cpp itself in test_golden.cpp and test_gemma3.cpp.
#include "tokenizer/token_index.hpp"
#include "tokenizer/tokenizer.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <fmt/format.h>

using namespace ember::tokenizer;

namespace {

// A SentencePiece vocabulary: <unk> <s> </s>, the byte tokens, single letters, then `extra`.
Vocab make_vocab(const std::vector<std::pair<std::string, TokenType>>& extra) {
  Vocab v;
  v.model = "llama";
  v.add_space_prefix = false;
  auto add = [&](std::string text, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(-static_cast<float>(v.tokens.size()));
    v.types.push_back(type);
  };
  add("<unk>", TokenType::unknown);
  add("<s>", TokenType::control);
  add("</s>", TokenType::control);
  for (unsigned b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), TokenType::byte);
  for (char c = 'a'; c <= 'z'; ++c) add(std::string(1, c), TokenType::normal);
  for (const auto& [text, type] : extra) add(text, type);
  v.unknown = 0;
  v.bos = 1;
  v.eos = 2;
  return v;
}

TokenId id_of(const Tokenizer& tok, std::string_view text) {
  const auto id = tok.find_token(text);
  REQUIRE_MESSAGE(id.has_value(), "no token " << std::string(text));
  return *id;
}

}  // namespace

TEST_CASE("turn-ending texts end generation and become control tokens, as in llama.cpp") {
  // Gemma: <end_of_turn> (here stored as a normal token) and a user-defined "</s>".
  Vocab v = make_vocab({{"<start_of_turn>", TokenType::control},
                        {"<end_of_turn>", TokenType::normal},
                        {"<eos>", TokenType::control},
                        {"<i>", TokenType::user_defined}});
  v.tokens[2] = "</s>";
  v.types[2] = TokenType::user_defined;
  v.eos = static_cast<TokenId>(v.tokens.size()) - 2;  // <eos>
  const auto tok = Tokenizer::from_vocab(v);
  const TokenId end = id_of(*tok, "<end_of_turn>"), start = id_of(*tok, "<start_of_turn>");
  CHECK(tok->is_end_of_generation(end));
  CHECK(tok->is_end_of_generation(tok->eos()));
  CHECK(tok->is_end_of_generation(2));  // "</s>"
  CHECK_FALSE(tok->is_end_of_generation(start));
  CHECK(tok->end_of_generation_tokens() == std::vector<TokenId>{2, end, tok->eos()});
  CHECK(tok->token_type(end) == TokenType::control);
  CHECK(tok->token_type(2) == TokenType::control);  // no longer user-defined
  CHECK(tok->token_type(id_of(*tok, "<i>")) == TokenType::user_defined);
  // A control token's text is only a token with parse_special, and renders only on request.
  CHECK(tok->encode("<end_of_turn>", true) == std::vector<TokenId>{end});
  CHECK(tok->encode("<end_of_turn>", false).size() > 1);
  CHECK(tok->encode("x</s>", false).size() > 2);
  CHECK(tok->encode("<i>", false) == std::vector<TokenId>{id_of(*tok, "<i>")});  // user-defined
  CHECK(tok->token_to_piece(end).empty());
  CHECK(tok->token_to_piece(end, true) == "<end_of_turn>");
}

TEST_CASE("ChatML and Llama 3 end tokens; fill-in-the-middle pad, repo and separator tokens") {
  const auto tok = Tokenizer::from_vocab(make_vocab({{"<|im_start|>", TokenType::control},
                                                     {"<|im_end|>", TokenType::control},
                                                     {"<|eot_id|>", TokenType::control},
                                                     {"<|endoftext|>", TokenType::control},
                                                     {"<fim_prefix>", TokenType::normal},
                                                     {"<fim_pad>", TokenType::control},
                                                     {"<reponame>", TokenType::control},
                                                     {"<|file_sep|>", TokenType::normal}}));
  for (const char* text : {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<fim_pad>", "<reponame>", "<|file_sep|>"}) {
    CHECK_MESSAGE(tok->is_end_of_generation(id_of(*tok, text)), text);
    CHECK_MESSAGE(tok->token_type(id_of(*tok, text)) == TokenType::control, text);
  }
  CHECK_FALSE(tok->is_end_of_generation(id_of(*tok, "<|im_start|>")));
  // A fill-in-the-middle prefix becomes control but does not end generation.
  CHECK(tok->token_type(id_of(*tok, "<fim_prefix>")) == TokenType::control);
  CHECK_FALSE(tok->is_end_of_generation(id_of(*tok, "<fim_prefix>")));
}

TEST_CASE("ids named by the file are end of generation; text detection of that kind is skipped") {
  Vocab v =
      make_vocab({{"<my_end>", TokenType::normal}, {"<PAD>", TokenType::normal}, {"<pad_of_mine>", TokenType::normal}});
  v.eot = static_cast<TokenId>(v.tokens.size()) - 3;
  v.fim_pad = static_cast<TokenId>(v.tokens.size()) - 1;  // "<PAD>" is then not the pad token
  const auto tok = Tokenizer::from_vocab(v);
  CHECK(tok->is_end_of_generation(id_of(*tok, "<my_end>")));
  CHECK(tok->is_end_of_generation(id_of(*tok, "<pad_of_mine>")));
  CHECK_FALSE(tok->is_end_of_generation(id_of(*tok, "<PAD>")));
  CHECK(tok->token_type(id_of(*tok, "<PAD>")) == TokenType::normal);
}

TEST_CASE("gpt-oss: <|end|> does not end generation beside <|return|> and <|call|>") {
  const auto with = Tokenizer::from_vocab(make_vocab({{"<|end|>", TokenType::control},
                                                      {"<|return|>", TokenType::control},
                                                      {"<|call|>", TokenType::control},
                                                      {"<|channel|>", TokenType::control}}));
  CHECK_FALSE(with->is_end_of_generation(id_of(*with, "<|end|>")));
  CHECK(with->token_type(id_of(*with, "<|end|>")) == TokenType::user_defined);
  CHECK(with->is_end_of_generation(id_of(*with, "<|return|>")));
  CHECK(with->is_end_of_generation(id_of(*with, "<|call|>")));
  CHECK(with->token_type(id_of(*with, "<|channel|>")) == TokenType::user_defined);  // rendered
  const auto without = Tokenizer::from_vocab(make_vocab({{"<|end|>", TokenType::control}}));
  CHECK(without->is_end_of_generation(id_of(*without, "<|end|>")));  // Phi-3
}

TEST_CASE("Gemma 4: an ordinary </s> beside <|tool_response>") {
  const auto tok = Tokenizer::from_vocab(make_vocab({{"<|tool_response>", TokenType::control}}));
  CHECK_FALSE(tok->is_end_of_generation(2));
  CHECK(tok->token_type(2) == TokenType::normal);
  CHECK(tok->is_end_of_generation(id_of(*tok, "<|tool_response>")));
}

TEST_CASE("special tokens are cut out longest first, only where they occur") {
  const auto tok = Tokenizer::from_vocab(make_vocab({{"<a>", TokenType::control},
                                                     {"<a><b>", TokenType::control},
                                                     {"  ", TokenType::user_defined},
                                                     {"   ", TokenType::user_defined}}));
  const TokenId a = id_of(*tok, "<a>"), ab = id_of(*tok, "<a><b>");
  const TokenId two = id_of(*tok, "  "), three = id_of(*tok, "   ");
  CHECK(tok->encode("<a><b><a>", true) == std::vector<TokenId>{ab, a});
  CHECK(tok->encode("<a<a>>", true) ==
        std::vector<TokenId>{id_of(*tok, "<0x3C>"), id_of(*tok, "a"), a, id_of(*tok, "<0x3E>")});
  // Runs of spaces (user-defined, so recognised in both modes): the longest first, left to right.
  CHECK(tok->encode("     ", false) == std::vector<TokenId>{three, two});
  // The fourth space is escaped to U+2581, which this vocabulary spells with byte tokens.
  CHECK(tok->encode("x    y", false) == std::vector<TokenId>{id_of(*tok, "x"), three, id_of(*tok, "<0xE2>"),
                                                             id_of(*tok, "<0x96>"), id_of(*tok, "<0x81>"),
                                                             id_of(*tok, "y")});
  CHECK(tok->encode("", true).empty());
  CHECK(tok->encode("", false, /*add_bos=*/true) == std::vector<TokenId>{1});
}

TEST_CASE("TokenIndex: exact lookups, later duplicates win, misses") {
  std::vector<std::string> tokens = {"a", "ab", "", "abc", "ab", std::string(40, 'x'), std::string("\0z", 2)};
  detail::TokenIndex index;
  index.build(tokens);
  CHECK(index.find("a") == 0);
  CHECK(index.find("ab") == 4);  // the later of the two
  CHECK(index.find("abc") == 3);
  CHECK(index.find("") == 2);
  CHECK(index.find(std::string(40, 'x')) == 5);
  CHECK(index.find(std::string_view("\0z", 2)) == 6);
  CHECK(index.find("abcd") == -1);
  CHECK(index.find(std::string(41, 'x')) == -1);  // longer than any token
  CHECK(index.find("b") == -1);
  detail::TokenIndex empty;
  CHECK(empty.find("a") == -1);
}

TEST_CASE("SpecialTokenMatcher finds every occurring entry once, ascending, filtered") {
  detail::SpecialTokenMatcher m;
  m.build({"<ab>", "<a>", "", "b", "<a>"});
  std::vector<int> found;
  m.find_all(
      "x<a>y<ab>b<a>", [](int) { return true; }, found);
  CHECK(found == std::vector<int>{0, 1, 3});  // the second "<a>" entry is the first one's text
  found.clear();
  m.find_all(
      "x<a>y<ab>b", [](int e) { return e != 1; }, found);
  CHECK(found == std::vector<int>{0, 3});
  found.clear();
  m.find_all(
      "<a", [](int) { return true; }, found);
  CHECK(found.empty());
}
