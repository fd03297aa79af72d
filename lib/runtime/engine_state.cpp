// EngineCore's KV state that outlives a request: save (prefill, then export full prefix-cache
// blocks into a KV snapshot) and load (validate, then import blocks as cached prefix blocks).
//
// Only full blocks are saved. The partial tail block of a conversation is recomputed when the
// next request runs, which gives the same K/V: on the INT8 path every per-row computation is
// independent of the batch (tests/engine/test_batch_invariance.cpp), so continuing after a
// restore produces the tokens an uninterrupted run would have.
#include "runtime/engine_core.hpp"

#include "util/check.hpp"

namespace ember::runtime {

KvSnapshotIdentity EngineCore::snapshot_identity() const {
  const backend::KvGeometry& g = kv_->geometry();
  KvSnapshotIdentity id;
  id.model = file_->identity();
  id.precision = options_.precision;
  id.kv_type = g.dtype;
  id.block_size = g.block_size;
  id.layers = g.layers;
  id.kv_heads = g.kv_heads;
  id.head_dim = g.head_dim;
  return id;
}

KvSnapshotLimits EngineCore::snapshot_limits() const {
  return KvSnapshotLimits{config_.vocab, static_cast<std::uint64_t>(pool_->block_count())};
}

void EngineCore::prefill(const std::vector<std::int32_t>& tokens) {
  Request request;
  request.prompt_tokens = tokens;
  request.sampling.max_tokens = 1;  // the prompt's KV is what we want; one sampled token is the price
  request.sampling.temperature = 0;
  request.sampling.ignore_eos = true;
  const auto seq = make_sequence(request, {});
  submit(seq, /*allow_response_cache=*/false);
  wait(seq);
  const Completion& c = seq->completion;
  if (c.finish_reason == FinishReason::error || c.finish_reason == FinishReason::cancelled)
    fail(ErrorCode::cancelled, "computing the KV state to save did not finish ({}): {}", to_string(c.finish_reason),
         c.error);
}

bool EngineCore::export_chain(const std::vector<std::int32_t>& tokens, KvSnapshotWriter& out) {
  auto lock = lock_.lock();
  const std::vector<int> chain = pool_->find_chain(tokens);  // retained: no step can evict them now
  const std::size_t bs = static_cast<std::size_t>(pool_->block_size());
  const bool complete = chain.size() == tokens.size() / bs;
  if (complete) {
    std::uint64_t parent = 0;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      const auto ids = std::span(tokens).subspan(i * bs, bs);
      const std::uint64_t hash = BlockPool::block_hash(parent, ids);
      if (!out.contains(hash)) kv_->read_block(chain[i], out.add_block(parent, ids));
      parent = hash;
    }
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) pool_->release(*it);
  return complete;
}

std::vector<std::uint8_t> EngineCore::save_state(const std::vector<std::vector<std::int32_t>>& token_lists) {
  if (!options_.prefix_cache)
    fail(ErrorCode::invalid_argument, "saving KV state needs EngineOptions::prefix_cache, which is off");
  KvSnapshotWriter writer(snapshot_identity());
  for (const auto& tokens : token_lists) {
    // Another thread's requests may evict the blocks between the prefill and the export: one
    // retry, then the pool is too small for this state.
    bool exported = false;
    for (int attempt = 0; attempt < 2 && !exported; ++attempt) {
      prefill(tokens);
      exported = export_chain(tokens, writer);
    }
    if (!exported)
      fail(ErrorCode::out_of_memory,
           "the KV cache ({} blocks of {} tokens) could not keep the {} full blocks of a {}-token state",
           pool_->block_count(), pool_->block_size(), tokens.size() / static_cast<std::size_t>(pool_->block_size()),
           tokens.size());
  }
  return writer.finish();
}

std::size_t EngineCore::load_state(std::span<const std::uint8_t> snapshot) {
  if (!options_.prefix_cache)
    fail(ErrorCode::invalid_argument, "loading KV state needs EngineOptions::prefix_cache, which is off");
  // Everything is validated before the pool is touched: a bad snapshot changes nothing.
  const std::vector<KvSnapshotBlock> blocks = read_kv_snapshot(snapshot, snapshot_identity(), snapshot_limits());

  auto lock = lock_.lock();
  std::vector<int> held;  // retained while importing, so the import never evicts its own blocks
  std::unordered_set<std::uint64_t> cached;
  try {
    for (const KvSnapshotBlock& b : blocks) {
      if (b.parent != 0 && !cached.contains(b.parent)) continue;  // its chain was cut short
      const std::optional<BlockPool::Imported> imported = pool_->import_block(b.parent, b.tokens);
      if (!imported) continue;  // every block is in use
      held.push_back(imported->block);
      if (imported->fresh) kv_->write_block(imported->block, b.kv);
      cached.insert(imported->hash);
    }
  } catch (...) {
    for (auto it = held.rbegin(); it != held.rend(); ++it) pool_->release(*it);
    throw;
  }
  for (auto it = held.rbegin(); it != held.rend(); ++it) pool_->release(*it);
  if (cached.size() < blocks.size())
    logger_.log(LogLevel::warning, "KV state: {} of {} blocks loaded; the KV cache has no room for the rest",
                cached.size(), blocks.size());
  return cached.size();
}

std::size_t EngineCore::load_state_file(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_snapshot_file(path, snapshot_limits().max_bytes(snapshot_identity()));
  try {
    return load_state(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), path + ": " + e.what());
  }
}

}  // namespace ember::runtime
