#include "model_writer/gguf_writer.hpp"

#include "model_writer/ggml_quantize.hpp"
#include "util/atomic_file.hpp"
#include "util/check.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>
#include <type_traits>

namespace ember::model {
namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<std::uint8_t>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const std::size_t at = out_.size();
    out_.resize(at + sizeof v);
    std::memcpy(out_.data() + at, &v, sizeof v);
  }
  void put_type(GgufType t) { put(static_cast<std::uint32_t>(t)); }
  void put_string(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void pad_to(std::uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(0);
  }

 private:
  std::vector<std::uint8_t>& out_;
};

template <class T>
std::vector<std::uint8_t> scalar(GgufType type, T v) {
  std::vector<std::uint8_t> out;
  ByteSink s(out);
  s.put_type(type);
  s.put(v);
  return out;
}

template <class T>
std::vector<std::uint8_t> array(GgufType element, const std::vector<T>& v) {
  std::vector<std::uint8_t> out;
  ByteSink s(out);
  s.put_type(GgufType::array);
  s.put_type(element);
  s.put(static_cast<std::uint64_t>(v.size()));
  for (const T& x : v) {
    if constexpr (std::is_same_v<T, std::string>) {
      s.put_string(x);
    } else {
      s.put(x);
    }
  }
  return out;
}

void check_shape(const std::string& name, GgmlType type, const std::vector<std::int64_t>& shape, std::uint64_t bytes) {
  if (shape.empty() || shape.size() > 4) {
    fail(ErrorCode::invalid_argument, "tensor '{}' has {} dimensions (1 to 4 allowed)", name, shape.size());
  }
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d <= 0) fail(ErrorCode::invalid_argument, "tensor '{}' has a dimension of {}", name, d);
    n *= d;
  }
  const auto row = ggml_row_bytes(type, shape[0]);
  if (!row) {
    fail(ErrorCode::invalid_argument, "tensor '{}': a row of {} is not a whole number of {} blocks", name, shape[0],
         ggml_type_info(type).name);
  }
  if (*row * static_cast<std::uint64_t>(n / shape[0]) != bytes) {
    fail(ErrorCode::invalid_argument, "tensor '{}' has {} bytes of data, its shape needs {}", name, bytes,
         *row * static_cast<std::uint64_t>(n / shape[0]));
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, std::vector<std::uint8_t> encoded) {
  for (Entry& e : metadata_) {
    if (e.key == key) {
      e.encoded = std::move(encoded);
      return;
    }
  }
  metadata_.push_back({key, std::move(encoded)});
}

void GgufWriter::set_u32(const std::string& key, std::uint32_t v) { set(key, scalar(GgufType::u32, v)); }
void GgufWriter::set_i32(const std::string& key, std::int32_t v) { set(key, scalar(GgufType::i32, v)); }
void GgufWriter::set_u64(const std::string& key, std::uint64_t v) { set(key, scalar(GgufType::u64, v)); }
void GgufWriter::set_f32(const std::string& key, float v) { set(key, scalar(GgufType::f32, v)); }
void GgufWriter::set_bool(const std::string& key, bool v) {
  set(key, scalar(GgufType::boolean, static_cast<std::uint8_t>(v ? 1 : 0)));
}

void GgufWriter::set_string(const std::string& key, const std::string& v) {
  std::vector<std::uint8_t> out;
  ByteSink s(out);
  s.put_type(GgufType::string);
  s.put_string(v);
  set(key, std::move(out));
}

void GgufWriter::set_string_array(const std::string& key, const std::vector<std::string>& v) {
  set(key, array(GgufType::string, v));
}
void GgufWriter::set_f32_array(const std::string& key, const std::vector<float>& v) {
  set(key, array(GgufType::f32, v));
}
void GgufWriter::set_i32_array(const std::string& key, const std::vector<std::int32_t>& v) {
  set(key, array(GgufType::i32, v));
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                            const std::vector<float>& values) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  if (shape.empty() || static_cast<std::int64_t>(values.size()) != n) {
    fail(ErrorCode::invalid_argument, "tensor '{}': {} values do not match its shape", name, values.size());
  }
  add_raw_tensor(name, type, std::move(shape), quantize(type, values.data(), n));
}

void GgufWriter::add_raw_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                                std::vector<std::uint8_t> bytes) {
  check_shape(name, type, shape, bytes.size());
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) fail(ErrorCode::invalid_argument, "tensor '{}' was added twice", name);
  }
  const std::uint64_t size = bytes.size();
  tensors_.push_back({name, type, std::move(shape), std::move(bytes), {}, size});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<std::int64_t> shape,
                            std::function<std::vector<float>()> make) {
  std::int64_t rows = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
  const auto row = shape.empty() ? std::nullopt : ggml_row_bytes(type, shape[0]);
  const std::uint64_t size = row ? *row * static_cast<std::uint64_t>(rows) : 0;
  check_shape(name, type, shape, size);
  for (const PendingTensor& t : tensors_)
    if (t.name == name) fail(ErrorCode::invalid_argument, "tensor '{}' was added twice", name);
  tensors_.push_back({name, type, std::move(shape), {}, std::move(make), size});
}

std::vector<std::uint8_t> GgufWriter::header() const {
  std::vector<std::uint8_t> out{'G', 'G', 'U', 'F'};
  ByteSink s(out);
  s.put(std::uint32_t{3});
  s.put(static_cast<std::uint64_t>(tensors_.size()));
  const bool has_alignment =
      std::any_of(metadata_.begin(), metadata_.end(), [](const Entry& e) { return e.key == "general.alignment"; });
  s.put(static_cast<std::uint64_t>(metadata_.size() + (has_alignment ? 0 : 1)));
  if (!has_alignment) {
    s.put_string("general.alignment");
    s.put_type(GgufType::u32);
    s.put(kAlignment);
  }
  for (const Entry& e : metadata_) {
    s.put_string(e.key);
    out.insert(out.end(), e.encoded.begin(), e.encoded.end());
  }
  std::uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    s.put_string(t.name);
    s.put(static_cast<std::uint32_t>(t.shape.size()));
    for (std::int64_t d : t.shape) s.put(static_cast<std::uint64_t>(d));
    s.put(static_cast<std::uint32_t>(t.type));
    s.put(offset);
    offset = (offset + t.size + kAlignment - 1) / kAlignment * kAlignment;
  }
  s.pad_to(kAlignment);
  return out;
}

void GgufWriter::for_each_data(const std::function<void(const std::vector<std::uint8_t>&)>& emit) const {
  for (const PendingTensor& t : tensors_) {
    if (t.make) {
      const std::vector<float> values = t.make();
      if (values.size() != t.size / *ggml_row_bytes(t.type, t.shape[0]) * static_cast<std::uint64_t>(t.shape[0]))
        fail(ErrorCode::invalid_argument, "tensor '{}': {} values do not match its shape", t.name, values.size());
      emit(quantize(t.type, values.data(), static_cast<std::int64_t>(values.size())));
    } else {
      emit(t.data);
    }
    emit(std::vector<std::uint8_t>((kAlignment - t.size % kAlignment) % kAlignment, 0));
  }
}

std::vector<std::uint8_t> GgufWriter::bytes() const {
  std::vector<std::uint8_t> out = header();
  for_each_data([&](const std::vector<std::uint8_t>& data) { out.insert(out.end(), data.begin(), data.end()); });
  return out;
}

void GgufWriter::write(const std::string& path) const {
  util::AtomicFile file(path);  // never a half-written model, nor a followed symlink
  const std::vector<std::uint8_t> head = header();
  file.write(head.data(), head.size());
  for_each_data([&](const std::vector<std::uint8_t>& data) {
    if (!data.empty()) file.write(data.data(), data.size());
  });
  file.commit();
}

}  // namespace ember::model
