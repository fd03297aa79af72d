// Token masks: which tokens of the vocabulary a grammar state accepts.
//
// TokenTrie holds the vocabulary's token bytes as a trie laid out in preorder (a node's
// subtree is the index range [node, subtree_end)), built once per model. A mask is one pass
// over that array: each node's matcher state is its parent's advanced by the node's byte
// (a lookup in the matcher's memoised transition rows), and a dead state skips the whole
// subtree, so a state that admits only `"` or digits visits a few hundred nodes of Gemma 3's
// ~1M. Masks are cached per matcher state: a state depends on the whole stack of the parse,
// so equal states have equal masks wherever they occur (inside a long string value, after
// every character, the state and its mask repeat).
//
// CompiledGrammar is what depends on the grammar and the vocabulary only: the matcher's states
// and the masks computed for them. Sequences with the same grammar share one (the engine keeps
// them by grammar text), so a state one request reached, and its mask, cost the next nothing:
// sixteen streams of one JSON Schema meet the same structural states again and again.
//
// TokenConstraint is one sequence's grammar state: it masks a logits row and advances by the
// sampled token. End-of-generation tokens are allowed exactly when the grammar can end. Most
// steps need no mask at all: the sampler asks allows() about its few best candidates (the
// token's bytes walked through the matcher, a handful of table lookups), and only when none of
// them is allowed, or the whole distribution is wanted (logprobs), computes the mask; both
// give the same answer for every token (llama.cpp's "sample first, check after" trick, made
// exact: see runtime/sampler.hpp).
//
// Thread-safety: a TokenTrie is immutable and shared. A CompiledGrammar mutates its tables on
// every call: it and all the TokenConstraints over it are used by one thread at a time (the
// engine's step); only constructing a TokenConstraint over it may happen beside that.
#pragma once

#include "grammar/matcher.hpp"
#include "grammar/unique_items.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::grammar {

class TokenTrie {
 public:
  // `pieces[id]` is the bytes token `id` adds to the text; tokens with `usable[id]` false
  // (control tokens, empty pieces) are never allowed by a grammar. `end_of_generation` are
  // the ids that end a sequence (allowed when the grammar can end).
  TokenTrie(const std::vector<std::string>& pieces, const std::vector<bool>& usable,
            std::vector<std::int32_t> end_of_generation);

  int vocab_size() const { return vocab_size_; }
  std::size_t node_count() const { return byte_.size(); }
  const std::string& piece(std::int32_t id) const { return pieces_[static_cast<std::size_t>(id)]; }
  bool usable(std::int32_t id) const { return usable_[static_cast<std::size_t>(id)]; }
  const std::vector<std::int32_t>& end_of_generation() const { return end_of_generation_; }
  bool is_end_of_generation(std::int32_t id) const;

  // Node 0 is the root (the empty prefix). For node i > 0:
  std::vector<std::int32_t> parent_;       // the node one byte shorter
  std::vector<std::uint8_t> byte_;         // the byte from the parent
  std::vector<std::int32_t> subtree_end_;  // one past the node's last descendant
  std::vector<std::int32_t> token_begin_;  // tokens ending at node i: token_ids_[begin[i], begin[i+1])
  std::vector<std::int32_t> token_ids_;

 private:
  int vocab_size_ = 0;
  std::vector<std::string> pieces_;
  std::vector<bool> usable_;
  std::vector<std::int32_t> end_of_generation_;  // ascending
};

// A mask over the vocabulary, one bit per token.
using TokenMask = std::vector<std::uint64_t>;

class CompiledGrammar {
 public:
  CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  Matcher& matcher() { return matcher_; }
  Matcher::State start() const { return matcher_.start(); }  // fixed at construction
  const TokenTrie& trie() const { return *trie_; }
  // The mask of state `s`: from the cache, or computed (and `computed` set) and cached.
  const TokenMask& mask(Matcher::State s, bool& computed);
  const TokenMask* cached_mask(Matcher::State s) const;
  std::size_t cached_masks() const { return masks_.size(); }
  // What of a JSON Schema this grammar does not enforce (json_schema.hpp's SchemaGrammar).
  std::vector<std::string> relaxed;
  // Marks the rules whose arrays must have distinct items (SchemaGrammar::unique_rules; names
  // the grammar lacks are ignored): their sequences check items at decode time (unique_items.hpp).
  void mark_unique_items(const std::vector<std::string>& rules);
  // Per grammar element: the `[` that opens such an array. Empty when there are none.
  const std::vector<bool>& unique_opens() const { return unique_opens_; }
  // The bytes of the grammar's shortest document (Matcher::closing_cost of the start), fixed at
  // construction: a request whose max_tokens is at least this always closes in time.
  int shortest_document_bytes() const { return shortest_bytes_; }
  // The tokens of a shortest document: the walk from the start that takes, at each step, the
  // token leaving the fewest closing bytes (the longest of those), which is what closing at the
  // limit does once the budget is below the closing cost. Memoised; computed on matcher tables
  // of its own, so any thread may call it beside the engine's step. Matcher::kUnreachable when
  // no document can be finished.
  int shortest_document_tokens();

 private:
  std::shared_ptr<const Grammar> grammar_;
  Matcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::unordered_map<Matcher::State, TokenMask> masks_;
  std::vector<Matcher::State> walk_;  // scratch: the state at each trie node
  std::vector<bool> unique_opens_;
  int shortest_bytes_ = 0;
  std::atomic<int> shortest_tokens_{-1};
};

class TokenConstraint {
 public:
  // Over a grammar of its own.
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);
  // Over one shared with other sequences.
  explicit TokenConstraint(std::shared_ptr<CompiledGrammar> compiled);

  // Sets every logit the grammar forbids to -infinity (`logits` has trie.vocab_size() entries).
  void apply(float* logits);
  // Whether `id` is allowed now: an end token when the grammar can end, else the bit of the
  // state's mask when it is cached, else the token's bytes walked through the matcher (the
  // same answer, without computing the mask).
  bool allows(std::int32_t id);
  // The grammar alone, without the closing budget below.
  bool grammar_allows(std::int32_t id);
  // Closing early: with `n` >= 0 tokens left (max_tokens, the context), a token is allowed only
  // when the grammar can still be closed after it in n - 1 tokens, counting the shortest
  // closing completion's bytes (Matcher::closing_cost) as tokens: every byte has a token of its
  // own in byte-level vocabularies, so the structure always closes by the last token. Below
  // even that (a budget shorter than the shortest document), apply() keeps the tokens that
  // bring the closing nearest, and allows() none (the sampler then takes apply()). -1: off.
  void set_tokens_left(int n) { tokens_left_ = n; }
  // Whether `id` leaves the structure closable in the tokens left (true when off), and keeps
  // the items of every uniqueItems array distinct and finishable distinctly (unique_items.hpp).
  // apply() enforces the same, except that when it would leave no token at all the items'
  // check gives way (the budget and the grammar do not).
  bool fits(std::int32_t id);
  // The budget refused a token the grammar allows at least once: the text was closed early.
  bool steered() const { return steered_; }
  // Advances past token `id`. Throws Error(internal) when the grammar does not allow it.
  void accept(std::int32_t id);
  bool can_end() const { return compiled_->matcher().accepting(state_); }
  const std::vector<std::int32_t>& end_tokens() const { return compiled_->trie().end_of_generation(); }
  // The grammar is complete and nothing can follow: only an end token is allowed.
  bool complete() const { return !compiled_->matcher().can_continue(state_); }

  // The mask of the current state (computed or from the cache).
  const TokenMask& mask();
  std::size_t masks_computed() const { return masks_computed_; }  // by this constraint's calls
  std::size_t tokens_checked() const { return tokens_checked_; }  // allows() answered without a mask
  std::size_t cached_masks() const { return compiled_->cached_masks(); }
  Matcher& matcher() { return compiled_->matcher(); }
  const CompiledGrammar& compiled() const { return *compiled_; }

 private:
  std::shared_ptr<CompiledGrammar> compiled_;
  Matcher::State state_;
  std::size_t masks_computed_ = 0;
  std::size_t tokens_checked_ = 0;
  void refuse_repeats(const TokenMask& m, std::vector<std::int32_t>& refused, bool end_ok);

  std::unique_ptr<UniqueItems> unique_;  // the schema has uniqueItems arrays checked at decode time
  std::vector<float> saved_;             // scratch: end-token logits during apply()
  int tokens_left_ = -1;
  bool steered_ = false;
};

}  // namespace ember::grammar
