#include "tokenizer/token_index.hpp"

#include "util/hash.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace ember::tokenizer::detail {

void TokenIndex::build(const std::vector<std::string>& tokens) {
  tokens_ = &tokens;
  // At most half full: probe runs stay short and a miss usually stops at the first empty slot.
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(2 * tokens.size(), 16));
  slots_.assign(capacity, Slot{0, -1});
  mask_ = capacity - 1;
  max_size_ = 0;
  auto insert = [&](std::size_t id, std::uint64_t h) {
    const std::string& text = tokens[id];
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {tag, static_cast<std::int32_t>(id)};
        return;
      }
      if (s.tag == tag && tokens[static_cast<std::size_t>(s.id)] == text) {
        s.id = static_cast<std::int32_t>(id);  // a later duplicate wins
        return;
      }
    }
  };
  // The table is larger than the caches, so each insert would wait for its slot's line: hash a
  // few tokens ahead and prefetch their slots (docs/benchmarks.md#token-index).
  constexpr std::size_t kAhead = 16;
  std::array<std::uint64_t, kAhead> pending{};
  for (std::size_t id = 0; id < tokens.size() + kAhead; ++id) {
    if (id >= kAhead) insert(id - kAhead, pending[id % kAhead]);
    if (id < tokens.size()) {
      max_size_ = std::max(max_size_, tokens[id].size());
      const std::uint64_t h = hash(tokens[id]);
      pending[id % kAhead] = h;
      prefetch(h);
    }
  }
}

void SpecialTokenMatcher::build(const std::vector<std::string_view>& texts) {
  root_ = filled();
  nodes_.clear();
  entries_ = texts.size();
  for (std::size_t e = 0; e < texts.size(); ++e) {
    const std::string_view text = texts[e];
    if (text.empty()) continue;
    std::int32_t node = root_[static_cast<unsigned char>(text[0])];
    if (node < 0) {
      node = root_[static_cast<unsigned char>(text[0])] = static_cast<std::int32_t>(nodes_.size());
      nodes_.push_back({-1, -1, -1, static_cast<unsigned char>(text[0])});
    }
    for (std::size_t k = 1; k < text.size(); ++k) {
      const auto byte = static_cast<unsigned char>(text[k]);
      std::int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<std::int32_t>(nodes_.size());
        nodes_.push_back({-1, nodes_[static_cast<std::size_t>(node)].first_child, -1, byte});
        nodes_[static_cast<std::size_t>(node)].first_child = next;
      }
      node = next;
    }
    Node& end = nodes_[static_cast<std::size_t>(node)];
    // Two tokens with one text (no vocabulary ember knows has them): the first in llama.cpp's
    // order takes every occurrence, so only it is kept.
    if (end.entry < 0) end.entry = static_cast<std::int32_t>(e);
  }
}

}  // namespace ember::tokenizer::detail
