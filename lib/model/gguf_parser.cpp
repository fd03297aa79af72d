// GGUF layout (all little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata
// count, metadata (string key, u32 type, value), tensor infos (string name, u32 n_dims,
// u64 dims[n_dims], u32 type, u64 offset), padding to general.alignment, tensor data.
// Every read is bounds-checked against the mapping and every size against overflow.
#include "model/gguf_parser.hpp"

#include "model/gguf_limits.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

namespace ember::model {
namespace lim = gguf_limits;

namespace {

constexpr std::uint64_t kMinMetadataEntryBytes = 8 + 1 + 4 + 1;       // key len, key, type, u8
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;  // one-dimension info

// Bytes a value of `type` occupies at least (a string or an array may be longer).
std::uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
    case GgufType::string: return 8;
    case GgufType::array: return 12;
  }
  return 1;
}

template <class T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

GgufParser::GgufParser(GgufFile& file) : file_(file), base_(file.base_), size_(file.size_) {}

void GgufParser::bad(std::uint64_t at, const std::string& what) const {
  fail(ErrorCode::invalid_model, "{}: {} (at byte {})", file_.path_, what, at);
}

void GgufParser::need(std::uint64_t bytes, const std::string& field) const {
  if (bytes > remaining()) {
    bad(pos_, fmt::format("{} needs {} bytes but the file ends after {}", field, bytes, remaining()));
  }
}

std::uint32_t GgufParser::read_u32(const std::string& field) {
  need(4, field);
  const auto v = load<std::uint32_t>(base_ + pos_);
  pos_ += 4;
  return v;
}

std::uint64_t GgufParser::read_u64(const std::string& field) {
  need(8, field);
  const auto v = load<std::uint64_t>(base_ + pos_);
  pos_ += 8;
  return v;
}

std::string_view GgufParser::read_string(const std::string& field, std::uint64_t max_bytes) {
  const std::uint64_t at = pos_;
  const std::uint64_t length = read_u64(field + " length");
  if (length > max_bytes) {
    bad(at, fmt::format("{} length {} exceeds the limit of {} bytes", field, length, max_bytes));
  }
  need(length, field);
  std::string_view s(reinterpret_cast<const char*>(base_ + pos_), static_cast<std::size_t>(length));
  pos_ += length;
  return s;
}

GgufType GgufParser::read_value_type(const std::string& field) {
  const std::uint64_t at = pos_;
  const std::uint32_t type = read_u32(field);
  if (type > static_cast<std::uint32_t>(GgufType::f64)) {
    bad(at, fmt::format("{} is an unknown metadata value type {}", field, type));
  }
  return static_cast<GgufType>(type);
}

GgufValue GgufParser::read_value(GgufType type, int depth, const std::string& field) {
  GgufValue v;
  v.type = type;
  v.offset = pos_;
  const std::uint64_t width = min_value_bytes(type);
  if (type != GgufType::string && type != GgufType::array) need(width, field);
  const std::uint8_t* p = base_ + pos_;
  switch (type) {
    case GgufType::u8: v.scalar.u = *p; break;
    case GgufType::i8: v.scalar.i = static_cast<std::int8_t>(*p); break;
    case GgufType::u16: v.scalar.u = load<std::uint16_t>(p); break;
    case GgufType::i16: v.scalar.i = load<std::int16_t>(p); break;
    case GgufType::u32: v.scalar.u = load<std::uint32_t>(p); break;
    case GgufType::i32: v.scalar.i = load<std::int32_t>(p); break;
    case GgufType::u64: v.scalar.u = load<std::uint64_t>(p); break;
    case GgufType::i64: v.scalar.i = load<std::int64_t>(p); break;
    case GgufType::f32: v.scalar.f = load<float>(p); break;
    case GgufType::f64: v.scalar.f = load<double>(p); break;
    case GgufType::boolean:
      if (*p > 1) bad(pos_, fmt::format("{} is a bool with value {} (not 0 or 1)", field, *p));
      v.scalar.b = *p != 0;
      break;
    case GgufType::string: v.str = read_string(field, lim::kMaxStringBytes); return v;
    case GgufType::array: read_array(v, depth, field); return v;
  }
  pos_ += width;
  return v;
}

void GgufParser::read_array(GgufValue& value, int depth, const std::string& field) {
  const std::uint64_t at = pos_;
  if (depth >= lim::kMaxArrayDepth) {
    bad(at, fmt::format("{} nests arrays deeper than {} levels", field, lim::kMaxArrayDepth));
  }
  value.element_type = read_value_type(field + " element type");
  const std::uint64_t count = read_u64(field + " element count");
  if (count > lim::kMaxArrayElements) {
    bad(at, fmt::format("{} has {} elements, more than the limit of {}", field, count, lim::kMaxArrayElements));
  }
  array_elements_ += count;  // no overflow: count <= 2^22 and so is every earlier step
  if (array_elements_ > lim::kMaxTotalArrayElements) {
    bad(at, fmt::format("{}: the file's arrays hold more than {} elements in all", field, lim::kMaxTotalArrayElements));
  }
  // Reject a count that cannot fit the rest of the file before allocating anything for it.
  if (count * min_value_bytes(value.element_type) > remaining()) {
    bad(at, fmt::format("{} declares {} elements of type {} but only {} bytes remain", field, count,
                        to_string(value.element_type), remaining()));
  }
  value.elements.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t k = 0; k < count; ++k) {
    value.elements.push_back(read_value(value.element_type, depth + 1, fmt::format("{}[{}]", field, k)));
  }
}

void GgufParser::read_header() {
  if (size_ < 4) bad(0, fmt::format("file of {} bytes is too small for a GGUF header", size_));
  if (std::memcmp(base_, "GGUF", 4) != 0) {
    bad(0,
        fmt::format("bad magic {:02x} {:02x} {:02x} {:02x}, expected 'GGUF'", base_[0], base_[1], base_[2], base_[3]));
  }
  pos_ = 4;
  file_.version_ = read_u32("version");
  if (file_.version_ != 2 && file_.version_ != 3) {
    fail(ErrorCode::unsupported, "{}: GGUF version {} is not supported (ember reads 2 and 3)", file_.path_,
         file_.version_);
  }
  const std::uint64_t counts_at = pos_;
  tensor_count_ = read_u64("tensor count");
  metadata_count_ = read_u64("metadata count");
  if (tensor_count_ > lim::kMaxTensors) {
    bad(counts_at, fmt::format("tensor count {} exceeds the limit of {}", tensor_count_, lim::kMaxTensors));
  }
  if (metadata_count_ > lim::kMaxMetadataKeys) {
    bad(counts_at + 8,
        fmt::format("metadata count {} exceeds the limit of {}", metadata_count_, lim::kMaxMetadataKeys));
  }
  // Both counts are bounded above, so these products cannot overflow.
  const std::uint64_t least = tensor_count_ * kMinTensorInfoBytes + metadata_count_ * kMinMetadataEntryBytes;
  if (least > remaining()) {
    bad(counts_at, fmt::format("{} tensors and {} metadata entries cannot fit in the {} bytes "
                               "that follow the header",
                               tensor_count_, metadata_count_, remaining()));
  }
}

void GgufParser::read_metadata() {
  file_.metadata_.reserve(static_cast<std::size_t>(metadata_count_));
  for (std::uint64_t k = 0; k < metadata_count_; ++k) {
    const std::uint64_t at = pos_;
    const std::string_view key = read_string(fmt::format("metadata entry {} key", k), lim::kMaxKeyBytes);
    if (key.empty()) bad(at, fmt::format("metadata entry {} has an empty key", k));
    if (file_.metadata_index_.count(key) != 0) {
      bad(at, fmt::format("duplicate metadata key '{}'", key));
    }
    const std::string field = fmt::format("metadata key '{}'", key);
    const GgufType type = read_value_type(field + " type");
    GgufValue value = read_value(type, 0, field);
    file_.metadata_index_.emplace(key, file_.metadata_.size());
    file_.metadata_.emplace_back(std::string(key), std::move(value));
  }
}

void GgufParser::read_alignment() {
  const GgufValue* v = file_.find("general.alignment");
  if (v == nullptr) return;
  if (v->type != GgufType::u32) {
    bad(v->offset, fmt::format("general.alignment has type {}, expected u32", to_string(v->type)));
  }
  if (!is_power_of_two(v->scalar.u)) {
    bad(v->offset, fmt::format("general.alignment {} is not a power of two", v->scalar.u));
  }
  file_.alignment_ = v->scalar.u;
}

void GgufParser::read_tensor_infos() {
  file_.tensors_.reserve(static_cast<std::size_t>(tensor_count_));
  tensor_info_offsets_.reserve(static_cast<std::size_t>(tensor_count_));
  for (std::uint64_t k = 0; k < tensor_count_; ++k) {
    const std::uint64_t at = pos_;
    const std::string_view name = read_string(fmt::format("tensor {} name", k), lim::kMaxTensorNameBytes);
    if (name.empty()) bad(at, fmt::format("tensor {} has an empty name", k));
    if (file_.tensor_index_.count(name) != 0) bad(at, fmt::format("duplicate tensor '{}'", name));
    const std::string field = fmt::format("tensor '{}'", name);

    GgufTensor t;
    t.name = std::string(name);
    const std::uint64_t dims_at = pos_;
    const std::uint32_t n_dims = read_u32(field + " dimension count");
    if (n_dims < 1 || n_dims > static_cast<std::uint32_t>(lim::kMaxDims)) {
      bad(dims_at, fmt::format("{} has {} dimensions (1 to {} allowed)", field, n_dims, lim::kMaxDims));
    }
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const std::uint64_t dim_at = pos_;
      const std::uint64_t dim = read_u64(fmt::format("{} dimension {}", field, d));
      if (dim == 0) bad(dim_at, fmt::format("{} dimension {} is 0", field, d));
      const auto product = checked_mul(elements, dim);
      if (!product || *product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        bad(dim_at, fmt::format("{} element count overflows at dimension {} ({})", field, d, dim));
      }
      elements = *product;
      t.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const std::uint64_t type_at = pos_;
    const std::uint32_t type = read_u32(field + " type");
    const auto info = ggml_type_info(type);
    if (!info) {
      fail(ErrorCode::unsupported, "{}: {} has unknown tensor type {} (at byte {})", file_.path_, field, type, type_at);
    }
    t.type = static_cast<GgmlType>(type);
    const auto row_bytes = ggml_row_bytes(t.type, t.shape[0]);
    if (!row_bytes) {
      bad(dims_at, fmt::format("{} row of {} elements is not a whole number of {} blocks of {}", field, t.shape[0],
                               info->name, info->block_elements));
    }
    const auto nbytes = checked_mul(*row_bytes, elements / static_cast<std::uint64_t>(t.shape[0]));
    if (!nbytes) bad(dims_at, fmt::format("{} byte size overflows", field));
    t.nbytes = *nbytes;
    const std::uint64_t offset_at = pos_;
    t.offset = read_u64(field + " offset");
    if (t.offset % file_.alignment_ != 0) {
      bad(offset_at,
          fmt::format("{} offset {} is not a multiple of the alignment {}", field, t.offset, file_.alignment_));
    }
    file_.tensor_index_.emplace(name, file_.tensors_.size());
    file_.tensors_.push_back(std::move(t));
    tensor_info_offsets_.push_back(at);
  }
}

void GgufParser::check_tensor_layout() {
  const auto data_offset = checked_align_up(pos_, file_.alignment_);
  if (!data_offset) bad(pos_, "data section offset overflows");
  file_.data_offset_ = *data_offset;
  auto& tensors = file_.tensors_;
  if (tensors.empty()) return;
  if (file_.data_offset_ > size_) {
    bad(pos_,
        fmt::format("data section starts at byte {}, past the end of the file ({} bytes)", file_.data_offset_, size_));
  }
  const std::uint64_t data_bytes = size_ - file_.data_offset_;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto end = checked_add(tensors[k].offset, tensors[k].nbytes);
    if (!end || *end > data_bytes) {
      bad(tensor_info_offsets_[k], fmt::format("tensor '{}' data [{}, +{}) lies outside the data section of {} bytes",
                                               tensors[k].name, tensors[k].offset, tensors[k].nbytes, data_bytes));
    }
    tensors[k].data = base_ + file_.data_offset_ + tensors[k].offset;
  }
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return tensors[a].offset < tensors[b].offset; });
  // Tensors tile the data section: each starts where the previous one ends, rounded up to the
  // alignment. A gap means a tensor's declared size is smaller than what the writer stored (its
  // type or shape was changed after writing), and reading it would give garbage weights.
  const std::uint64_t align = file_.alignment_;
  const GgufTensor& first = tensors[order[0]];
  if (first.offset != 0) {
    bad(tensor_info_offsets_[order[0]],
        fmt::format("tensor '{}' data starts at offset {}, leaving a gap of {} bytes at the start of "
                    "the data section",
                    first.name, first.offset, first.offset));
  }
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensor& prev = tensors[order[k - 1]];
    const GgufTensor& cur = tensors[order[k]];
    const std::uint64_t prev_end = prev.offset + prev.nbytes;  // checked against data_bytes above
    if (cur.offset < prev_end) {
      bad(tensor_info_offsets_[order[k]], fmt::format("tensor '{}' data at offset {} overlaps tensor '{}' [{}, {})",
                                                      cur.name, cur.offset, prev.name, prev.offset, prev_end));
    }
    if (cur.offset - prev_end >= align) {
      bad(tensor_info_offsets_[order[k]],
          fmt::format("tensor '{}' data at offset {} leaves a gap of {} bytes after tensor '{}' [{}, {}), "
                      "more than the alignment padding ({})",
                      cur.name, cur.offset, cur.offset - prev_end, prev.name, prev.offset, prev_end, align));
    }
  }
  const GgufTensor& last = tensors[order.back()];
  const std::uint64_t last_end = last.offset + last.nbytes;
  if (data_bytes - last_end >= align) {
    bad(tensor_info_offsets_[order.back()],
        fmt::format("{} bytes follow the last tensor '{}' [{}, {}), more than the alignment padding ({})",
                    data_bytes - last_end, last.name, last.offset, last_end, align));
  }
}

void GgufParser::run() {
  read_header();
  read_metadata();
  read_alignment();
  read_tensor_infos();
  check_tensor_layout();
}

}  // namespace ember::model
