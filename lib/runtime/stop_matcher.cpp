#include "runtime/stop_matcher.hpp"

#include <algorithm>
#include <utility>

namespace ember::runtime {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

// Invariant between calls: held_ contains no complete stop string, and every stop that can still
// complete starts inside held_ (released text was checked to start none). So a search of held_
// after appending the piece finds every newly completed stop.
StopMatcher::Result StopMatcher::push(std::string_view piece) {
  if (stopped_) return {"", true};
  held_.append(piece);

  std::size_t best_end = std::string::npos, best_start = std::string::npos;
  for (const std::string& s : stops_) {
    // find() returns the earliest start, which for one fixed string is also the earliest end.
    const std::size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    const std::size_t end = at + s.size();
    if (end < best_end || (end == best_end && at < best_start)) best_end = end, best_start = at;
  }
  if (best_start != std::string::npos) {
    Result r{held_.substr(0, best_start), true};
    held_.clear();
    stopped_ = true;
    return r;
  }

  const std::size_t keep_from = held_suffix_start();
  Result r{held_.substr(0, keep_from), false};
  held_.erase(0, keep_from);
  return r;
}

std::size_t StopMatcher::held_suffix_start() const {
  // The earliest i whose suffix held_[i..] is a proper prefix of some stop string. Suffixes are
  // at most (longest stop - 1) bytes long, so this is cheap for realistic stop lists.
  std::size_t longest = 0;
  for (const std::string& s : stops_) longest = std::max(longest, s.size());
  const std::size_t first = held_.size() >= longest ? held_.size() - longest + 1 : 0;
  const std::string_view held(held_);
  for (std::size_t i = first; i < held.size(); ++i) {
    const std::string_view suffix = held.substr(i);
    for (const std::string& s : stops_)
      if (s.size() > suffix.size() && std::string_view(s).substr(0, suffix.size()) == suffix) return i;
  }
  return held.size();
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(held_, {});
}

}  // namespace ember::runtime
