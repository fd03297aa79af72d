// CUDA graphs of the forward pass for small batches: a decode step of a small model is a few
// hundred short kernels, and launching them one by one costs more than running them. The work
// of a batch shape is recorded once and replayed; every per-step input (tokens, positions,
// block tables) is read from device buffers that the step fills before the replay, so one graph
// serves every step of that shape.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>

namespace ember::backend::cuda {

class GraphCache {
 public:
  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs the work of `key` on `stream`: eagerly the first time (which also lets cuBLAS and the
  // lazily loaded kernels initialise outside a capture), captured from `record` the second
  // time, replayed from then on. `record` enqueues the work on `stream` and must not
  // synchronise or allocate.
  void run(std::uint64_t key, cudaStream_t stream, const std::function<void()>& record);
  // Drops every graph: the buffers they captured moved.
  void clear() noexcept;

 private:
  std::map<std::uint64_t, cudaGraphExec_t> graphs_;
  std::set<std::uint64_t> seen_;  // keys run eagerly once, captured at their next use
};

}  // namespace ember::backend::cuda
