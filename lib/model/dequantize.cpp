// FP32 dequantization of the GGUF block formats. Each routine mirrors the reference layout
// (ggml-quants / gguf-py quants.py) and evaluates its products in the same order, so results
// are bit-identical to the reference (this file is compiled with -ffp-contract=off: a fused
// multiply-add would round differently).
#include "model/ggml_types.hpp"

#include "util/check.hpp"
#include "util/fp16.hpp"

#include <cstring>

namespace ember::model {
namespace {

constexpr int kQK = 32;    // elements per block of the legacy formats
constexpr int kQKK = 256;  // elements per super-block of the K-quants

float load_f16(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_float(h);
}

std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Legacy formats: nibble i of byte j holds element j (low) or j + 16 (high).
void dequant_q4_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>((b[2 + j] & 0x0f) - 8);
    y[j + kQK / 2] = d * static_cast<float>((b[2 + j] >> 4) - 8);
  }
}

void dequant_q4_1(const std::uint8_t* b, float* y) {
  const float d = load_f16(b), m = load_f16(b + 2);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(b[4 + j] & 0x0f) + m;
    y[j + kQK / 2] = d * static_cast<float>(b[4 + j] >> 4) + m;
  }
}

// Q5: a 32-bit mask supplies the fifth bit of element i at bit i.
int q5_value(const std::uint8_t* qs, std::uint32_t qh, int i) {
  const int low = i < kQK / 2 ? (qs[i] & 0x0f) : (qs[i - kQK / 2] >> 4);
  return low | static_cast<int>(((qh >> i) & 1u) << 4);
}

void dequant_q5_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const std::uint32_t qh = load_u32(b + 2);
  for (int i = 0; i < kQK; ++i) y[i] = d * static_cast<float>(q5_value(b + 6, qh, i) - 16);
}

void dequant_q5_1(const std::uint8_t* b, float* y) {
  const float d = load_f16(b), m = load_f16(b + 2);
  const std::uint32_t qh = load_u32(b + 4);
  for (int i = 0; i < kQK; ++i) y[i] = d * static_cast<float>(q5_value(b + 8, qh, i)) + m;
}

void dequant_q8_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  for (int i = 0; i < kQK; ++i) y[i] = static_cast<float>(static_cast<std::int8_t>(b[2 + i])) * d;
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin. Element
// h*128 + j*32 + l holds bits 2j..2j+1 of qs[h*32 + l]; sub-block = element / 16.
void dequant_q2_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = load_f16(b + 80), dmin = load_f16(b + 82);
  for (int i = 0; i < kQKK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int q = (qs[h * 32 + l] >> (2 * j)) & 3;
    const std::uint8_t sc = scales[i / 16];
    const float dl = d * static_cast<float>(sc & 0x0f);
    const float ml = dmin * static_cast<float>(sc >> 4);
    y[i] = dl * static_cast<float>(q) - ml;
  }
}

// Q3_K: hmask[32], qs[64], scales[12] (sixteen 6-bit values), d. The high bit *clear* means
// subtract 4.
void dequant_q3_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::uint8_t* sc = b + 96;
  const float d = load_f16(b + 108);
  int scales[16];
  for (int k = 0; k < 16; ++k) {
    const int low = (sc[k % 8] >> (4 * (k / 8))) & 0x0f;
    const int high = (sc[8 + k % 4] >> (2 * (k / 4))) & 0x03;
    scales[k] = (low | (high << 4)) - 32;
  }
  for (int i = 0; i < kQKK; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int low = (qs[h * 32 + l] >> (2 * j)) & 3;
    const int high_set = (hmask[l] >> (i / 32)) & 1;
    const int q = low - (high_set ? 0 : 4);
    const float dl = d * static_cast<float>(scales[i / 16]);
    y[i] = dl * static_cast<float>(q);
  }
}

// The 12-byte packing of eight 6-bit scales and eight 6-bit mins shared by Q4_K and Q5_K.
void unpack_k_scales(const std::uint8_t* s, int* scale, int* min) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = s[j] & 0x3f;
    min[j] = s[4 + j] & 0x3f;
    scale[4 + j] = (s[8 + j] & 0x0f) | ((s[j] >> 2) & 0x30);
    min[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 0x30);
  }
}

// Q4_K: d, dmin, scales[12], qs[128]; sub-block s = 2c + n takes nibble n of qs[c*32 + l].
void dequant_q4_k(const std::uint8_t* b, float* y) {
  const float d = load_f16(b), dmin = load_f16(b + 2);
  int scale[8], min[8];
  unpack_k_scales(b + 4, scale, min);
  const std::uint8_t* qs = b + 16;
  for (int i = 0; i < kQKK; ++i) {
    const int s = i / 32, l = i % 32;
    const int q = (qs[(s / 2) * 32 + l] >> (4 * (s % 2))) & 0x0f;
    const float dd = d * static_cast<float>(scale[s]);
    const float dm = dmin * static_cast<float>(min[s]);
    y[i] = dd * static_cast<float>(q) - dm;
  }
}

// Q5_K: as Q4_K plus qh[32]: bit s of qh[l] is the fifth bit of element s*32 + l.
void dequant_q5_k(const std::uint8_t* b, float* y) {
  const float d = load_f16(b), dmin = load_f16(b + 2);
  int scale[8], min[8];
  unpack_k_scales(b + 4, scale, min);
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* qs = b + 48;
  for (int i = 0; i < kQKK; ++i) {
    const int s = i / 32, l = i % 32;
    const int low = (qs[(s / 2) * 32 + l] >> (4 * (s % 2))) & 0x0f;
    const int q = low | (((qh[l] >> s) & 1) << 4);
    const float dd = d * static_cast<float>(scale[s]);
    const float dm = dmin * static_cast<float>(min[s]);
    y[i] = dd * static_cast<float>(q) - dm;
  }
}

// Q6_K: ql[128], qh[64], int8 scales[16], d. Element h*128 + r takes nibble r/64 of
// ql[h*64 + r%64] and bits 2(r/32).. of qh[h*32 + r%32].
void dequant_q6_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* scales = b + 192;
  const float d = load_f16(b + 208);
  for (int i = 0; i < kQKK; ++i) {
    const int h = i / 128, r = i % 128;
    const int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 0x0f;
    const int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
    const int q = (low | (high << 4)) - 32;
    const float dd = d * static_cast<float>(static_cast<std::int8_t>(scales[i / 16]));
    y[i] = dd * static_cast<float>(q);
  }
}

using BlockFn = void (*)(const std::uint8_t*, float*);

BlockFn block_function(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return dequant_q4_0;
    case GgmlType::Q4_1: return dequant_q4_1;
    case GgmlType::Q5_0: return dequant_q5_0;
    case GgmlType::Q5_1: return dequant_q5_1;
    case GgmlType::Q8_0: return dequant_q8_0;
    case GgmlType::Q2_K: return dequant_q2_k;
    case GgmlType::Q3_K: return dequant_q3_k;
    case GgmlType::Q4_K: return dequant_q4_k;
    case GgmlType::Q5_K: return dequant_q5_k;
    case GgmlType::Q6_K: return dequant_q6_k;
    default: return nullptr;
  }
}

}  // namespace

void dequantize(GgmlType type, const void* src, float* dst, std::int64_t elements) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (elements < 0 || elements % info.block_elements != 0) {
    fail(ErrorCode::invalid_argument, "dequantize: {} elements is not a whole number of {} blocks", elements,
         info.name);
  }
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, in, static_cast<std::size_t>(elements) * 4); return;
    case GgmlType::F16:
      for (std::int64_t i = 0; i < elements; ++i) dst[i] = load_f16(in + 2 * i);
      return;
    case GgmlType::BF16:
      for (std::int64_t i = 0; i < elements; ++i) {
        std::uint16_t v;
        std::memcpy(&v, in + 2 * i, 2);
        dst[i] = bf16_to_float(v);
      }
      return;
    default: break;
  }
  const BlockFn fn = block_function(type);
  if (fn == nullptr) fail(ErrorCode::unsupported, "cannot dequantize tensor type {}", info.name);
  const std::int64_t blocks = elements / info.block_elements;
  for (std::int64_t k = 0; k < blocks; ++k) {
    fn(in + k * info.block_bytes, dst + k * info.block_elements);
  }
}

int group_bits(GgmlType type) {
  if (type == GgmlType::Q4_0 || type == GgmlType::Q4_1 || type == GgmlType::Q4_K) return 4;
  return type == GgmlType::Q8_0 ? 8 : 0;
}

void read_groups(GgmlType type, const void* src, std::int64_t elements, std::uint8_t* values, float* scales,
                 float* offsets) {
  const auto* in = static_cast<const std::uint8_t*>(src);
  if (group_bits(type) == 0)
    fail(ErrorCode::invalid_argument, "read_groups: {} does not store groups of 32", ggml_type_info(type).name);
  const GgmlTypeInfo& info = ggml_type_info(type);
  if (elements < 0 || elements % info.block_elements != 0)
    fail(ErrorCode::invalid_argument, "read_groups: {} elements is not a whole number of {} blocks", elements,
         info.name);
  const std::int64_t blocks = elements / info.block_elements;
  std::uint8_t* nibbles = values;
  for (std::int64_t k = 0; k < blocks; ++k) {
    const std::uint8_t* b = in + k * info.block_bytes;
    if (type == GgmlType::Q8_0) {
      const float d = load_f16(b);
      scales[k] = d;
      offsets[k] = -128.0f * d;
      for (int e = 0; e < 32; ++e)
        values[32 * k + e] = static_cast<std::uint8_t>(static_cast<std::int8_t>(b[2 + e]) + 128);
      continue;
    }
    if (type == GgmlType::Q4_0 || type == GgmlType::Q4_1) {
      // The legacy blocks already pair value e with e + 16 in one byte.
      const float d = load_f16(b);
      const bool q4_1 = type == GgmlType::Q4_1;
      scales[k] = d;
      offsets[k] = q4_1 ? load_f16(b + 2) : -8.0f * d;
      std::memcpy(nibbles + 16 * k, b + (q4_1 ? 4 : 2), 16);
      continue;
    }
    // Q4_K: sub-block s = 2c + n is nibble n of qs[c*32 + l]; re-paired for groups of 32.
    const float d = load_f16(b), dmin = load_f16(b + 2);
    int scale[8], min[8];
    unpack_k_scales(b + 4, scale, min);
    const std::uint8_t* qs = b + 16;
    for (int s = 0; s < 8; ++s) {
      const std::int64_t g = k * 8 + s;
      scales[g] = d * static_cast<float>(scale[s]);
      offsets[g] = -(dmin * static_cast<float>(min[s]));
      const std::uint8_t* q = qs + (s / 2) * 32;
      const int shift = 4 * (s % 2);
      for (int e = 0; e < 16; ++e)
        nibbles[16 * g + e] =
            static_cast<std::uint8_t>(((q[e] >> shift) & 0x0f) | (((q[16 + e] >> shift) & 0x0f) << 4));
    }
  }
}

}  // namespace ember::model
