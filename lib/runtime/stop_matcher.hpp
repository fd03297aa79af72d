// Streaming stop strings. Generated text arrives in pieces; a stop string may straddle pieces.
// The matcher releases text only once it can no longer be the start of a stop string, so a
// stop string is never emitted, not even partially.
//
// Which stop wins: the first one to complete in the byte stream (smallest end offset); when
// several complete at the same byte, the one that starts earliest. This depends only on the
// concatenated text, never on how it was split into pieces.
//
// UTF-8: matching is bytewise. If the pieces are valid UTF-8 and the stop strings are too, every
// released text is valid UTF-8, because a held-back suffix always starts with a stop string's
// first byte, which is a character boundary.
//
// Thread-safety: per-request state; one thread at a time.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ember::runtime {

class StopMatcher {
 public:
  // Empty strings are ignored (validate() rejects them in SamplingParams anyway).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; `text` is what preceded it
  };

  // Feeds the next piece. After a stop every further push returns {"", true}.
  Result push(std::string_view piece);

  // End of generation: releases whatever was held back ("" after a stop).
  std::string flush();

  bool stopped() const { return stopped_; }
  // Bytes currently held back (at most the longest stop string's length - 1).
  std::size_t held_bytes() const { return held_.size(); }

 private:
  std::size_t held_suffix_start() const;  // where the longest suffix that may begin a stop starts

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace ember::runtime
