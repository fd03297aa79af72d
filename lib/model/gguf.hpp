// GGUF (v2, v3) reader: the file is memory-mapped and validated completely in open(); tensors
// are views into the mapping, nothing is copied. Every malformed field becomes an
// ember::Error(invalid_model) naming the field and its byte offset.
//
// Thread-safety: a GgufFile is immutable after open(); any number of threads may read it.
#pragma once

#include "model/ggml_types.hpp"

#include <ember/ember.hpp>  // ember::Error, thrown by everything here

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::model {

// Metadata value types, numbered as in the GGUF specification.
enum class GgufType : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

const char* to_string(GgufType type);

// One metadata value. Scalars are widened on read; strings are views into the mapping; arrays
// keep their element type and their elements (nested arrays allowed).
struct GgufValue {
  GgufType type = GgufType::u8;
  std::uint64_t offset = 0;  // byte offset of the value in the file (for error messages)
  union {
    std::uint64_t u;
    std::int64_t i;
    double f;
    bool b;
  } scalar{};
  std::string_view str;                  // type == string
  GgufType element_type = GgufType::u8;  // type == array
  std::vector<GgufValue> elements;       // type == array

  bool is_integer() const;
  bool is_float() const;
};

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<std::int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  std::uint64_t offset = 0;         // relative to the data section
  std::uint64_t nbytes = 0;
  const std::uint8_t* data = nullptr;  // into the mapping

  std::int64_t numel() const;
  std::int64_t rows() const;  // product of shape[1..]
};

class GgufFile {
 public:
  // Maps and validates `path`. Throws ember::Error (io for open/map failures, invalid_model for
  // malformed content, unsupported for an unknown version or tensor type).
  static std::shared_ptr<const GgufFile> open(const std::string& path);
  // Parses an in-memory image (fuzzing, tests). The bytes are copied.
  static std::shared_ptr<const GgufFile> parse(const void* bytes, std::size_t size, std::string name = "<memory>");

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }
  std::uint64_t file_size() const { return size_; }
  // A 64-bit identity of the file, computed once at open: a stable hash (util/hash.hpp) of the
  // header (metadata and tensor table), the file size and evenly spaced samples of the tensor
  // data. Files that ember writes beside or for a model (KV snapshots) carry it.
  std::uint64_t identity() const { return identity_; }
  const std::uint8_t* bytes() const { return base_; }  // the whole image, file_size() bytes

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: throw Error(invalid_model) naming the key when it is missing or has the wrong
  // type; integers are range-checked into the requested type.
  std::string_view get_string(std::string_view key) const;
  std::uint32_t get_u32(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<std::int32_t> get_i32_array(std::string_view key) const;
  // Optional forms: std::nullopt when missing, an Error when present with the wrong type.
  std::optional<std::string_view> find_string(std::string_view key) const;
  std::optional<std::uint32_t> find_u32(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;
  const GgufTensor& tensor(std::string_view name) const;  // throws when missing

  // The tensor's data is no longer needed in memory (it was prepared into a copy of its own):
  // its pages leave the process's resident memory, and are read back from the file if touched
  // again. A no-op for an in-memory image (parse()).
  void release(const GgufTensor& tensor) const;
  // The same for rows [first, first + count) of the tensor (rows() of them, each
  // nbytes / rows() bytes): one expert of a stacked expert tensor, released as soon as it is
  // prepared, so that a layer's experts are not all resident at once.
  void release_rows(const GgufTensor& tensor, std::int64_t first, std::int64_t count) const;

 private:
  GgufFile() = default;
  void finish_open();  // parses and validates, then computes the identity
  friend class GgufParser;

  std::string path_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t identity_ = 0;
  const std::uint8_t* base_ = nullptr;
  std::shared_ptr<void> mapping_;  // releases the mmap (or the owned copy)
  bool mapped_ = false;            // mapping_ is a file mapping
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::unordered_map<std::string_view, std::size_t> metadata_index_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string_view, std::size_t> tensor_index_;
};

}  // namespace ember::model
