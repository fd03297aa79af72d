// The exact response cache (off by default): a deterministic request (ember's sampling is always
// seeded) with the same prompt tokens and the same parameters as an earlier one gets the stored
// completion back without inference. Bounded in bytes, least recently used evicted first.
//
// Thread-safety: none; the engine calls it under its lock.
#pragma once

#include <ember/ember.hpp>

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace ember::runtime {

class ResponseCache {
 public:
  explicit ResponseCache(std::size_t capacity_bytes) : capacity_(capacity_bytes) {}

  // The exact key of a request: every token and every parameter that changes the output, the
  // context policy among them (a request that shifts its window generates past the context
  // where one that does not ends there).
  static std::string key(const std::vector<std::int32_t>& prompt, const SamplingParams& params, bool shift_on_full,
                         int context_keep);

  std::optional<Completion> find(const std::string& key);
  // Stores a finished completion (only `stop`, `length` or `context` ones: the others depend on
  // the caller, not on the request). Entries larger than the capacity are not stored.
  void insert(const std::string& key, const Completion& completion);

  bool enabled() const { return capacity_ > 0; }
  std::size_t bytes() const { return bytes_; }
  std::size_t entries() const { return entries_.size(); }
  std::uint64_t hits() const { return hits_; }

 private:
  struct Entry {
    std::string key;
    Completion completion;
    std::size_t bytes;
  };
  std::size_t capacity_;
  std::size_t bytes_ = 0;
  std::uint64_t hits_ = 0;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace ember::runtime
