// The compute threads of the kernel microbenchmarks (gemm_bench, attention_bench, moe_bench):
// $EMBER_BENCH_THREADS, default 2 (the machines these run on).
#pragma once

#include <cstdlib>

namespace ember::bench {

inline int bench_threads() {
  const char* env = std::getenv("EMBER_BENCH_THREADS");
  return env != nullptr ? std::atoi(env) : 2;
}

}  // namespace ember::bench
