// The CPU compute context: the thread count every kernel uses and the one oneDNN engine and
// stream. One per backend, created once; kernels never create threads of their own beyond
// OpenMP's pool (oneDNN here is built with the OpenMP runtime, DNNL_RUNTIME_OMP).
//
// Thread-safety: a CpuContext is used by one thread at a time (the thread that runs the engine
// step). Its members are not mutated by kernels.
#pragma once

#include "kernels/cpu/weight_arena.hpp"

#include <oneapi/dnnl/dnnl.hpp>

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace ember::kernels::cpu {

// What a oneDNN matmul primitive of a Linear depends on. Weight scales are run-time arguments,
// not part of it, so every Linear of one shape and row count shares one primitive.
struct MatmulKey {
  int type;  // dnnl::memory::data_type of the weights and activations
  std::int64_t in, out, rows;
  bool accumulate;
  auto operator<=>(const MatmulKey&) const = default;
};

struct CachedMatmul {
  dnnl::matmul matmul;
  std::string implementation;  // oneDNN's name of the kernel it chose
};

// The primitives of one context: creating one takes a millisecond or more, and a model has a
// handful of Linear shapes but several Linears of each per layer, so a prefill of a row count
// not seen before creates one primitive per shape, not one per Linear. Thread-safe.
class MatmulCache {
 public:
  template <class Make>
  std::shared_ptr<const CachedMatmul> get(const MatmulKey& key, Make&& make) {
    std::lock_guard lock(mutex_);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    // Bounds memory when a caller sweeps row counts; continuous batching sees at most the
    // token budget. Cleared, not evicted: a primitive in use is kept alive by its caller.
    if (cache_.size() >= kMaxEntries) cache_.clear();
    return cache_.emplace(key, std::make_shared<const CachedMatmul>(make())).first->second;
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<MatmulKey, std::shared_ptr<const CachedMatmul>> cache_;
};

struct CpuContext {
  // threads <= 0: all hardware threads (omp_get_num_procs()).
  explicit CpuContext(int threads);

  int threads;  // OpenMP threads of every kernel: num_threads clauses and oneDNN calls
  dnnl::engine engine;
  dnnl::stream stream;
  // Where Linears put the weights decode streams; shared with them, so it outlives both.
  // Allocated from while weights are built, which is not concurrent with steps.
  std::shared_ptr<WeightArena> decode_weights;
  std::shared_ptr<MatmulCache> matmuls;  // shared by this context's Linears
};

// Makes oneDNN (which reads the calling thread's OpenMP ICV) use ctx.threads. Called by every
// kernel that enters oneDNN; cheap (one store).
void bind_threads(const CpuContext& ctx);

}  // namespace ember::kernels::cpu
