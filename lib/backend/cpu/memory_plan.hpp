// What a CPU backend will hold once a model is open, worked out before anything is prepared,
// so that a model that cannot fit fails at once with Error(out_of_memory) saying how much it
// needs, instead of being killed by the OS half-way through a long load.
#pragma once

#include "backend/cpu/kernel_backend.hpp"
#include "model/model_config.hpp"

#include <cstdint>

namespace ember::backend::cpu {

struct MemoryPlan {
  std::uint64_t prepared_bytes = 0;   // the weights in their final layouts
  std::uint64_t transient_bytes = 0;  // the most preparation holds beside them at one time
  std::uint64_t total() const { return prepared_bytes + transient_bytes; }
};

// An upper bound for `config` on the given GEMM path: INT8 matrices in both of the kernel
// backend's layouts (oneDNN's packed one and the GEMV's) with their scales, `four_bit_share`
// of the weights (0..1) instead in the W4A8 layout (5 bits a weight at most), or FP32 ones; the
// transient part is one layer's FP32 matrices twice (the dequantized copy and the FP32 linears
// that calibrate it) and the lm_head's INT8 rows while it is packed.
MemoryPlan plan_memory(const model::ModelConfig& config, Precision gemm, double four_bit_share = 0.0);

// The memory the system can give this process now (platform::available_memory_bytes); 0 when it
// does not say (then nothing is refused).
std::uint64_t available_memory();

// Throws Error(out_of_memory) naming the model's needs and what is available when `plan` does
// not fit in `available` (0 = unknown: never throws).
void check_fits(const MemoryPlan& plan, std::uint64_t available, const model::ModelConfig& config);

}  // namespace ember::backend::cpu
