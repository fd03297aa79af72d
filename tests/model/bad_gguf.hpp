// A hand-assembled GGUF image whose every field can be set to a bad value, for the bad-input
// tests (the writer in lib/model only produces valid files).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::test {

// Encoded metadata values: the u32 value type followed by the payload.
std::vector<std::uint8_t> gguf_u32(std::uint32_t v);
std::vector<std::uint8_t> gguf_bool_byte(std::uint8_t v);
std::vector<std::uint8_t> gguf_string(const std::string& s);
std::vector<std::uint8_t> gguf_string_with_length(std::uint64_t declared, const std::string& s);
// An array header (element type, declared count) followed by raw element bytes.
std::vector<std::uint8_t> gguf_array(std::uint32_t element_type, std::uint64_t count,
                                     const std::vector<std::uint8_t>& elements);
// Arrays of arrays `depth` levels deep, innermost an empty u8 array.
std::vector<std::uint8_t> gguf_nested_arrays(int depth);

struct RawKv {
  std::string key;
  std::vector<std::uint8_t> value;
  std::optional<std::uint64_t> key_length;  // a declared length that differs from key.size()
};

struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> dims;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

struct RawGguf {
  std::string magic = "GGUF";
  std::uint32_t version = 3;
  std::optional<std::uint64_t> tensor_count;    // default: tensors.size()
  std::optional<std::uint64_t> metadata_count;  // default: kvs.size()
  std::vector<RawKv> kvs;
  std::vector<RawTensor> tensors;
  std::uint64_t pad_to = 32;     // padding before the data section
  std::uint64_t data_bytes = 0;  // size of the (zero) data section

  std::vector<std::uint8_t> build() const;
};

// A valid image: general.alignment 32, a string, an i32 array; tensors "a" F32 [8] at 0 and
// "b" Q8_0 [32, 2] at 32; 128 data bytes.
RawGguf valid_raw_gguf();

}  // namespace ember::test
