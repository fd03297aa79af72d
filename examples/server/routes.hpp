// The HTTP routes of ember-server. Each handler runs on one of httplib's worker threads: it
// submits its request through the EngineDriver (whose thread batches all clients together)
// and waits for it, or streams its chunks as server-sent events.
#pragma once

#include "engine_driver.hpp"
#include "metrics.hpp"

#include <ember/ember.hpp>

#include <atomic>
#include <cstdint>
#include <string>

namespace httplib {
class Server;
}

namespace server {

struct ServerState {
  EngineDriver* driver = nullptr;   // the only way to the engine: it steps it
  Metrics metrics;
  std::string model_id;             // reported by /v1/models and in every response
  std::atomic<std::uint64_t> next_seed{0};  // seeds of requests that do not give one
  std::atomic<std::uint64_t> next_id{1};    // response ids: "cmpl-1", "chatcmpl-2", ...
};

void install_routes(httplib::Server& http, ServerState& state);

}  // namespace server
