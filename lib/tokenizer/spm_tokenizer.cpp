// SentencePiece BPE (`tokenizer.ggml.model = llama`: Llama 2, Mistral, Gemma).
//
// Spaces are written as U+2581 ("▁"), a space is put in front of every run of plain text
// (add_space_prefix), and adjacent symbols merge highest vocabulary score first, a pair merging
// only when its concatenation is a vocabulary entry. Whatever stays outside the vocabulary is
// spelled with the byte tokens <0x00>..<0xFF> (byte fallback).
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"
#include "util/check.hpp"

#include <array>
#include <queue>

#include <fmt/format.h>

namespace ember::tokenizer::detail {
namespace {

struct SpmSymbol {
  std::size_t offset, size;  // bytes of the escaped text
  std::int32_t prev, next;
};

struct SpmCandidate {
  float score;
  std::int32_t left, right;
  std::size_t size;                              // bytes of the merged text, to detect stale candidates
  bool operator<(const SpmCandidate& o) const {  // highest score first, then leftmost
    return score != o.score ? score < o.score : left > o.left;
  }
};

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(Vocab& vocab) : Tokenizer(vocab), unknown_(vocab.unknown) {
    if (vocab.scores.size() != tokens_.size()) {
      fail(ErrorCode::invalid_model, "tokenizer.ggml.scores has {} entries for {} tokens", vocab.scores.size(),
           tokens_.size());
    }
    scores_ = std::move(vocab.scores);
    add_bos_ = vocab.add_bos.value_or(true);
    add_space_prefix_ = vocab.add_space_prefix.value_or(true);
    strip_space_prefix_ = add_space_prefix_;
    for (int b = 0; b < 256; ++b) {
      byte_token_[b] = find_token(fmt::format("<0x{:02X}>", b))
                           .value_or(find_token(std::string(1, static_cast<char>(b))).value_or(-1));
      if (byte_token_[b] < 0) ++missing_byte_tokens_;
    }
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    check_id(id);
    const std::string& text = tokens_[id];
    switch (types_[id]) {
      case TokenType::normal: return unescape_spaces(text);
      case TokenType::user_defined: return text;
      case TokenType::control:
      case TokenType::unknown: return render_special ? text : std::string();
      case TokenType::byte: return std::string(1, static_cast<char>(byte_value(text)));
      default: return {};
    }
  }

 protected:
  void encode_text(std::string_view raw, std::vector<TokenId>& out) const override {
    std::string text;
    text.reserve(raw.size() + 8);
    if (add_space_prefix_) text += kSpaceMark;
    for (char ch : raw) {
      if (ch == ' ') {
        text += kSpaceMark;
      } else {
        text.push_back(ch);
      }
    }

    std::vector<SpmSymbol> symbols;
    for (std::size_t offset = 0; offset < text.size();) {
      const std::size_t size =
          std::min(utf8_sequence_length(static_cast<unsigned char>(text[offset])), text.size() - offset);
      const auto index = static_cast<std::int32_t>(symbols.size());
      symbols.push_back({offset, size, index - 1, offset + size < text.size() ? index + 1 : -1});
      offset += size;
    }

    std::priority_queue<SpmCandidate> queue;
    auto try_pair = [&](std::int32_t left, std::int32_t right) {
      if (left < 0 || right < 0) return;
      const std::size_t size = symbols[left].size + symbols[right].size;
      const TokenId id = lookup(std::string_view(text).substr(symbols[left].offset, size));
      if (id >= 0) queue.push({scores_[id], left, right, size});
    };
    for (std::int32_t i = 1; i < static_cast<std::int32_t>(symbols.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
      const SpmCandidate c = queue.top();
      queue.pop();
      SpmSymbol& left = symbols[c.left];
      SpmSymbol& right = symbols[c.right];
      if (left.size == 0 || right.size == 0 || left.size + right.size != c.size) continue;
      left.size += right.size;
      right.size = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = c.left;
      try_pair(left.prev, c.left);
      try_pair(c.left, left.next);
    }

    for (std::int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
      emit(std::string_view(text).substr(symbols[i].offset, symbols[i].size), out);
    }
  }

 private:
  // Every merged symbol is a vocabulary entry; a single character that is not is spelled with
  // byte tokens (or the unknown token when the vocabulary has no byte tokens).
  void emit(std::string_view piece, std::vector<TokenId>& out) const {
    if (const TokenId id = lookup(piece); id >= 0) {
      out.push_back(id);
      return;
    }
    for (unsigned char b : piece) {
      const TokenId id = byte_token_[b] >= 0 ? byte_token_[b] : unknown_;
      if (id >= 0) out.push_back(id);
    }
  }

  static std::string unescape_spaces(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
        out.push_back(' ');
        i += kSpaceMark.size();
      } else {
        out.push_back(text[i++]);
      }
    }
    return out;
  }

  // "<0xAB>" -> 0xAB (a malformed byte token gives 0).
  static unsigned byte_value(const std::string& text) {
    if (text.size() != 6 || text.compare(0, 3, "<0x") != 0) return 0;
    return static_cast<unsigned>(std::strtoul(text.substr(3, 2).c_str(), nullptr, 16));
  }

  std::vector<float> scores_;
  std::array<TokenId, 256> byte_token_{};
  TokenId unknown_ = -1;
  bool add_space_prefix_ = true;
};

}  // namespace

std::shared_ptr<const Tokenizer> make_spm_tokenizer(Vocab& vocab) { return std::make_shared<SpmTokenizer>(vocab); }

}  // namespace ember::tokenizer::detail
