// Dequantization and quantization against goldens made by the Python gguf package
// (tests/reference/make_dequant_goldens.py).
#include <ember/ember.hpp>

#include "model/ggml_types.hpp"
#include "model_writer/ggml_quantize.hpp"
#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace ember::model;

namespace {

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

std::vector<float> floats_from_hex(const std::string& hex) {
  const auto bytes = from_hex(hex);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

nlohmann::json load_case(const std::string& file) {
  std::ifstream in(ember::test::data_path("model/dequant/" + file));
  REQUIRE_MESSAGE(in.good(), "missing golden " << file);
  return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("dequantize matches the gguf reference bit for bit") {
  for (const char* name :
       {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) {
    CAPTURE(name);
    const auto c = load_case(std::string(name) + ".json");
    const auto type = static_cast<GgmlType>(c["type_id"].get<std::uint32_t>());
    CHECK(std::string(ggml_type_info(type).name) == name);
    const auto raw = from_hex(c["raw_hex"]);
    const auto expected = floats_from_hex(c["values_hex"]);
    const std::int64_t n = c["elements"];
    REQUIRE(static_cast<std::int64_t>(expected.size()) == n);
    REQUIRE(ggml_row_bytes(type, n) == raw.size());
    std::vector<float> got(static_cast<std::size_t>(n), -12345.0f);
    dequantize(type, raw.data(), got.data(), n);
    int mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (std::memcmp(&got[i], &expected[i], 4) != 0 && ++mismatches <= 3) {
        INFO("element " << i << ": got " << got[i] << ", expected " << expected[i]);
        CHECK(false);
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("quantize matches the gguf reference bytes") {
  for (const char* name : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1"}) {
    CAPTURE(name);
    const auto c = load_case(std::string("quantize_") + name + ".json");
    const auto type = static_cast<GgmlType>(c["type_id"].get<std::uint32_t>());
    const auto values = floats_from_hex(c["values_hex"]);
    const auto expected = from_hex(c["raw_hex"]);
    const auto got = quantize(type, values.data(), static_cast<std::int64_t>(values.size()));
    CHECK(got == expected);
  }
}

TEST_CASE("quantize then dequantize stays within the format's step") {
  std::vector<float> x(256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.0f;
  const struct {
    GgmlType type;
    float tolerance;
  } cases[] = {{GgmlType::F32, 0.0f},
               {GgmlType::F16, 2e-3f},
               {GgmlType::Q8_0, 3.0f / 127 * 0.51f + 2e-3f},
               {GgmlType::Q4_0, 3.0f / 8 + 1e-2f},
               {GgmlType::Q4_1, 6.0f / 15 * 0.51f + 4e-3f}};
  // Q4_0 clamps the largest positive code (16 -> 15), so its error can reach a whole step.
  for (const auto& c : cases) {
    CAPTURE(std::string(ggml_type_info(c.type).name));
    const auto q = quantize(c.type, x.data(), 256);
    CHECK(q.size() == ggml_row_bytes(c.type, 256));
    std::vector<float> y(256);
    dequantize(c.type, q.data(), y.data(), 256);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) worst = ember::test::worse(worst, std::fabs(x[i] - y[i]));
    CHECK(worst <= c.tolerance);
  }
}

TEST_CASE("type table and errors") {
  CHECK(ggml_type_info(12u)->block_elements == 256);
  CHECK(ggml_type_info(12u)->block_bytes == 144);
  CHECK_FALSE(ggml_type_info(4u).has_value());  // Q4_2 was removed from ggml
  CHECK_FALSE(ggml_type_info(99u).has_value());
  CHECK(ggml_row_bytes(GgmlType::Q4_1, 576) == 18u * 20u);
  CHECK_FALSE(ggml_row_bytes(GgmlType::Q4_1, 33).has_value());
  std::vector<float> out(32);
  std::vector<std::uint8_t> in(64);
  CHECK_THROWS_AS(dequantize(GgmlType::Q8_0, in.data(), out.data(), 31), ember::Error);
  try {
    dequantize(GgmlType::I32, in.data(), out.data(), 4);
    FAIL("I32 must not dequantize");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ember::ErrorCode::unsupported);
    CHECK(std::string(e.what()).find("I32") != std::string::npos);
  }
  CHECK_THROWS_AS(quantize(GgmlType::Q4_K, out.data(), 256), ember::Error);
}

TEST_CASE("groups give dequantize's values: Q4_0 and Q4_1 exactly, Q4_K and Q8_0 to a rounding") {
  for (const char* name : {"Q4_0", "Q4_1", "Q4_K", "Q8_0", "Q6_K"}) {
    CAPTURE(name);
    const auto c = load_case(std::string(name) + ".json");
    const auto type = static_cast<GgmlType>(c["type_id"].get<std::uint32_t>());
    const auto raw = from_hex(c["raw_hex"]);
    const auto expected = floats_from_hex(c["values_hex"]);
    const std::int64_t n = c["elements"];
    std::vector<std::uint8_t> values(static_cast<std::size_t>(n));
    std::vector<float> scales(static_cast<std::size_t>(n / 32)), offsets(scales.size());
    const int bits = group_bits(type);
    if (bits == 0) {
      CHECK_THROWS(read_groups(type, raw.data(), n, values.data(), scales.data(), offsets.data()));
      continue;
    }
    CHECK(bits == (type == GgmlType::Q8_0 ? 8 : 4));
    read_groups(type, raw.data(), n, values.data(), scales.data(), offsets.data());
    int off = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t g = i / 32, e = i % 32;
      int u = values[static_cast<std::size_t>(i)];
      if (bits == 4) {
        const std::uint8_t byte = values[static_cast<std::size_t>(g * 16 + e % 16)];
        u = e < 16 ? (byte & 0x0f) : (byte >> 4);
      }
      const float got =
          scales[static_cast<std::size_t>(g)] * static_cast<float>(u) + offsets[static_cast<std::size_t>(g)];
      const float want = expected[static_cast<std::size_t>(i)];
      // Q4_K evaluates d*sc*q - dmin*m with its two products rounded in another order; Q8_0's
      // d*q here is d*(q + 128) - 128*d.
      const float tolerance = type == GgmlType::Q4_K || bits == 8 ? 1e-6f * (std::fabs(want) + 1.0f) : 0.0f;
      if (!(std::fabs(got - want) <= tolerance) && ++off <= 3) {  // NaN is off too
        INFO("element " << i << ": " << got << " vs " << want);
        CHECK(false);
      }
    }
    CHECK(off == 0);
  }
}
