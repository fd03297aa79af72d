#include "runtime/lora_registry.hpp"

#include "model/decoder_tensors.hpp"
#include "util/check.hpp"
#include "util/hash.hpp"

#include <cmath>
#include <cstring>

namespace ember::runtime {

std::int32_t AdapterRegistry::load(const std::string& path) {
  const auto file = model::GgufFile::open(path);
  const model::LoraAdapter raw = model::read_lora_adapter(*file, config_, model::map_decoder_tensors(base_, config_));
  Entry entry;
  entry.info.path = path;
  entry.info.alpha = raw.alpha();
  entry.info.tensors = raw.tensor_count();
  entry.info.rank = raw.max_rank();
  entry.prepared = backend_.prepare_adapter(raw);
  const std::scoped_lock lock(mutex_);
  const std::int32_t id = next_id_++;
  entry.info.id = id;
  entries_.emplace(id, std::move(entry));
  return id;
}

void AdapterRegistry::erase(std::int32_t id) {
  const std::scoped_lock lock(mutex_);
  if (entries_.erase(id) == 0) fail(ErrorCode::invalid_argument, "no LoRA adapter with id {} is loaded", id);
}

bool AdapterRegistry::contains(std::int32_t id) const {
  const std::scoped_lock lock(mutex_);
  return entries_.contains(id);
}

std::vector<AdapterInfo> AdapterRegistry::list() const {
  const std::scoped_lock lock(mutex_);
  std::vector<AdapterInfo> out;
  for (const auto& [id, e] : entries_) out.push_back(e.info);
  return out;
}

void AdapterRegistry::attach(Sequence& seq) const {
  const std::vector<AdapterScale>& wanted = seq.sampling.adapters;
  if (wanted.empty()) return;
  // The chain root names the set in order: the same ids with the same scales share KV blocks,
  // any other set (or none) never does.
  Hasher root(0x4c6f5241ull);  // "LoRA"
  const std::scoped_lock lock(mutex_);
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const AdapterScale& a = wanted[i];
    if (!std::isfinite(a.scale))
      fail(ErrorCode::invalid_argument, "adapters[{}]: the scale of adapter {} is not finite", i, a.id);
    const auto it = entries_.find(a.id);
    if (it == entries_.end()) fail(ErrorCode::invalid_argument, "adapters[{}]: no LoRA adapter with id {}", i, a.id);
    for (std::size_t j = 0; j < i; ++j)
      if (wanted[j].id == a.id) fail(ErrorCode::invalid_argument, "adapters[{}]: adapter {} is named twice", i, a.id);
    if (a.scale == 0.0f) continue;  // left out, as llama.cpp does
    seq.adapter_refs.push_back(it->second.prepared);
    seq.adapters.push_back({it->second.prepared.get(), a.scale});
    std::uint32_t scale_bits = 0;
    std::memcpy(&scale_bits, &a.scale, sizeof scale_bits);
    root.update(&a.id, sizeof a.id);
    root.update(&scale_bits, sizeof scale_bits);
  }
  if (!seq.adapters.empty()) seq.prefix_root = root.value();
}

}  // namespace ember::runtime
