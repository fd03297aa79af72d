// Every CPU path against the readable reference, on synthetic models: the CPU backend with
// FP32 GEMMs must match it to rounding, the INT8 backend within quantization error, and a
// flattened multi-sequence batch must give the same logits as each sequence alone.
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/reference.hpp"
#include "model/decoder_graph.hpp"
#include "model_writer/gguf_writer.hpp"
#include "sequence_runner.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

namespace ember {
namespace {

// The options with `precision`: the CPU backend's matrix products (int8 or fp32).
backend::BackendOptions at_precision(backend::BackendOptions options, Precision precision) {
  options.precision = precision;
  return options;
}

std::shared_ptr<const model::GgufFile> synthetic(const model::ModelConfig& config, std::uint64_t seed) {
  model::SyntheticModelSpec spec;
  spec.config = config;
  spec.seed = seed;
  const auto bytes = model::make_synthetic_model(spec);
  return model::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
}

using test::random_tokens;

struct Diff {
  double max_abs = 0, rel = 0;  // rel: ||a-b|| / ||b||
  double top1 = 0;              // fraction of rows with the same argmax
};

Diff compare(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  REQUIRE(a.size() == b.size());
  Diff d;
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d.max_abs = test::worse(d.max_abs, std::fabs(a[i] - b[i]));
    num += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    den += b[i] * static_cast<double>(b[i]);
  }
  d.rel = std::sqrt(num / den);
  const std::size_t rows = a.size() / static_cast<std::size_t>(vocab);
  int same = 0;
  for (std::size_t r = 0; r < rows; ++r)
    same += test::argmax(a.data() + r * vocab, vocab) == test::argmax(b.data() + r * vocab, vocab);
  d.top1 = static_cast<double>(same) / static_cast<double>(rows);
  return d;
}

std::vector<float> run(backend::Backend& b, const std::vector<std::int32_t>& tokens, KvCacheType kv, int chunk) {
  test::SequenceRunner runner(b, static_cast<int>(tokens.size()) + 16, kv);
  return runner.append(tokens, /*all_rows=*/true, chunk);
}

void check_paths(const model::ModelConfig& config) {
  const auto file = synthetic(config, 7);
  const model::ModelConfig c = model::read_model_config(*file);
  backend::BackendOptions options;
  options.threads = 2;
  auto reference = backend::cpu::make_reference_backend(file, c, options);
  auto fp32 = backend::cpu::make_cpu_backend(file, c, at_precision(options, Precision::fp32));
  auto int8 = backend::cpu::make_cpu_backend(file, c, at_precision(options, Precision::int8));
  backend::BackendOptions calibrated = options;
  calibrated.tokenize = [&](std::string_view) { return random_tokens(40, c.vocab, 9); };
  auto smoothed = backend::cpu::make_cpu_backend(file, c, at_precision(calibrated, Precision::int8));
  const auto tokens = random_tokens(45, c.vocab, 3);  // not a multiple of the block size

  const auto ref = run(*reference, tokens, KvCacheType::f32, 45);
  const auto ref_f16 = run(*reference, tokens, KvCacheType::f16, 45);
  const auto fast = run(*fp32, tokens, KvCacheType::f32, 7);  // chunked prefill too
  const auto quant = run(*int8, tokens, KvCacheType::f16, 16);

  const Diff fast_diff = compare(fast, ref, c.vocab);
  MESSAGE("kernel fp32 vs reference: max abs ", fast_diff.max_abs, ", rel ", fast_diff.rel);
  CHECK(fast_diff.rel < 1e-4);
  CHECK(fast_diff.top1 == 1.0);
  const Diff f16_diff = compare(ref_f16, ref, c.vocab);
  MESSAGE("reference f16 KV vs f32 KV: rel ", f16_diff.rel);
  CHECK(f16_diff.rel < 5e-3);
  const Diff int8_diff = compare(quant, ref, c.vocab);
  MESSAGE("kernel int8 vs reference: max abs ", int8_diff.max_abs, ", rel ", int8_diff.rel, ", top-1 ", int8_diff.top1);
  CHECK(int8_diff.rel < 0.05);
  CHECK(int8_diff.rel > 0.0);  // the int8 path really quantizes
  CHECK(int8_diff.top1 >= 0.85);
  // Activation smoothing folds factors into norms, V and up: the function must not change.
  const Diff smooth_diff = compare(run(*smoothed, tokens, KvCacheType::f16, 16), ref, c.vocab);
  MESSAGE("kernel int8 with activation smoothing vs reference: rel ", smooth_diff.rel, ", top-1 ", smooth_diff.top1);
  CHECK(smooth_diff.rel < 0.05);
  CHECK(smooth_diff.top1 >= 0.85);
}

TEST_CASE("llama: every CPU path matches the reference") { check_paths(model::SyntheticModelSpec::tiny_config()); }

TEST_CASE("qwen2: half RoPE layout and attention biases match the reference") {
  model::ModelConfig c = model::SyntheticModelSpec::tiny_config();
  c.architecture = "qwen2";
  c.rope_layout = model::RopeLayout::half;
  c.attention_bias = true;
  check_paths(c);
}

TEST_CASE("qwen3: q/k norm and a head width of its own match the reference") {
  model::ModelConfig c = model::SyntheticModelSpec::tiny_config();
  c.architecture = "qwen3";
  c.head_dim = 32;  // 4 heads of 32 on a width of 64: key_length says so
  c.rope_dims = 32;
  check_paths(c);
  const model::ModelConfig read = model::read_model_config(*synthetic(c, 7));
  CHECK(read.qk_norm);
  CHECK(read.head_dim == 32);
  CHECK(read.rope_layout == model::RopeLayout::half);
}

// Gemma 3's layer: q/k norm, post-norms, GeGLU, scaled embeddings and, on a 2-layer model with a
// pattern of 2, a sliding layer (window 8, RoPE base 10000) then a global one (base 1e6).
model::ModelConfig gemma3_config(int window) {
  model::ModelConfig c = model::SyntheticModelSpec::tiny_config();
  c.architecture = "gemma3";
  c.head_dim = 32;
  c.rope_dims = 32;
  c.rope_base = 1e6f;
  c.sliding_window = window;
  c.sliding_window_pattern = 2;
  return c;
}

TEST_CASE("gemma3: post-norms, GeGLU, scaled embeddings and sliding-window layers match the reference") {
  check_paths(gemma3_config(8));
  const auto file = synthetic(gemma3_config(8), 7);
  const model::ModelConfig c = model::read_model_config(*file);
  CHECK(c.qk_norm);
  CHECK(c.post_norms);
  CHECK(c.feed_forward == model::FeedForward::geglu);
  CHECK(c.embedding_scale == doctest::Approx(8.0f));  // sqrt(64)
  CHECK(c.sliding(0));
  CHECK_FALSE(c.sliding(1));
  CHECK(c.attention_window(0) == 8);
  CHECK(c.layer_rope_base(0) == 10000.0f);
  CHECK(c.layer_rope_base(1) == 1e6f);
  // The window and the sliding layers' own RoPE base change the function: the same weights with
  // a window longer than the sequence (every layer sees everything) give other logits, and the
  // kernel path follows the windowed reference, not the unwindowed one.
  const auto unwindowed_file = synthetic(gemma3_config(4096), 7);
  const model::ModelConfig u = model::read_model_config(*unwindowed_file);
  backend::BackendOptions options;
  options.threads = 2;
  const auto tokens = random_tokens(45, c.vocab, 3);
  auto reference = backend::cpu::make_reference_backend(file, c, options);
  auto unwindowed = backend::cpu::make_reference_backend(unwindowed_file, u, options);
  auto fp32 = backend::cpu::make_cpu_backend(file, c, at_precision(options, Precision::fp32));
  const auto ref = run(*reference, tokens, KvCacheType::f32, 45);
  const Diff moved = compare(run(*unwindowed, tokens, KvCacheType::f32, 45), ref, c.vocab);
  MESSAGE("gemma3: window 8 vs 4096 on 45 tokens: rel ", moved.rel);
  CHECK(moved.rel > 0.01);
  CHECK(compare(run(*fp32, tokens, KvCacheType::f32, 7), ref, c.vocab).rel < 1e-4);
}

TEST_CASE("gemma3 27B's attention scale (62 layers: 1/sqrt(width / heads)) is read and applied alike") {
  model::ModelConfig c = gemma3_config(8);
  c.layers = 62;
  const model::ModelConfig read = model::read_model_config(*synthetic(c, 7));
  CHECK(read.attention_scale == doctest::Approx(0.25f));  // 1/sqrt(64 / 4), not 1/sqrt(32)
  CHECK(model::read_model_config(*synthetic(gemma3_config(8), 7)).attention_scale == 0.0f);
  check_paths(c);
}

// A model with RoPE scaling (rope_freqs.weight, linear scaling) through every CPU path, then
// against the same weights with `unscaled`'s RoPE (one part of the scaling taken away): the
// logits must move by far more than any path's tolerance, and each path must stay with the
// scaled function, so a path that ignored that part would fail here.
void check_rope_scaling_applied(const model::ModelConfig& config, const model::ModelConfig& unscaled) {
  check_paths(config);
  const auto file = synthetic(config, 7), plain_file = synthetic(unscaled, 7);  // same weights
  const model::ModelConfig c = model::read_model_config(*file), plain = model::read_model_config(*plain_file);
  REQUIRE(c.rope_freq_factors == config.rope_freq_factors);
  REQUIRE(c.rope_position_scale() == config.rope_position_scale());
  REQUIRE(plain.rope_freq_factors == unscaled.rope_freq_factors);
  REQUIRE(plain.rope_position_scale() == unscaled.rope_position_scale());
  backend::BackendOptions options;
  options.threads = 2;
  const auto tokens = random_tokens(45, c.vocab, 3);
  const auto ref = run(*backend::cpu::make_reference_backend(file, c, options), tokens, KvCacheType::f32, 45);
  const auto ref_plain =
      run(*backend::cpu::make_reference_backend(plain_file, plain, options), tokens, KvCacheType::f32, 45);
  const Diff moved = compare(ref_plain, ref, c.vocab);
  MESSAGE("reference with vs without RoPE scaling: rel ", moved.rel, ", top-1 ", moved.top1);
  CHECK(moved.rel > 0.01);  // 100 times the fp32 path's tolerance (1e-4)
  for (Precision precision : {Precision::fp32, Precision::int8}) {
    CAPTURE(static_cast<int>(precision));
    const auto fast =
        run(*backend::cpu::make_cpu_backend(file, c, at_precision(options, precision)), tokens, KvCacheType::f16, 16);
    const double to_scaled = compare(fast, ref, c.vocab).rel, to_plain = compare(fast, ref_plain, c.vocab).rel;
    MESSAGE("CPU backend vs scaled reference: rel ", to_scaled, "; vs unscaled: rel ", to_plain);
    CHECK(to_scaled < to_plain / 4);  // int8's own error is within check_paths' 0.05, not this
  }
}

TEST_CASE("llama 3: RoPE frequency factors match the reference and change the logits") {
  const model::ModelConfig plain = model::SyntheticModelSpec::tiny_config();
  model::ModelConfig c = plain;
  // Llama 3.1's parameters with a 32-token original context, so that the test's positions
  // reach the pairs the factors slow down: factors 1, 3.3, 8, ..., 8.
  c.rope_freq_factors = model::SyntheticModelSpec::llama3_rope_factors(c, 8.0f, 1.0f, 4.0f, 32);
  check_rope_scaling_applied(c, plain);
}

TEST_CASE("linear RoPE scaling on top of frequency factors matches the reference and changes the logits") {
  model::ModelConfig factors_only = model::SyntheticModelSpec::tiny_config();
  factors_only.rope_freq_factors = model::SyntheticModelSpec::llama3_rope_factors(factors_only, 8.0f, 1.0f, 4.0f, 32);
  model::ModelConfig c = factors_only;
  c.rope_scaling_factor = 4.0f;  // written as rope.scaling.type "linear", factor 4
  check_rope_scaling_applied(c, factors_only);
}

TEST_CASE("a flattened batch of several sequences equals each sequence alone") {
  const auto file = synthetic(model::SyntheticModelSpec::tiny_config(), 11);
  const model::ModelConfig c = model::read_model_config(*file);
  backend::BackendOptions options;
  options.threads = 2;
  for (Precision precision : {Precision::fp32, Precision::int8}) {
    auto b = backend::cpu::make_cpu_backend(file, c, at_precision(options, precision));
    const auto a_tokens = random_tokens(21, c.vocab, 1), b_tokens = random_tokens(5, c.vocab, 2);
    // Alone: A prefilled then decoding its 21st token; B prefilled in one go.
    test::SequenceRunner alone_a(*b, 64), alone_b(*b, 64);
    alone_a.append(std::vector<std::int32_t>(a_tokens.begin(), a_tokens.end() - 1));
    const auto a_last = alone_a.append({a_tokens.back()});
    const auto b_all = alone_b.append(b_tokens, /*all_rows=*/true);

    // Together: A's prefix computed first, then one batch with A's decode row and B's prefill.
    backend::KvGeometry g{{4, c.kv_heads, c.head_dim, KvCacheType::f16}, c.layers, 16};
    backend::KvCache kv(g);
    const std::vector<std::int32_t> a_blocks{9, 2, 14, 5, 0, 7}, b_blocks{3, 11};
    auto slot = [&](const std::vector<std::int32_t>& blocks, int pos) {
      return blocks[static_cast<std::size_t>(pos / 4)] * 4 + pos % 4;
    };
    backend::Batch prefix;
    for (int p = 0; p < 20; ++p) {
      prefix.tokens.push_back(a_tokens[static_cast<std::size_t>(p)]);
      prefix.positions.push_back(p);
      prefix.slots.push_back(slot(a_blocks, p));
    }
    prefix.sequences.push_back({0, 20, {9, 2, 14, 5, 0}, {}});
    std::vector<float> logits;
    b->forward(prefix, kv, logits);
    CHECK(logits.empty());  // no logit rows asked, none computed

    backend::Batch step;
    step.tokens = {a_tokens.back()};
    step.positions = {20};
    step.slots = {slot(a_blocks, 20)};
    step.sequences.push_back({0, 1, a_blocks, {}});
    for (int p = 0; p < 5; ++p) {
      step.tokens.push_back(b_tokens[static_cast<std::size_t>(p)]);
      step.positions.push_back(p);
      step.slots.push_back(slot(b_blocks, p));
    }
    step.sequences.push_back({1, 5, b_blocks, {}});
    step.logit_rows = {0, 1, 2, 3, 4, 5};
    b->forward(step, kv, logits);
    std::vector<float> together_a(logits.begin(), logits.begin() + c.vocab);
    std::vector<float> together_b(logits.begin() + c.vocab, logits.end());
    // The INT8 path is bit-exact here in the Release build (batch_invariance_test asserts the
    // tokens); Clang's sanitizer build (RelWithDebInfo, unity) differs by up to 4.1e-4 on B's
    // rows since the x86-tier split, some FP contraction outside the files that hold
    // -ffp-contract=off. The FP32 path's products (oneDNN's FP32 matmul) block their sums by the
    // row count, so a row's sums are ordered by its batch.
    const double bound = precision == Precision::fp32 ? 1e-3 : 5e-4;
    CAPTURE(static_cast<int>(precision));
    CHECK(compare(together_a, a_last, c.vocab).max_abs < bound);
    CHECK(compare(together_b, b_all, c.vocab).max_abs < bound);
  }
}

TEST_CASE(
    "a pass in pieces (a stage, or part of a product or of attention, per call) equals the whole pass bit for bit") {
  model::SyntheticModelSpec spec;
  spec.config.vocab = 4096;  // a head of about seven layers' weights
  for (const model::GgmlType type : {model::GgmlType::Q8_0, model::GgmlType::Q4_0}) {
    spec.weight_type = type;
    const auto bytes = model::make_synthetic_model(spec);
    const auto file = model::GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
    const model::ModelConfig c = model::read_model_config(*file);
    backend::BackendOptions options;
    options.threads = 2;
    for (Precision precision : {Precision::fp32, Precision::int8}) {
      auto b = backend::cpu::make_cpu_backend(file, c, at_precision(options, precision));
      CAPTURE(b->weight_format());
      const auto tokens = random_tokens(41, c.vocab, 4);
      test::SequenceRunner whole_runner(*b, 64), piece_runner(*b, 64);
      // Passes of 20 logit rows (attention in parts of 8 rows), then a decode row: each product's
      // kernel (GEMV, W4A8 or oneDNN) takes its slices at either row count.
      const std::vector<std::int32_t> prompt(tokens.begin(), tokens.end() - 1);
      auto whole = whole_runner.append(prompt, /*all_rows=*/true, 20);
      const auto whole_last = whole_runner.append({tokens.back()});
      whole.insert(whole.end(), whole_last.begin(), whole_last.end());
      int calls = 0;
      auto pieces = piece_runner.append(prompt, /*all_rows=*/true, 20, &calls);
      const auto pieces_last = piece_runner.append({tokens.back()}, false, 256, &calls);
      pieces.insert(pieces.end(), pieces_last.begin(), pieces_last.end());
      REQUIRE(pieces.size() == whole.size());
      CHECK(std::memcmp(pieces.data(), whole.data(), whole.size() * sizeof(float)) == 0);
      // With no time left every call runs one piece: a whole stage, or a granule of a split one.
      int stages = 0;
      for (const model::Stage s : model::kLayerStages) stages += model::stage_work(c, 0, s, 20).units > 0;
      const int whole_stages = 3 * (c.layers * stages + 2);  // 20 + 20 prompt rows, then 1
      const int attention_parts = 2 * c.layers * (3 - 1);    // 20 rows in parts of 8, twice
      MESSAGE(b->weight_format(), ": ", calls, " calls for ", whole_stages, " stages");
      if (precision == Precision::fp32)
        CHECK(calls == whole_stages + attention_parts);  // oneDNN computes a product whole
      else
        CHECK(calls > whole_stages + attention_parts + 3 * c.layers * 4);  // every product in slices

      // With time to spare a budgeted pass is one call: the parts grow to what fits, here all.
      test::SequenceRunner roomy_runner(*b, 64);
      roomy_runner.piece_budget = std::chrono::hours(1);
      int roomy_calls = 0;
      auto roomy = roomy_runner.append(prompt, /*all_rows=*/true, 20, &roomy_calls);
      CHECK(roomy_calls == 2);
      CHECK(std::memcmp(roomy.data(), whole.data(), roomy.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("a batch with inconsistent indices is rejected, not trusted") {
  const auto file = synthetic(model::SyntheticModelSpec::tiny_config(), 5);
  const model::ModelConfig c = model::read_model_config(*file);
  auto b = backend::cpu::make_cpu_backend(file, c, at_precision({}, Precision::int8));
  backend::KvGeometry g{{4, c.kv_heads, c.head_dim, KvCacheType::f16}, c.layers, 4};
  backend::KvCache kv(g);
  std::vector<float> logits;
  backend::Batch bad;
  bad.tokens = {5};
  bad.positions = {0};
  bad.slots = {99};  // outside the pool
  bad.sequences.push_back({0, 1, {0}, {}});
  CHECK_THROWS_AS(b->forward(bad, kv, logits), Error);
  bad.slots = {0};
  bad.tokens = {c.vocab};  // outside the vocabulary
  CHECK_THROWS_AS(b->forward(bad, kv, logits), Error);
  bad.tokens = {5};
  bad.logit_rows = {3};
  CHECK_THROWS_AS(b->forward(bad, kv, logits), Error);
}

}  // namespace
}  // namespace ember
