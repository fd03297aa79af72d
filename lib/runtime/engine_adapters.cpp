// LoRA adapters through the engine: EngineCore's part (attaching a request's adapters, refusing
// to unload one in use) and Engine's public members.
#include "runtime/engine_core.hpp"
#include "util/check.hpp"

#include <ember/ember.hpp>

#include <algorithm>

namespace ember::runtime {

std::shared_ptr<Sequence> EngineCore::make_sequence(const Request& request, StreamCallback on_chunk) const {
  auto seq = requests_->make_sequence(request, std::move(on_chunk));
  adapters_->attach(*seq);
  return seq;
}

void EngineCore::unload_adapter(std::int32_t id) {
  auto lock = lock_.lock();
  int users = 0;
  for (const std::shared_ptr<Sequence>& seq : scheduler_->sequences())
    users += std::any_of(seq->sampling.adapters.begin(), seq->sampling.adapters.end(),
                         [id](const AdapterScale& a) { return a.id == id; });
  if (users > 0)
    fail(ErrorCode::busy, "LoRA adapter {} is in use by {} queued or running request(s): unload it when they end", id,
         users);
  adapters_->erase(id);
}

}  // namespace ember::runtime

namespace ember {

std::int32_t Engine::load_adapter(const std::string& path) { return core("load_adapter").load_adapter(path); }

void Engine::unload_adapter(std::int32_t id) { core("unload_adapter").unload_adapter(id); }

std::vector<AdapterInfo> Engine::adapters() const { return core("adapters").adapters(); }

}  // namespace ember
