// GGUF writer -> reader round trips, typed getters, model config and the weights map, all on
// synthetic models.
#include "model/decoder_tensors.hpp"
#include "model/gguf.hpp"
#include "model/model_config.hpp"
#include "model_writer/ggml_quantize.hpp"
#include "model_writer/gguf_writer.hpp"
#include "tests/support/test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <string>

using namespace ember::model;
using ember::ErrorCode;

namespace {

template <class F>
std::string error_of(F&& f, ErrorCode expected) {
  try {
    f();
  } catch (const ember::Error& e) {
    CHECK(e.code() == expected);
    return e.what();
  }
  FAIL("no ember::Error thrown");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A valid tiny llama config (head_dim 16: 8 RoPE pairs), then `edit`.
template <class Edit>
std::shared_ptr<const GgufFile> edited_config_file(Edit edit) {
  GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.set_u32("llama.block_count", 2);
  g.set_u32("llama.context_length", 256);
  g.set_u32("llama.embedding_length", 64);
  g.set_u32("llama.feed_forward_length", 128);
  g.set_u32("llama.attention.head_count", 4);
  g.set_u32("llama.attention.head_count_kv", 2);
  g.set_u32("llama.vocab_size", 512);
  edit(g);
  const auto bytes = g.bytes();
  return GgufFile::parse(bytes.data(), bytes.size(), "edited");
}

// The message of the error read_model_config throws on the edited config (checking its code).
template <class Edit>
std::string config_error(Edit edit, ErrorCode code) {
  const auto h = edited_config_file(edit);
  return error_of([&] { read_model_config(*h); }, code);
}

}  // namespace

TEST_CASE("writer and reader round-trip metadata of every setter and tensors") {
  GgufWriter w;
  w.set_u32("a.u32", 4000000000u);
  w.set_i32("a.i32", -7);
  w.set_u64("a.u64", 1ull << 40);
  w.set_f32("a.f32", 0.125f);
  w.set_bool("a.bool", true);
  w.set_string("a.str", "h\xc3\xa9llo");
  w.set_string_array("a.strs", {"x", "", "yz"});
  w.set_f32_array("a.f32s", {1.5f, -2.0f});
  w.set_i32_array("a.i32s", {3, -4, 5});
  w.set_u32("a.u32", 17u);  // replaces, keeps its place
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f - 8.0f;
  w.add_tensor("t.f32", GgmlType::F32, {16, 4}, v);
  w.add_tensor("t.q8", GgmlType::Q8_0, {32, 2}, v);
  w.add_tensor("t.q41", GgmlType::Q4_1, {64}, v);
  const auto image = w.bytes();
  const auto f = GgufFile::parse(image.data(), image.size(), "roundtrip");

  CHECK(f->version() == 3);
  CHECK(f->alignment() == 32);
  CHECK(f->data_offset() % 32 == 0);
  CHECK(f->file_size() == image.size());
  REQUIRE(f->metadata().size() == 10);  // general.alignment + 9 keys
  CHECK(f->metadata()[0].first == "general.alignment");
  CHECK(f->metadata()[1].first == "a.u32");
  CHECK(f->get_u32("a.u32") == 17u);
  CHECK(f->find("a.i32")->scalar.i == -7);
  CHECK(f->find("a.u64")->scalar.u == (1ull << 40));
  CHECK(f->get_f32("a.f32") == 0.125f);
  CHECK(f->get_bool("a.bool"));
  CHECK(f->get_string("a.str") == "h\xc3\xa9llo");
  CHECK(f->get_string_array("a.strs") == std::vector<std::string_view>{"x", "", "yz"});
  CHECK(f->get_f32_array("a.f32s") == std::vector<float>{1.5f, -2.0f});
  CHECK(f->get_i32_array("a.i32s") == std::vector<std::int32_t>{3, -4, 5});
  CHECK_FALSE(f->find_u32("missing").has_value());
  CHECK(contains(error_of([&] { f->get_u32("missing"); }, ErrorCode::invalid_model), "'missing'"));
  CHECK(contains(error_of([&] { f->get_u32("a.str"); }, ErrorCode::invalid_model), "type string"));
  CHECK(contains(error_of([&] { f->get_u32("a.i32"); }, ErrorCode::invalid_model), "u32 range"));
  CHECK(contains(error_of([&] { f->get_u32("a.u64"); }, ErrorCode::invalid_model), "u32 range"));
  CHECK(contains(error_of([&] { f->get_string_array("a.i32s"); }, ErrorCode::invalid_model), "array of string"));

  REQUIRE(f->tensors().size() == 3);
  const GgufTensor& t = f->tensor("t.f32");
  CHECK(t.shape == std::vector<std::int64_t>{16, 4});
  CHECK(t.rows() == 4);
  CHECK(t.nbytes == 256);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data) % 32 == 0);
  CHECK(dequantize_tensor(t) == v);
  const GgufTensor& q8 = f->tensor("t.q8");
  CHECK(q8.type == GgmlType::Q8_0);
  CHECK(q8.nbytes == 68);
  CHECK(q8.offset % 32 == 0);
  const auto expected_q8 = quantize(GgmlType::Q8_0, v.data(), 64);
  CHECK(std::equal(expected_q8.begin(), expected_q8.end(), q8.data));
  std::vector<float> row(32);
  dequantize_row(q8, 1, row.data());
  for (std::size_t i = 0; i < 32; ++i) CHECK(std::fabs(row[i] - v[32 + i]) <= 8.0f / 127 * 0.51f);
  CHECK_THROWS_AS(dequantize_row(q8, 2, row.data()), ember::Error);
  const auto q41 = dequantize_to_tensor(f->tensor("t.q41"));
  CHECK(q41.ndim() == 1);
  CHECK(q41.dim(0) == 64);
  CHECK(f->find_tensor("nope") == nullptr);
  CHECK(contains(error_of([&] { f->tensor("nope"); }, ErrorCode::invalid_model), "'nope'"));
  CHECK_THROWS_AS(w.add_tensor("t.f32", GgmlType::F32, {4}, {1, 2, 3, 4}), ember::Error);
  CHECK_THROWS_AS(w.add_tensor("odd", GgmlType::Q8_0, {16}, std::vector<float>(16)), ember::Error);
}

TEST_CASE("synthetic llama model: file round trip, config, tokenizer metadata, weights") {
  SyntheticModelSpec spec;
  spec.config.tied_embeddings = false;
  const auto dir = ember::test::temp_dir("ember-model");
  const std::string path = (dir / "tiny.gguf").string();
  write_synthetic_model(spec, path);
  auto f = GgufFile::open(path);
  const auto image = make_synthetic_model(spec);
  CHECK(f->file_size() == image.size());  // same spec, same bytes

  const ModelConfig c = read_model_config(*f);
  CHECK(c.architecture == "llama");
  CHECK(c.layers == 2);
  CHECK(c.embedding == 64);
  CHECK(c.ffn == 128);
  CHECK(c.heads == 4);
  CHECK(c.kv_heads == 2);
  CHECK(c.head_dim == 16);
  CHECK(c.rope_dims == 16);
  CHECK(c.vocab == 512);
  CHECK(c.context_length == 256);
  CHECK(c.rope_layout == RopeLayout::interleaved);
  CHECK_FALSE(c.tied_embeddings);
  CHECK_FALSE(c.attention_bias);

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  const auto types = f->get_i32_array("tokenizer.ggml.token_type");
  const auto merges = f->get_string_array("tokenizer.ggml.merges");
  REQUIRE(tokens.size() == 512);
  REQUIRE(types.size() == 512);
  CHECK(tokens[0] == "<|endoftext|>");
  CHECK(tokens[1] == "<|im_start|>");
  CHECK(tokens[2] == "<|im_end|>");
  CHECK(types[1] == 3);
  CHECK(tokens[kSyntheticFirstByteToken + 'a'] == "a");
  CHECK(tokens[kSyntheticFirstByteToken + ' '] == "\xc4\xa0");  // GPT-2 maps space to U+0120
  CHECK(tokens[kSyntheticFirstByteToken + '\n'] == "\xc4\x8a");
  CHECK(merges.size() >= 200);
  const std::set<std::string_view> vocab(tokens.begin(), tokens.end());
  CHECK(vocab.size() == tokens.size());  // no duplicates
  for (std::string_view m : merges) {
    const auto space = m.find(' ');
    REQUIRE(space != std::string_view::npos);
    std::string joined(m.substr(0, space));
    joined += m.substr(space + 1);
    CHECK_MESSAGE(vocab.count(joined) == 1, "merge '" << m << "' makes no token");
  }
  CHECK(f->get_string("tokenizer.ggml.model") == "gpt2");
  CHECK(f->get_string("tokenizer.ggml.pre") == "smollm");
  CHECK(f->get_u32("tokenizer.ggml.bos_token_id") == 1);
  CHECK(f->get_u32("tokenizer.ggml.eos_token_id") == 2);
  CHECK(f->get_string("tokenizer.chat_template") == kSmolLmChatTemplate);

  const DecoderTensors w = map_decoder_tensors(*f, c);
  REQUIRE(w.layers.size() == 2);
  CHECK(w.output != w.token_embd);
  CHECK(w.layers[1].w_down->shape == std::vector<std::int64_t>{128, 64});
  CHECK(w.layers[0].wk->shape == std::vector<std::int64_t>{64, 32});
  CHECK(w.layers[0].bq == nullptr);
  const auto norm = dequantize_tensor(*w.layers[0].attn_norm);
  for (float x : norm) CHECK((x >= 0.9f && x <= 1.1f));
  const auto embd = dequantize_to_tensor(*w.token_embd);
  CHECK(embd.dim(0) == 512);
  CHECK(embd.dim(1) == 64);
  std::vector<float> row(64);
  dequantize_row(*w.token_embd, 300, row.data());
  for (int i = 0; i < 64; ++i) CHECK(row[static_cast<std::size_t>(i)] == embd.row<float>(300)[i]);
  f.reset();  // unmapped first: Windows deletes no file that a view maps
  std::filesystem::remove_all(dir);
}

TEST_CASE("synthetic qwen2 model has biases and the half RoPE layout; seeds matter") {
  SyntheticModelSpec spec;
  spec.config.architecture = "qwen2";
  spec.weight_type = GgmlType::Q4_1;
  const auto image = make_synthetic_model(spec);
  const auto f = GgufFile::parse(image.data(), image.size());
  const ModelConfig c = read_model_config(*f);
  CHECK(c.rope_layout == RopeLayout::half);
  CHECK(c.attention_bias);
  CHECK(c.tied_embeddings);
  const DecoderTensors w = map_decoder_tensors(*f, c);
  CHECK(w.output == w.token_embd);
  REQUIRE(w.layers[1].bk != nullptr);
  CHECK(w.layers[1].bk->shape == std::vector<std::int64_t>{32});
  CHECK(w.layers[0].wq->type == GgmlType::Q4_1);

  CHECK(make_synthetic_model(spec) == image);
  spec.seed = 2;
  CHECK(make_synthetic_model(spec) != image);
}

TEST_CASE("model config rejects unsupported architectures and inconsistent shapes") {
  const auto arch =
      config_error([](GgufWriter& g) { g.set_string("general.architecture", "gpt2"); }, ErrorCode::unsupported);
  CHECK(contains(arch, "'gpt2'"));
  CHECK(contains(arch, "llama, qwen2"));
  CHECK(contains(
      config_error([](GgufWriter& g) { g.set_u32("llama.attention.head_count", 5); }, ErrorCode::invalid_model),
      "not divisible by 5 heads"));
  CHECK(contains(
      config_error([](GgufWriter& g) { g.set_u32("llama.attention.head_count_kv", 3); }, ErrorCode::invalid_model),
      "3 KV heads"));
  CHECK(contains(config_error([](GgufWriter& g) { g.set_u32("llama.block_count", 0); }, ErrorCode::invalid_model),
                 "llama.block_count = 0"));
  CHECK(contains(
      config_error([](GgufWriter& g) { g.set_u32("llama.embedding_length", 1u << 20); }, ErrorCode::invalid_model),
      "llama.embedding_length"));
  CHECK(
      contains(config_error([](GgufWriter& g) { g.set_f32("llama.rope.freq_base", -1.0f); }, ErrorCode::invalid_model),
               "freq_base"));
  CHECK(contains(
      config_error([](GgufWriter& g) { g.set_string("llama.context_length", "big"); }, ErrorCode::invalid_model),
      "llama.context_length"));
}

TEST_CASE("model config reads Llama 3 RoPE frequency factors and linear scaling from a written file") {
  SyntheticModelSpec spec;
  const auto plain_image = make_synthetic_model(spec);
  const auto plain_file = GgufFile::parse(plain_image.data(), plain_image.size());
  const ModelConfig plain = read_model_config(*plain_file);
  CHECK(plain.rope_freq_factors.empty());
  CHECK(plain.rope_scaling == RopeScaling::linear);  // llama.cpp's default type, factor 1
  CHECK(plain.rope_scaling_factor == 1.0f);
  CHECK(plain.rope_position_scale() == 1.0f);
  CHECK(plain.rope_original_context == 0);

  // Llama 3.1's factors (factor 8, low 1, high 4) for a 64-token original context: the fastest
  // pair keeps its frequency, the slowest is divided by 8, one pair lies in between.
  const std::vector<float> factors = SyntheticModelSpec::llama3_rope_factors(spec.config, 8.0f, 1.0f, 4.0f, 64);
  REQUIRE(factors.size() == 8);
  CHECK(factors.front() == 1.0f);
  CHECK(factors.back() == 8.0f);
  CHECK(std::count_if(factors.begin(), factors.end(), [](float f) { return f > 1.0f && f < 8.0f; }) >= 1);
  spec.config.rope_freq_factors = factors;
  spec.config.rope_scaling_factor = 4.0f;
  spec.config.rope_original_context = 8192;
  const auto dir = ember::test::temp_dir("ember-rope");
  const std::string path = (dir / "llama3.gguf").string();
  write_synthetic_model(spec, path);
  auto f = GgufFile::open(path);
  const GgufTensor& t = f->tensor("rope_freqs.weight");
  CHECK(t.type == GgmlType::F32);
  CHECK(t.shape == std::vector<std::int64_t>{8});
  CHECK(f->get_string("llama.rope.scaling.type") == "linear");
  const ModelConfig c = read_model_config(*f);
  CHECK(c.rope_freq_factors == factors);
  CHECK(c.rope_scaling == RopeScaling::linear);
  CHECK(c.rope_scaling_factor == 4.0f);
  CHECK(c.rope_position_scale() == 0.25f);
  CHECK(c.rope_original_context == 8192);
  // Same seed, same weights: the factors are not drawn from the generator.
  const DecoderTensors w = map_decoder_tensors(*f, c);
  CHECK(dequantize_tensor(*w.layers[1].wq) == dequantize_tensor(*map_decoder_tensors(*plain_file, plain).layers[1].wq));
  f.reset();  // unmapped first: Windows deletes no file that a view maps
  std::filesystem::remove_all(dir);

  // "none" never scales, whatever the factor; an absent type with a factor is linear, and the
  // old key rope.scale_linear is read when rope.scaling.factor is absent.
  const auto none = edited_config_file([](GgufWriter& g) {
    g.set_string("llama.rope.scaling.type", "none");
    g.set_f32("llama.rope.scaling.factor", 8.0f);
  });
  CHECK(read_model_config(*none).rope_scaling == RopeScaling::none);
  CHECK(read_model_config(*none).rope_position_scale() == 1.0f);
  const auto untyped = edited_config_file([](GgufWriter& g) { g.set_f32("llama.rope.scale_linear", 2.0f); });
  CHECK(read_model_config(*untyped).rope_position_scale() == 0.5f);
  // A factor of 0 means "not set" to llama.cpp.
  const auto zero = edited_config_file([](GgufWriter& g) { g.set_f32("llama.rope.scaling.factor", 0.0f); });
  CHECK(read_model_config(*zero).rope_position_scale() == 1.0f);
}

TEST_CASE("model config rejects a wrong rope_freqs.weight and RoPE scaling it does not implement") {
  auto with_factors = [](std::vector<std::int64_t> shape, std::vector<float> values) {
    return [shape = std::move(shape), values = std::move(values)](GgufWriter& g) {
      g.add_tensor("rope_freqs.weight", GgmlType::F32, shape, values);
    };
  };
  const std::vector<float> ok(8, 2.0f);
  CHECK_NOTHROW(read_model_config(*edited_config_file(with_factors({8}, ok))));
  std::string e = config_error(with_factors({7}, std::vector<float>(7, 2.0f)), ErrorCode::invalid_model);
  CHECK(contains(e, "'rope_freqs.weight'"));
  CHECK(contains(e, "[7], expected [8]"));
  e = config_error(with_factors({16}, std::vector<float>(16, 2.0f)), ErrorCode::invalid_model);
  CHECK(contains(e, "'rope_freqs.weight'"));
  CHECK(contains(config_error(with_factors({4, 2}, ok), ErrorCode::invalid_model), "'rope_freqs.weight'"));
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    CAPTURE(bad);
    std::vector<float> values = ok;
    values[5] = bad;
    e = config_error(with_factors({8}, values), ErrorCode::invalid_model);
    CHECK(contains(e, "'rope_freqs.weight' value 5"));
  }
  // With a shorter rope.dimension_count the tensor must shrink with it.
  CHECK(contains(config_error(
                     [&](GgufWriter& g) {
                       g.set_u32("llama.rope.dimension_count", 8);
                       with_factors({8}, ok)(g);
                     },
                     ErrorCode::invalid_model),
                 "expected [4]"));

  for (const char* type : {"yarn", "longrope", "llama3"}) {
    CAPTURE(type);
    e = config_error([&](GgufWriter& g) { g.set_string("llama.rope.scaling.type", type); }, ErrorCode::unsupported);
    CHECK(contains(e, std::string("'") + type + "'"));
    CHECK(contains(e, "llama.rope.scaling.type"));
    CHECK(contains(e, "none, linear"));
  }
  // ggml scales every rotated cos and sin by the attention factor: q.k by its square when the
  // heads are rotated whole (Phi-3.5), refused when only part of each head turns.
  const ModelConfig scaled =
      read_model_config(*edited_config_file([](GgufWriter& g) { g.set_f32("llama.rope.scaling.attn_factor", 1.2f); }));
  CHECK(scaled.rope_attention_factor == 1.2f);
  CHECK(scaled.attention_score_scale() == doctest::Approx(1.44f / std::sqrt(static_cast<float>(scaled.head_dim))));
  CHECK(contains(config_error(
                     [](GgufWriter& g) {
                       g.set_f32("llama.rope.scaling.attn_factor", 1.2f);
                       g.set_u32("llama.rope.dimension_count", 8);
                     },
                     ErrorCode::unsupported),
                 "llama.rope.scaling.attn_factor"));
  // LongRoPE's two factor sets: the short one up to the original context, the long one past it.
  const auto long_rope = edited_config_file([](GgufWriter& g) {
    g.add_tensor("rope_factors_short.weight", GgmlType::F32, {8}, std::vector<float>(8, 1.5f));
    g.add_tensor("rope_factors_long.weight", GgmlType::F32, {8}, std::vector<float>(8, 4.0f));
    g.set_u32("llama.rope.scaling.original_context_length", 64);
  });
  ModelConfig lr = read_model_config(*long_rope);
  CHECK(lr.rope_freq_factors == std::vector<float>(8, 1.5f));
  lr.use_context(64);
  CHECK(lr.rope_freq_factors == std::vector<float>(8, 1.5f));
  lr.use_context(65);
  CHECK(lr.rope_freq_factors == std::vector<float>(8, 4.0f));
  CHECK(contains(config_error(
                     [](GgufWriter& g) {
                       g.add_tensor("rope_factors_long.weight", GgmlType::F32, {8}, std::vector<float>(8, 4.0f));
                     },
                     ErrorCode::invalid_model),
                 "without rope_factors_short"));
  CHECK(contains(config_error(
                     [&](GgufWriter& g) {
                       with_factors({8}, ok)(g);
                       g.add_tensor("rope_factors_short.weight", GgmlType::F32, {8}, std::vector<float>(8, 1.5f));
                     },
                     ErrorCode::invalid_model),
                 "both rope_freqs.weight"));
  CHECK_NOTHROW(
      read_model_config(*edited_config_file([](GgufWriter& g) { g.set_f32("llama.rope.scaling.attn_factor", 1.0f); })));
  CHECK(contains(
      config_error([](GgufWriter& g) { g.set_f32("llama.rope.scaling.factor", -2.0f); }, ErrorCode::invalid_model),
      "scaling.factor"));
  CHECK(contains(
      config_error(
          [](GgufWriter& g) { g.set_f32("llama.rope.scaling.factor", std::numeric_limits<float>::infinity()); },
          ErrorCode::invalid_model),
      "scaling.factor"));
}

TEST_CASE("weights map names missing and misshapen tensors") {
  SyntheticModelSpec spec;
  const auto image = make_synthetic_model(spec);
  const auto f = GgufFile::parse(image.data(), image.size());
  ModelConfig c = read_model_config(*f);
  c.layers = 3;  // the file has 2
  CHECK(contains(error_of([&] { map_decoder_tensors(*f, c); }, ErrorCode::invalid_model),
                 "'blk.2.attn_norm.weight' is missing"));
  c = read_model_config(*f);
  c.ffn = 96;
  CHECK(contains(error_of([&] { map_decoder_tensors(*f, c); }, ErrorCode::invalid_model),
                 "'blk.0.ffn_gate.weight' has shape [64, 128], expected [64, 96]"));
}

TEST_CASE("synthetic model spec errors") {
  SyntheticModelSpec spec;
  spec.config.vocab = 100;
  CHECK(contains(error_of([&] { make_synthetic_model(spec); }, ErrorCode::invalid_argument), "vocab 100"));
  spec = {};
  spec.config.embedding = 48;  // 48 = 4 x 12, but not a whole number of Q8_0 blocks
  spec.config.head_dim = 12;
  spec.config.rope_dims = 12;
  CHECK(contains(error_of([&] { make_synthetic_model(spec); }, ErrorCode::invalid_argument), "blocks"));
  spec.weight_type = GgmlType::F16;
  CHECK_NOTHROW(make_synthetic_model(spec));
}
