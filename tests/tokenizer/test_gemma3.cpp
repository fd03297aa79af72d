// Gemma 3 270M's tokenizer (SentencePiece, 262,144 tokens, add_space_prefix = false) against
// llama.cpp: the corpus ids in both special modes and with BOS, decode, end of generation
// (<end_of_turn> stops) and token types, all from tests/data/tokenizer/gemma3_goldens.json
// (tests/reference/make_tokenizer_goldens.py); the chat template chosen for a file without one
// renders as Jinja2 renders Gemma 3's template and tokenizes to llama.cpp's ids.
//
// Needs the model file (test::require_gemma3_model(): $EMBER_GEMMA3_MODEL, else
// gemma-3-270m-q4_k_m.gguf in the model cache, scripts/fetch-model.sh gemma3); without it the
// test exits 77 (skipped).
#include "golden_support.hpp"
#include "model/gguf.hpp"
#include "tokenizer/chat_template.hpp"

#include <algorithm>
#include <chrono>

using namespace ember;
using tokenizer::TokenId;

namespace {

struct Gemma {
  std::shared_ptr<const model::GgufFile> file;
  std::shared_ptr<const tokenizer::Tokenizer> tok;
};

const Gemma& gemma() {
  static const Gemma g = [] {
    Gemma m;
    m.file = model::GgufFile::open(test::require_gemma3_model());
    m.tok = tokenizer::Tokenizer::from_gguf(*m.file);
    return m;
  }();
  return g;
}

const test::ModelGoldens& goldens() {
  static const test::ModelGoldens g = test::load_goldens("gemma3_goldens.json");
  return g;
}

std::vector<Message> messages_of(const nlohmann::json& j) {
  std::vector<Message> out;
  for (const auto& m : j) {
    out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  }
  return out;
}

}  // namespace

TEST_CASE("Gemma 3 token ids equal llama.cpp's for the whole corpus, both special modes, with BOS") {
  REQUIRE(goldens().cases.size() >= 400);
  test::check_token_ids(*gemma().tok, goldens(), "Gemma 3");
}

TEST_CASE("Gemma 3 decode of llama.cpp's ids equals llama_detokenize") {
  test::check_decode(*gemma().tok, goldens(), "Gemma 3");
}

TEST_CASE("Gemma 3 special ids, end of generation and token types are llama.cpp's") {
  const auto& g = gemma();
  test::check_special_tokens(*g.tok, tokenizer::read_vocab(*g.file), goldens());
  const auto& tok = *g.tok;
  CHECK(tok.vocab_size() == 262144);
  CHECK(tok.bos() == 2);
  CHECK(tok.eos() == 1);
  CHECK(tok.add_bos());
  REQUIRE(tok.token_text(106) == "<end_of_turn>");
  CHECK(tok.is_end_of_generation(106));        // the end of a model turn stops generation
  CHECK(tok.is_end_of_generation(1));          // <eos>
  CHECK_FALSE(tok.is_end_of_generation(105));  // <start_of_turn>
  CHECK_FALSE(tok.is_end_of_generation(2));
  CHECK(tok.encode("<end_of_turn>", /*parse_special=*/true) == std::vector<TokenId>{106});
  CHECK(tok.encode("<end_of_turn>", /*parse_special=*/false).size() > 1);
  CHECK(tok.token_to_piece(106).empty());  // a stop token never leaks into the text
  CHECK(tok.token_to_piece(106, /*render_special=*/true) == "<end_of_turn>");
  // No space prefix: "Hello" is one token, the same as in the middle of a line after a newline.
  const auto hello = tok.encode("Hello", false);
  CHECK(hello.size() == 1);
  CHECK(tok.encode("Hello", false, /*add_bos=*/true) == std::vector<TokenId>{2, hello.at(0)});
  CHECK(tok.decode(tok.encode(" Hello  world", false)) == " Hello  world");
}

TEST_CASE("a Gemma 3 file without a chat template gets Gemma 3's, rendered as Jinja2 renders it") {
  const auto& g = gemma();
  REQUIRE_FALSE(g.file->find_string("tokenizer.chat_template").has_value());
  const tokenizer::ChatTemplate tmpl = tokenizer::ChatTemplate::from_gguf(*g.file, *g.tok);
  CHECK(tmpl.format() == tokenizer::ChatFormat::gemma);

  const auto all = test::read_tokenizer_json("chat_template_goldens.json");
  int matched = 0, total = 0;
  for (const auto& t : all.at("templates")) {
    if (t.at("name") != "gemma3") continue;
    REQUIRE(t.at("bos_token") == "<bos>");
    for (const auto& c : t.at("cases")) {
      ++total;
      const auto messages = messages_of(c.at("messages"));
      if (c.contains("error")) {
        CHECK_THROWS_AS(tmpl.render(messages, c.at("add_generation_prompt")), Error);
        ++matched;
        continue;
      }
      const std::string got = tmpl.render(messages, c.at("add_generation_prompt"));
      CHECK_MESSAGE(got == c.at("output").get<std::string>(), "Gemma 3 chat case " << total);
      matched += got == c.at("output").get<std::string>();
    }
  }
  CHECK(total >= 12);
  std::printf("Gemma 3 chat template (chosen by architecture): %d/%d cases as Jinja2\n", matched, total);
}

TEST_CASE("a rendered Gemma 3 chat tokenizes to llama.cpp's ids, one BOS; <end_of_turn> stops") {
  const auto& g = gemma();
  const auto& tok = *g.tok;
  const tokenizer::ChatTemplate tmpl = tokenizer::ChatTemplate::from_gguf(*g.file, tok);
  const std::string prompt =
      tmpl.render({{"system", "You are terse."}, {"user", "What is 2+2?"}, {"assistant", "4"}}, true);
  REQUIRE(prompt ==
          "<bos><start_of_turn>user\nYou are terse.\n\nWhat is 2+2?<end_of_turn>\n"
          "<start_of_turn>model\n4<end_of_turn>\n<start_of_turn>model\n");
  // The engine's rule: a template that writes the BOS text gets no second BOS.
  const auto ids = tok.encode(prompt, /*parse_special=*/true, /*add_bos=*/false);
  const test::GoldenCase* golden = nullptr;
  for (const auto& c : goldens().cases) {
    if (c.bytes == prompt) golden = &c;
  }
  REQUIRE_MESSAGE(golden != nullptr, "the corpus has no string equal to the rendered prompt");
  CHECK(ids == golden->special);
  CHECK(std::count(ids.begin(), ids.end(), tok.bos()) == 1);
  CHECK(ids.front() == tok.bos());
  // The model's answer ends with <end_of_turn>: the first end-of-generation token in it.
  const auto answer = tok.encode("4<end_of_turn>\n", true);
  const auto stop =
      std::find_if(answer.begin(), answer.end(), [&](TokenId id) { return tok.is_end_of_generation(id); });
  REQUIRE(stop != answer.end());
  CHECK(*stop == 106);
  CHECK(tok.decode({answer.begin(), stop}) == "4");
}

TEST_CASE("Gemma 3 vocabulary load and encode speed (reported)") {
  const auto& file = *gemma().file;
  double best_ms = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    best_ms =
        std::min(best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    CHECK(tok->vocab_size() == 262144);
  }
  std::string text;
  for (const auto& c : goldens().cases) {
    if (c.valid_utf8) text += c.bytes + "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  std::size_t tokens = 0;
  constexpr int kRounds = 5;
  for (int i = 0; i < kRounds; ++i) tokens += gemma().tok->encode(text, true).size();
  const double encode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / kRounds;
  std::printf(
      "Gemma 3 tokenizer: from_gguf %.1f ms (best of 3); encode %zu bytes -> %zu tokens "
      "in %.2f ms (%.1f MB/s)\n",
      best_ms, text.size(), tokens / kRounds, encode_ms, text.size() / encode_ms / 1e3);
}
