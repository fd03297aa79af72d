// The packed-weight cache (EngineOptions::weight_cache_dir): the weights a CPU backend prepared
// at load (INT8 matrices after smoothing and per-channel quantization, and the float vectors
// smoothing adjusted) written to one file, so the next open of the same model reads them back
// instead of dequantizing, calibrating and quantizing again.
//
// The format is generic: a list of named linears {out, in, INT8 rows [out, in], scales [out]} and
// named float vectors; the backend chooses the names. A file is trusted only after every check:
// magic, format, the full key (model identity, ember version, preparation recipe, CPU weight
// range), record bounds and a checksum of the whole payload. Anything else is an Error that the
// caller logs before preparing the weights from the model again and rewriting the file.
// Files are written through util::AtomicFile (a random O_EXCL | O_NOFOLLOW temporary, fsynced and
// renamed), so readers never see a partial file and a planted symlink is never followed.
//
// Thread-safety: a reader is immutable after construction; a writer belongs to one thread.
#pragma once

#include "model/gguf.hpp"
#include "model/mapped_file.hpp"
#include "util/atomic_file.hpp"
#include "util/hash.hpp"

#include <ember/ember.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ember::backend::cpu {

// Where the prepared weights of `file` live in `dir`, and the key they must carry. `recipe`
// names what the backend derives (precision, smoothing, calibration text): a change of it or of
// the model file, ember's version or the CPU's INT8 weight range gives another key.
struct WeightCacheFile {
  std::string path;
  std::string key;
};
WeightCacheFile weight_cache_file(const std::string& dir, const model::GgufFile& file, std::string_view recipe);

// Borrowed views into the mapped cache file.
struct CachedLinear {
  std::int64_t out = 0, in = 0;
  const std::int8_t* q = nullptr;  // [out, in]
  const float* scales = nullptr;   // [out]
};

class WeightCacheReader {
 public:
  // Maps and validates the whole file. Throws Error(io) when it cannot be read and
  // Error(invalid_model) naming the first check that fails.
  explicit WeightCacheReader(const WeightCacheFile& file);

  // The named record with the given shape; Error(invalid_model) when missing or of another one.
  CachedLinear linear(const std::string& name, std::int64_t out, std::int64_t in) const;
  std::vector<float> vector(const std::string& name, std::int64_t size) const;
  bool has(const std::string& name) const { return records_.contains(name); }

 private:
  struct Record {
    std::uint32_t kind;
    std::int64_t out, in;
    const std::uint8_t* data;
  };
  const Record& find(const std::string& name, std::uint32_t kind, std::int64_t out, std::int64_t in) const;

  std::string path_;
  model::MappedFile file_;
  std::unordered_map<std::string, Record> records_;
};

// Streams records to a temporary file; commit() makes it the cache file. Never throws: a write
// failure (a read-only directory, a full disk) is logged once as a warning and turns the rest of
// the writer into no-ops, because the cache must not make a load fail.
class WeightCacheWriter {
 public:
  WeightCacheWriter(WeightCacheFile file, LogCallback log);
  ~WeightCacheWriter();  // removes the temporary file unless committed
  WeightCacheWriter(const WeightCacheWriter&) = delete;
  WeightCacheWriter& operator=(const WeightCacheWriter&) = delete;

  void add_linear(const std::string& name, std::int64_t out, std::int64_t in, const std::int8_t* q,
                  const float* scales) noexcept;
  void add_vector(const std::string& name, const std::vector<float>& v) noexcept;
  // Writes the header and renames the file into place; returns whether the cache was written.
  bool commit() noexcept;

 private:
  void add(std::uint32_t kind, const std::string& name, std::int64_t out, std::int64_t in, const void* a,
           std::size_t a_bytes, const void* b, std::size_t b_bytes) noexcept;
  void write(const void* bytes, std::size_t n);  // pads to 64 bytes; throws on failure
  void failed(std::string_view what) noexcept;

  WeightCacheFile file_;
  LogCallback log_;
  std::optional<util::AtomicFile> out_;  // empty once a write failed
  std::uint64_t payload_bytes_ = 0, records_ = 0;
  Hasher checksum_;
};

}  // namespace ember::backend::cpu
