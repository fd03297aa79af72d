// Internal: the two searches over vocabulary text that encode runs for every input:
// TokenIndex (text -> token id) and SpecialTokenMatcher (which special tokens occur in a text).
//
// TokenIndex is one flat open-addressing table over the vocabulary. Why not
// std::unordered_map<std::string, TokenId>: with Gemma 3's 262,144 tokens that map costs a heap
// node and a string copy per token to build and a pointer chase per lookup, and the
// SentencePiece merge loop looks up about two pairs per input character. Here a slot is 8 bytes
// (32 bits of the hash and the id); a lookup reads one slot and compares text only when the
// stored hash bits agree; the build copies no text (docs/benchmarks.md#token-index).
//
// Thread-safety: both are immutable after build(); their finds may run on any number of threads.
#pragma once

#include "util/hash.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer::detail {

class TokenIndex {
 public:
  // Indexes `tokens` (which must outlive the index and stay unchanged); a text that appears
  // more than once maps to its last id, as llama.cpp's token_to_id does.
  void build(const std::vector<std::string>& tokens);

  // The id of the vocabulary entry equal to `text`, or -1.
  std::int32_t find(std::string_view text) const {
    if (text.size() > max_size_) return -1;
    const std::uint64_t h = hash(text);
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && (*tokens_)[static_cast<std::size_t>(s.id)] == text) return s.id;
    }
  }

 private:
  static std::uint64_t hash(std::string_view text) { return hash_bytes(text.data(), text.size()); }

  void prefetch(std::uint64_t h) const {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(&slots_[h & mask_], 1);
#else
    (void)h;
#endif
  }

  struct Slot {
    std::uint32_t tag;  // the high 32 bits of the text's hash
    std::int32_t id;    // -1 = empty
  };
  std::vector<Slot> slots_{Slot{0, -1}};
  std::uint64_t mask_ = 0;
  std::size_t max_size_ = 0;  // longest token text: longer queries miss without hashing
  const std::vector<std::string>* tokens_ = nullptr;
};

// Which of a fixed set of strings occur in a text, found in one pass: a byte trie over the
// strings, walked from each position of the text whose byte starts one of them. Encoding with
// Gemma 3's 6,400 special tokens would otherwise search the text once per special token.
class SpecialTokenMatcher {
 public:
  // Entry i is `texts[i]`; empty strings are never found.
  void build(const std::vector<std::string_view>& texts);

  // Appends to `found` the entry index of every string that occurs in `text` and for which
  // `wanted(entry)` is true, each once, ascending.
  template <class Wanted>
  void find_all(std::string_view text, Wanted wanted, std::vector<int>& found) const {
    const std::size_t first = found.size();
    // Each entry is taken (or refused) once: a run of 10,000 spaces holds Gemma 3's 30 space
    // tokens at almost every position.
    std::vector<std::uint64_t> seen((entries_ + 63) / 64);
    for (std::size_t i = 0; i < text.size(); ++i) {
      std::int32_t node = root_[static_cast<unsigned char>(text[i])];
      for (std::size_t j = i + 1; node >= 0; ++j) {
        const Node& n = nodes_[static_cast<std::size_t>(node)];
        if (n.entry >= 0) {
          std::uint64_t& word = seen[static_cast<std::size_t>(n.entry) / 64];
          const std::uint64_t bit = std::uint64_t{1} << (n.entry % 64);
          if ((word & bit) == 0) {
            word |= bit;
            if (wanted(n.entry)) found.push_back(n.entry);
          }
        }
        if (j == text.size()) break;
        node = child(node, static_cast<unsigned char>(text[j]));
      }
    }
    std::sort(found.begin() + static_cast<std::ptrdiff_t>(first), found.end());
  }

 private:
  struct Node {
    std::int32_t first_child = -1, next_sibling = -1;
    std::int32_t entry = -1;  // the string that ends here, or -1
    unsigned char byte = 0;
  };
  std::int32_t child(std::int32_t node, unsigned char byte) const {
    for (std::int32_t c = nodes_[static_cast<std::size_t>(node)].first_child; c >= 0;
         c = nodes_[static_cast<std::size_t>(c)].next_sibling) {
      if (nodes_[static_cast<std::size_t>(c)].byte == byte) return c;
    }
    return -1;
  }

  std::array<std::int32_t, 256> root_ = filled();  // the node of each first byte, or -1
  std::vector<Node> nodes_;
  std::size_t entries_ = 0;

  static std::array<std::int32_t, 256> filled() {
    std::array<std::int32_t, 256> a{};
    a.fill(-1);
    return a;
  }
};

}  // namespace ember::tokenizer::detail
