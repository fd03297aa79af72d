// The CPU compute context: the thread count every kernel uses and, where ember is built with
// oneDNN, its one engine and stream. One per backend, created once; kernels never create
// threads of their own beyond OpenMP's pool (oneDNN here is built with the OpenMP runtime,
// DNNL_RUNTIME_OMP).
//
// Thread-safety: a CpuContext is used by one thread at a time (the thread that runs the engine
// step). Its members are not mutated by kernels.
#pragma once

#include "kernels/cpu/weight_arena.hpp"

#include <memory>

namespace ember::kernels::cpu {

struct OnednnContext;  // kernels/cpu/onednn_matmul.hpp

struct CpuContext {
  // threads <= 0: all hardware threads (omp_get_num_procs()).
  explicit CpuContext(int threads);

  int threads;  // OpenMP threads of every kernel: num_threads clauses and oneDNN calls
  // oneDNN's engine, stream and primitive cache, shared by this context's Linears; null in a
  // build without oneDNN (EMBER_WITH_ONEDNN off), where ember's own kernels run every product.
  std::shared_ptr<OnednnContext> onednn;
  // Where Linears put the weights decode streams; shared with them, so it outlives both.
  // Allocated from while weights are built, which is not concurrent with steps.
  std::shared_ptr<WeightArena> decode_weights;
};

// For its lifetime, OpenMP regions the calling thread opens without a num_threads clause
// (oneDNN's and Eigen's, which read the thread's OpenMP ICV) use `threads`; then the thread's
// own setting comes back, so a host thread that runs engine steps keeps its OpenMP default.
// ember's own regions name their team. Cheap: an ICV read and at most two stores.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(int threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int previous_;
  bool changed_;
};

}  // namespace ember::kernels::cpu
