#include "lora_endpoints.hpp"

#include "routes.hpp"

namespace server {

void add_lora_routes(ServerState& state, std::vector<Route>& routes) {
  routes.push_back({"GET", "/lora-adapters", [&state](const HttpRequest&, std::shared_ptr<Exchange> ex) {
                      HttpResponse r;
                      r.content_type = "application/json";
                      r.body = lora_adapters_json(state.engine->adapters()).dump();
                      ex->respond(std::move(r));
                    }});
}

}  // namespace server
