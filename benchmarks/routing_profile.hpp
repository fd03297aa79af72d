// ember-bench's routing profile of a mixture-of-experts model: how many of a layer's experts a
// step read, from the EngineStats totals (routed_layers, experts_run) around the timed runs.
#pragma once

#include <ember/ember.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>

namespace ember::bench {

struct RoutingProfile {
  std::uint64_t steps = 0, layers = 0, experts = 0;

  // What one run added: the stats before it and after it.
  void add(const EngineStats& before, const EngineStats& after) {
    steps += after.steps - before.steps;
    layers += after.routed_layers - before.routed_layers;
    experts += after.experts_run - before.experts_run;
  }
  double per_layer() const { return layers > 0 ? static_cast<double>(experts) / static_cast<double>(layers) : 0.0; }

  // A line under the workload's result and its JSON fields; nothing for a dense model.
  void report(nlohmann::json& j, int model_experts) const {
    if (layers == 0) return;
    std::printf("         %.1f of %d experts read per routed layer and step (mean over %llu steps)\n", per_layer(),
                model_experts, static_cast<unsigned long long>(steps));
    j["experts_per_layer_step"] = per_layer();
    j["experts"] = model_experts;
    j["steps"] = steps;
  }
};

}  // namespace ember::bench
