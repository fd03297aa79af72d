#include "model/gguf.hpp"

#include "model/gguf_parser.hpp"
#include "model/mapped_file.hpp"
#include "util/check.hpp"
#include "util/hash.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::model {

const char* to_string(GgufType type) {
  switch (type) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::u16:
    case GgufType::i16:
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::u64:
    case GgufType::i64: return true;
    default: return false;
  }
}

bool GgufValue::is_float() const { return type == GgufType::f32 || type == GgufType::f64; }

namespace {

bool is_signed(GgufType t) {
  return t == GgufType::i8 || t == GgufType::i16 || t == GgufType::i32 || t == GgufType::i64;
}

// The integer value of `v` if it lies in [lo, hi].
template <class T>
std::optional<T> integer_in_range(const GgufValue& v) {
  if (!v.is_integer()) return std::nullopt;
  if (is_signed(v.type)) {
    const std::int64_t x = v.scalar.i;
    if (x < static_cast<std::int64_t>(std::numeric_limits<T>::min())) return std::nullopt;
    if (x >= 0 && static_cast<std::uint64_t>(x) > std::numeric_limits<T>::max()) return std::nullopt;
    return static_cast<T>(x);
  }
  if (v.scalar.u > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
  return static_cast<T>(v.scalar.u);
}

}  // namespace

std::shared_ptr<const GgufFile> GgufFile::open(const std::string& path) {
  MappedFile m = map_file(path);
  std::shared_ptr<GgufFile> file(new GgufFile());
  file->path_ = path;
  file->base_ = m.data;
  file->size_ = m.size;
  file->mapping_ = std::move(m.owner);
  file->mapped_ = m.mapped;
  file->finish_open();
  return file;
}

void GgufFile::release(const GgufTensor& tensor) const {
  if (mapped_) release_pages(tensor.data, tensor.nbytes);
}

void GgufFile::release_rows(const GgufTensor& tensor, std::int64_t first, std::int64_t count) const {
  EMBER_ASSERT(first >= 0 && count >= 0 && first + count <= tensor.rows());
  const std::uint64_t row_bytes = tensor.nbytes / static_cast<std::uint64_t>(tensor.rows());
  if (mapped_)
    release_pages(tensor.data + static_cast<std::uint64_t>(first) * row_bytes,
                  static_cast<std::uint64_t>(count) * row_bytes);
}

std::shared_ptr<const GgufFile> GgufFile::parse(const void* bytes, std::size_t size, std::string name) {
  MappedFile m = copy_bytes(bytes, size);
  std::shared_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(name);
  file->base_ = m.data;
  file->size_ = m.size;
  file->mapping_ = std::move(m.owner);
  file->finish_open();
  return file;
}

void GgufFile::finish_open() {
  GgufParser(*this).run();
  // The header names every tensor, type and shape; the data samples tell apart two files that
  // share a header (a fine-tune saved with the same metadata). 64 samples of 4 KiB: cheap.
  constexpr std::uint64_t kSamples = 64, kSampleBytes = 4096;
  Hasher h(0x67677566);  // "gguf"
  h.update_u64(size_);
  // Without tensors the aligned data offset may lie past the end.
  const std::uint64_t header = std::min(data_offset_, size_);
  h.update(base_, static_cast<std::size_t>(header));
  const std::uint64_t data_size = size_ - header;
  for (std::uint64_t i = 0; i < kSamples && data_size > 0; ++i) {
    const std::uint64_t at = header + data_size / kSamples * i;
    h.update(base_ + at, static_cast<std::size_t>(std::min(kSampleBytes, size_ - at)));
  }
  identity_ = h.value();
}

GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const GgufValue& v, const char* expected) {
  fail(ErrorCode::invalid_model, "{}: metadata key '{}' has type {}, expected {} (at byte {})", path, key,
       to_string(v.type), expected, v.offset);
}

const GgufValue& require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) fail(ErrorCode::invalid_model, "{}: metadata key '{}' is missing", f.path(), key);
  return *v;
}

const GgufValue& require_array_of(const GgufFile& f, std::string_view key, const char* expected) {
  const GgufValue& v = require(f, key);
  if (v.type != GgufType::array) wrong_type(f.path(), key, v, expected);
  return v;
}

}  // namespace

std::optional<std::string_view> GgufFile::find_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::string) wrong_type(path_, key, *v, "string");
  return v->str;
}

std::optional<std::uint32_t> GgufFile::find_u32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_integer()) wrong_type(path_, key, *v, "an integer");
  auto x = integer_in_range<std::uint32_t>(*v);
  if (!x) {
    fail(ErrorCode::invalid_model, "{}: metadata key '{}' value is out of the u32 range (at byte {})", path_, key,
         v->offset);
  }
  return x;
}

std::optional<float> GgufFile::find_f32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_float()) wrong_type(path_, key, *v, "f32");
  return static_cast<float>(v->scalar.f);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::boolean) wrong_type(path_, key, *v, "bool");
  return v->scalar.b;
}

std::string_view GgufFile::get_string(std::string_view key) const {
  require(*this, key);
  return *find_string(key);
}

std::uint32_t GgufFile::get_u32(std::string_view key) const {
  require(*this, key);
  return *find_u32(key);
}

float GgufFile::get_f32(std::string_view key) const {
  require(*this, key);
  return *find_f32(key);
}

bool GgufFile::get_bool(std::string_view key) const {
  require(*this, key);
  return *find_bool(key);
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = require_array_of(*this, key, "array of string");
  if (v.element_type != GgufType::string) wrong_type(path_, key, v, "array of string");
  std::vector<std::string_view> out;
  out.reserve(v.elements.size());
  for (const GgufValue& e : v.elements) out.push_back(e.str);
  return out;
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const GgufValue& v = require_array_of(*this, key, "array of f32");
  if (v.element_type != GgufType::f32 && v.element_type != GgufType::f64) {
    wrong_type(path_, key, v, "array of f32");
  }
  std::vector<float> out;
  out.reserve(v.elements.size());
  for (const GgufValue& e : v.elements) out.push_back(static_cast<float>(e.scalar.f));
  return out;
}

std::vector<std::int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const GgufValue& v = require_array_of(*this, key, "array of i32");
  std::vector<std::int32_t> out;
  out.reserve(v.elements.size());
  for (std::size_t k = 0; k < v.elements.size(); ++k) {
    auto x = integer_in_range<std::int32_t>(v.elements[k]);
    if (!x) {
      fail(ErrorCode::invalid_model, "{}: metadata key '{}' element {} is not an i32 (at byte {})", path_, key, k,
           v.elements[k].offset);
    }
    out.push_back(*x);
  }
  return out;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(std::string_view name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) fail(ErrorCode::invalid_model, "{}: tensor '{}' is missing", path_, name);
  return *t;
}

std::int64_t GgufTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;  // validated against overflow by the parser
  return n;
}

std::int64_t GgufTensor::rows() const { return shape.empty() ? 0 : numel() / shape[0]; }

}  // namespace ember::model
