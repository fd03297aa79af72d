// ISA invariance: a synthetic model's logits are the same bit for bit at every tier this CPU has
// (x86 or arm64, kernels/cpu/cpu_tier.hpp), the scalar reference among them. INT8 dot products are exact
// integers, and every tier's float epilogues and attention loops keep one order of operations,
// so the CPU a player owns does not change the tokens. The tier is fixed once per process, so
// the test runs this binary again under each EMBER_CPU_ISA cap (the "dump" case below writes
// the logits to a file) and compares the files. In a cross build the child runs under the same
// emulator as the test (EMBER_TEST_EMULATOR, set by tests/backend/CMakeLists.txt): qemu-user
// without binfmt_misc cannot start an arm64 program from a shell.
#include "backend/cpu/cpu_backend.hpp"
#include "kernels/cpu/cpu_tier.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <unistd.h>
#if defined(_WIN32)
#include <windows.h>  // GetModuleFileNameA
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace ember {
namespace {

namespace k = kernels::cpu;

// The weight types a run covers: FP32 matrices (INT8 per output channel, "w8a8"), Q4_1 (the
// grouped W4A8 kernel) and Q8_0 (its 8-bit form, "w8a8-g32").
const model::GgmlType kWeightTypes[] = {model::GgmlType::F32, model::GgmlType::Q4_1, model::GgmlType::Q8_0};

// The models a run covers: the tiny llama, and mixture-of-experts layers (the router, each row's
// experts, the experts' grouped products and the weighted sum) of each routed architecture.
std::vector<model::ModelConfig> configs() {
  std::vector<model::ModelConfig> out{model::SyntheticModelSpec::tiny_config()};
  for (const char* name : {"qwen3moe", "olmoe", "mixtral"})
    out.push_back(model::SyntheticModelSpec::architecture_config(name));
  return out;
}

// The logits of every row of a prompt prefilled in chunks of 7, then 6 decode steps, for each
// model, weight type and both KV types, after the backend's weight format.
std::vector<char> logits_at_this_tier() {
  std::vector<char> out;
  for (const model::ModelConfig& config : configs())
    for (model::GgmlType type : kWeightTypes) {
      model::SyntheticModelSpec spec;
      spec.config = config;
      spec.seed = 11;
      spec.weight_type = type;
      const auto bytes = model::make_synthetic_model(spec);
      const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
      const model::ModelConfig c = model::read_model_config(*file);
      backend::BackendOptions options;
      options.threads = 2;
      options.precision = Precision::int8;
      auto int8 = backend::cpu::make_cpu_backend(file, c, options);
      const std::string format = int8->weight_format() + ";";
      out.insert(out.end(), format.begin(), format.end());
      for (KvCacheType kv : {KvCacheType::f16, KvCacheType::int8}) {
        test::SequenceRunner runner(*int8, 64, kv);
        const auto prompt = test::random_tokens(37, c.vocab, 5);
        std::vector<float> logits = runner.append(prompt, /*all_rows=*/true, 7);
        for (int step = 0; step < 6; ++step) {
          const std::int32_t next =
              test::argmax(logits.data() + logits.size() - static_cast<std::size_t>(c.vocab), c.vocab);
          const auto row = runner.append({next}, true);
          logits.insert(logits.end(), row.begin(), row.end());
        }
        const auto* p = reinterpret_cast<const char*>(logits.data());
        out.insert(out.end(), p, p + logits.size() * sizeof(float));
      }
    }
  return out;
}

// FNV-1a, 64 bits: a digest of the logits that needs no library.
std::uint64_t fnv1a(const std::vector<char>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// The scalar tier's logits on x86-64 and arm64 alike: every tier of both chains equals the
// scalar one, and the scalar one equals itself across instruction sets (no FMA contraction,
// cmake/EmberCompilerFlags.cmake), so one digest holds on every 64-bit Linux. A change of the
// synthetic models or of a kernel's float order updates it on every platform at once, from the
// failure message of a native run; a digest that differs on one platform only is the bug.
constexpr std::uint64_t kLogitsDigest = 0x7b3c7446e457db86ull;

// This test's executable, which the case below reruns once per tier.
std::string self_path() {
#if defined(_WIN32)
  char path[MAX_PATH];
  const DWORD n = GetModuleFileNameA(nullptr, path, MAX_PATH);
  return std::string(path, n);
#else
  return std::filesystem::read_symlink("/proc/self/exe").string();
#endif
}

// Set in this process, inherited by the child std::system starts (no shell syntax needed, so
// cmd.exe on Windows runs the same command as sh elsewhere).
void set_env(const char* name, const std::string& value) {
#if defined(_WIN32)
  _putenv_s(name, value.c_str());
#else
  if (value.empty())
    unsetenv(name);
  else
    setenv(name, value.c_str(), 1);
#endif
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

// Run by the case below in a child process; does nothing on its own.
TEST_CASE("isa invariance: dump this tier's logits") {
  const char* path = std::getenv("EMBER_ISA_DUMP");
  if (path == nullptr) return;
  const std::vector<char> bytes = logits_at_this_tier();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST_CASE("isa invariance: the logits are the same bit for bit at every available tier") {
  if (std::getenv("EMBER_ISA_DUMP") != nullptr) return;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string self = self_path();
  const char* emulator = std::getenv("EMBER_TEST_EMULATOR");
  const std::string prefix = emulator != nullptr && *emulator != '\0' ? std::string(emulator) + " " : "";
  std::vector<char> scalar;
  int compared = 0;
  for (k::CpuTier tier : k::kAllCpuTiers) {
    if (!k::tier_available(tier)) {
      MESSAGE("tier ", std::string(k::to_string(tier)), ": not on this CPU (or capped), skipped");
      continue;
    }
    CAPTURE(std::string(k::to_string(tier)));
    const std::string path = (dir / ("ember_isa_" + std::to_string(::getpid()) + "_" + k::to_string(tier))).string();
    set_env("EMBER_CPU_ISA", k::to_string(tier));
    set_env("EMBER_ISA_DUMP", path);
#if defined(_WIN32)
    // A Windows program starts another directly, under Wine too (the emulator prefix is the
    // host's command). cmd /c drops the first and last quote of the line: the outer pair.
    const std::string command = "\"\"" + self + "\" \"-tc=isa invariance: dump*\" > NUL\"";
#else
    const std::string command = prefix + "'" + self + "' -tc='isa invariance: dump*' > /dev/null";
#endif
    const int status = std::system(command.c_str());
    set_env("EMBER_ISA_DUMP", "");
    set_env("EMBER_CPU_ISA", "");
    REQUIRE(status == 0);
    const std::vector<char> bytes = read_file(path);
    std::filesystem::remove(path);
    REQUIRE(bytes.size() > 1000);
    if (tier == k::CpuTier::scalar) {
      scalar = bytes;
      continue;
    }
    REQUIRE(bytes.size() == scalar.size());
    std::size_t first = 0;
    while (first < bytes.size() && bytes[first] == scalar[first]) ++first;
    CAPTURE(first);
    REQUIRE(std::memcmp(bytes.data(), scalar.data(), bytes.size()) == 0);
    ++compared;
    MESSAGE("tier ", std::string(k::to_string(tier)), ": ", bytes.size(), " bytes of logits equal the scalar tier's");
  }
  MESSAGE("tiers compared with scalar: ", compared);
  REQUIRE(!scalar.empty());
  const std::uint64_t digest = fnv1a(scalar);
  CAPTURE(scalar.size());
  std::ostringstream hex;
  hex << "0x" << std::hex << digest << "ull";
  INFO("digest ", hex.str());
  CHECK(digest == kLogitsDigest);
}

}  // namespace ember
