// Broken GGUF files: each must give an ember::Error with the right code and a message that
// names the problem, never a crash, a hang or an out-of-memory.
#include "bad_gguf.hpp"
#include "model/gguf.hpp"
#include "model_writer/gguf_writer.hpp"
#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <system_error>

using namespace ember::model;
using namespace ember::test;
using ember::ErrorCode;

namespace {

struct BadCase {
  const char* name;
  std::function<void(RawGguf&)> edit;
  ErrorCode code;
  std::vector<std::string> substrings;
};

std::string parse_error(const std::vector<std::uint8_t>& image, ErrorCode code) {
  try {
    GgufFile::parse(image.data(), image.size(), "bad.gguf");
  } catch (const ember::Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  FAIL("parsed without an error");
  return {};
}

std::vector<std::uint8_t> u8s(std::initializer_list<int> v) { return std::vector<std::uint8_t>(v.begin(), v.end()); }

}  // namespace

TEST_CASE("the unmodified base image parses") {
  const auto image = valid_raw_gguf().build();
  const auto f = GgufFile::parse(image.data(), image.size());
  CHECK(f->tensors().size() == 2);
  CHECK(f->get_i32_array("test.ints") == std::vector<std::int32_t>{1, -2, 3});
  CHECK(f->tensor("b").nbytes == 68);
  auto deep = valid_raw_gguf();
  deep.kvs.push_back({"deep", gguf_nested_arrays(4), {}});  // the deepest nesting allowed
  const auto deep_image = deep.build();
  CHECK(GgufFile::parse(deep_image.data(), deep_image.size())->find("deep") != nullptr);
}

TEST_CASE("broken headers, metadata and tensor infos") {
  const auto im = ErrorCode::invalid_model;
  const std::vector<BadCase> cases = {
      {"wrong magic", [](RawGguf& g) { g.magic = "GGUG"; }, im, {"bad magic", "(at byte 0)"}},
      {"version 1", [](RawGguf& g) { g.version = 1; }, ErrorCode::unsupported, {"version 1"}},
      {"version 4", [](RawGguf& g) { g.version = 4; }, ErrorCode::unsupported, {"version 4"}},
      {"huge tensor count",
       [](RawGguf& g) { g.tensor_count = 1ull << 40; },
       im,
       {"tensor count 1099511627776 exceeds", "(at byte 8)"}},
      {"huge metadata count",
       [](RawGguf& g) { g.metadata_count = ~0ull; },
       im,
       {"metadata count", "exceeds", "(at byte 16)"}},
      {"counts larger than the file", [](RawGguf& g) { g.metadata_count = 60000; }, im, {"cannot fit"}},
      {"huge key length",
       [](RawGguf& g) { g.kvs[1].key_length = 1ull << 62; },
       im,
       {"key length 4611686018427387904 exceeds the limit"}},
      {"key longer than the file",
       [](RawGguf& g) { g.kvs[1].key_length = 60000; },
       im,
       {"metadata entry 1 key needs 60000 bytes but the file ends"}},
      {"empty key", [](RawGguf& g) { g.kvs[1].key = ""; }, im, {"empty key"}},
      {"huge string length",
       [](RawGguf& g) { g.kvs[1].value = gguf_string_with_length(~0ull, "x"); },
       im,
       {"'general.name' length 18446744073709551615 exceeds"}},
      {"string past the end",
       [](RawGguf& g) { g.kvs[1].value = gguf_string_with_length(1u << 20, "x"); },
       im,
       {"'general.name' needs 1048576 bytes"}},
      {"huge array length",
       [](RawGguf& g) { g.kvs[2].value = gguf_array(5, 1ull << 40, {}); },
       im,
       {"'test.ints' has 1099511627776 elements, more than the limit"}},
      {"array longer than the file",
       [](RawGguf& g) { g.kvs[2].value = gguf_array(5, 1u << 20, {}); },
       im,
       {"'test.ints' declares 1048576 elements of type i32"}},
      {"arrays nested too deep",
       [](RawGguf& g) { g.kvs[2].value = gguf_nested_arrays(5); },
       im,
       {"nests arrays deeper than 4"}},
      {"unknown value type",
       [](RawGguf& g) {
         g.kvs[2].value = u8s({13, 0, 0, 0});
       },
       im,
       {"unknown metadata value type 13"}},
      {"unknown array element type",
       [](RawGguf& g) { g.kvs[2].value = gguf_array(77, 1, {}); },
       im,
       {"element type is an unknown metadata value type 77"}},
      {"bool that is not 0 or 1", [](RawGguf& g) { g.kvs[2].value = gguf_bool_byte(2); }, im, {"bool with value 2"}},
      {"duplicate key",
       [](RawGguf& g) { g.kvs[2].key = "general.name"; },
       im,
       {"duplicate metadata key 'general.name'"}},
      {"alignment not a power of two",
       [](RawGguf& g) { g.kvs[0].value = gguf_u32(48); },
       im,
       {"general.alignment 48 is not a power of two"}},
      {"alignment zero",
       [](RawGguf& g) { g.kvs[0].value = gguf_u32(0); },
       im,
       {"general.alignment 0 is not a power of two"}},
      {"alignment of the wrong type",
       [](RawGguf& g) { g.kvs[0].value = gguf_string("32"); },
       im,
       {"general.alignment has type string"}},
      // std::string(1, 'a'), not "a": assigning the one-character literal drew GCC 12's false -Wrestrict.
      {"duplicate tensor", [](RawGguf& g) { g.tensors[1].name = std::string(1, 'a'); }, im, {"duplicate tensor 'a'"}},
      {"empty tensor name", [](RawGguf& g) { g.tensors[1].name = ""; }, im, {"tensor 1 has an empty name"}},
      {"tensor name too long",
       [](RawGguf& g) { g.tensors[1].name = std::string(2000, 'n'); },
       im,
       {"tensor 1 name length 2000 exceeds the limit of 1024"}},
      {"unknown tensor type",
       [](RawGguf& g) { g.tensors[1].type = 99; },
       ErrorCode::unsupported,
       {"'b' has unknown tensor type 99"}},
      {"zero dimensions", [](RawGguf& g) { g.tensors[0].dims = {}; }, im, {"'a' has 0 dimensions"}},
      {"five dimensions",
       [](RawGguf& g) {
         g.tensors[0].dims = {1, 1, 1, 1, 8};
       },
       im,
       {"'a' has 5 dimensions"}},
      {"zero-size dimension",
       [](RawGguf& g) {
         g.tensors[1].dims = {32, 0};
       },
       im,
       {"'b' dimension 1 is 0"}},
      {"element count overflow",
       [](RawGguf& g) {
         g.tensors[0].dims = {1ull << 32, 1ull << 32};
       },
       im,
       {"'a' element count overflows at dimension 1"}},
      {"byte size overflow",
       [](RawGguf& g) {
         g.tensors[0].dims = {1ull << 31, 1ull << 31};
       },
       im,
       {"'a' byte size overflows"}},
      {"partial block",
       [](RawGguf& g) {
         g.tensors[1].dims = {33, 2};
       },
       im,
       {"row of 33 elements is not a whole number of Q8_0 blocks"}},
      {"misaligned offset",
       [](RawGguf& g) { g.tensors[1].offset = 36; },
       im,
       {"'b' offset 36 is not a multiple of the alignment 32"}},
      {"tensor data past the end",
       [](RawGguf& g) { g.tensors[1].offset = 1ull << 40; },
       im,
       {"tensor 'b' data [1099511627776, +68) lies outside the data section of 128 bytes"}},
      {"offset + size overflows",
       [](RawGguf& g) { g.tensors[1].offset = ~0ull - 31; },
       im,
       {"lies outside the data section"}},
      {"overlapping tensors", [](RawGguf& g) { g.tensors[1].offset = 0; }, im, {"overlaps tensor"}},
      {"data section past the end",
       [](RawGguf& g) {
         g.pad_to = 0;
         g.data_bytes = 0;
       },
       im,
       {"data section"}},
  };
  CHECK(cases.size() >= 25);
  for (const BadCase& c : cases) {
    CAPTURE(c.name);
    RawGguf g = valid_raw_gguf();
    c.edit(g);
    const std::string message = parse_error(g.build(), c.code);
    CHECK(message.find("bad.gguf") == 0);
    for (const std::string& part : c.substrings) {
      CHECK_MESSAGE(message.find(part) != std::string::npos, "message: " << message);
    }
  }
}

TEST_CASE("a synthetic model truncated anywhere before its last tensor ends is rejected") {
  const auto image = make_synthetic_model(SyntheticModelSpec{});
  const auto f = GgufFile::parse(image.data(), image.size());
  std::uint64_t last_end = 0;
  for (const auto& t : f->tensors()) last_end = std::max(last_end, f->data_offset() + t.offset + t.nbytes);
  int tried = 0;
  for (std::uint64_t n = 0; n < last_end; n += (n < 600 ? 1 : n < f->data_offset() ? 97 : 4099)) {
    CAPTURE(n);
    const std::vector<std::uint8_t> prefix(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string message = parse_error(prefix, ErrorCode::invalid_model);
    CHECK(!message.empty());
    ++tried;
  }
  CHECK(tried > 700);
  const std::vector<std::uint8_t> complete(image.begin(), image.begin() + static_cast<std::ptrdiff_t>(last_end));
  CHECK_NOTHROW(GgufFile::parse(complete.data(), complete.size()));
}

TEST_CASE("random byte flips in the header give a file or an ember::Error, never a crash") {
  const auto image = make_synthetic_model(SyntheticModelSpec{});
  const auto f = GgufFile::parse(image.data(), image.size());
  std::mt19937_64 rng(7);
  int errors = 0, parsed = 0;
  for (int round = 0; round < 1500; ++round) {
    auto bad = image;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Half of the flips hit the first 64 bytes (counts, first key), the rest anywhere in the header.
      const std::uint64_t span = (rng() % 2 == 0) ? 64 : f->data_offset();
      bad[static_cast<std::size_t>(rng() % span)] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
    }
    try {
      const auto g = GgufFile::parse(bad.data(), bad.size());
      for (const auto& t : g->tensors()) {
        CHECK(g->data_offset() + t.offset + t.nbytes <= bad.size());
      }
      ++parsed;
    } catch (const ember::Error& e) {
      CHECK((e.code() == ErrorCode::invalid_model || e.code() == ErrorCode::unsupported));
      ++errors;
    }
  }
  MESSAGE("byte flips: " << errors << " rejected, " << parsed << " still valid");
  CHECK(errors > 300);
}

TEST_CASE("open errors are io errors naming the path and the reason") {
  const auto dir = temp_dir("ember-bad");
  auto open_error = [](const std::string& path) {
    try {
      GgufFile::open(path);
    } catch (const ember::Error& e) {
      CHECK(e.code() == ErrorCode::io);
      const std::string m = e.what();
      CHECK_MESSAGE(m.find(path) != std::string::npos, m);
      return m;
    }
    FAIL("opened without an error");
    return std::string();
  };
  // The OS's own words for a missing file: strerror's on POSIX, FormatMessage's for
  // ERROR_FILE_NOT_FOUND (2) on Windows.
#if defined(_WIN32)
  const std::string missing_text = std::system_category().message(2);
#else
  const std::string missing_text = "No such file";
#endif
  CHECK(open_error((dir / "missing.gguf").string()).find(missing_text) != std::string::npos);
  CHECK(open_error(dir.string()).find("directory") != std::string::npos);
  const auto empty = dir / "empty.gguf";
  std::ofstream(empty).close();
  CHECK(open_error(empty.string()).find("empty") != std::string::npos);

  const auto locked = dir / "locked.gguf";
  write_synthetic_model(SyntheticModelSpec{}, locked.string());
  std::filesystem::permissions(locked, std::filesystem::perms::none);
  if (std::FILE* probe = std::fopen(locked.string().c_str(), "rb")) {
    std::fclose(probe);  // root reads anything: nothing to test here
  } else {
    CHECK(open_error(locked.string()).find("Permission denied") != std::string::npos);
  }
  // Windows keeps a read-only file from being deleted with its folder.
  std::filesystem::permissions(locked, std::filesystem::perms::owner_all);
  // A broken file on disk reports its path too.
  const auto broken = dir / "broken.gguf";
  auto image = valid_raw_gguf();
  image.version = 1;
  const auto bytes = image.build();
  std::ofstream(broken, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  try {
    GgufFile::open(broken.string());
    FAIL("version 1 accepted");
  } catch (const ember::Error& e) {
    CHECK(e.code() == ErrorCode::unsupported);
    CHECK(std::string(e.what()).find(broken.string()) == 0);
  }
  std::filesystem::remove_all(dir);
}
