#include "tokenizer/special_tokens.hpp"

#include <algorithm>
#include <span>

namespace ember::tokenizer::detail {
namespace {

using Texts = std::span<const std::string_view>;

// The token texts of llama.cpp's rules (src/llama-vocab.cpp as vendored by llama-cpp-python
// 0.3.36, the version ember's goldens come from), in its order. "\xEF\xBD\x9C" is U+FF5C
// (DeepSeek's full-width bar), "\xE2\x96\x81" U+2581 (SentencePiece's space).
constexpr std::string_view kEndOfTurn[] = {  // special_eot_id, when the file has no eot_token_id
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::string_view kEndOfMessage[] = {"<|eom_id|>"};
constexpr std::string_view kFimPrefix[] = {"<|fim_prefix|>",
                                           "<fim-prefix>",
                                           "<fim_prefix>",
                                           "<\xEF\xBD\x9C"
                                           "fim\xE2\x96\x81"
                                           "begin\xEF\xBD\x9C>",
                                           "<PRE>",
                                           "\xE2\x96\x81<PRE>",
                                           "<|code_prefix|>",
                                           "<|prefix|>"};
constexpr std::string_view kFimSuffix[] = {"<|fim_suffix|>",
                                           "<fim-suffix>",
                                           "<fim_suffix>",
                                           "<\xEF\xBD\x9C"
                                           "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                           "<SUF>",
                                           "\xE2\x96\x81<SUF>",
                                           "<|code_suffix|>",
                                           "<|suffix|>"};
constexpr std::string_view kFimMiddle[] = {"<|fim_middle|>",
                                           "<fim-middle>",
                                           "<fim_middle>",
                                           "<\xEF\xBD\x9C"
                                           "fim\xE2\x96\x81"
                                           "end\xEF\xBD\x9C>",
                                           "<MID>",
                                           "\xE2\x96\x81<MID>",
                                           "<|code_middle|>",
                                           "<|middle|>"};
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRepo[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSeparator[] = {"<|file_sep|>"};
// Every token with one of these texts ends generation.
constexpr std::string_view kEndOfGeneration[] = {"<|eot_id|>",
                                                 "<|im_end|>",
                                                 "<|end|>",
                                                 "<|return|>",
                                                 "<|call|>",
                                                 "<|flush|>",
                                                 "<|calls|>",
                                                 "<end_of_turn>",
                                                 "<|endoftext|>",
                                                 "</s>",
                                                 "<|eom_id|>",
                                                 "<EOT>",
                                                 "_<EOT>",
                                                 "[EOT]",
                                                 "[EOS]",
                                                 "<|end_of_text|>",
                                                 "<end_of_utterance>",
                                                 "<eos>",
                                                 "<turn|>",
                                                 "<|tool_response>",
                                                 "<\xEF\xBD\x9C"
                                                 "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                                 "[e~["};
// gpt-oss: always rendered (user-defined), whatever the file says.
constexpr std::string_view kAlwaysRendered[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

}  // namespace

std::vector<TokenId> apply_llama_cpp_special_rules(const Vocab& vocab, const std::vector<std::string>& tokens,
                                                   const TokenIndex& index, std::vector<TokenType>& types) {
  auto text_of = [&](TokenId id) -> const std::string& { return tokens[static_cast<std::size_t>(id)]; };
  auto promote = [&](TokenId id) {  // llama.cpp adds the control attribute
    if (id >= 0) types[static_cast<std::size_t>(id)] = TokenType::control;
  };
  // llama.cpp walks its text->id hash map and takes the first match of each kind; where a
  // vocabulary has two candidates of one kind (none that ember knows has), ember takes the first
  // in list order.
  auto detect = [&](TokenId given, Texts texts) {
    if (given >= 0) return given;
    for (std::string_view text : texts) {
      if (const TokenId id = index.find(text); id >= 0) {
        promote(id);
        return id;
      }
    }
    return TokenId{-1};
  };
  detect(vocab.eot, kEndOfTurn);
  detect(vocab.eom, kEndOfMessage);
  detect(vocab.fim_pre, kFimPrefix);
  detect(vocab.fim_suf, kFimSuffix);
  detect(vocab.fim_mid, kFimMiddle);

  std::vector<TokenId> eog;
  auto add = [&](TokenId id) {
    if (id >= 0 && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
  };
  add(detect(vocab.fim_pad, kFimPad));
  add(detect(vocab.fim_rep, kFimRepo));
  add(detect(vocab.fim_sep, kFimSeparator));
  for (std::string_view text : kEndOfGeneration) {
    if (const TokenId id = index.find(text); id >= 0) {
      add(id);
      promote(id);
    }
  }
  for (std::string_view text : kAlwaysRendered) {
    if (const TokenId id = index.find(text); id >= 0) {
      types[static_cast<std::size_t>(id)] = TokenType::user_defined;
    }
  }
  add(vocab.eos);
  add(vocab.eot);
  add(vocab.eom);

  auto eog_with_text = [&](std::string_view text) {
    for (TokenId id : eog) {
      if (text_of(id) == text) return id;
    }
    return TokenId{-1};
  };
  auto drop = [&](TokenId id, TokenType type) {
    eog.erase(std::find(eog.begin(), eog.end(), id));
    types[static_cast<std::size_t>(id)] = type;
  };
  // o200k_harmony (gpt-oss) and solar-open end a message with <|end|> but not the generation.
  const bool has_call = eog_with_text("<|call|>") >= 0 || eog_with_text("<|calls|>") >= 0;
  const bool has_return_or_flush = eog_with_text("<|return|>") >= 0 || eog_with_text("<|flush|>") >= 0;
  if (const TokenId end = eog_with_text("<|end|>"); end >= 0 && has_call && has_return_or_flush) {
    drop(end, TokenType::user_defined);
  }
  // Gemma 4 and PLaMo have an ordinary "</s>".
  if (const TokenId s = eog_with_text("</s>");
      s >= 0 && (eog_with_text("<|tool_response>") >= 0 || eog_with_text("<|plamo:eos|>") >= 0)) {
    drop(s, TokenType::normal);
  }
  std::sort(eog.begin(), eog.end());
  return eog;
}

}  // namespace ember::tokenizer::detail
