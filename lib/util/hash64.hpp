// A fast streaming 64-bit hash for integrity checks of large buffers (the weight cache's
// checksum, a model file's identity). Four independent lanes take 32 bytes per round, so the
// multiplies overlap and it runs at several GB/s; each round is a bijection of the lane state
// for a fixed input, so a changed word always changes the digest's input. Not cryptographic:
// it detects damage and mix-ups, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ember {

class Hash64 {
 public:
  explicit Hash64(std::uint64_t seed = 0) {
    for (int i = 0; i < 4; ++i) lane_[i] = seed + kPrime1 * static_cast<std::uint64_t>(i + 1);
  }

  void update(const void* data, std::size_t n) {
    if (n == 0) return;
    const auto* p = static_cast<const std::uint8_t*>(data);
    length_ += n;
    if (buffered_ > 0) {
      const std::size_t take = n < 32 - buffered_ ? n : 32 - buffered_;
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      n -= take;
      if (buffered_ < 32) return;
      round(buffer_);
      buffered_ = 0;
    }
    for (; n >= 32; p += 32, n -= 32) round(p);
    std::memcpy(buffer_, p, n);
    buffered_ = n;
  }

  template <class T>
  void update_value(const T& value) {
    update(&value, sizeof value);
  }

  std::uint64_t digest() const {
    std::uint64_t lanes[4] = {lane_[0], lane_[1], lane_[2], lane_[3]};
    std::uint8_t tail[32] = {};
    std::memcpy(tail, buffer_, buffered_);
    for (int i = 0; i < 4; ++i) lanes[i] = mix_word(lanes[i], load(tail + 8 * i));
    std::uint64_t h = length_ * kPrime2;
    for (std::uint64_t lane : lanes) h = (h ^ avalanche(lane)) * kPrime1 + kPrime2;
    return avalanche(h);
  }

 private:
  static constexpr std::uint64_t kPrime1 = 0x9e3779b97f4a7c15ull;  // odd: multiplying is a bijection
  static constexpr std::uint64_t kPrime2 = 0xc2b2ae3d27d4eb4full;

  static std::uint64_t load(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static std::uint64_t rotl(std::uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }
  static std::uint64_t mix_word(std::uint64_t lane, std::uint64_t word) {
    return rotl(lane + word * kPrime2, 31) * kPrime1;
  }
  static std::uint64_t avalanche(std::uint64_t h) {  // the splitmix64 finaliser
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    return h ^ (h >> 31);
  }
  void round(const std::uint8_t* p) {
    for (int i = 0; i < 4; ++i) lane_[i] = mix_word(lane_[i], load(p + 8 * i));
  }

  std::uint64_t lane_[4];
  std::uint8_t buffer_[32] = {};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
};

}  // namespace ember
