// Explicit 64-bit hashing whose values are part of ember's file formats (KV snapshots, the
// prefix cache's block hashes, the model identity): the same input gives the same value in every
// process, build, compiler and platform. Never std::hash, whose values are unspecified.
//
// Not cryptographic: it detects corruption and mismatched files, not a deliberate forgery.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember {

// The splitmix64 finaliser: a bijection with full avalanche.
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

inline constexpr std::uint64_t kHashGolden = 0x9e3779b97f4a7c15ull;

// A streaming hash of bytes: eight little-endian bytes at a time through mix64, the tail
// zero-padded, the total length mixed in last. Feeding the same bytes in any split gives the
// same value.
class Hasher {
 public:
  explicit Hasher(std::uint64_t seed = 0) : state_(mix64(seed + kHashGolden)) {}

  void update(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    length_ += size;
    while (size > 0 && pending_ > 0) {  // complete a word begun by an earlier call
      add_byte(*p++);
      --size;
    }
    for (; size >= 8; p += 8, size -= 8) word(load_le(p));
    while (size-- > 0) add_byte(*p++);
  }
  void update_u64(std::uint64_t v) {
    std::uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::uint8_t>(v >> (8 * i));
    update(b, 8);
  }

  std::uint64_t value() const {
    std::uint64_t s = state_;
    if (pending_ > 0) s = mix64(s ^ (buffer_ + kHashGolden));
    return mix64(s ^ (length_ * kHashGolden));
  }

 private:
  static std::uint64_t load_le(const std::uint8_t* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  void word(std::uint64_t w) { state_ = mix64(state_ ^ (w + kHashGolden)); }
  void add_byte(std::uint8_t b) {
    buffer_ |= static_cast<std::uint64_t>(b) << (8 * pending_);
    if (++pending_ == 8) {
      word(buffer_);
      buffer_ = 0;
      pending_ = 0;
    }
  }

  std::uint64_t state_;
  std::uint64_t buffer_ = 0;
  int pending_ = 0;
  std::uint64_t length_ = 0;
};

// Hasher's value of one buffer, for a lookup key hashed in one go.
inline std::uint64_t hash_bytes(const void* data, std::size_t size) {
  Hasher h;
  h.update(data, size);
  return h.value();
}

}  // namespace ember
