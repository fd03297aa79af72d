// Tensor storage types of GGUF files (numbered as ggml numbers them) and their dequantization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ember::model {

enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  std::int64_t block_elements;  // elements per block (1 for plain types)
  std::int64_t block_bytes;     // bytes per block
  bool dequantizable;           // ember can convert it to FP32
};

// Info for a known type; std::nullopt for a number ember does not know.
std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type);
const GgmlTypeInfo& ggml_type_info(GgmlType type);

// Bytes of `elements` values of `type`; std::nullopt when `elements` is not a whole number of
// blocks or the size overflows.
std::optional<std::uint64_t> ggml_row_bytes(GgmlType type, std::int64_t elements);

// Converts `elements` values (a whole number of blocks) to FP32. Throws Error(unsupported) for
// a type that cannot be dequantized.
void dequantize(GgmlType type, const void* src, float* dst, std::int64_t elements);

// The bits a value of `type` has when it stores groups of 32 values with a scale and an offset
// each, the weights ember's grouped kernel multiplies as they are, without dequantizing: 4 (Q4_0,
// Q4_1, Q4_K), 8 (Q8_0), or 0 for the other types.
int group_bits(GgmlType type);

// Reads `elements` values (whole blocks) of a grouped type (group_bits() > 0) as groups of 32 of
// unsigned values u, value = scales[g] * u + offsets[g]. 4 bits: for group g, values[16 g + e]
// holds value 32 g + e in its low nibble and 32 g + 16 + e in its high one (Q4_0: offset =
// -8 * scale); 8 bits: values[32 g + e] holds value 32 g + e as q + 128 (Q8_0: offset = -128 *
// scale). The values are those dequantize() gives, up to the rounding of Q4_K's scale products
// (here one product each) and of d * u + o against Q8_0's d * q. Throws Error(invalid_argument)
// for a type that is not grouped.
void read_groups(GgmlType type, const void* src, std::int64_t elements, std::uint8_t* values, float* scales,
                 float* offsets);

}  // namespace ember::model
