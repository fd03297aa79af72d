#include "grammar/unique_items.hpp"

#include "grammar/json_canonical.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <tuple>

namespace ember::grammar {
namespace {

bool is_space(char b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
bool scalar_byte(char b) {
  return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '.' || b == '+' || b == '-';
}

}  // namespace

bool UniqueItems::active() const { return cursor_.checked_open > 0; }

void UniqueItems::begin_value(Cursor& c, std::size_t at) {
  if (!c.frames.empty() && c.frames.back().array && c.frames.back().item < 0)
    c.frames.back().item = static_cast<std::int32_t>(at);
}

void UniqueItems::end_value(Cursor& c, std::size_t end) {
  if (c.frames.empty() || !c.frames.back().array || c.frames.back().item < 0) return;
  Frame& f = c.frames.back();
  const std::size_t begin = static_cast<std::size_t>(f.item);
  f.item = -1;
  if (!f.checked) return;
  JsonValue value;
  try {
    value = parse_json(std::string_view(text_).substr(begin, end - begin), "item");
  } catch (const Error&) {
    return;  // not JSON (a grammar that is not a schema's): nothing to compare
  }
  std::string canonical = canonical_json(value);
  const auto has = [&](const std::vector<std::string>& list) {
    return std::find(list.begin(), list.end(), canonical) != list.end();
  };
  if ((f.seen && has(f.seen->canonical)) || has(f.added)) {
    c.repeated = true;
    return;
  }
  f.added.push_back(std::move(canonical));
  f.added_values.push_back(std::move(value));
}

void UniqueItems::step(Cursor& c, Matcher::State before, std::size_t at) {
  const char b = text_[at];
  switch (c.lex) {
    case Lex::escape: c.lex = Lex::string; return;
    case Lex::string:
      if (b == '\\') {
        c.lex = Lex::escape;
      } else if (b == '"') {
        c.lex = Lex::plain;
        end_value(c, at + 1);
      }
      return;
    case Lex::scalar:
      if (scalar_byte(b)) return;
      c.lex = Lex::plain;
      end_value(c, at);
      break;
    case Lex::plain: break;
  }
  if (is_space(b) || b == ',' || b == ':') return;
  if (b == ']' || b == '}') {
    if (!c.frames.empty()) {
      c.checked_open -= c.frames.back().checked;
      c.frames.pop_back();
    }
    end_value(c, at + 1);
    return;
  }
  begin_value(c, at);
  if (b == '"') {
    c.lex = Lex::string;
  } else if (b == '[' || b == '{') {
    Frame f;
    f.array = b == '[';
    f.checked = f.array && matcher_.at_marked(before, opens_);
    c.checked_open += f.checked;
    c.frames.push_back(std::move(f));
  } else {
    c.lex = Lex::scalar;
  }
}

bool UniqueItems::at_risk(const Cursor& c) const {
  if (c.checked_open == 0) return false;
  for (const Frame& f : c.frames) {
    if (!f.checked || f.item < 0) continue;
    const std::string_view prefix = std::string_view(text_).substr(static_cast<std::size_t>(f.item));
    if (f.seen)
      for (const JsonValue& v : f.seen->values)
        if (may_become(prefix, v)) return true;
    for (const JsonValue& v : f.added_values)
      if (may_become(prefix, v)) return true;
  }
  return false;
}

// Depth first, the bytes that bring the grammar's end nearest tried first (an item usually
// differs one byte after it stops repeating).
bool UniqueItems::finishable(Matcher::State s, const Cursor& c, int& budget) {
  if (c.repeated) return false;
  if (!at_risk(c)) return true;
  if (--budget < 0) return false;
  std::vector<std::tuple<int, int, Matcher::State>> next;  // closing cost, byte, state
  for (int b = 0; b < 256; ++b) {
    if (c.lex != Lex::string && c.lex != Lex::escape && is_space(static_cast<char>(b))) continue;
    const Matcher::State t = matcher_.advance(s, static_cast<std::uint8_t>(b));
    if (t != Matcher::kDead) next.emplace_back(matcher_.closing_cost(t), b, t);
  }
  std::sort(next.begin(), next.end());
  // One byte that already settles it first (an item that stops repeating), then deeper.
  for (const auto& [cost, b, t] : next) {
    text_.push_back(static_cast<char>(b));
    Cursor d = c;
    step(d, s, text_.size() - 1);
    const bool ok = !d.repeated && !at_risk(d);
    text_.pop_back();
    if (ok) return true;
  }
  for (const auto& [cost, b, t] : next) {
    text_.push_back(static_cast<char>(b));
    Cursor d = c;
    step(d, s, text_.size() - 1);
    const bool ok = finishable(t, d, budget);
    text_.pop_back();
    if (ok) return true;
    if (budget < 0) return false;
  }
  return false;
}

bool UniqueItems::walk(Cursor& c, Matcher::State& s, std::string_view piece) {
  for (char b : piece) {
    text_.push_back(b);
    step(c, s, text_.size() - 1);
    s = matcher_.advance(s, static_cast<std::uint8_t>(b));
    if (s == Matcher::kDead || c.repeated) return false;
  }
  return true;
}

bool UniqueItems::allows(Matcher::State s, std::string_view piece) {
  if (!active() && piece.find('[') == std::string_view::npos) return true;
  // Inside a string that can no longer repeat anything, bytes other than a quote or an escape
  // only lengthen it, and a longer text can become no more values than a shorter one: the
  // whole-mask path's usual case, answered without a walk.
  if (cursor_.lex == Lex::string && !risk_ && piece.find_first_of("\"\\") == std::string_view::npos) return true;
  const std::size_t mark = text_.size();
  Cursor c = cursor_;
  bool ok = walk(c, s, piece);
  int budget = kSearchBudget;
  if (ok) ok = finishable(s, c, budget);
  text_.resize(mark);
  return ok;
}

void UniqueItems::accept(Matcher::State s, std::string_view piece) {
  for (char b : piece) {
    text_.push_back(b);
    step(cursor_, s, text_.size() - 1);
    s = matcher_.advance(s, static_cast<std::uint8_t>(b));
  }
  cursor_.repeated = false;  // taken anyway (nothing else was allowed): later items still count
  for (Frame& f : cursor_.frames) {
    if (f.added.empty()) continue;
    auto seen = f.seen ? std::make_shared<Seen>(*f.seen) : std::make_shared<Seen>();
    seen->canonical.insert(seen->canonical.end(), f.added.begin(), f.added.end());
    seen->values.insert(seen->values.end(), f.added_values.begin(), f.added_values.end());
    f.seen = std::move(seen);
    f.added.clear();
    f.added_values.clear();
  }
  risk_ = at_risk(cursor_);
}

}  // namespace ember::grammar
