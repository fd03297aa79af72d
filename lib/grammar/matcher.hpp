// The matcher: a pushdown recogniser of a Grammar over bytes, determinised lazily.
//
// A parse position is a stack of grammar positions (the top is the next element to match, the
// ones below are where each enclosing rule continues), as in llama.cpp's grammar sampler.
// Stacks are interned as linked nodes (position, parent node), so pushing shares the tail and
// equal stacks have equal ids. A matcher State is an interned, sorted set of stacks whose tops
// are all byte sets (plus a marker for "the grammar may end here"): the subset construction of
// the pushdown automaton, built on demand. advance(state, byte) is memoised in a 256-wide
// transition row per state, so a state seen once costs a table lookup per byte afterwards; the
// token masks (token_mask.hpp) walk the vocabulary trie through these rows.
//
// Thread-safety: a Matcher mutates its tables on every call; one thread at a time.
#pragma once

#include "grammar/grammar.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::grammar {

// At most this many stacks in one state: an ambiguous grammar whose parses multiply with
// every byte is refused (Error(invalid_argument)) instead of slowing down without bound.
inline constexpr std::size_t kMaxStacksPerState = 4096;

class Matcher {
 public:
  using State = std::int32_t;
  static constexpr State kDead = -1;  // no parse survives: the bytes are not in the language

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  State start() const { return start_; }
  State advance(State s, std::uint8_t byte) {  // kDead stays kDead
    if (s == kDead) return kDead;
    const std::size_t i = static_cast<std::size_t>(s) * 256 + byte;
    if (transitions_[i] == kUnknown) {
      const State t = compute(s, byte);  // may grow transitions_
      transitions_[i] = t;
    }
    return transitions_[i];
  }
  State advance(State s, std::string_view bytes) {
    for (char c : bytes) {
      if (s == kDead) break;
      s = advance(s, static_cast<std::uint8_t>(c));
    }
    return s;
  }
  // The grammar can end after the bytes that led to `s`.
  bool accepting(State s) const {
    return s != kDead && !sets_[static_cast<std::size_t>(s)].empty() &&
           sets_[static_cast<std::size_t>(s)][0] == kAcceptStack;
  }
  // Some byte can follow.
  bool can_continue(State s) const {
    if (s == kDead) return false;
    const auto& set = sets_[static_cast<std::size_t>(s)];
    return !set.empty() && set.back() != kAcceptStack;
  }
  // Whether some parse in `s` is about to match the element at a position `marked` flags
  // (`marked` has one entry per grammar element).
  bool at_marked(State s, const std::vector<bool>& marked) const;
  // Whether a whole text is in the language (tests, tools).
  bool matches(std::string_view text) { return accepting(advance(start_, text)); }

  // The fewest bytes that take `s` to a state where the grammar can end (0 when it can end
  // now): the shortest completion that closes every open structure. Memoised per state; a
  // stack's cost is the sum of the shortest rests of its frames (Grammar minimum lengths).
  int closing_cost(State s);
  static constexpr int kUnreachable = 1 << 29;

  std::size_t state_count() const { return sets_.size(); }
  const Grammar& grammar() const { return *grammar_; }

 private:
  static constexpr std::int32_t kUnknown = -2;
  static constexpr std::int32_t kAcceptStack = 0;  // node 0: the empty stack (the end)
  static constexpr std::int32_t kBottom = -1;      // parent of a stack's last node

  struct Node {
    std::int32_t pos;     // position in Grammar::elements
    std::int32_t parent;  // node below, or kBottom
  };

  std::int32_t node(std::int32_t pos, std::int32_t parent);
  // Pushes every stack with a byte-set top reachable from "at `pos`, then `parent`" onto out.
  void expand(std::int32_t pos, std::int32_t parent, std::vector<std::int32_t>& out, int depth);
  State intern(std::vector<std::int32_t>& stacks);
  State compute(State s, std::uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<std::uint64_t, std::int32_t> node_ids_;
  std::vector<std::vector<std::int32_t>> sets_;
  std::unordered_map<std::string, State> set_ids_;
  std::vector<std::int32_t> transitions_;  // state * 256 + byte -> state, kDead or kUnknown
  std::vector<std::int32_t> scratch_;
  std::vector<int> rest_min_;    // position -> fewest bytes from it to its alternative's end
  std::vector<int> node_cost_;   // stack node -> fewest bytes to empty the stack (-1: unknown)
  std::vector<int> state_cost_;  // state -> closing_cost (-1: unknown)
  int node_cost(std::int32_t id);
  void compute_rest_min();
  State start_ = kDead;
};

}  // namespace ember::grammar
