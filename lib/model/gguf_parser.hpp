// The validating GGUF parser behind GgufFile::open/parse (internal to lib/model).
#pragma once

#include "model/gguf.hpp"

#include <string>

namespace ember::model {

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file);
  // Parses and validates file.base_[0, file.size_) into `file`. Throws ember::Error.
  void run();

 private:
  [[noreturn]] void bad(std::uint64_t at, const std::string& what) const;
  void need(std::uint64_t bytes, const std::string& field) const;
  std::uint64_t remaining() const { return size_ - pos_; }
  std::uint32_t read_u32(const std::string& field);
  std::uint64_t read_u64(const std::string& field);
  std::string_view read_string(const std::string& field, std::uint64_t max_bytes);
  GgufType read_value_type(const std::string& field);
  GgufValue read_value(GgufType type, int depth, const std::string& field);
  void read_array(GgufValue& value, int depth, const std::string& field);

  void read_header();
  void read_metadata();
  void read_alignment();
  void read_tensor_infos();
  void check_tensor_layout();

  GgufFile& file_;
  const std::uint8_t* base_;
  std::uint64_t size_;
  std::uint64_t pos_ = 0;
  std::uint64_t tensor_count_ = 0;
  std::uint64_t metadata_count_ = 0;
  std::uint64_t array_elements_ = 0;                // all array elements read so far
  std::vector<std::uint64_t> tensor_info_offsets_;  // for error messages
};

}  // namespace ember::model
