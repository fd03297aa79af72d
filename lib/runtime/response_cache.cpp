#include "runtime/response_cache.hpp"

#include <cstring>

namespace ember::runtime {
namespace {

template <class T>
void append(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append(std::string& out, const std::string& s) {
  append(out, s.size());
  out += s;
}

std::size_t size_of(const std::string& key, const Completion& c) {
  return sizeof(Completion) + key.size() + c.text.size() + c.reasoning.size() + c.tokens.size() * sizeof(std::int32_t) +
         c.logprobs.size() * sizeof(float) + c.error.size() +
         c.top_logprobs.size() * (sizeof(std::vector<TokenLogprob>) +
                                  sizeof(TokenLogprob) * (c.top_logprobs.empty() ? 0 : c.top_logprobs[0].size()));
}

}  // namespace

std::string ResponseCache::key(const std::vector<std::int32_t>& prompt, const SamplingParams& p, bool shift_on_full,
                               int context_keep) {
  std::string k;
  k.reserve(prompt.size() * sizeof(std::int32_t) + 96);
  append(k, p.max_tokens);
  append(k, p.temperature);
  append(k, p.top_k);
  append(k, p.top_p);
  append(k, p.min_p);
  append(k, p.repetition_penalty);
  append(k, p.presence_penalty);
  append(k, p.frequency_penalty);
  append(k, p.penalty_last_n);
  append(k, p.seed);
  append(k, p.ignore_eos);
  append(k, p.logprobs);
  append(k, p.stop.size());
  for (const auto& s : p.stop) append(k, s);
  append(k, p.top_logprobs);
  append(k, p.logit_bias.size());
  for (const LogitBias& b : p.logit_bias) {
    append(k, b.token);
    append(k, b.bias);
  }
  append(k, p.grammar);
  append(k, p.json_schema);
  append(k, p.reasoning_budget);
  append(k, p.close_at_limit);   // changes the tokens near max_tokens
  append(k, p.adapters.size());  // ids are never reused, so an id names one adapter for good
  for (const AdapterScale& a : p.adapters) {
    append(k, a.id);
    append(k, a.scale);
  }
  append(k, shift_on_full);
  append(k, shift_on_full ? context_keep : 0);  // only a shift reads it
  append(k, prompt.size());
  k.append(reinterpret_cast<const char*>(prompt.data()), prompt.size() * sizeof(std::int32_t));
  return k;
}

std::optional<Completion> ResponseCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  ++hits_;
  return it->second->completion;
}

void ResponseCache::insert(const std::string& key, const Completion& completion) {
  if (capacity_ == 0) return;
  const FinishReason r = completion.finish_reason;
  if (r != FinishReason::stop && r != FinishReason::length && r != FinishReason::context) return;
  const std::size_t bytes = size_of(key, completion);
  if (bytes > capacity_ || index_.count(key) != 0) return;
  while (bytes_ + bytes > capacity_) {
    bytes_ -= entries_.back().bytes;
    index_.erase(entries_.back().key);
    entries_.pop_back();
  }
  entries_.push_front({key, completion, bytes});
  index_.emplace(key, entries_.begin());
  bytes_ += bytes;
}

}  // namespace ember::runtime
