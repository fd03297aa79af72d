// Byte-level BPE (GPT-2 style, `tokenizer.ggml.model = gpt2`).
//
// Text is split into words by the pre-tokenizer, each word's bytes are mapped to printable code
// points (the GPT-2 byte-to-unicode table, in which the vocabulary is written), and adjacent
// symbols are merged lowest merge rank first. Merges are looked up as pairs of symbol ids in a
// hash map built once; a word is a linked list of symbols and a priority queue of candidate
// pairs, so a word of n bytes costs O(n log n).
#include "tokenizer/pretokenize.hpp"
#include "tokenizer/tokenizer_impl.hpp"
#include "tokenizer/unicode.hpp"
#include "util/check.hpp"

#include <array>
#include <queue>

namespace ember::tokenizer::detail {
namespace {

// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100 onward.
std::array<std::uint32_t, 256> byte_to_codepoint_table() {
  std::array<std::uint32_t, 256> table{};
  std::uint32_t next = 256;
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? b : next++;
  }
  return table;
}

using SymbolId = std::int32_t;  // a vocabulary id, or >= vocab size for a merge-only string

struct Merge {
  std::int32_t rank;
  SymbolId result;
};

std::uint64_t pair_key(SymbolId left, SymbolId right) {
  return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
}

struct Symbol {
  SymbolId id;
  std::int32_t prev, next;
  bool alive;
};

struct Candidate {
  std::int32_t rank;
  std::int32_t left, right;
  SymbolId left_id, right_id, result;
  bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(Vocab& vocab) : Tokenizer(vocab) {
    pre_ = pre_tokenizer_from_name(vocab.pre);
    ignore_merges_ = pre_ == PreTokenizer::llama3;  // Llama 3 keeps whole-word vocabulary hits
    add_bos_ = vocab.add_bos.value_or(pre_ == PreTokenizer::llama3);
    if (vocab.merges.empty()) fail(ErrorCode::invalid_model, "tokenizer.ggml.merges is empty");

    const auto table = byte_to_codepoint_table();
    for (std::uint32_t b = 0; b < 256; ++b) {
      std::string text;
      append_utf8(text, table[b]);
      codepoint_to_byte_[table[b]] = static_cast<std::int16_t>(b);
      byte_text_[b] = text;
    }
    build_merges(vocab.merges);
    for (std::uint32_t b = 0; b < 256; ++b) {
      byte_symbol_[b] = lookup_symbol(byte_text_[b]);
      if (lookup(byte_text_[b]) < 0) ++missing_byte_tokens_;
    }
  }

  std::string token_to_piece(TokenId id, bool render_special) const override {
    check_id(id);
    switch (types_[id]) {
      case TokenType::normal: return unmap_bytes(tokens_[id]);
      case TokenType::user_defined: return tokens_[id];
      case TokenType::control:
      case TokenType::unknown: return render_special ? tokens_[id] : std::string();
      default: return {};  // unused, byte, undefined: llama.cpp renders nothing
    }
  }

 protected:
  void encode_text(std::string_view text, std::vector<TokenId>& out) const override {
    const std::vector<std::uint32_t> cpts = decode_utf8(text);
    const std::vector<std::size_t> words = pre_tokenize(pre_, cpts);
    Workspace ws;
    std::string word;
    std::size_t start = 0;
    for (std::size_t length : words) {
      // The word's bytes are its code points re-encoded: undecodable input bytes were read as
      // U+FFFD and are tokenized as EF BF BD, exactly as llama.cpp does.
      word.clear();
      for (std::size_t i = start; i < start + length; ++i) append_utf8(word, cpts[i]);
      start += length;
      encode_word(word, ws, out);
    }
  }

 private:
  struct Workspace {
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
  };

  SymbolId lookup_symbol(const std::string& text) const {
    if (const TokenId id = lookup(text); id >= 0) return id;
    if (auto it = extra_ids_.find(text); it != extra_ids_.end()) return it->second;
    return -1;
  }

  SymbolId intern(const std::string& text) {
    if (SymbolId id = lookup_symbol(text); id >= 0) return id;
    const auto id = static_cast<SymbolId>(tokens_.size() + extra_texts_.size());
    extra_texts_.push_back(text);
    extra_ids_.emplace(text, id);
    return id;
  }

  void build_merges(const std::vector<std::string>& merges) {
    merges_.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& m = merges[rank];
      // Split at the first space after the first byte (a merge may start with a space byte).
      const std::size_t space = m.find(' ', 1);
      if (space == std::string::npos) {
        fail(ErrorCode::invalid_model, "tokenizer.ggml.merges[{}] = '{}' has no space", rank, m);
      }
      const std::string left = m.substr(0, space), right = m.substr(space + 1);
      const SymbolId l = intern(left), r = intern(right), result = intern(left + right);
      merges_.emplace(pair_key(l, r), Merge{static_cast<std::int32_t>(rank), result});  // first wins
    }
  }

  void push_candidate(Workspace& ws, std::int32_t left, std::int32_t right) const {
    if (left < 0 || right < 0) return;
    const SymbolId l = ws.symbols[left].id, r = ws.symbols[right].id;
    if (l < 0 || r < 0) return;
    auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    ws.heap.push_back({it->second.rank, left, right, l, r, it->second.result});
    std::push_heap(ws.heap.begin(), ws.heap.end());
  }

  void encode_word(const std::string& word, Workspace& ws, std::vector<TokenId>& out) const {
    if (ignore_merges_) {
      std::string mapped;
      for (unsigned char b : word) mapped += byte_text_[b];
      if (const TokenId id = lookup(mapped); id >= 0) {
        out.push_back(id);
        return;
      }
    }
    const auto n = static_cast<std::int32_t>(word.size());
    ws.symbols.clear();
    ws.heap.clear();
    for (std::int32_t i = 0; i < n; ++i) {
      ws.symbols.push_back({byte_symbol_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true});
    }
    for (std::int32_t i = 1; i < n; ++i) push_candidate(ws, i - 1, i);

    while (!ws.heap.empty()) {
      std::pop_heap(ws.heap.begin(), ws.heap.end());
      const Candidate c = ws.heap.back();
      ws.heap.pop_back();
      Symbol& left = ws.symbols[c.left];
      Symbol& right = ws.symbols[c.right];
      // Stale when either side has merged since: then its id (its text) has changed.
      if (!left.alive || !right.alive || left.id != c.left_id || right.id != c.right_id) continue;
      left.id = c.result;
      right.alive = false;
      left.next = right.next;
      if (right.next >= 0) ws.symbols[right.next].prev = c.left;
      push_candidate(ws, left.prev, c.left);
      push_candidate(ws, c.left, left.next);
    }

    for (std::int32_t i = 0; i >= 0 && i < n; i = ws.symbols[i].next) {
      emit_symbol(ws.symbols[i].id, static_cast<unsigned char>(word[i]), out);
    }
  }

  // A symbol that is not a vocabulary entry falls back to single-byte tokens of its mapped
  // text, as llama.cpp does (for a complete byte-level vocabulary this never happens).
  void emit_symbol(SymbolId id, unsigned char first_byte, std::vector<TokenId>& out) const {
    if (id >= 0 && id < vocab_size()) {
      out.push_back(id);
      return;
    }
    const std::string& text = id >= 0 ? extra_texts_[id - vocab_size()] : byte_text_[first_byte];
    for (char ch : text) {
      if (const TokenId id = lookup(std::string_view(&ch, 1)); id >= 0) out.push_back(id);
    }
  }

  // Vocabulary text back to bytes; a code point outside the byte table is kept as UTF-8.
  std::string unmap_bytes(const std::string& text) const {
    std::string bytes;
    bytes.reserve(text.size());
    for (std::uint32_t cp : decode_utf8(text)) {
      if (cp < codepoint_to_byte_.size() && codepoint_to_byte_[cp] >= 0) {
        bytes.push_back(static_cast<char>(codepoint_to_byte_[cp]));
      } else {
        append_utf8(bytes, cp);
      }
    }
    return bytes;
  }

  PreTokenizer pre_ = PreTokenizer::standard;
  bool ignore_merges_ = false;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::unordered_map<std::string, SymbolId> extra_ids_;  // merge strings not in the vocabulary
  std::vector<std::string> extra_texts_;
  std::array<std::string, 256> byte_text_;
  std::array<SymbolId, 256> byte_symbol_{};
  std::array<std::int16_t, 324> codepoint_to_byte_ = filled(-1);

  static std::array<std::int16_t, 324> filled(std::int16_t v) {
    std::array<std::int16_t, 324> a{};
    a.fill(v);
    return a;
  }
};

}  // namespace

std::shared_ptr<const Tokenizer> make_bpe_tokenizer(Vocab& vocab) { return std::make_shared<BpeTokenizer>(vocab); }

}  // namespace ember::tokenizer::detail
