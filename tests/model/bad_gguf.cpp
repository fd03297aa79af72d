#include "bad_gguf.hpp"

#include <cstring>

namespace ember::test {
namespace {

template <class T>
void put(std::vector<std::uint8_t>& out, T v) {
  const std::size_t at = out.size();  // resize + memcpy: GCC 12 misreports insert() here
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

void append(std::vector<std::uint8_t>& out, const std::uint8_t* p, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

void append(std::vector<std::uint8_t>& out, const std::vector<std::uint8_t>& bytes) {
  append(out, bytes.data(), bytes.size());
}

void put_str(std::vector<std::uint8_t>& out, std::uint64_t declared, const std::string& s) {
  put(out, declared);
  append(out, reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
}

}  // namespace

std::vector<std::uint8_t> gguf_u32(std::uint32_t v) {
  std::vector<std::uint8_t> out;
  put(out, std::uint32_t{4});
  put(out, v);
  return out;
}

std::vector<std::uint8_t> gguf_bool_byte(std::uint8_t v) {
  std::vector<std::uint8_t> out;
  put(out, std::uint32_t{7});
  out.push_back(v);
  return out;
}

std::vector<std::uint8_t> gguf_string(const std::string& s) { return gguf_string_with_length(s.size(), s); }

std::vector<std::uint8_t> gguf_string_with_length(std::uint64_t declared, const std::string& s) {
  std::vector<std::uint8_t> out;
  put(out, std::uint32_t{8});
  put_str(out, declared, s);
  return out;
}

std::vector<std::uint8_t> gguf_array(std::uint32_t element_type, std::uint64_t count,
                                     const std::vector<std::uint8_t>& elements) {
  std::vector<std::uint8_t> out;
  put(out, std::uint32_t{9});
  put(out, element_type);
  put(out, count);
  append(out, elements);
  return out;
}

std::vector<std::uint8_t> gguf_nested_arrays(int depth) {
  // Element payloads of an array of arrays carry no type prefix: element type + count + items.
  std::vector<std::uint8_t> inner;
  put(inner, std::uint32_t{0});  // u8
  put(inner, std::uint64_t{0});
  for (int level = 1; level < depth; ++level) {
    std::vector<std::uint8_t> outer;
    put(outer, std::uint32_t{9});
    put(outer, std::uint64_t{1});
    append(outer, inner);
    inner = std::move(outer);
  }
  std::vector<std::uint8_t> out;
  put(out, std::uint32_t{9});
  append(out, inner);
  return out;
}

std::vector<std::uint8_t> RawGguf::build() const {
  std::vector<std::uint8_t> out(magic.begin(), magic.end());
  put(out, version);
  put(out, tensor_count.value_or(tensors.size()));
  put(out, metadata_count.value_or(kvs.size()));
  for (const RawKv& kv : kvs) {
    put_str(out, kv.key_length.value_or(kv.key.size()), kv.key);
    append(out, kv.value);
  }
  for (const RawTensor& t : tensors) {
    put_str(out, t.name.size(), t.name);
    put(out, static_cast<std::uint32_t>(t.dims.size()));
    for (std::uint64_t d : t.dims) put(out, d);
    put(out, t.type);
    put(out, t.offset);
  }
  while (pad_to != 0 && out.size() % pad_to != 0) out.push_back(0);
  out.resize(out.size() + data_bytes, 0);
  return out;
}

RawGguf valid_raw_gguf() {
  RawGguf g;
  g.kvs.push_back({"general.alignment", gguf_u32(32), {}});
  g.kvs.push_back({"general.name", gguf_string("bad-input base"), {}});
  std::vector<std::uint8_t> ints;
  for (std::int32_t v : {1, -2, 3}) put(ints, v);
  g.kvs.push_back({"test.ints", gguf_array(5, 3, ints), {}});
  g.tensors.push_back({"a", {8}, 0, 0});
  g.tensors.push_back({"b", {32, 2}, 8, 32});
  g.data_bytes = 32 + 68 + 28;
  return g;
}

}  // namespace ember::test
