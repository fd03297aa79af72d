// Draftless speculative decoding (prompt lookup): the tokens a sequence is likely to generate
// next, guessed from its own prompt and output without a draft model. Text that copies its
// input (an edit, a summary quoting its source, a refactor, an NPC repeating a quest name)
// continues the way an earlier occurrence of its latest few tokens did. The guesses are
// verified in the next step's forward pass (one row each, runtime/scheduler), so a wrong guess
// costs a row and never changes the output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ember::runtime {

// The longest and shortest n-grams looked up. Three tokens rarely match by chance; one token
// (a "the" or a comma) matches everywhere and mostly proposes what is then rejected.
inline constexpr int kLookupMaxNgram = 3;
inline constexpr int kLookupMinNgram = 2;

// Speculation backs off when more sequences than this decode in one step: their rows already
// fill the matrix products, and draft rows would slow every one of them for a few accepted
// tokens. (With one to four streams a step reads the same weights whatever its rows.)
inline constexpr int kSpeculationMaxDecodes = 4;

// At most `max_tokens` tokens that followed the latest earlier occurrence of the last n tokens
// of `tokens`, trying n = kLookupMaxNgram down to kLookupMinNgram; empty when none occurs.
std::vector<std::int32_t> propose_by_lookup(std::span<const std::int32_t> tokens, int max_tokens);

}  // namespace ember::runtime
