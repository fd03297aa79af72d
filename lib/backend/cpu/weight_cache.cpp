// File layout (little-endian, native x86-64 layout of the structs below):
//   FileHeader (64 bytes) | key (key_bytes, padded to 64) | payload
//   payload = records, each: RecordHeader (32 bytes) + name, padded to 64 | section A padded to
//   64 | section B padded to 64. A linear's sections are its INT8 rows and its float scales; a
//   vector's section A is its floats and B is empty.
// The header is written last (it holds the payload's size and checksum), then the file is
// renamed into place.
#include "backend/cpu/weight_cache.hpp"

#include "kernels/cpu/linear.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstring>
#include <filesystem>

namespace ember::backend::cpu {
namespace {

namespace fs = std::filesystem;

constexpr std::array<char, 8> kMagic = {'E', 'M', 'B', 'R', 'W', 'C', 'A', 'C'};
constexpr std::uint32_t kFormat = 1;
constexpr std::uint32_t kLinear = 1, kVector = 2;
constexpr std::uint64_t kAlign = 64;
// Bounds that no real model reaches; they keep the size arithmetic far from overflow.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
constexpr std::uint32_t kMaxName = 256, kMaxKey = 4096;
constexpr std::uint8_t kZeros[kAlign] = {};  // padding

struct FileHeader {
  std::array<char, 8> magic;
  std::uint32_t format;
  std::uint32_t key_bytes;
  std::uint64_t records;
  std::uint64_t payload_offset;
  std::uint64_t payload_bytes;
  std::uint64_t payload_checksum;
  std::uint64_t header_checksum;  // of the fields above and the key
  std::uint64_t reserved;
};
static_assert(sizeof(FileHeader) == 64);

struct RecordHeader {
  std::uint32_t kind;
  std::uint32_t name_bytes;
  std::int64_t out;     // rows of a linear, elements of a vector
  std::int64_t in;      // 0 for a vector
  std::uint64_t bytes;  // the whole record, header to the end of its last padded section
};
static_assert(sizeof(RecordHeader) == 32);

std::uint64_t padded(std::uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The section sizes of a record, before padding.
std::pair<std::uint64_t, std::uint64_t> section_bytes(std::uint32_t kind, std::int64_t out, std::int64_t in) {
  const auto o = static_cast<std::uint64_t>(out), i = static_cast<std::uint64_t>(in);
  if (kind == kLinear) return {o * i, o * sizeof(float)};
  return {o * sizeof(float), 0};
}

std::uint64_t header_checksum(const FileHeader& h, std::string_view key) {
  Hasher hash;
  hash.update(&h, offsetof(FileHeader, header_checksum));
  hash.update(key.data(), key.size());
  return hash.value();
}

// A file-name-safe form of the model's file name.
std::string safe_stem(const std::string& path) {
  std::string stem = fs::path(path).stem().string();
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return stem.empty() ? "model" : stem.substr(0, 96);
}

}  // namespace

WeightCacheFile weight_cache_file(const std::string& dir, const model::GgufFile& file, std::string_view recipe) {
  WeightCacheFile f;
  f.key = fmt::format(
      "ember {}; weight cache format {}; model {} bytes, identity {:016x}; {}; "
      "INT8 weight range {}",
      version(), kFormat, file.file_size(), file.identity(), recipe, kernels::cpu::int8_weight_range());
  Hasher name;
  name.update(f.key.data(), f.key.size());
  f.path = (fs::path(dir) / fmt::format("{}.{:016x}.ember-weights", safe_stem(file.path()), name.value())).string();
  return f;
}

// ---- reader ----

WeightCacheReader::WeightCacheReader(const WeightCacheFile& file) : path_(file.path) {
  file_ = model::map_file(file.path);
  const std::uint8_t* base = file_.data;
  const std::uint64_t size = file_.size;
  auto bad = [&](std::string_view what) { fail(ErrorCode::invalid_model, "weight cache '{}': {}", path_, what); };
  FileHeader h;
  if (size < sizeof h) bad(fmt::format("{} bytes is too small for a header", size));
  std::memcpy(&h, base, sizeof h);
  if (h.magic != kMagic) bad("not an ember weight cache (bad magic)");
  if (h.format != kFormat) bad(fmt::format("format {}, this ember reads {}", h.format, kFormat));
  if (h.key_bytes > kMaxKey || sizeof h + h.key_bytes > size) bad("key length out of range");
  const std::string_view key(reinterpret_cast<const char*>(base + sizeof h), h.key_bytes);
  if (header_checksum(h, key) != h.header_checksum) bad("header checksum mismatch");
  if (key != file.key) bad(fmt::format("written for another model or build ({})", key));
  if (h.payload_offset != padded(sizeof h + h.key_bytes) || h.payload_offset > size ||
      h.payload_bytes != size - h.payload_offset)
    bad(fmt::format("payload of {} bytes at {} does not match the file size {} (truncated?)", h.payload_bytes,
                    h.payload_offset, size));
  Hasher checksum;
  checksum.update(base + h.payload_offset, static_cast<std::size_t>(h.payload_bytes));
  if (checksum.value() != h.payload_checksum) bad("payload checksum mismatch (damaged file)");

  std::uint64_t pos = h.payload_offset;
  for (std::uint64_t r = 0; r < h.records; ++r) {
    RecordHeader rh;
    if (size - pos < sizeof rh) bad(fmt::format("record {} runs past the end", r));
    std::memcpy(&rh, base + pos, sizeof rh);
    if ((rh.kind != kLinear && rh.kind != kVector) || rh.name_bytes == 0 || rh.name_bytes > kMaxName || rh.out < 0 ||
        rh.out > kMaxDim || rh.in < 0 || rh.in > kMaxDim || (rh.kind == kVector) != (rh.in == 0))
      bad(fmt::format("record {} has a bad header", r));
    const auto [a, b] = section_bytes(rh.kind, rh.out, rh.in);
    const std::uint64_t head = padded(sizeof rh + rh.name_bytes);
    if (rh.bytes != head + padded(a) + padded(b) || rh.bytes > size - pos)
      bad(fmt::format("record {} has a bad size", r));
    std::string name(reinterpret_cast<const char*>(base + pos + sizeof rh), rh.name_bytes);
    if (!records_.emplace(std::move(name), Record{rh.kind, rh.out, rh.in, base + pos + head}).second)
      bad(fmt::format("record {} repeats a name", r));
    pos += rh.bytes;
  }
  if (pos != size) bad("bytes after the last record");
}

const WeightCacheReader::Record& WeightCacheReader::find(const std::string& name, std::uint32_t kind, std::int64_t out,
                                                         std::int64_t in) const {
  const auto it = records_.find(name);
  if (it == records_.end() || it->second.kind != kind)
    fail(ErrorCode::invalid_model, "weight cache '{}' has no {} '{}'", path_, kind == kLinear ? "linear" : "vector",
         name);
  if (it->second.out != out || it->second.in != in)
    fail(ErrorCode::invalid_model, "weight cache '{}': '{}' is {}x{}, the model needs {}x{}", path_, name,
         it->second.out, it->second.in, out, in);
  return it->second;
}

CachedLinear WeightCacheReader::linear(const std::string& name, std::int64_t out, std::int64_t in) const {
  const Record& r = find(name, kLinear, out, in);
  const std::uint64_t scales_at = padded(section_bytes(kLinear, out, in).first);
  return {out, in, reinterpret_cast<const std::int8_t*>(r.data), reinterpret_cast<const float*>(r.data + scales_at)};
}

std::vector<float> WeightCacheReader::vector(const std::string& name, std::int64_t size) const {
  const Record& r = find(name, kVector, size, 0);
  std::vector<float> v(static_cast<std::size_t>(size));
  if (size > 0) std::memcpy(v.data(), r.data, v.size() * sizeof(float));
  return v;
}

// ---- writer ----

WeightCacheWriter::WeightCacheWriter(WeightCacheFile file, LogCallback log)
    : file_(std::move(file)), log_(std::move(log)) {
  std::error_code ec;
  fs::create_directories(fs::path(file_.path).parent_path(), ec);
  try {
    // The temporary's random name keeps two processes that build the same cache at once apart.
    out_.emplace(file_.path);
    const FileHeader placeholder{};
    write(&placeholder, sizeof placeholder);  // commit() writes the real one
    write(file_.key.data(), file_.key.size());
  } catch (const Error& e) {
    failed(e.what());
  }
}

WeightCacheWriter::~WeightCacheWriter() = default;  // AtomicFile removes an uncommitted file

void WeightCacheWriter::failed(std::string_view what) noexcept {
  if (log_) log_(LogLevel::warning, fmt::format("weight cache not written: {}", what));
  out_.reset();  // removes the temporary file
}

void WeightCacheWriter::write(const void* bytes, std::size_t n) {
  const std::size_t pad = static_cast<std::size_t>(padded(n) - n);
  out_->write(bytes, n);
  out_->write(kZeros, pad);
}

void WeightCacheWriter::add(std::uint32_t kind, const std::string& name, std::int64_t out, std::int64_t in,
                            const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept {
  if (!out_) return;
  try {
    RecordHeader rh{kind, static_cast<std::uint32_t>(name.size()), out, in,
                    padded(sizeof rh + name.size()) + padded(a_bytes) + padded(b_bytes)};
    EMBER_ASSERT(!name.empty() && name.size() <= kMaxName);
    std::vector<std::uint8_t> head(sizeof rh + name.size());
    std::memcpy(head.data(), &rh, sizeof rh);
    std::memcpy(head.data() + sizeof rh, name.data(), name.size());
    const std::pair<const void*, std::size_t> sections[] = {{head.data(), head.size()}, {a, a_bytes}, {b, b_bytes}};
    for (const auto& [p, n] : sections) {
      write(p, n);
      checksum_.update(p, n);
      checksum_.update(kZeros, static_cast<std::size_t>(padded(n) - n));
    }
    payload_bytes_ += rh.bytes;
    ++records_;
  } catch (const std::exception& e) {
    failed(e.what());
  }
}

void WeightCacheWriter::add_linear(const std::string& name, std::int64_t out, std::int64_t in, const std::int8_t* q,
                                   const float* scales) noexcept {
  const auto [a, b] = section_bytes(kLinear, out, in);
  add(kLinear, name, out, in, q, static_cast<std::size_t>(a), scales, static_cast<std::size_t>(b));
}

void WeightCacheWriter::add_vector(const std::string& name, const std::vector<float>& v) noexcept {
  add(kVector, name, static_cast<std::int64_t>(v.size()), 0, v.data(), v.size() * sizeof(float), nullptr, 0);
}

bool WeightCacheWriter::commit() noexcept {
  if (!out_) return false;
  try {
    FileHeader h{};
    h.magic = kMagic;
    h.format = kFormat;
    h.key_bytes = static_cast<std::uint32_t>(file_.key.size());
    h.records = records_;
    h.payload_offset = padded(sizeof h + file_.key.size());
    h.payload_bytes = payload_bytes_;
    h.payload_checksum = checksum_.value();
    h.header_checksum = header_checksum(h, file_.key);
    out_->write_at(0, &h, sizeof h);
    out_->commit();  // atomic: a reader sees the old file or the whole new one
    out_.reset();
    if (log_)
      log_(LogLevel::info,
           fmt::format("weight cache written: {} ({:.1f} MB)", file_.path, (h.payload_offset + payload_bytes_) / 1e6));
    return true;
  } catch (const std::exception& e) {
    failed(e.what());
    return false;
  }
}

}  // namespace ember::backend::cpu
