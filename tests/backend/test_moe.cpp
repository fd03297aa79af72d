// Mixture-of-experts layers (qwen3moe, olmoe, llama with experts) on synthetic files: the
// hyper-parameters read and checked, every CPU path against the readable reference, and a
// row's logits the same whatever rows share its batch (experts grouped by the batch's routing).
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/cpu_ops.hpp"
#include "backend/cpu/reference.hpp"
#include "backend/cpu/weight_preparation.hpp"
#include "model/decoder_graph.hpp"
#include "model/decoder_tensors.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ember {
namespace {

const char* const kMoeArchitectures[] = {"qwen3moe", "olmoe", "mixtral"};

std::shared_ptr<const model::GgufFile> synthetic(const std::string& name, model::GgmlType type,
                                                 std::uint64_t seed = 7) {
  model::SyntheticModelSpec spec;
  spec.config = model::SyntheticModelSpec::architecture_config(name);
  spec.weight_type = type;
  spec.seed = seed;
  const auto bytes = model::make_synthetic_model(spec);
  return model::GgufFile::parse(bytes.data(), bytes.size(), name);
}

backend::BackendOptions options_at(Precision precision) {
  backend::BackendOptions options;
  options.threads = 2;
  options.precision = precision;
  return options;
}

std::vector<float> run(backend::Backend& b, const std::vector<std::int32_t>& tokens, int chunk) {
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16, KvCacheType::f32);
  return runner.append(tokens, /*all_rows=*/true, chunk);
}

struct Diff {
  double rel = 0, top1 = 0;
};

Diff compare(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += b[i] * static_cast<double>(b[i]);
  }
  const std::size_t rows = a.size() / static_cast<std::size_t>(vocab);
  int same = 0;
  for (std::size_t r = 0; r < rows; ++r)
    same += test::argmax(a.data() + r * vocab, vocab) == test::argmax(b.data() + r * vocab, vocab);
  return {std::sqrt(num / den), static_cast<double>(same) / static_cast<double>(rows)};
}

TEST_CASE("mixture-of-experts hyper-parameters are read per architecture") {
  const model::ModelConfig q = model::read_model_config(*synthetic("qwen3moe", model::GgmlType::F32));
  CHECK(q.routed());
  CHECK(q.experts == 8);
  CHECK(q.experts_used == 4);
  CHECK(q.expert_ffn == 32);  // qwen3moe.expert_feed_forward_length, not feed_forward_length (128)
  CHECK(q.expert_weights_norm);
  CHECK(!q.qk_norm_whole);
  const model::ModelConfig o = model::read_model_config(*synthetic("olmoe", model::GgmlType::F32));
  CHECK(o.experts_used == 3);
  CHECK(o.expert_ffn == o.ffn);
  CHECK(!o.expert_weights_norm);
  CHECK(o.qk_norm_whole);
  const model::ModelConfig m = model::read_model_config(*synthetic("mixtral", model::GgmlType::F32));
  CHECK(m.architecture == "llama");
  CHECK(m.experts == 4);
  CHECK(m.expert_weights_norm);
  CHECK(!model::read_model_config(*synthetic("llama3", model::GgmlType::F32)).routed());
}

// A file whose metadata says something else than its writer meant: key `key` set to `value`.
std::vector<std::uint8_t> with_u32(const std::string& name, const std::string& key, std::uint32_t value) {
  model::SyntheticModelSpec spec;
  spec.config = model::SyntheticModelSpec::architecture_config(name);
  spec.weight_type = model::GgmlType::F32;
  auto bytes = model::make_synthetic_model(spec);
  const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), name);
  const model::GgufValue* v = file->find(key);
  REQUIRE(v != nullptr);
  // The value's bytes are in the image: find the u32 after the key's name and patch it.
  const std::uint32_t old = *file->find_u32(key);
  auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  REQUIRE(at != bytes.end());
  at += static_cast<std::ptrdiff_t>(key.size() + 4);  // the name, then the value type
  REQUIRE(std::memcmp(&*at, &old, 4) == 0);
  std::memcpy(&*at, &value, 4);
  return bytes;
}

TEST_CASE("inconsistent expert counts are refused at open, naming the key") {
  for (const auto& patch :
       {std::pair{"qwen3moe.expert_used_count", 9u}, std::pair{"qwen3moe.expert_count", 0u},
        std::pair{"qwen3moe.expert_used_count", 0u}, std::pair{"qwen3moe.expert_feed_forward_length", 0u}}) {
    // Named copies, not structured bindings: Clang 14 cannot capture those in CAPTURE's lambda.
    const std::string key = patch.first;
    const std::uint32_t value = patch.second;
    CAPTURE(key);
    const auto bytes = with_u32("qwen3moe", key, value);
    const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "patched");
    try {
      (void)model::read_model_config(*file);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::invalid_model);
      CHECK(std::string(e.what()).find("expert") != std::string::npos);
    }
  }
  // An expert count the tensors do not have.
  const auto bytes = with_u32("mixtral", "llama.expert_count", 5);
  const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "patched");
  const model::ModelConfig c = model::read_model_config(*file);
  CHECK_THROWS_AS(model::map_decoder_tensors(*file, c), Error);
}

std::shared_ptr<const model::GgufFile> from_spec(const model::SyntheticModelSpec& spec, const std::string& name) {
  const auto bytes = model::make_synthetic_model(spec);
  return model::GgufFile::parse(bytes.data(), bytes.size(), name);
}

model::SyntheticModelSpec spec_of(const std::string& name, model::GgmlType type, std::uint64_t seed = 7) {
  model::SyntheticModelSpec spec;
  spec.config = model::SyntheticModelSpec::architecture_config(name);
  spec.weight_type = type;
  spec.seed = seed;
  return spec;
}

// Older llama.cpp conversions of Mixtral hold each expert's matrices as tensors of their own
// (blk.N.ffn_gate.E.weight): stacked at preparation, they give the stacked file's logits bit for
// bit, on the reference and on every CPU path.
TEST_CASE("mixture of experts: one tensor per expert gives the stacked file's logits") {
  for (const std::string name : kMoeArchitectures) {
    for (const auto type : {model::GgmlType::F32, model::GgmlType::Q4_0, model::GgmlType::Q4_1}) {
      model::SyntheticModelSpec spec = spec_of(name, type);
      const auto stacked = from_spec(spec, "stacked");
      spec.tensor_per_expert = true;
      const auto split = from_spec(spec, "split");
      CAPTURE(name);
      CAPTURE(model::ggml_type_info(type).name);
      REQUIRE(split->find_tensor("blk.1.ffn_down.3.weight") != nullptr);
      REQUIRE(split->find_tensor("blk.1.ffn_down_exps.weight") == nullptr);
      const model::ModelConfig c = model::read_model_config(*split);
      const model::DecoderTensors t = model::map_decoder_tensors(*split, c);
      CHECK(t.layers[1].gate_experts.size() == static_cast<std::size_t>(c.experts));
      CHECK(t.layers[1].gate_exps == nullptr);
      const auto tokens = test::random_tokens(24, c.vocab, 2);
      const auto compare_on = [&](auto make, Precision precision) {
        auto a = make(stacked, c, options_at(precision));
        auto b = make(split, c, options_at(precision));
        CHECK(a->weight_format() == b->weight_format());
        const auto la = run(*a, tokens, 24), lb = run(*b, tokens, 24);
        REQUIRE(la.size() == lb.size());
        CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
      };
      compare_on(backend::cpu::make_cpu_backend, Precision::int8);
      if (type != model::GgmlType::F32) continue;  // the float paths once, on the F32 file
      compare_on(backend::cpu::make_cpu_backend, Precision::fp32);
      compare_on(backend::cpu::make_reference_backend, Precision::fp32);
    }
  }
}

TEST_CASE("one tensor per expert: an expert tensor past expert_count is refused") {
  model::SyntheticModelSpec spec = spec_of("mixtral", model::GgmlType::F32);
  spec.tensor_per_expert = true;
  const model::ModelConfig c = spec.config;
  spec.extras = [&c](model::GgufWriter& w) {  // a fifth expert's gate in layer 1 of a 4-expert file
    w.add_tensor("blk.1.ffn_gate.4.weight", model::GgmlType::F32, {c.embedding, c.expert_ffn},
                 std::vector<float>(static_cast<std::size_t>(c.embedding * c.expert_ffn), 0.0f));
  };
  const auto file = from_spec(spec, "extra");
  const model::ModelConfig read = model::read_model_config(*file);
  REQUIRE(read.experts == 4);
  try {
    (void)model::map_decoder_tensors(*file, read);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_model);
    CHECK(std::string(e.what()).find("layer 1 has more expert tensors") != std::string::npos);
  }
}

// llama.cpp reads neither {arch}.expert_weights_scale nor expert_weights_norm for qwen3moe,
// olmoe or llama (model_config.cpp, read_experts): a file carrying them, with values that would
// change the logits if they were applied, runs as the same file without them.
TEST_CASE("mixture of experts: expert_weights_scale and expert_weights_norm change nothing, as in llama.cpp") {
  for (const std::string name : kMoeArchitectures) {
    model::SyntheticModelSpec spec = spec_of(name, model::GgmlType::Q4_0);
    const auto plain = from_spec(spec, "plain");
    const model::ModelConfig c = model::read_model_config(*plain);
    const std::string arch = c.architecture;
    spec.extras = [arch, norm = c.expert_weights_norm](model::GgufWriter& w) {
      w.set_f32(arch + ".expert_weights_scale", 2.5f);
      w.set_bool(arch + ".expert_weights_norm", !norm);
    };
    const auto keyed = from_spec(spec, "keyed");
    REQUIRE(keyed->find(arch + ".expert_weights_scale") != nullptr);
    CAPTURE(name);
    const model::ModelConfig k = model::read_model_config(*keyed);
    CHECK(k.expert_weights_norm == c.expert_weights_norm);
    const auto tokens = test::random_tokens(16, c.vocab, 9);
    auto a = backend::cpu::make_cpu_backend(plain, c, options_at(Precision::int8));
    auto b = backend::cpu::make_cpu_backend(keyed, k, options_at(Precision::int8));
    const auto la = run(*a, tokens, 16), lb = run(*b, tokens, 16);
    REQUIRE(la.size() == lb.size());
    CHECK(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) == 0);
  }
}

// The reference, the FP32 kernels and the INT8 kernels (w8a8 from Q8_0, w4a8 from Q4_0 and
// Q4_1) on each architecture.
TEST_CASE("mixture of experts: every CPU path matches the reference") {
  for (const std::string name : kMoeArchitectures) {
    for (const auto type : {model::GgmlType::Q8_0, model::GgmlType::Q4_0, model::GgmlType::Q4_1}) {
      const auto file = synthetic(name, type);
      const model::ModelConfig c = model::read_model_config(*file);
      auto reference = backend::cpu::make_reference_backend(file, c, options_at(Precision::fp32));
      auto fp32 = backend::cpu::make_cpu_backend(file, c, options_at(Precision::fp32));
      auto int8 = backend::cpu::make_cpu_backend(file, c, options_at(Precision::int8));
      CAPTURE(name);
      CAPTURE(int8->weight_format());
      const auto tokens = test::random_tokens(45, c.vocab, 3);
      const auto ref = run(*reference, tokens, 45);
      const Diff fast = compare(run(*fp32, tokens, 7), ref, c.vocab);
      CHECK(fast.rel < 1e-4);
      CHECK(fast.top1 == 1.0);
      const Diff quant = compare(run(*int8, tokens, 16), ref, c.vocab);
      MESSAGE(name, " ", int8->weight_format(), " vs reference: rel ", quant.rel, ", top-1 ", quant.top1);
      CHECK(quant.rel > 0.0);
      CHECK(quant.rel < 0.08);
      CHECK(quant.top1 >= 0.85);
      if (type == model::GgmlType::Q4_0) CHECK(int8->weight_format() == "w4a8");
    }
  }
}

// Prefill in one pass, in chunks, and token by token: the expert groups differ every time (a
// row's experts share a product with other rows, or run alone), the logits must not.
TEST_CASE("mixture of experts: a row's logits do not depend on its batch (int8)") {
  for (const std::string name : kMoeArchitectures) {
    for (const auto type : {model::GgmlType::Q8_0, model::GgmlType::Q4_0}) {
      const auto file = synthetic(name, type);
      const model::ModelConfig c = model::read_model_config(*file);
      auto int8 = backend::cpu::make_cpu_backend(file, c, options_at(Precision::int8));
      CAPTURE(name);
      CAPTURE(int8->weight_format());
      const auto tokens = test::random_tokens(40, c.vocab, 5);
      const auto whole = run(*int8, tokens, 40);
      for (const int chunk : {1, 3, 16}) {
        CAPTURE(chunk);
        const auto parts = run(*int8, tokens, chunk);
        REQUIRE(parts.size() == whole.size());
        CHECK(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)) == 0);
      }
    }
  }
}

// The routing profile: a decode row runs (and reads the weights of) only its experts_used
// experts; a batch of rows runs each expert its rows chose once, however many rows chose it.
TEST_CASE("mixture of experts: a decode row reads only its routed experts, a batch each chosen expert once") {
  const auto file = synthetic("olmoe", model::GgmlType::Q4_0);
  const model::ModelConfig c = model::read_model_config(*file);
  const model::DecoderTensors tensors = model::map_decoder_tensors(*file, c);
  kernels::cpu::CpuContext ctx(2);
  const backend::BackendOptions options = options_at(Precision::int8);
  const backend::cpu::PreparedWeights prepared =
      backend::cpu::prepare_cpu_weights(*file, c, tensors, ctx, options, Precision::int8);
  backend::cpu::CpuOps ops(c, prepared.weights, *tensors.token_embd, ctx);
  backend::KvCache kv(backend::KvGeometry{{16, c.kv_heads, c.head_dim, KvCacheType::f32}, c.layers, 4});
  const auto tokens = test::random_tokens(48, c.vocab, 6);
  std::vector<float> logits;
  std::uint64_t passes = 0, experts_summed = 0;  // the totals' expected values
  for (const int rows : {1, 2, 48}) {
    const std::uint64_t before = ops.experts_run_total();
    backend::Batch batch;
    for (int i = 0; i < rows; ++i) {
      batch.tokens.push_back(tokens[static_cast<std::size_t>(i)]);
      batch.positions.push_back(i);
      batch.slots.push_back(i);
    }
    batch.sequences.push_back({0, rows, {0, 1, 2}, {}});
    batch.logit_rows.push_back(rows - 1);
    ops.begin(batch, kv, &logits);
    model::run_decoder(c, ops, rows, 1);
    MESSAGE("olmoe, ", rows, " rows: ", ops.experts_run(), " of ", c.experts, " experts run in the last layer");
    if (rows == 1) CHECK(ops.experts_run() == c.experts_used);
    CHECK(ops.experts_run() >= c.experts_used);
    CHECK(ops.experts_run() <= std::min(c.experts, rows * c.experts_used));
    // The totals (EngineStats::routed_layers, experts_run): every layer of the pass counted,
    // each with at least its rows' experts_used and the last one with what it ran.
    ++passes;
    const std::uint64_t added = ops.experts_run_total() - before;
    experts_summed += added;
    CHECK(added >= static_cast<std::uint64_t>(c.layers) * static_cast<std::uint64_t>(c.experts_used));
    CHECK(added <= static_cast<std::uint64_t>(c.layers) * static_cast<std::uint64_t>(c.experts));
    if (rows == 1) CHECK(added == static_cast<std::uint64_t>(c.layers * c.experts_used));
  }
  CHECK(ops.routed_layers_run() == passes * static_cast<std::uint64_t>(c.layers));
  CHECK(ops.experts_run_total() == experts_summed);
}

// A budgeted step splits a routed stage by its (row, expert) slots (StageWork::Split::slots):
// with no time left each call runs one slot, so every expert with more than one row is cut
// between parts; the pass equals the whole one bit for bit.
TEST_CASE("mixture of experts: a pass in pieces (a slot per call) equals the whole pass") {
  const auto file = synthetic("qwen3moe", model::GgmlType::Q4_0);
  const model::ModelConfig c = model::read_model_config(*file);
  CHECK(model::stage_work(c, 0, model::Stage::gate_up, 20).units == 20 * c.experts_used);
  CHECK(model::stage_work(c, 0, model::Stage::down, 20).units == 0);
  for (const Precision precision : {Precision::fp32, Precision::int8}) {
    CAPTURE(precision == Precision::fp32 ? "fp32" : "int8");
    auto b = backend::cpu::make_cpu_backend(file, c, options_at(precision));
    const auto tokens = test::random_tokens(21, c.vocab, 4);
    test::SequenceRunner whole_runner(*b, 64), piece_runner(*b, 64);
    const auto whole = whole_runner.append(tokens, /*all_rows=*/true, 20);
    int calls = 0;
    const auto pieces = piece_runner.append(tokens, /*all_rows=*/true, 20, &calls);
    REQUIRE(pieces.size() == whole.size());
    CHECK(std::memcmp(pieces.data(), whole.data(), whole.size() * sizeof(float)) == 0);
    CHECK(calls > 21 * c.layers * c.experts_used);  // 20 rows, then 1: every routed stage a slot a call
  }
}

// W4A8 (the 4-bit experts and matrices kept in the file's groups, INT8 activations) against the
// FP32 path on the same Q4_0 file, teacher-forced over 160 positions: the FP32 path is the one
// arch_golden_test holds to llama.cpp, and the bound is the dense models' INT8 top-1 bound
// against FP32 (test_model_golden.cpp's int8_top1, 0.94).
TEST_CASE("mixture of experts: W4A8 teacher-forced top-1 against FP32 on the same Q4_0 file") {
  for (const std::string name : kMoeArchitectures) {
    const auto file = synthetic(name, model::GgmlType::Q4_0, 21);
    const model::ModelConfig c = model::read_model_config(*file);
    auto fp32 = backend::cpu::make_cpu_backend(file, c, options_at(Precision::fp32));
    auto int8 = backend::cpu::make_cpu_backend(file, c, options_at(Precision::int8));
    REQUIRE(int8->weight_format() == "w4a8");
    const auto tokens = test::random_tokens(160, c.vocab, 8);
    const Diff d = compare(run(*int8, tokens, 64), run(*fp32, tokens, 64), c.vocab);
    MESSAGE(name, ": w4a8 vs fp32 teacher-forced top-1 ", d.top1 * 100, " % over 160 positions, rel ", d.rel);
    CHECK(d.top1 >= 0.94);
  }
}

}  // namespace
}  // namespace ember
