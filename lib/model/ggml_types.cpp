#include "model/ggml_types.hpp"

#include "util/check.hpp"

#include <array>

namespace ember::model {
namespace {

struct TypeEntry {
  std::uint32_t id;
  GgmlTypeInfo info;
};

// Block sizes as the GGUF specification defines them (QK_K = 256 for the K-quants).
constexpr std::array<TypeEntry, 20> kTypes{{
    {0, {"F32", 1, 4, true}},       {1, {"F16", 1, 2, true}},        {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},    {6, {"Q5_0", 32, 22, true}},     {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},    {9, {"Q8_1", 32, 36, false}},    {10, {"Q2_K", 256, 84, true}},
    {11, {"Q3_K", 256, 110, true}}, {12, {"Q4_K", 256, 144, true}},  {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}}, {15, {"Q8_K", 256, 292, false}}, {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},     {26, {"I32", 1, 4, false}},      {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},     {30, {"BF16", 1, 2, true}},
}};

}  // namespace

std::optional<GgmlTypeInfo> ggml_type_info(std::uint32_t type) {
  for (const auto& entry : kTypes) {
    if (entry.id == type) return entry.info;
  }
  return std::nullopt;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  for (const auto& entry : kTypes) {
    if (entry.id == static_cast<std::uint32_t>(type)) return entry.info;
  }
  fail(ErrorCode::unsupported, "unknown ggml tensor type {}", static_cast<std::uint32_t>(type));
}

std::optional<std::uint64_t> ggml_row_bytes(GgmlType type, std::int64_t elements) {
  auto info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (!info || elements < 0 || elements % info->block_elements != 0) return std::nullopt;
  return checked_mul(static_cast<std::uint64_t>(elements / info->block_elements),
                     static_cast<std::uint64_t>(info->block_bytes));
}

}  // namespace ember::model
