#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::tokenizer {

std::string IncrementalDecoder::push(TokenId id) {
  pending_ += tokenizer_->token_to_piece(id, render_special_);
  // Emit everything up to a character that is still arriving; ill-formed bytes before it can
  // never become valid and are emitted as U+FFFD right away.
  const std::size_t complete = complete_utf8_prefix(pending_);
  std::string out = sanitize_utf8(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace ember::tokenizer
