// WordPiece (`tokenizer.ggml.model = bert`: BERT, MiniLM, bge), as llama.cpp tokenizes it
// (llm_tokenizer_wpm_session), so that ember's ids equal llama.cpp's on the same file.
//
// The converter writes the vocabulary in "phantom space" form: a word-initial piece starts with
// U+2581 and a continuation piece ("##ing" in the Hugging Face vocabulary) has lost its "##".
// The text is normalised (optionally lowercased and stripped of accents: NFD's first code point,
// combining marks dropped), split at whitespace, and every punctuation character, ASCII symbol
// and CJK ideograph becomes a word of its own; control characters, NUL and U+FFFD vanish. Each
// word, prefixed with U+2581, is cut greedily into the longest vocabulary entries, byte by byte
// as llama.cpp does; a word with any part that matches nothing becomes the unknown token.
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"
#include "util/check.hpp"

#include <algorithm>

namespace ember::tokenizer::detail {
namespace {

// llama.cpp's is_chinese_char (the ranges of Hugging Face's BERT tokenizer).
bool is_cjk(std::uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// llama.cpp's defaults for a bert vocabulary, which the file's keys override.
constexpr TokenId kDefaultCls = 101, kDefaultUnknown = 100, kDefaultSep = 102;

class WpmTokenizer final : public Tokenizer {
 public:
  explicit WpmTokenizer(Vocab& vocab) : Tokenizer(with_defaults(vocab)), unknown_(vocab.unknown) {
    add_bos_ = true;  // llama.cpp adds [CLS] ... [SEP] whenever special tokens are asked for
    end_token_ = vocab.sep;
    sep_ = vocab.sep;
    add_sep_ = vocab.add_sep.value_or(true);  // llama.cpp's default for bert vocabularies
    lowercase_ = vocab.lowercase.value_or(false);
    strip_accents_ = vocab.strip_accents.value_or(lowercase_);
    for (const std::string& t : tokens_) max_token_bytes_ = std::max(max_token_bytes_, t.size());
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    check_id(id);
    const std::string& text = tokens_[id];
    switch (types_[id]) {
      case TokenType::normal: {
        std::string piece;
        for (std::size_t i = 0; i < text.size();) {
          if (text.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
            piece += ' ';
            i += kSpaceMark.size();
          } else {
            piece += text[i++];
          }
        }
        return piece;
      }
      case TokenType::user_defined: return text;
      case TokenType::control:
      case TokenType::unknown: return render_special ? text : std::string();
      default: return {};
    }
  }

 protected:
  void encode_text(std::string_view text, std::vector<TokenId>& out) const override {
    for (const std::string& word : split_words(text)) encode_word(word, out);
  }

 private:
  static Vocab& with_defaults(Vocab& v) {
    const auto n = static_cast<TokenId>(v.tokens.size());
    const auto fallback = [n](TokenId& id, TokenId value) {
      if (id < 0 && value < n) id = value;
    };
    fallback(v.bos, kDefaultCls);
    fallback(v.unknown, kDefaultUnknown);
    fallback(v.sep, kDefaultSep);
    if (v.sep >= n)
      fail(ErrorCode::invalid_model, "tokenizer.ggml.seperator_token_id = {} is outside the vocabulary", v.sep);
    return v;
  }

  std::vector<std::string> split_words(std::string_view text) const {
    std::vector<std::string> words(1);
    for (std::uint32_t cp : decode_utf8(text)) {
      if (strip_accents_) cp = codepoint_nfd_first(cp);
      const std::uint16_t cls = codepoint_class(cp);
      if (cls & CodepointClass::whitespace) {
        if (!words.back().empty()) words.emplace_back();
        continue;
      }
      if (cp == 0 || cp == kReplacementCharacter || (cls & CodepointClass::control)) continue;
      if (strip_accents_ && (cls & CodepointClass::mark)) continue;
      const std::uint32_t c = lowercase_ ? codepoint_lower(cp) : cp;
      if ((cls & CodepointClass::punctuation) || (cp < 0x7F && (cls & CodepointClass::symbol)) || is_cjk(cp)) {
        if (!words.back().empty()) words.emplace_back();
        append_utf8(words.back(), c);
        words.emplace_back();
      } else {
        append_utf8(words.back(), c);
      }
    }
    if (words.back().empty()) words.pop_back();
    return words;
  }

  // Longest vocabulary entries first, over bytes; nothing of the word when a part matches nothing.
  void encode_word(const std::string& word, std::vector<TokenId>& out) const {
    const std::string w = std::string(kSpaceMark) + word;
    const std::size_t n = w.size(), start = out.size();
    for (std::size_t i = 0; i < n; ++i) {
      bool matched = false;
      for (std::size_t j = std::min(n, i + max_token_bytes_ + 1); j > i; --j) {
        const TokenId id = lookup(std::string_view(w).substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          matched = true;
          i = j - 1;
          break;
        }
      }
      if (!matched) {
        out.resize(start);
        break;
      }
    }
    if (out.size() == start && unknown_ >= 0) out.push_back(unknown_);
  }

  TokenId unknown_;
  bool lowercase_ = false, strip_accents_ = false;
  std::size_t max_token_bytes_ = 0;
};

}  // namespace

std::shared_ptr<const Tokenizer> make_wpm_tokenizer(Vocab& vocab) { return std::make_shared<WpmTokenizer>(vocab); }

}  // namespace ember::tokenizer::detail