// Fills a Vocab from a GGUF file's tokenizer.* metadata; the tokenizers never see the file.
#include "model/gguf.hpp"
#include "tokenizer/tokenizer.hpp"
#include "util/check.hpp"

namespace ember::tokenizer {
namespace {

std::vector<std::string> to_strings(const std::vector<std::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

TokenId find_id(const model::GgufFile& file, std::string_view key) {
  auto v = file.find_u32(key);
  if (!v) return -1;
  if (*v > static_cast<std::uint32_t>(INT32_MAX)) {
    fail(ErrorCode::invalid_model, "{} = {} is not a token id", key, *v);
  }
  return static_cast<TokenId>(*v);
}

}  // namespace

Vocab read_vocab(const model::GgufFile& file) {
  Vocab v;
  v.model = std::string(file.get_string("tokenizer.ggml.model"));
  v.pre = std::string(file.find_string("tokenizer.ggml.pre").value_or(""));
  v.tokens = to_strings(file.get_string_array("tokenizer.ggml.tokens"));
  if (file.find("tokenizer.ggml.scores")) v.scores = file.get_f32_array("tokenizer.ggml.scores");
  if (file.find("tokenizer.ggml.token_type")) {
    for (std::int32_t t : file.get_i32_array("tokenizer.ggml.token_type")) {
      if (t < 0 || t > static_cast<std::int32_t>(TokenType::byte)) {
        fail(ErrorCode::invalid_model, "tokenizer.ggml.token_type has the unknown type {}", t);
      }
      v.types.push_back(static_cast<TokenType>(t));
    }
  }
  if (file.find("tokenizer.ggml.merges")) {
    v.merges = to_strings(file.get_string_array("tokenizer.ggml.merges"));
  }
  v.bos = find_id(file, "tokenizer.ggml.bos_token_id");
  v.eos = find_id(file, "tokenizer.ggml.eos_token_id");
  v.eot = find_id(file, "tokenizer.ggml.eot_token_id");
  v.unknown = find_id(file, "tokenizer.ggml.unknown_token_id");
  v.eom = find_id(file, "tokenizer.ggml.eom_token_id");
  // The fill-in-the-middle ids have older names too (llama.cpp reads both; the later wins).
  auto fim_id = [&](std::string_view key, std::string_view old_key) {
    const TokenId old = find_id(file, old_key);
    return old >= 0 ? old : find_id(file, key);
  };
  v.fim_pre = fim_id("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id");
  v.fim_suf = fim_id("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id");
  v.fim_mid = fim_id("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id");
  v.fim_pad = find_id(file, "tokenizer.ggml.fim_pad_token_id");
  v.fim_rep = find_id(file, "tokenizer.ggml.fim_rep_token_id");
  v.fim_sep = find_id(file, "tokenizer.ggml.fim_sep_token_id");
  v.add_bos = file.find_bool("tokenizer.ggml.add_bos_token");
  v.add_eos = file.find_bool("tokenizer.ggml.add_eos_token");
  v.add_sep = file.find_bool("tokenizer.ggml.add_sep_token");
  v.add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix");
  v.sep = find_id(file, "tokenizer.ggml.seperator_token_id");
  v.lowercase = file.find_bool("tokenizer.ggml.normalizer.lowercase");
  v.strip_accents = file.find_bool("tokenizer.ggml.normalizer.strip_accents");
  return v;
}

std::shared_ptr<const Tokenizer> Tokenizer::from_gguf(const model::GgufFile& file) {
  return from_vocab(read_vocab(file));  // the rvalue overload: the token texts are not copied
}

}  // namespace ember::tokenizer
