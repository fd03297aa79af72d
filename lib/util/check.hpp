// Throwing helpers: every recoverable failure becomes an ember::Error with a formatted message.
#pragma once

#include <ember/ember.hpp>
#include <fmt/format.h>

#include <utility>

namespace ember {

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Internal invariant (a bug if it fails): still an exception, never an abort, because ember
// runs inside someone else's process.
#define EMBER_ASSERT(cond)                                                                   \
  do {                                                                                       \
    if (!(cond)) ::ember::fail(::ember::ErrorCode::internal, "internal check failed: {} ({}:{})", \
                               #cond, __FILE__, __LINE__);                                   \
  } while (0)

}  // namespace ember
