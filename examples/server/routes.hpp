// The HTTP routes of ember-server. A completion handler runs on one of the front end's worker
// threads only to parse the body and submit the request to the engine (whose background thread
// batches all clients together); the engine's callbacks then answer through the Exchange
// (a whole response, or server-sent events), so no thread waits for a generation.
#pragma once

#include "http_server.hpp"
#include "metrics.hpp"
#include "tool_format.hpp"

#include <ember/ember.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace server {

struct ServerState {
  ember::Engine* engine = nullptr;  // opened with background_thread: it steps itself
  Metrics metrics;
  std::string model_id;                          // reported by /v1/models and in every response
  std::atomic<std::uint64_t> next_seed{0};       // seeds of requests that do not give one
  std::atomic<std::uint64_t> next_id{1};         // response ids: "cmpl-1", "chatcmpl-2", ...
  const HttpCounters* http = nullptr;            // the front end's counters, for /metrics
  ToolFormat tool_format = ToolFormat::generic;  // the chat family's tool-call format
};

std::vector<Route> make_routes(ServerState& state);

}  // namespace server
