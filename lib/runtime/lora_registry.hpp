// The engine's loaded LoRA adapters (Engine::load_adapter): each read and checked against the
// base model (model/lora_adapter.hpp), prepared by the backend, and named by an id that is never
// reused, so a response cache key or a prefix-cache root that names an id names one adapter.
//
// Thread-safety: every member may be called from any thread (one mutex guards the table; a file
// is read and prepared outside it). A sequence holds its adapters by shared_ptr, so unloading
// never frees an adapter that a step is still applying; the engine refuses to unload an
// adapter that a queued or running request names (EngineCore::unload_adapter).
#pragma once

#include "backend/backend.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "runtime/sequence.hpp"

#include <ember/ember.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ember::runtime {

class AdapterRegistry {
 public:
  // base, config and backend must outlive the registry.
  AdapterRegistry(const model::GgufFile& base, const model::ModelConfig& config, const backend::Backend& backend)
      : base_(base), config_(config), backend_(backend) {}

  // Throws as Engine::load_adapter documents.
  std::int32_t load(const std::string& path);
  // Removes `id` from the table; Error(invalid_argument) when it is not there.
  void erase(std::int32_t id);
  bool contains(std::int32_t id) const;
  std::vector<AdapterInfo> list() const;
  // Resolves `seq`'s SamplingParams::adapters: the adapters it holds, the backend's uses and its
  // prefix-cache root. Throws Error(invalid_argument) for an unknown id, a repeated one or a
  // scale that is not finite.
  void attach(Sequence& seq) const;

 private:
  struct Entry {
    AdapterInfo info;
    std::shared_ptr<const model::LoraAdapter> prepared;
  };
  const model::GgufFile& base_;
  const model::ModelConfig& config_;
  const backend::Backend& backend_;
  mutable std::mutex mutex_;
  std::map<std::int32_t, Entry> entries_;
  std::int32_t next_id_ = 0;
};

}  // namespace ember::runtime
