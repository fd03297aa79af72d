#include "grammar/token_mask.hpp"

#include "util/check.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace ember::grammar {
namespace {

// Masks kept per compiled grammar before the cache starts over (a mask is vocab / 8 bytes: 6 KiB for
// a 49k vocabulary, 32 KiB for 262k). States repeat within a value, so a small cache serves
// most steps; one that overflows is cleared rather than tracked for recency.
constexpr std::size_t kMaxCachedMaskBytes = 16u << 20;

}  // namespace

TokenTrie::TokenTrie(const std::vector<std::string>& pieces, const std::vector<bool>& usable,
                     std::vector<std::int32_t> end_of_generation)
    : vocab_size_(static_cast<int>(pieces.size())),
      pieces_(pieces),
      usable_(usable),
      end_of_generation_(std::move(end_of_generation)) {
  EMBER_ASSERT(usable.size() == pieces.size());
  std::sort(end_of_generation_.begin(), end_of_generation_.end());
  end_of_generation_.erase(std::remove_if(end_of_generation_.begin(), end_of_generation_.end(),
                                          [&](std::int32_t id) { return id < 0 || id >= vocab_size_; }),
                           end_of_generation_.end());
  for (std::int32_t id : end_of_generation_) usable_[static_cast<std::size_t>(id)] = false;
  std::vector<std::int32_t> order;
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (usable_[i] && !pieces[i].empty()) order.push_back(static_cast<std::int32_t>(i));
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return pieces[static_cast<std::size_t>(a)] < pieces[static_cast<std::size_t>(b)];
  });
  // Sorted pieces give the trie in preorder: each piece shares its longest common prefix with
  // the previous one, and the path below that prefix is new nodes.
  parent_ = {-1};
  byte_ = {0};
  std::vector<std::int32_t> path = {0};  // node at each depth of the previous piece
  std::string_view prev;
  std::vector<std::int32_t> token_node;
  token_node.reserve(order.size());
  for (std::int32_t id : order) {
    const std::string_view p = pieces[static_cast<std::size_t>(id)];
    std::size_t common = 0;
    while (common < p.size() && common < prev.size() && p[common] == prev[common]) ++common;
    path.resize(common + 1);
    for (std::size_t d = common; d < p.size(); ++d) {
      parent_.push_back(path.back());
      byte_.push_back(static_cast<std::uint8_t>(p[d]));
      path.push_back(static_cast<std::int32_t>(parent_.size() - 1));
    }
    token_node.push_back(path.back());
    prev = p;
  }
  const std::size_t n = parent_.size();
  subtree_end_.assign(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    if (subtree_end_[i] == 0) subtree_end_[i] = static_cast<std::int32_t>(i + 1);
    if (i > 0) {
      auto& pe = subtree_end_[static_cast<std::size_t>(parent_[i])];
      pe = std::max(pe, subtree_end_[i]);
    }
  }
  token_begin_.assign(n + 1, 0);
  for (std::int32_t node : token_node) ++token_begin_[static_cast<std::size_t>(node) + 1];
  std::partial_sum(token_begin_.begin(), token_begin_.end(), token_begin_.begin());
  token_ids_.resize(order.size());
  std::vector<std::int32_t> fill(token_begin_.begin(), token_begin_.end() - 1);
  for (std::size_t k = 0; k < order.size(); ++k)
    token_ids_[static_cast<std::size_t>(fill[static_cast<std::size_t>(token_node[k])]++)] = order[k];
}

bool TokenTrie::is_end_of_generation(std::int32_t id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : grammar_(grammar), matcher_(std::move(grammar)), trie_(std::move(trie)) {
  shortest_bytes_ = matcher_.closing_cost(matcher_.start());
}

int CompiledGrammar::shortest_document_tokens() {
  if (const int known = shortest_tokens_.load(); known >= 0) return known;
  CompiledGrammar own(grammar_, trie_);
  Matcher& m = own.matcher_;
  Matcher::State s = own.start();
  int tokens = 0;
  // Every step takes at least one byte off the closing cost (a byte-level vocabulary has a
  // token per byte), so the walk ends within shortest_bytes_ steps; the bound guards others.
  while (!m.accepting(s) && tokens <= shortest_bytes_) {
    bool computed = false;
    const TokenMask& mask = own.mask(s, computed);
    Matcher::State best = Matcher::kDead;
    int best_cost = Matcher::kUnreachable;
    std::size_t best_length = 0;
    for (std::size_t w = 0; w < mask.size(); ++w)
      for (std::uint64_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        const auto id = static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
        const std::string& piece = trie_->piece(id);
        const Matcher::State next = m.advance(s, piece);
        const int cost = m.closing_cost(next);
        if (cost < best_cost || (cost == best_cost && piece.size() > best_length))
          best = next, best_cost = cost, best_length = piece.size();
      }
    if (best_cost >= Matcher::kUnreachable) break;
    s = best;
    ++tokens;
  }
  if (!m.accepting(s)) tokens = Matcher::kUnreachable;
  shortest_tokens_.store(tokens);
  return tokens;
}

void CompiledGrammar::mark_unique_items(const std::vector<std::string>& rules) {
  const Grammar& g = matcher_.grammar();
  for (const std::string& name : rules) {
    const auto it = std::find(g.rule_names.begin(), g.rule_names.end(), name);
    if (it == g.rule_names.end()) continue;
    for (std::int32_t pos : g.rules[static_cast<std::size_t>(it - g.rule_names.begin())])
      if (g.elements[static_cast<std::size_t>(pos)].kind == Element::Kind::bytes) {
        unique_opens_.resize(g.elements.size(), false);
        unique_opens_[static_cast<std::size_t>(pos)] = true;
      }
  }
}

const TokenMask* CompiledGrammar::cached_mask(Matcher::State s) const {
  const auto it = masks_.find(s);
  return it == masks_.end() ? nullptr : &it->second;
}

const TokenMask& CompiledGrammar::mask(Matcher::State s, bool& computed) {
  computed = false;
  if (const TokenMask* m = cached_mask(s)) return *m;
  const TokenTrie& t = *trie_;
  const std::size_t bytes = (static_cast<std::size_t>(t.vocab_size()) + 63) / 64 * 8;
  if ((masks_.size() + 1) * bytes > kMaxCachedMaskBytes) masks_.clear();
  TokenMask out;
  out.assign((static_cast<std::size_t>(t.vocab_size()) + 63) / 64, 0);
  const std::size_t n = t.node_count();
  walk_.resize(n);
  walk_[0] = s;
  const std::int32_t* parent = t.parent_.data();
  const std::uint8_t* byte = t.byte_.data();
  const std::int32_t* end = t.subtree_end_.data();
  const std::int32_t* tb = t.token_begin_.data();
  for (std::size_t i = 1; i < n;) {
    const Matcher::State st = matcher_.advance(walk_[static_cast<std::size_t>(parent[i])], byte[i]);
    if (st == Matcher::kDead) {
      i = static_cast<std::size_t>(end[i]);
      continue;
    }
    walk_[i] = st;
    for (std::int32_t k = tb[i]; k < tb[i + 1]; ++k) {
      const auto id = static_cast<std::size_t>(t.token_ids_[static_cast<std::size_t>(k)]);
      out[id / 64] |= std::uint64_t{1} << (id % 64);
    }
    ++i;
  }
  computed = true;
  return masks_.emplace(s, std::move(out)).first->second;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : TokenConstraint(std::make_shared<CompiledGrammar>(std::move(grammar), std::move(trie))) {}

TokenConstraint::TokenConstraint(std::shared_ptr<CompiledGrammar> compiled)
    : compiled_(std::move(compiled)), state_(compiled_->start()) {
  if (!compiled_->unique_opens().empty())
    unique_ = std::make_unique<UniqueItems>(compiled_->matcher(), compiled_->unique_opens());
}

const TokenMask& TokenConstraint::mask() {
  bool computed = false;
  const TokenMask& m = compiled_->mask(state_, computed);
  masks_computed_ += computed ? 1 : 0;
  return m;
}

bool TokenConstraint::grammar_allows(std::int32_t id) {
  const TokenTrie& trie = compiled_->trie();
  if (id < 0 || id >= trie.vocab_size()) return false;
  if (trie.is_end_of_generation(id)) return can_end();
  if (const TokenMask* m = compiled_->cached_mask(state_))
    return ((*m)[static_cast<std::size_t>(id) / 64] >> (id % 64)) & 1;
  ++tokens_checked_;
  // What CompiledGrammar::mask() decides for the token's trie node: it is in the trie (usable,
  // not empty) and its bytes lead to a live state.
  const std::string& piece = trie.piece(id);
  return trie.usable(id) && !piece.empty() && compiled_->matcher().advance(state_, piece) != Matcher::kDead;
}

bool TokenConstraint::allows(std::int32_t id) { return grammar_allows(id) && fits(id); }

bool TokenConstraint::fits(std::int32_t id) {
  if (compiled_->trie().is_end_of_generation(id)) return true;
  if (unique_ && !unique_->allows(state_, compiled_->trie().piece(id))) return false;
  if (tokens_left_ < 0) return true;
  Matcher& m = compiled_->matcher();
  const bool ok = m.closing_cost(m.advance(state_, compiled_->trie().piece(id))) <= tokens_left_ - 1;
  steered_ |= !ok;
  return ok;
}

void TokenConstraint::apply(float* logits) {
  const TokenMask& m = mask();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  // End tokens are never in the trie: their logits are kept aside and restored when the
  // grammar can end here.
  const TokenTrie& trie = compiled_->trie();
  const bool end_ok = can_end();
  saved_.clear();
  if (end_ok)
    for (std::int32_t id : trie.end_of_generation()) saved_.push_back(logits[id]);
  const std::size_t vocab = static_cast<std::size_t>(trie.vocab_size());
  std::vector<std::int32_t> refused;  // by the closing budget, when one is set
  if (tokens_left_ >= 0) {
    // The tokens that leave the structure closable in time; when none does (the budget is
    // below even the shortest document), those that bring the closing nearest.
    Matcher& matcher = compiled_->matcher();
    const int budget = tokens_left_ - 1;
    int best = end_ok ? 0 : Matcher::kUnreachable;
    std::vector<std::pair<std::int32_t, int>> costs;
    for (std::size_t w = 0; w < m.size(); ++w)
      for (std::uint64_t bits = m[w]; bits != 0; bits &= bits - 1) {
        const auto id = static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
        const int cost = matcher.closing_cost(matcher.advance(state_, trie.piece(id)));
        costs.emplace_back(id, cost);
        best = std::min(best, cost);
      }
    const int limit = std::max(budget, best);
    for (const auto& [id, cost] : costs)
      if (cost > limit) refused.push_back(id);
    steered_ |= !refused.empty();
  }
  if (unique_) refuse_repeats(m, refused, end_ok);
  for (std::int32_t id : refused) logits[id] = minus_inf;
  for (std::size_t w = 0; w < m.size(); ++w) {
    std::uint64_t bits = m[w];
    if (bits == ~std::uint64_t{0}) continue;
    const std::size_t base = w * 64;
    const std::size_t count = std::min<std::size_t>(64, vocab - base);
    for (std::size_t b = 0; b < count; ++b)
      if (!((bits >> b) & 1)) logits[base + b] = minus_inf;
  }
  if (!end_ok) return;
  for (std::size_t k = 0; k < saved_.size(); ++k) logits[trie.end_of_generation()[k]] = saved_[k];
}

// Adds to `refused` (ascending: the budget's refusals) the tokens that repeat an array item,
// unless no token would be left.
void TokenConstraint::refuse_repeats(const TokenMask& m, std::vector<std::int32_t>& refused, bool end_ok) {
  const TokenTrie& trie = compiled_->trie();
  std::vector<std::int32_t> repeats;
  std::size_t left = end_ok ? 1 : 0, r = 0;
  for (std::size_t w = 0; w < m.size(); ++w)
    for (std::uint64_t bits = m[w]; bits != 0; bits &= bits - 1) {
      const auto id = static_cast<std::int32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
      while (r < refused.size() && refused[r] < id) ++r;
      if (r < refused.size() && refused[r] == id) continue;
      if (unique_->allows(state_, trie.piece(id)))
        ++left;
      else
        repeats.push_back(id);
    }
  if (left > 0) refused.insert(refused.end(), repeats.begin(), repeats.end());
}

void TokenConstraint::accept(std::int32_t id) {
  if (!grammar_allows(id)) fail(ErrorCode::internal, "grammar: token {} is not allowed in the current state", id);
  if (compiled_->trie().is_end_of_generation(id)) return;
  if (unique_) unique_->accept(state_, compiled_->trie().piece(id));
  state_ = compiled_->matcher().advance(state_, compiled_->trie().piece(id));
}

}  // namespace ember::grammar
