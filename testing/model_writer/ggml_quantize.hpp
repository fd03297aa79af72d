// Reference (round-to-nearest) quantization of FP32 values into GGUF block formats, used by the
// GGUF writer to make synthetic models. Bit-identical to ggml's *_ref quantizers.
#pragma once

#include "model/ggml_types.hpp"

#include <cstdint>
#include <vector>

namespace ember::model {

// Encodes `elements` values (a whole number of blocks) as `type`: F32, F16, BF16, Q8_0, Q4_0
// or Q4_1. Throws Error(invalid_argument) for a partial block, Error(unsupported) for another
// type.
std::vector<std::uint8_t> quantize(GgmlType type, const float* src, std::int64_t elements);

}  // namespace ember::model
