// Limits the GGUF parser enforces so that a huge declared size is an error, not an
// out-of-memory. Real models stay far below them (SmolLM2: 33 keys, 49152-token vocabulary,
// 272 tensors; the largest vocabularies are ~256k tokens).
#pragma once

#include <cstdint>

namespace ember::model::gguf_limits {

// Keys, tensor names and string values are views into the file, so their limits only guard
// against nonsense; arrays allocate one GgufValue per element, so they are capped tighter.
constexpr std::uint64_t kMaxKeyBytes = 65535;                 // GGUF spec: keys are at most 65535 bytes
constexpr std::uint64_t kMaxTensorNameBytes = 1024;           // ggml itself uses 64
constexpr std::uint64_t kMaxStringBytes = 64ull << 20;        // one string value (chat templates ~ KB)
constexpr std::uint64_t kMaxArrayElements = 1ull << 22;       // one array (4M elements)
constexpr std::uint64_t kMaxTotalArrayElements = 1ull << 23;  // all arrays of one file together
constexpr int kMaxArrayDepth = 4;                             // arrays of arrays of ...
constexpr std::uint64_t kMaxMetadataKeys = 1ull << 16;
constexpr std::uint64_t kMaxTensors = 1ull << 20;
constexpr int kMaxDims = 4;

}  // namespace ember::model::gguf_limits
