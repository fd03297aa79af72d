#include "grammar/matcher.hpp"

#include "util/check.hpp"

#include <algorithm>

namespace ember::grammar {
namespace {

// Deeper than this many nested expansions in one step means a grammar (or an input) that no
// real use needs; it fails instead of overflowing the thread's stack.
constexpr int kMaxExpandDepth = 2000;

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  compute_rest_min();
  nodes_.push_back({-1, kBottom});  // kAcceptStack
  std::vector<std::int32_t> stacks;
  for (std::int32_t alt : grammar_->rules[static_cast<std::size_t>(grammar_->root)]) expand(alt, kBottom, stacks, 0);
  start_ = intern(stacks);
}

std::int32_t Matcher::node(std::int32_t pos, std::int32_t parent) {
  const std::uint64_t key =
      (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pos)) << 32) | static_cast<std::uint32_t>(parent + 1);
  const auto [it, inserted] = node_ids_.try_emplace(key, static_cast<std::int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

void Matcher::expand(std::int32_t pos, std::int32_t parent, std::vector<std::int32_t>& out, int depth) {
  if (depth > kMaxExpandDepth)
    fail(ErrorCode::invalid_argument, "grammar: more than {} rules nested at one point", kMaxExpandDepth);
  if (out.size() > kMaxStacksPerState)
    fail(ErrorCode::invalid_argument, "grammar: more than {} parses alive at once (an ambiguous grammar)",
         kMaxStacksPerState);
  const Grammar& g = *grammar_;
  // A rest that derives no string (a rule that matches nothing, such as a recursion cut off)
  // is never entered: every state's parses can then be completed, so generation never
  // reaches a state that no token continues.
  if (rest_min_[static_cast<std::size_t>(pos)] >= kUnreachable) return;
  const Element& e = g.elements[static_cast<std::size_t>(pos)];
  switch (e.kind) {
    case Element::Kind::bytes:
      // An empty set (an empty class) can never be passed: the parse ends here.
      if (g.byte_sets[static_cast<std::size_t>(e.value)].any()) out.push_back(node(pos, parent));
      return;
    case Element::Kind::end:
      // The alternative is complete: continue where the enclosing rule left off.
      if (parent == kBottom) {
        out.push_back(kAcceptStack);
      } else {
        const Node n = nodes_[static_cast<std::size_t>(parent)];
        expand(n.pos, n.parent, out, depth + 1);
      }
      return;
    case Element::Kind::rule: {
      // A reference in tail position pushes no continuation (right recursion stays flat).
      const std::int32_t next = pos + 1;
      const std::int32_t cont =
          g.elements[static_cast<std::size_t>(next)].kind == Element::Kind::end ? parent : node(next, parent);
      for (std::int32_t alt : g.rules[static_cast<std::size_t>(e.value)]) expand(alt, cont, out, depth + 1);
      return;
    }
  }
}

Matcher::State Matcher::intern(std::vector<std::int32_t>& stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  std::string key(reinterpret_cast<const char*>(stacks.data()), stacks.size() * sizeof(std::int32_t));
  const auto [it, inserted] = set_ids_.try_emplace(std::move(key), static_cast<State>(sets_.size()));
  if (inserted) {
    sets_.push_back(stacks);
    transitions_.resize(sets_.size() * 256, kUnknown);
  }
  return it->second;
}

Matcher::State Matcher::compute(State s, std::uint8_t byte) {
  const Grammar& g = *grammar_;
  std::vector<std::int32_t> out;
  // sets_ may grow (and move) while expanding: index it afresh on each iteration.
  for (std::size_t i = 0; i < sets_[static_cast<std::size_t>(s)].size(); ++i) {
    const std::int32_t id = sets_[static_cast<std::size_t>(s)][i];
    if (id == kAcceptStack) continue;
    const Node n = nodes_[static_cast<std::size_t>(id)];
    const Element& e = g.elements[static_cast<std::size_t>(n.pos)];
    if (!g.byte_sets[static_cast<std::size_t>(e.value)].test(byte)) continue;
    expand(n.pos + 1, n.parent, out, 0);
  }
  return intern(out);
}

bool Matcher::at_marked(State s, const std::vector<bool>& marked) const {
  if (s == kDead) return false;
  for (std::int32_t id : sets_[static_cast<std::size_t>(s)])
    if (id != kAcceptStack && marked[static_cast<std::size_t>(nodes_[static_cast<std::size_t>(id)].pos)]) return true;
  return false;
}

// Minimum lengths: of each rule by fixpoint, then of each position's rest of its alternative.
void Matcher::compute_rest_min() {
  const Grammar& g = *grammar_;
  std::vector<int> rule_min(g.rules.size(), kUnreachable);
  const auto element_min = [&](const Element& e) {
    if (e.kind == Element::Kind::bytes)  // an empty set (an empty class) matches nothing
      return g.byte_sets[static_cast<std::size_t>(e.value)].any() ? 1 : kUnreachable;
    return rule_min[static_cast<std::size_t>(e.value)];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < g.rules.size(); ++r)
      for (std::int32_t start : g.rules[r]) {
        int len = 0;
        for (std::int32_t p = start; g.elements[static_cast<std::size_t>(p)].kind != Element::Kind::end; ++p)
          len = std::min(kUnreachable, len + element_min(g.elements[static_cast<std::size_t>(p)]));
        if (len < rule_min[r]) rule_min[r] = len, changed = true;
      }
  }
  rest_min_.assign(g.elements.size(), 0);
  for (std::size_t p = g.elements.size(); p-- > 0;)
    if (g.elements[p].kind != Element::Kind::end)
      rest_min_[p] = std::min(kUnreachable, element_min(g.elements[p]) + rest_min_[p + 1]);
}

int Matcher::node_cost(std::int32_t id) {
  if (id == kAcceptStack) return 0;
  if (node_cost_.size() < nodes_.size()) node_cost_.resize(nodes_.size(), -1);
  if (node_cost_[static_cast<std::size_t>(id)] >= 0) return node_cost_[static_cast<std::size_t>(id)];
  // Iterative over the parents (stacks may be deep): sum the rests from the bottom up.
  std::vector<std::int32_t> chain;
  for (std::int32_t n = id; n != kBottom && n != kAcceptStack && node_cost_[static_cast<std::size_t>(n)] < 0;
       n = nodes_[static_cast<std::size_t>(n)].parent)
    chain.push_back(n);
  for (std::size_t i = chain.size(); i-- > 0;) {
    const Node n = nodes_[static_cast<std::size_t>(chain[i])];
    const int below = n.parent == kBottom ? 0 : node_cost_[static_cast<std::size_t>(n.parent)];
    node_cost_[static_cast<std::size_t>(chain[i])] =
        std::min(kUnreachable, rest_min_[static_cast<std::size_t>(n.pos)] + below);
  }
  return node_cost_[static_cast<std::size_t>(id)];
}

int Matcher::closing_cost(State s) {
  if (s == kDead) return kUnreachable;
  if (state_cost_.size() < sets_.size()) state_cost_.resize(sets_.size(), -1);
  int& cost = state_cost_[static_cast<std::size_t>(s)];
  if (cost < 0) {
    cost = kUnreachable;
    for (std::size_t i = 0; i < sets_[static_cast<std::size_t>(s)].size(); ++i)
      cost = std::min(cost, node_cost(sets_[static_cast<std::size_t>(s)][i]));
  }
  return state_cost_[static_cast<std::size_t>(s)];
}

}  // namespace ember::grammar
