// The C ABI's LoRA adapters (ember.h, "LoRA adapters"): a thin shell over Engine::load_adapter,
// unload_adapter and adapters, inside guarded() like every entry.
#include "capi/capi.hpp"

#include <algorithm>

using namespace ember::capi;
using ember::ErrorCode;
using ember::fail;

extern "C" {

EMBER_API ember_status ember_load_adapter(ember_engine* engine, const char* path, int32_t* id) {
  return guarded(engine, [&] {
    ember_engine& e = live(engine);
    require(path, "path");
    require(id, "the id output");
    *id = e.engine.load_adapter(path);
  });
}

EMBER_API ember_status ember_unload_adapter(ember_engine* engine, int32_t id) {
  return guarded(engine, [&] { live(engine).engine.unload_adapter(id); });
}

EMBER_API ember_status ember_list_adapters(const ember_engine* engine, int32_t* ids, size_t capacity, size_t* count) {
  return guarded(engine, [&] {
    const ember_engine& e = live(engine);
    require(count, "the count output");
    if (ids == nullptr && capacity > 0) fail(ErrorCode::invalid_argument, "ids is NULL but capacity is {}", capacity);
    const std::vector<ember::AdapterInfo> all = e.engine.adapters();
    for (std::size_t i = 0; i < std::min(capacity, all.size()); ++i) ids[i] = all[i].id;
    *count = all.size();
  });
}

}  // extern "C"
