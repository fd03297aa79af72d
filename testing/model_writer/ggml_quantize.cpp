#include "model_writer/ggml_quantize.hpp"

#include "util/check.hpp"
#include "util/fp16.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember::model {
namespace {

constexpr int kQK = 32;

void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = float_to_fp16(v);
  std::memcpy(p, &h, 2);
}

void quantize_q8_0(const float* x, std::uint8_t* b) {
  float amax = 0.0f;
  for (int i = 0; i < kQK; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  for (int i = 0; i < kQK; ++i) {
    b[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::round(x[i] * id)));
  }
}

// Q4_0 scales by the value of largest magnitude, sign included, so that it maps to -8 exactly.
void quantize_q4_0(const float* x, std::uint8_t* b) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < kQK; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
    b[2 + j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
  }
}

void quantize_q4_1(const float* x, std::uint8_t* b) {
  float min = x[0], max = x[0];
  for (int i = 1; i < kQK; ++i) {
    min = std::fmin(min, x[i]);
    max = std::fmax(max, x[i]);
  }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(b, d);
  store_f16(b + 2, min);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
    const int q1 = std::min(15, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
    b[4 + j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
  }
}

}  // namespace

std::vector<std::uint8_t> quantize(GgmlType type, const float* src, std::int64_t elements) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (elements < 0 || elements % info.block_elements != 0) {
    fail(ErrorCode::invalid_argument, "quantize: {} elements is not a whole number of {} blocks", elements, info.name);
  }
  const std::int64_t blocks = elements / info.block_elements;
  std::vector<std::uint8_t> out(static_cast<std::size_t>(blocks * info.block_bytes));
  std::uint8_t* dst = out.data();
  switch (type) {
    case GgmlType::F32:
      if (elements > 0) std::memcpy(dst, src, out.size());
      return out;
    case GgmlType::F16:
      for (std::int64_t i = 0; i < elements; ++i) store_f16(dst + 2 * i, src[i]);
      return out;
    case GgmlType::BF16:
      for (std::int64_t i = 0; i < elements; ++i) {
        const std::uint16_t v = float_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &v, 2);
      }
      return out;
    case GgmlType::Q8_0:
      for (std::int64_t k = 0; k < blocks; ++k) quantize_q8_0(src + k * kQK, dst + k * 34);
      return out;
    case GgmlType::Q4_0:
      for (std::int64_t k = 0; k < blocks; ++k) quantize_q4_0(src + k * kQK, dst + k * 18);
      return out;
    case GgmlType::Q4_1:
      for (std::int64_t k = 0; k < blocks; ++k) quantize_q4_1(src + k * kQK, dst + k * 20);
      return out;
    default: fail(ErrorCode::unsupported, "quantize: writing {} tensors is not supported", info.name);
  }
}

}  // namespace ember::model
