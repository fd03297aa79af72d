// Helpers shared by the robustness suites: a greedy request and the error a call throws.
#pragma once

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <string>
#include <utility>

namespace ember::test {

// `max_tokens` tokens, greedy, end-of-sequence ignored: the same count every time.
inline Request greedy(std::string prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

// The code of the ember::Error `f` throws, checking that its message names `needle`.
template <typename F>
ErrorCode error_of(F&& f, const std::string& needle = {}) {
  try {
    f();
  } catch (const Error& e) {
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    return e.code();
  }
  FAIL("no ember::Error thrown");
  return ErrorCode::internal;
}

}  // namespace ember::test
