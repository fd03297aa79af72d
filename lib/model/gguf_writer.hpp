// Writes GGUF v3 files: tests and tools use it to make synthetic models of any Llama-family
// shape with random weights, so most tests need no download.
#pragma once

#include "model/ggml_types.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ember::model {

class GgufWriter {
 public:
  void set_u32(const std::string& key, std::uint32_t v);
  void set_i32(const std::string& key, std::int32_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string(const std::string& key, const std::string& v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  void set_i32_array(const std::string& key, const std::vector<std::int32_t>& v);

  // Adds a tensor from FP32 values, quantized to `type` (F32, F16, Q8_0, Q4_0, Q4_1 at least).
  // `shape` is in ggml order (shape[0] contiguous).
  void add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                  const std::vector<float>& values);

  std::vector<std::uint8_t> bytes() const;  // the whole file image
  void write(const std::string& path) const;
  // ...
};

// Options for a synthetic Llama-family model (random weights, a small byte-level vocabulary
// with a ChatML template) used by tests and benchmarks.
struct SyntheticModelSpec {
  ModelConfig config;                      // shape; architecture "llama" by default
  GgmlType weight_type = GgmlType::Q8_0;   // type of the matrices
  std::uint64_t seed = 1;
};

std::vector<std::uint8_t> make_synthetic_model(const SyntheticModelSpec& spec);
void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path);

}  // namespace ember::model
