// uniqueItems at decode time: a grammar cannot say "distinct" over an unbounded item set, so the
// arrays a JSON Schema marks uniqueItems (SchemaGrammar::unique_rules) are checked as the text
// is written.
//
// A cursor follows the output's JSON structure byte by byte (strings, escapes, containers, where
// each array item starts and ends). An array is checked when the `[` that opens it is, in the
// matcher's state, the first byte of a marked rule (some parse is: narrower when a union mixes
// checked and unchecked arrays). A token is refused when
//   * it completes an item of a checked array whose value equals an earlier item's (JSON
//     equality, json_canonical.hpp), or
//   * it leaves an unfinished item that may still become an earlier item's value and from
//     which no byte path through the grammar finishes it differently (a bounded depth-first
//     search, closing bytes first; see kSearchBudget): a closed object whose last member just
//     repeated an earlier item's cannot be extended at its `}`, so its last value's closing
//     quote is refused and the model writes on.
// Whitespace is never needed (the schema grammar's ws may be empty), so the search skips it
// outside strings. A token that can never repeat an item costs its bytes through the cursor;
// arrays that are not checked cost nothing but the cursor's byte steps on accepted tokens.
//
// Thread-safety: one sequence's state; used with its CompiledGrammar's thread rule.
#pragma once

#include "grammar/json_value.hpp"
#include "grammar/matcher.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

class UniqueItems {
 public:
  // `opens[pos]`: the grammar element at `pos` is the `[` of a checked array.
  UniqueItems(Matcher& matcher, const std::vector<bool>& opens) : matcher_(matcher), opens_(opens) {}

  // Whether the token with bytes `piece`, taken in matcher state `s`, keeps every checked
  // array's items distinct and still finishable distinctly.
  bool allows(Matcher::State s, std::string_view piece);
  // Advances past an accepted token (taken in state `s`).
  void accept(Matcher::State s, std::string_view piece);
  // A checked array is open: tokens may be refused.
  bool active() const;

  // Byte paths the search may try for one token before it gives up and refuses the token.
  static constexpr int kSearchBudget = 256;

 private:
  // The items of a checked array, canonical texts and values (shared by cursor copies).
  struct Seen {
    std::vector<std::string> canonical;
    std::vector<JsonValue> values;
  };
  struct Frame {
    bool array = false;
    bool checked = false;
    std::int32_t item = -1;            // array: where its current item starts in text_; -1: none
    std::shared_ptr<const Seen> seen;  // checked: items as of the last accepted token
    std::vector<std::string> added;    // checked: items completed since (canonical)
    std::vector<JsonValue> added_values;
  };
  enum class Lex : std::uint8_t { plain, string, escape, scalar };
  struct Cursor {
    std::vector<Frame> frames;
    Lex lex = Lex::plain;
    bool repeated = false;  // a checked item completed equal to an earlier one
    int checked_open = 0;   // frames with checked set
  };

  // One byte, already appended to text_ at position `at`.
  void step(Cursor& c, Matcher::State before, std::size_t at);
  void begin_value(Cursor& c, std::size_t at);
  void end_value(Cursor& c, std::size_t end);
  // An unfinished item of a checked array may still equal an earlier item.
  bool at_risk(const Cursor& c) const;
  bool finishable(Matcher::State s, const Cursor& c, int& budget);
  bool walk(Cursor& c, Matcher::State& s, std::string_view piece);

  Matcher& matcher_;
  const std::vector<bool>& opens_;
  Cursor cursor_;
  std::string text_;   // every accepted byte (items are read back from it)
  bool risk_ = false;  // at_risk(cursor_): an unfinished item may still repeat an earlier one
};

}  // namespace ember::grammar
