// LoRA adapters on the CPU backend: an adapter prepared for the placed weights, and (in
// lora_ops.cpp) CpuOps::apply_lora, which adds each sequence's low-rank updates to the rows of
// a product after the base product ran once for the whole step.
#pragma once

#include "backend/cpu/cpu_ops.hpp"
#include "model/lora_adapter.hpp"

#include <memory>

namespace ember::backend::cpu {

// `adapter` for weights placed as `weights`: where INT8 smoothing multiplied a matrix's input
// columns by s (and divided its input by s), A's columns are multiplied by s too; where it
// divided a product's output rows (V for the output projection, up for the down projection),
// B's rows are divided alike. So the update sees the unsmoothed activations and the adapted
// product keeps the value y = W x + scale * B (A x) of the file's weights.
std::shared_ptr<const model::LoraAdapter> prepare_lora(const model::LoraAdapter& adapter, const CpuWeights& weights,
                                                       const model::ModelConfig& config);

}  // namespace ember::backend::cpu
