#include "tokenizer/unicode.hpp"

#include <algorithm>
#include <array>
#include <memory>

namespace ember::tokenizer {
namespace {

std::uint16_t lookup_range(std::uint32_t cp) {
  const detail::CodepointRange* begin = detail::kCodepointRanges;
  const detail::CodepointRange* end = begin + detail::kCodepointRangeCount;
  auto it =
      std::upper_bound(begin, end, cp, [](std::uint32_t value, const auto& range) { return value < range.first; });
  return it == begin ? CodepointClass::undefined : (it - 1)->classes;
}

// The Basic Multilingual Plane is expanded once into a flat table: the pre-tokenizers ask for
// the class of every code point of every prompt, and a binary search per code point costs
// about a third of the whole encode time on English text.
using BmpTable = std::array<std::uint16_t, 0x10000>;

const BmpTable& bmp_table() {
  static const std::unique_ptr<const BmpTable> table = [] {
    auto t = std::make_unique<BmpTable>();
    for (std::uint32_t cp = 0; cp < 0x10000; ++cp) (*t)[cp] = lookup_range(cp);
    return std::unique_ptr<const BmpTable>(std::move(t));
  }();
  return *table;
}

bool is_continuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// Strict UTF-8 check of the sequence at `pos`: returns its length when it is complete and
// valid, 0 when it is valid so far but cut off by the end of `s`, and -n when the first n bytes
// form an ill-formed (maximal) subpart to be replaced by one U+FFFD.
int strict_sequence(std::string_view s, std::size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) return 1;
  int length = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return -1;
  }
  for (int i = 1; i < length; ++i) {
    if (pos + i >= s.size()) return 0;
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) return -i;
  }
  return length;
}

}  // namespace

std::uint16_t codepoint_class(std::uint32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  return cp < 0x110000 ? lookup_range(cp) : CodepointClass::undefined;
}

std::uint32_t codepoint_lower(std::uint32_t cp) {
  const detail::CodepointMap* end = detail::kLowercase + detail::kLowercaseCount;
  const auto* it = std::lower_bound(detail::kLowercase, end, cp,
                                    [](const detail::CodepointMap& m, std::uint32_t v) { return m.from < v; });
  return it != end && it->from == cp ? it->to : cp;
}

std::uint32_t codepoint_nfd_first(std::uint32_t cp) {
  const detail::CodepointRangeMap* end = detail::kNfdFirst + detail::kNfdFirstCount;
  const auto* it = std::upper_bound(detail::kNfdFirst, end, cp,
                                    [](std::uint32_t v, const detail::CodepointRangeMap& r) { return v < r.first; });
  if (it == detail::kNfdFirst) return cp;
  --it;
  return cp <= it->last ? it->to : cp;
}

std::vector<std::uint32_t> decode_utf8(std::string_view text) {
  std::vector<std::uint32_t> out;
  out.reserve(text.size());
  const std::size_t n = text.size();
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  while (i < n) {
    const unsigned char b0 = byte(i);
    if (b0 < 0x80) {
      out.push_back(b0);
      i += 1;
    } else if ((b0 & 0xE0) == 0xC0 && i + 1 < n && is_continuation(byte(i + 1))) {
      out.push_back((std::uint32_t(b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F));
      i += 2;
    } else if ((b0 & 0xF0) == 0xE0 && i + 2 < n && is_continuation(byte(i + 1)) && is_continuation(byte(i + 2))) {
      out.push_back((std::uint32_t(b0 & 0x0F) << 12) | (std::uint32_t(byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F));
      i += 3;
    } else if ((b0 & 0xF8) == 0xF0 && i + 3 < n && is_continuation(byte(i + 1)) && is_continuation(byte(i + 2)) &&
               is_continuation(byte(i + 3))) {
      out.push_back((std::uint32_t(b0 & 0x07) << 18) | (std::uint32_t(byte(i + 1) & 0x3F) << 12) |
                    (std::uint32_t(byte(i + 2) & 0x3F) << 6) | (byte(i + 3) & 0x3F));
      i += 4;
    } else {
      out.push_back(kReplacementCharacter);
      i += 1;
    }
  }
  return out;
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const int r = strict_sequence(bytes, pos);
    if (r == 0) return pos;  // a character still arriving
    pos += static_cast<std::size_t>(r > 0 ? r : -r);
  }
  return pos;
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const int r = strict_sequence(bytes, pos);
    if (r > 0) {
      out.append(bytes.substr(pos, static_cast<std::size_t>(r)));
      pos += static_cast<std::size_t>(r);
    } else {
      append_utf8(out, kReplacementCharacter);
      pos += r == 0 ? bytes.size() - pos : static_cast<std::size_t>(-r);
    }
  }
  return out;
}

}  // namespace ember::tokenizer
