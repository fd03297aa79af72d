#include "kernels/cpu/context.hpp"

#include "kernels/cpu/cpu_tier.hpp"
#include "kernels/cpu/onednn_matmul.hpp"

#include <omp.h>

namespace ember::kernels::cpu {

namespace {

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_num_procs(); }

std::shared_ptr<OnednnContext> make_onednn() {
  active_tier();                 // decides the tier (and with it oneDNN's maximum ISA) before any kernel runs
  return make_onednn_context();  // null without oneDNN
}

}  // namespace

CpuContext::CpuContext(int threads_in)
    : threads(resolve_threads(threads_in)), onednn(make_onednn()), decode_weights(std::make_shared<WeightArena>()) {}

ScopedOmpThreads::ScopedOmpThreads(int threads)
    : previous_(omp_get_max_threads()), changed_(threads > 0 && threads != previous_) {
  if (changed_) omp_set_num_threads(threads);
}

ScopedOmpThreads::~ScopedOmpThreads() {
  if (changed_) omp_set_num_threads(previous_);
}

}  // namespace ember::kernels::cpu
