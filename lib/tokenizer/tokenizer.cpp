#include "tokenizer/tokenizer.hpp"

#include "tokenizer/special_tokens.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "util/check.hpp"

#include <algorithm>

namespace ember::tokenizer {
namespace {

bool is_special_type(TokenType t) {
  return t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown;
}

// A piece of the input: plain text to tokenize, or an already recognised special token.
struct TextOrSpecial {
  std::string_view text;
  TokenId token = -1;  // >= 0 for a special token
};

}  // namespace

Tokenizer::Tokenizer(Vocab& vocab) : tokens_(std::move(vocab.tokens)) {
  vocab.tokens.clear();
  const auto n = static_cast<TokenId>(tokens_.size());
  if (n == 0) fail(ErrorCode::invalid_model, "tokenizer.ggml.tokens is empty");
  if (!vocab.types.empty() && vocab.types.size() != tokens_.size()) {
    fail(ErrorCode::invalid_model, "tokenizer.ggml.token_type has {} entries for {} tokens", vocab.types.size(),
         tokens_.size());
  }
  types_ = vocab.types.empty() ? std::vector<TokenType>(tokens_.size(), TokenType::normal) : vocab.types;
  auto check_special = [n](TokenId id, const char* key) {
    if (id < -1 || id >= n) {
      fail(ErrorCode::invalid_model, "tokenizer.ggml.{} = {} is outside the vocabulary of {}", key, id, n);
    }
  };
  check_special(vocab.bos, "bos_token_id");
  check_special(vocab.eos, "eos_token_id");
  check_special(vocab.eot, "eot_token_id");
  check_special(vocab.unknown, "unknown_token_id");
  // The ids ember only uses to end generation: one outside the vocabulary is ignored, as
  // llama.cpp ignores it (with a warning) and loads the file.
  for (TokenId* id :
       {&vocab.eom, &vocab.fim_pre, &vocab.fim_suf, &vocab.fim_mid, &vocab.fim_pad, &vocab.fim_rep, &vocab.fim_sep})
    if (*id < -1 || *id >= n) *id = -1;
  bos_ = vocab.bos;
  eos_ = vocab.eos;
  file_add_bos_ = vocab.add_bos;
  add_eos_ = vocab.add_eos.value_or(false);
  add_sep_ = vocab.add_sep.value_or(false);
  if (vocab.sep >= 0 && vocab.sep < n) sep_ = vocab.sep;

  index_.build(tokens_);
  end_of_generation_ = detail::apply_llama_cpp_special_rules(vocab, tokens_, index_, types_);

  // llama.cpp sorts its special-token cache with std::sort (not stable) by text length; the
  // same algorithm over the same ids gives the same order of equal-length tokens, which decides
  // between overlapping matches. Tokens with empty text are sorted along but never match.
  for (TokenId id = 0; id < n; ++id) {
    if (is_special_type(types_[id])) special_tokens_.push_back(id);
  }
  std::sort(special_tokens_.begin(), special_tokens_.end(),
            [this](TokenId a, TokenId b) { return tokens_[a].size() > tokens_[b].size(); });
  std::vector<std::string_view> texts;
  texts.reserve(special_tokens_.size());
  for (TokenId id : special_tokens_) texts.emplace_back(tokens_[id]);
  special_matcher_.build(texts);
}

std::shared_ptr<const Tokenizer> Tokenizer::from_vocab(const Vocab& vocab) { return from_vocab(Vocab(vocab)); }

std::shared_ptr<const Tokenizer> Tokenizer::from_vocab(Vocab&& vocab) {
  if (vocab.model == "gpt2") return detail::make_bpe_tokenizer(vocab);
  if (vocab.model == "llama") return detail::make_spm_tokenizer(vocab);
  if (vocab.model == "bert") return detail::make_wpm_tokenizer(vocab);
  fail(ErrorCode::unsupported,
       "tokenizer.ggml.model = '{}' is not supported; ember supports gpt2 (byte-level BPE), "
       "llama (SentencePiece BPE) and bert (WordPiece)",
       vocab.model);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool parse_special, bool add_bos) const {
  // Only the special tokens that occur in the text can split it; finding them is one pass.
  std::vector<int> present;
  special_matcher_.find_all(
      text,
      [&](int entry) {
        return parse_special || types_[special_tokens_[static_cast<std::size_t>(entry)]] == TokenType::user_defined;
      },
      present);

  // Then llama.cpp's partition: each present special token in order (longest first) is cut out
  // everywhere in the remaining plain text, left to right.
  std::vector<TextOrSpecial> fragments{{text}};
  std::vector<TextOrSpecial> next;
  for (int entry : present) {
    const TokenId id = special_tokens_[static_cast<std::size_t>(entry)];
    const std::string& special = tokens_[id];
    next.clear();
    for (const TextOrSpecial& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t start = 0;
      for (std::size_t hit; (hit = f.text.find(special, start)) != std::string_view::npos;) {
        if (hit > start) next.push_back({f.text.substr(start, hit - start)});
        next.push_back({{}, id});
        start = hit + special.size();
      }
      if (start < f.text.size()) next.push_back({f.text.substr(start)});
    }
    fragments.swap(next);
  }

  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && add_bos_ && bos_ >= 0) out.push_back(bos_);
  for (const TextOrSpecial& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else if (!f.text.empty()) {
      encode_text(f.text, out);
    }
  }
  if (add_bos && add_bos_ && end_token_ >= 0) out.push_back(end_token_);
  return out;
}

std::vector<TokenId> Tokenizer::encode_pair(std::string_view first, std::string_view second) const {
  std::vector<TokenId> out;
  if (file_add_bos_.value_or(add_bos_) && bos_ >= 0) out.push_back(bos_);
  const std::vector<TokenId> a = encode(first, /*parse_special=*/false), b = encode(second, /*parse_special=*/false);
  const TokenId end = eos_ >= 0 ? eos_ : sep_;
  out.insert(out.end(), a.begin(), a.end());
  if (add_eos_ && end >= 0) out.push_back(end);
  if (add_sep_ && sep_ >= 0) out.push_back(sep_);
  out.insert(out.end(), b.begin(), b.end());
  if (add_eos_ && end >= 0) out.push_back(end);
  return out;
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string text;
  bool first = true;
  for (TokenId id : ids) {
    std::string piece = token_to_piece(id, render_special);
    if (first && strip_space_prefix_ && id != bos_) {
      if (!piece.empty() && piece.front() == ' ') piece.erase(0, 1);
      first = false;
    }
    text += piece;
  }
  return text;
}

void Tokenizer::check_id(TokenId id) const {
  if (id < 0 || id >= vocab_size()) {
    fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary of {} tokens", id, vocab_size());
  }
}

const std::string& Tokenizer::token_text(TokenId id) const {
  check_id(id);
  return tokens_[id];
}

TokenType Tokenizer::token_type(TokenId id) const {
  check_id(id);
  return types_[id];
}

std::optional<TokenId> Tokenizer::find_token(std::string_view text) const {
  const TokenId id = index_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace ember::tokenizer
