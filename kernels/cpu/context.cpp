#include "kernels/cpu/context.hpp"

#include "kernels/cpu/cpu_tier.hpp"

#include "util/check.hpp"

#include <omp.h>

namespace ember::kernels::cpu {

namespace {

int resolve_threads(int threads) { return threads > 0 ? threads : omp_get_num_procs(); }

dnnl::engine make_engine() {
  active_tier();  // decides the tier, and with it oneDNN's maximum ISA, before any primitive
  try {
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  } catch (const dnnl::error& e) {
    fail(ErrorCode::internal, "cannot create the oneDNN CPU engine: {}", e.what());
  }
}

}  // namespace

CpuContext::CpuContext(int threads_in)
    : threads(resolve_threads(threads_in)),
      engine(make_engine()),
      stream(engine),
      decode_weights(std::make_shared<WeightArena>()),
      matmuls(std::make_shared<MatmulCache>()) {}

void bind_threads(const CpuContext& ctx) {
  if (omp_get_max_threads() != ctx.threads) omp_set_num_threads(ctx.threads);
}

}  // namespace ember::kernels::cpu
