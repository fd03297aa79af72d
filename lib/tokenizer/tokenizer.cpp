#include "tokenizer/tokenizer.hpp"

#include "tokenizer/tokenizer_impl.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>

namespace ember::tokenizer {
namespace {

// Texts that end a turn in the chat formats ember knows (llama.cpp treats the same set as
// end-of-generation when the vocabulary has them).
constexpr std::array<std::string_view, 10> kEndOfGenerationTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};

bool is_special_type(TokenType t) {
  return t == TokenType::control || t == TokenType::user_defined || t == TokenType::unknown;
}

// A piece of the input: plain text to tokenize, or an already recognised special token.
struct Fragment {
  std::string_view text;
  TokenId token = -1;  // >= 0 for a special token
};

}  // namespace

Tokenizer::Tokenizer(const Vocab& vocab) : tokens_(vocab.tokens) {
  const auto n = static_cast<TokenId>(tokens_.size());
  if (n == 0) fail(ErrorCode::invalid_model, "tokenizer.ggml.tokens is empty");
  if (!vocab.types.empty() && vocab.types.size() != tokens_.size()) {
    fail(ErrorCode::invalid_model, "tokenizer.ggml.token_type has {} entries for {} tokens",
         vocab.types.size(), tokens_.size());
  }
  types_ = vocab.types.empty() ? std::vector<TokenType>(tokens_.size(), TokenType::normal)
                               : vocab.types;
  auto check_special = [n](TokenId id, const char* key) {
    if (id < -1 || id >= n) {
      fail(ErrorCode::invalid_model, "tokenizer.ggml.{} = {} is outside the vocabulary of {}",
           key, id, n);
    }
  };
  check_special(vocab.bos, "bos_token_id");
  check_special(vocab.eos, "eos_token_id");
  check_special(vocab.eot, "eot_token_id");
  check_special(vocab.unknown, "unknown_token_id");
  bos_ = vocab.bos;
  eos_ = vocab.eos;

  token_to_id_.reserve(tokens_.size());
  for (TokenId id = 0; id < n; ++id) token_to_id_[tokens_[id]] = id;

  // End of generation: eos, eot, and the turn-ending tokens of the known chat formats. Those are
  // control tokens (llama.cpp promotes them too, so their text never leaks into output).
  auto add_eog = [this](TokenId id) {
    if (id >= 0 && std::find(end_of_generation_.begin(), end_of_generation_.end(), id) ==
                       end_of_generation_.end()) {
      end_of_generation_.push_back(id);
    }
  };
  add_eog(eos_);
  add_eog(vocab.eot);
  for (std::string_view text : kEndOfGenerationTexts) {
    if (auto id = find_token(text)) {
      if (types_[*id] != TokenType::control) types_[*id] = TokenType::control;
      add_eog(*id);
    }
  }

  for (TokenId id = 0; id < n; ++id) {
    if (is_special_type(types_[id]) && !tokens_[id].empty()) special_tokens_.push_back(id);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [this](TokenId a, TokenId b) {
    return tokens_[a].size() > tokens_[b].size();
  });
}

std::shared_ptr<const Tokenizer> Tokenizer::from_vocab(const Vocab& vocab) {
  if (vocab.model == "gpt2") return detail::make_bpe_tokenizer(vocab);
  if (vocab.model == "llama") return detail::make_spm_tokenizer(vocab);
  fail(ErrorCode::unsupported,
       "tokenizer.ggml.model = '{}' is not supported; ember supports gpt2 (byte-level BPE) and "
       "llama (SentencePiece BPE)",
       vocab.model);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool parse_special,
                                       bool add_bos) const {
  // Special tokens are cut out longest first, each everywhere in the remaining plain text,
  // which is the order llama.cpp uses (it decides overlapping matches the same way).
  std::vector<Fragment> fragments{{text}};
  std::vector<Fragment> next;
  for (TokenId id : special_tokens_) {
    if (!parse_special && types_[id] != TokenType::user_defined) continue;
    const std::string& special = tokens_[id];
    next.clear();
    for (const Fragment& f : fragments) {
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
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      encode_text(f.text, out);
    }
  }
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
    fail(ErrorCode::invalid_argument, "token id {} is outside the vocabulary of {} tokens", id,
         vocab_size());
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
  auto it = token_to_id_.find(text);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_end_of_generation(TokenId id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) !=
         end_of_generation_.end();
}

}  // namespace ember::tokenizer
