#include "lora_endpoints.hpp"

#include <cstdint>
#include <string>

namespace server {

using json = nlohmann::json;

void read_lora(const json& body, ParsedRequest& out) {
  const auto it = body.find("lora");
  if (it == body.end()) return;
  if (!it->is_array()) throw bad_field("lora", "'lora' must be an array of {\"id\": integer, \"scale\": number}");
  std::vector<ember::AdapterScale>& adapters = out.request.sampling.adapters;
  for (const json& entry : *it) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer())
      throw bad_field("lora", "each 'lora' entry must be an object with an integer 'id'");
    for (const auto& [key, value] : entry.items())
      if (key != "id" && key != "scale")
        throw bad_field("lora", "'lora' entries take 'id' and 'scale', not '" + key + "'");
    ember::AdapterScale a;
    const auto id = entry["id"].get<std::int64_t>();
    if (id < 0 || id > INT32_MAX) throw bad_field("lora", "'lora' id " + std::to_string(id) + " is out of range");
    a.id = static_cast<std::int32_t>(id);
    if (entry.contains("scale")) {
      if (!entry["scale"].is_number()) throw bad_field("lora", "a 'lora' scale must be a number");
      a.scale = entry["scale"].get<float>();
    }
    adapters.push_back(a);
  }
  out.lora_given = true;
}

void apply_default_lora(const ember::Engine& engine, ParsedRequest& parsed) {
  if (parsed.lora_given) return;
  for (const ember::AdapterInfo& a : engine.adapters()) parsed.request.sampling.adapters.push_back({a.id, 1.0f});
}

json lora_adapters_json(const std::vector<ember::AdapterInfo>& adapters) {
  json out = json::array();
  for (const ember::AdapterInfo& a : adapters)
    out.push_back(
        {{"id", a.id}, {"path", a.path}, {"scale", 1.0}, {"alpha", a.alpha}, {"rank", a.rank}, {"tensors", a.tensors}});
  return out;
}

}  // namespace server
