// What a CPU backend will hold once a model is open, worked out before anything is prepared,
// so that a model that cannot fit fails at once with Error(out_of_memory) saying how much it
// needs, instead of being killed by the OS half-way through a long load.
#pragma once

#include "model/model_config.hpp"

#include <ember/ember.hpp>

#include <cstdint>

namespace ember::backend::cpu {

struct MemoryPlan {
  std::uint64_t prepared_bytes = 0;   // the weights in their final layouts
  std::uint64_t transient_bytes = 0;  // the most preparation holds beside them at one time
  std::uint64_t total() const { return prepared_bytes + transient_bytes; }
};

// The shares (0..1) of a model's matrix weights that the INT8 path keeps in the file's 4-bit
// groups (W4A8), by layout: kernels/cpu/gemm_grouped.hpp holds 16 bytes of nibbles and an FP16
// scale per group of 32, and an FP16 offset where the file's type has one.
struct FourBitShares {
  double scale_only = 0.0;    // Q4_0: 18 bytes per 32 weights, 9/16 of a byte a weight
  double with_offsets = 0.0;  // Q4_1, Q4_K: 20 bytes per 32, 5/8 of a byte a weight
};

// An upper bound for `config` on the given GEMM path: INT8 matrices in both of the CPU
// backend's layouts (oneDNN's packed one and the GEMV's) with their scales, `four_bit` of the
// weights instead in the W4A8 layouts (the bytes of each; row padding ignored), or FP32 ones;
// the transient part is one layer's FP32 matrices twice (the dequantized copy and the FP32
// linears that calibrate it) and the lm_head's INT8 rows while it is packed.
MemoryPlan plan_memory(const model::ModelConfig& config, Precision gemm, FourBitShares four_bit = {});

// The memory the system can give this process now (platform::available_memory_bytes); 0 when it
// does not say (then nothing is refused).
std::uint64_t available_memory();

// Throws Error(out_of_memory) naming the model's needs and what is available when `plan` does
// not fit in `available` (0 = unknown: never throws).
void check_fits(const MemoryPlan& plan, std::uint64_t available, const model::ModelConfig& config);

}  // namespace ember::backend::cpu
