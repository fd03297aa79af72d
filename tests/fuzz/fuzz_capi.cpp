// Fuzz target: ember_tokenize and ember_detokenize through the C ABI with arbitrary text, ids
// and buffer sizes, on an engine opened once from a synthetic model.
//
// Input: one flags byte (bit 0 parse_special, bit 1 pass a NULL output buffer), one capacity
// byte, then the payload: the text to tokenize, and again as little-endian int32 ids to
// detokenize. Checked: the size-query protocol (EMBER_ERROR_BUFFER_TOO_SMALL reports the size,
// a buffer of that size then succeeds and agrees), nothing is written past `capacity`, and an
// out-of-range id is EMBER_ERROR_INVALID_ARGUMENT.
#include "fuzz_support.hpp"
#include "model_writer/gguf_writer.hpp"

#include <ember/ember.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr std::int32_t kCanary = 0x7EADBEEF;

ember_engine* open_engine() {
  const auto path = std::filesystem::temp_directory_path() / "ember-fuzz-capi.gguf";
  ember::model::SyntheticModelSpec spec;
  spec.config.context_length = 64;
  ember::model::write_synthetic_model(spec, path.string());
  ember_engine_options options = ember_engine_options_default();
  options.precision = EMBER_PRECISION_FP32;  // no INT8 calibration pass at open
  options.threads = 1;
  options.kv_cache_bytes = 1u << 20;
  ember_engine* engine = nullptr;
  FUZZ_CHECK(ember_engine_open(path.string().c_str(), &options, &engine) == EMBER_OK);
  return engine;
}

void check_tokenize(ember_engine* engine, std::string_view text, int parse_special, std::size_t capacity,
                    bool null_buffer) {
  std::vector<std::int32_t> buffer(capacity + 1, kCanary);
  std::size_t count = 0;
  const ember_status s = ember_tokenize(engine, text.data(), text.size(), parse_special,
                                        null_buffer ? nullptr : buffer.data(), capacity, &count);
  FUZZ_CHECK(s == EMBER_OK || s == EMBER_ERROR_BUFFER_TOO_SMALL);
  FUZZ_CHECK(buffer[capacity] == kCanary);
  if (s == EMBER_OK) FUZZ_CHECK(count <= capacity && !null_buffer);
  // One spare slot: a NULL buffer is always "too small", even for zero ids.
  std::vector<std::int32_t> ids(count + 1);
  std::size_t again = 0;
  FUZZ_CHECK(ember_tokenize(engine, text.data(), text.size(), parse_special, ids.data(), ids.size(), &again) ==
             EMBER_OK);
  FUZZ_CHECK(again == count);
  if (s == EMBER_OK) FUZZ_CHECK(std::memcmp(ids.data(), buffer.data(), count * 4) == 0);
}

void check_detokenize(ember_engine* engine, std::string_view bytes, std::size_t capacity, bool null_buffer) {
  std::vector<std::int32_t> ids(bytes.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), bytes.data(), ids.size() * 4);
  ember_model_info info{};
  info.struct_size = sizeof info;
  FUZZ_CHECK(ember_engine_info(engine, &info) == EMBER_OK);
  bool all_in_range = true;
  for (const std::int32_t id : ids) all_in_range = all_in_range && id >= 0 && id < info.vocab;

  std::string buffer(capacity + 1, '\x5A');
  std::size_t length = 0;
  const ember_status s =
      ember_detokenize(engine, ids.data(), ids.size(), null_buffer ? nullptr : buffer.data(), capacity, &length);
  FUZZ_CHECK(buffer[capacity] == '\x5A');
  if (!all_in_range) {
    FUZZ_CHECK(s == EMBER_ERROR_INVALID_ARGUMENT);
    FUZZ_CHECK(std::strlen(ember_engine_last_error(engine)) > 0);
    return;
  }
  FUZZ_CHECK(s == EMBER_OK || s == EMBER_ERROR_BUFFER_TOO_SMALL);
  if (s == EMBER_OK) FUZZ_CHECK(length < capacity && buffer[length] == '\0');
  std::string text(length + 1, '\0');
  std::size_t again = 0;
  FUZZ_CHECK(ember_detokenize(engine, ids.data(), ids.size(), text.data(), text.size(), &again) == EMBER_OK);
  FUZZ_CHECK(again == length);
  if (s == EMBER_OK) FUZZ_CHECK(std::memcmp(text.data(), buffer.data(), length) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static ember_engine* const engine = open_engine();
  ember::fuzz::InputReader in(data, size);
  const std::uint8_t flags = in.byte();
  const std::size_t capacity = in.byte();
  const std::string_view payload = in.rest();
  check_tokenize(engine, payload, flags & 1, capacity, (flags & 2) != 0);
  check_detokenize(engine, payload, capacity, (flags & 2) != 0);
  return 0;
}
