// LoRA adapters in ember-server, as llama-server has them: adapters loaded at start (--lora,
// ids 0, 1, ... in flag order), a request's `lora` field ([{"id", "scale"}]: the adapters named
// get their scale, the others none), the loaded adapters at their default scale 1 for a request
// without the field, and GET /lora-adapters listing them. No HTTP here beyond the route.
#pragma once

#include "http_server.hpp"
#include "openai_api.hpp"

#include <ember/ember.hpp>
#include <nlohmann/json.hpp>

#include <vector>

namespace server {

struct ServerState;

// Reads a body's `lora` (absent: nothing; else an array of {"id": integer, "scale": number}
// objects, no other keys) into the request's SamplingParams::adapters and sets lora_given.
// Throws ApiError (400, param "lora") for any other shape; unknown ids are the engine's 400.
void read_lora(const nlohmann::json& body, ParsedRequest& out);
// A request without `lora` runs with every loaded adapter at scale 1 (llama-server's default).
void apply_default_lora(const ember::Engine& engine, ParsedRequest& parsed);
// [{"id", "path", "scale": 1.0, "alpha", "rank", "tensors"}, ...] by id.
nlohmann::json lora_adapters_json(const std::vector<ember::AdapterInfo>& adapters);
// GET /lora-adapters.
void add_lora_routes(ServerState& state, std::vector<Route>& routes);

}  // namespace server
