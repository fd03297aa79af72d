// Every file ember writes goes through util::AtomicFile: a random O_EXCL | O_NOFOLLOW temporary in
// the target's folder, fsynced, renamed, removed on any failure. And the GGUF layout checks that
// catch a tensor whose declared size shrank (docs/robustness.md, "Files ember writes").
#include "backend/cpu/weight_cache.hpp"
#include "bad_gguf.hpp"
#include "model/gguf.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/unicode.hpp"
#include "util/atomic_file.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#if !defined(_WIN32)
#include <sys/resource.h>  // the file size limit below: POSIX only
#endif

namespace fs = std::filesystem;
using namespace ember;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Used by the symlink tests, which Windows skips.
[[maybe_unused]] void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

#if !defined(_WIN32)
// Files larger than `bytes` cannot be written while it lives (writes fail with EFBIG).
struct FileSizeLimit {
  rlimit saved{};
  void (*saved_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved);
    saved_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lower = saved;
    lower.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lower);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, saved_handler);
  }
};
#endif

std::string parse_error(const std::vector<std::uint8_t>& image) {
  try {
    model::GgufFile::parse(image.data(), image.size(), "bad.gguf");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_model);
    return e.what();
  }
  FAIL("the image was accepted");
  return {};
}

}  // namespace

TEST_CASE("AtomicFile: the target gets the whole content and no temporary is left") {
  const fs::path dir = test::temp_dir("ember-atomic");
  const fs::path target = dir / "out.bin";
  util::write_file_atomically(target.string(), bytes_of("first"));
  util::write_file_atomically(target.string(), bytes_of("second, longer"));
  CHECK(read_all(target) == "second, longer");
  CHECK(names_in(dir) == std::vector<std::string>{"out.bin"});

  util::AtomicFile file(target.string());
  CHECK(fs::path(file.temp_path()).parent_path() == dir);  // same folder: rename is atomic
  file.write("xxxx-body", 9);
  file.write_at(0, "head", 4);
  CHECK(read_all(target) == "second, longer");  // untouched until commit
  file.commit();
  CHECK(read_all(target) == "head-body");
  fs::remove_all(dir);
}

#if !defined(_WIN32)  // symbolic links need a privilege on Windows (and Wine has none)
TEST_CASE("AtomicFile: never follows a planted symlink, at the old fixed temp name or the target") {
  const fs::path dir = test::temp_dir("ember-atomic");
  const fs::path victim = dir / "victim.txt";
  write_text(victim, "precious");
  const fs::path target = dir / "state.bin";
  fs::create_symlink(victim, target.string() + ".tmp");  // the name save_state_file used to write
  util::write_file_atomically(target.string(), bytes_of("snapshot"));
  CHECK(read_all(victim) == "precious");
  CHECK(read_all(target) == "snapshot");
  CHECK(fs::is_symlink(target.string() + ".tmp"));

  // A symlink at the target itself is replaced by the new file, its target left alone.
  fs::remove(target);
  fs::create_symlink(victim, target);
  util::write_file_atomically(target.string(), bytes_of("snapshot 2"));
  CHECK(!fs::is_symlink(target));
  CHECK(read_all(target) == "snapshot 2");
  CHECK(read_all(victim) == "precious");
  fs::remove_all(dir);
}
#endif

TEST_CASE("AtomicFile: a failed write, rename or abandoned file leaves no temporary behind") {
  const fs::path dir = test::temp_dir("ember-atomic");
  SUBCASE("rename fails: the target is a non-empty folder") {
    fs::create_directories(dir / "taken" / "inside");
    CHECK_THROWS_WITH_AS(util::write_file_atomically((dir / "taken").string(), bytes_of("x")),
                         doctest::Contains("renaming"), Error);
    CHECK(names_in(dir) == std::vector<std::string>{"taken"});
  }
#if !defined(_WIN32)  // Windows has no per-process file size limit to stand in for a full disk
  SUBCASE("write fails: the file size limit (as a full disk)") {
    std::string big(64 * 1024, 'z');
    {
      FileSizeLimit limit(4096);
      CHECK_THROWS_WITH_AS(util::write_file_atomically((dir / "big").string(), bytes_of(big)),
                           doctest::Contains("writing"), Error);
    }
    CHECK(names_in(dir).empty());
  }
#endif
  SUBCASE("destroyed without commit") {
    {
      util::AtomicFile file((dir / "never").string());
      file.write("abc", 3);
      CHECK(fs::exists(file.temp_path()));
    }
    CHECK(names_in(dir).empty());
  }
  SUBCASE("the folder does not exist") {
    CHECK_THROWS_AS(util::write_file_atomically((dir / "no" / "such").string(), bytes_of("x")), Error);
    CHECK(names_in(dir).empty());
  }
  fs::remove_all(dir);
}

#if !defined(_WIN32)  // symbolic links need a privilege on Windows (and Wine has none)
TEST_CASE("save_state_file: a symlink planted at PATH.tmp is not followed; a failed save leaves nothing") {
  const fs::path dir = test::temp_dir("ember-state-files");
  EngineOptions options;
  options.threads = test::compute_threads(1);
  options.kv_cache_bytes = 4u << 20;
  Engine engine = Engine::open(test::synthetic_model_file(7), options);
  const auto tokens = test::random_tokens(40, 400, 3);

  const fs::path victim = dir / "victim.txt";
  write_text(victim, "precious");
  const fs::path state = dir / "conversation.state";
  fs::create_symlink(victim, state.string() + ".tmp");
  engine.save_state_file(state.string(), tokens);
  CHECK(read_all(victim) == "precious");
  CHECK(names_in(dir) == std::vector<std::string>{"conversation.state", "conversation.state.tmp", "victim.txt"});
  Engine fresh = Engine::open(test::synthetic_model_file(7), options);
  CHECK(fresh.load_state_file(state.string()) > 0);

  fs::create_directories(dir / "busy" / "inside");  // rename onto a non-empty folder fails
  CHECK_THROWS_AS(engine.save_state_file((dir / "busy").string(), tokens), Error);
  CHECK(names_in(dir).size() == 4);  // the three above and busy/: no temporary left
  fs::remove_all(dir);
}
#endif

TEST_CASE("the weight cache writer goes through AtomicFile: written whole, or nothing left") {
  const fs::path dir = test::temp_dir("ember-wcache-files");
  const std::vector<float> v(4096, 1.5f);
  {
    backend::cpu::WeightCacheWriter writer({(dir / "w.cache").string(), "key"}, nullptr);
    writer.add_vector("norm", v);
    CHECK(writer.commit());
  }
  CHECK(names_in(dir) == std::vector<std::string>{"w.cache"});
  {
    // Closed before the folder is removed: Windows deletes no file that a view maps.
    backend::cpu::WeightCacheReader reader({(dir / "w.cache").string(), "key"});
    CHECK(reader.vector("norm", 4096) == v);
  }
#if !defined(_WIN32)  // a full disk, as the file size limit stands in for it (POSIX only)
  {
    FileSizeLimit limit(8192);
    std::vector<std::string> warnings;
    backend::cpu::WeightCacheWriter writer({(dir / "x.cache").string(), "key"},
                                           [&](LogLevel, std::string_view m) { warnings.emplace_back(m); });
    writer.add_vector("norm", v);
    CHECK(!writer.commit());
    CHECK(warnings.size() == 1);
  }
  CHECK(names_in(dir) == std::vector<std::string>{"w.cache"});
#endif
  {
    backend::cpu::WeightCacheWriter writer({(dir / "y.cache").string(), "key"}, nullptr);
    writer.add_vector("norm", v);  // abandoned: a load that failed after this
  }
  CHECK(names_in(dir) == std::vector<std::string>{"w.cache"});
  fs::remove_all(dir);
}

TEST_CASE("GGUF: tensor data may leave no gap larger than the alignment padding") {
  using test::RawGguf;
  CHECK_NOTHROW(model::GgufFile::parse(test::valid_raw_gguf().build().data(), test::valid_raw_gguf().build().size()));
  SUBCASE("the last tensor's type changed to a smaller one (Q8_0 -> Q4_0)") {
    RawGguf g = test::valid_raw_gguf();
    g.tensors[1].type = 2;  // 36 bytes where 68 were written
    CHECK(parse_error(g.build()).find("60 bytes follow the last tensor 'b'") != std::string::npos);
  }
  SUBCASE("a tensor between two others shrank") {
    RawGguf g = test::valid_raw_gguf();
    g.tensors[0].dims = {8};
    g.tensors[1].offset = 64;  // a: [0, 32), then 32 bytes of nothing
    g.data_bytes = 160;
    CHECK(parse_error(g.build()).find("leaves a gap of 32 bytes after tensor 'a'") != std::string::npos);
  }
  SUBCASE("the first tensor does not start the data section") {
    RawGguf g = test::valid_raw_gguf();
    g.tensors[0].offset = 128;
    g.data_bytes = 160;
    CHECK(parse_error(g.build()).find("leaving a gap of") != std::string::npos);
  }
  SUBCASE("a gap within the padding is fine (F32 [8] -> F16 [8], 16 bytes)") {
    RawGguf g = test::valid_raw_gguf();
    g.tensors[0].type = 1;
    const auto image = g.build();
    CHECK_NOTHROW(model::GgufFile::parse(image.data(), image.size()));
  }
}

TEST_CASE("a vocabulary missing byte tokens is counted (the engine warns at open)") {
  tokenizer::Vocab v;
  v.model = "gpt2";
  v.pre = "gpt2";
  v.tokens = {"<|end|>"};
  v.types = {tokenizer::TokenType::control};
  for (unsigned b = 0x21; b <= 0x7E; ++b) {  // printable ASCII only: 94 of 256 bytes
    v.tokens.push_back(std::string(1, static_cast<char>(b)));
    v.types.push_back(tokenizer::TokenType::normal);
  }
  v.merges = {"a b"};
  v.eos = 0;
  CHECK(tokenizer::Tokenizer::from_vocab(v)->missing_byte_tokens() == 256 - 94);

  // The default synthetic vocabulary is complete: no warning.
  std::vector<std::string> warnings;
  EngineOptions options;
  options.threads = test::compute_threads(1);
  options.kv_cache_bytes = 4u << 20;
  options.log = [&](LogLevel level, std::string_view m) {
    if (level == LogLevel::warning) warnings.emplace_back(m);
  };
  Engine engine = Engine::open(test::synthetic_model_file(7), options);
  CHECK(warnings.empty());
}
