// KV state that outlives a request, end to end on synthetic models: a conversation saved,
// restored in a fresh engine and continued gives exactly the tokens of an uninterrupted run; a
// prefix store makes a fresh engine's first request hit the cache with unchanged output; and
// corrupt or foreign state is refused with a clear Error without touching the engine.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

namespace ember {
namespace {

std::string model_path() { return test::synthetic_model_file(42, 256); }

EngineOptions small_options(KvCacheType kv = KvCacheType::f16) {
  EngineOptions o;
  o.threads = 2;
  o.kv_cache_bytes = 1u << 20;  // 256 blocks of 16 tokens (f16)
  o.kv_cache_type = kv;
  return o;
}

Request greedy_tokens(const std::vector<std::int32_t>& prompt, int max_tokens) {
  Request r;
  r.prompt_tokens = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  r.sampling.logprobs = true;  // compared too: greedy ids alone barely depend on the K/V
  return r;
}

// 41 prompt ids: with 32 generated, 73 tokens = 4 full blocks of 16 and a partial one.
std::vector<std::int32_t> prompt_p() {
  std::vector<std::int32_t> p;
  for (int i = 0; i < 41; ++i) p.push_back(1 + (i * 37) % 500);
  return p;
}

std::vector<std::int32_t> concat(std::vector<std::int32_t> a, const std::vector<std::int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

ErrorCode code_of(auto&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message != nullptr) *message = e.what();
    return e.code();
  }
  FAIL("no Error was thrown");
  return ErrorCode::internal;
}

// With the int8 KV cache too: its blocks (int8 values and their scales) travel as they are, and a
// prefix-cache hit on them gives the uninterrupted run's logprobs bit for bit.
TEST_CASE("save, restore in a fresh engine, continue: the same tokens as never stopping") {
  for (KvCacheType kv : {KvCacheType::f16, KvCacheType::int8}) {
    CAPTURE(static_cast<int>(kv));
    const auto small_options = [kv] { return ember::small_options(kv); };
    const std::vector<std::int32_t> p = prompt_p();
    const auto dir = test::temp_dir("ember-state");
    const std::string path = (dir / "conversation.emberkv").string();
    std::vector<std::int32_t> uninterrupted, saved;
    std::vector<float> uninterrupted_logprobs;
    std::vector<std::uint8_t> bytes;
    {
      Engine a = Engine::open(model_path(), small_options());
      const Completion full = a.generate(greedy_tokens(p, 64));
      uninterrupted = full.tokens;
      uninterrupted_logprobs = full.logprobs;
      REQUIRE(uninterrupted.size() == 64);
      const Completion first = a.generate(greedy_tokens(p, 32));
      REQUIRE(first.tokens == std::vector<std::int32_t>(uninterrupted.begin(), uninterrupted.begin() + 32));
      saved = concat(p, first.tokens);
      a.save_state_file(path, saved);
      bytes = a.save_state(saved);
    }
    const std::vector<std::int32_t> rest(uninterrupted.begin() + 32, uninterrupted.end());
    for (const bool from_file : {true, false}) {
      INFO("from the file: ", from_file);
      Engine b = Engine::open(model_path(), small_options());
      const std::size_t blocks = from_file ? b.load_state_file(path) : b.load_state(bytes);
      CHECK(blocks == 73 / 16);
      CHECK(b.stats().requests_submitted == 0);  // loading computes nothing
      const Completion resumed = b.generate(greedy_tokens(saved, 32));
      CHECK(resumed.cached_prompt_tokens == 64);
      CHECK(resumed.tokens == rest);
      CHECK(resumed.logprobs == std::vector<float>(uninterrupted_logprobs.begin() + 32, uninterrupted_logprobs.end()));
    }
    CHECK(std::filesystem::file_size(path) == bytes.size());
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("a prefix store makes the first request of a fresh engine hit, with the same output") {
  const auto dir = test::temp_dir("ember-store");
  const std::string path = (dir / "personas.emberkv").string();
  const std::string lore(200, 'w');  // a long shared opening: many full blocks
  std::vector<Request> personas(2);
  personas[0].prompt = lore + " You are the blacksmith.";
  personas[1].prompt = lore + " You are the innkeeper.";
  Request question = personas[1];
  question.prompt += " Player: any rooms free tonight?";
  question.sampling.temperature = 0;
  question.sampling.max_tokens = 16;
  question.sampling.ignore_eos = true;
  question.sampling.logprobs = true;

  Completion reference;
  {
    Engine writer = Engine::open(model_path(), small_options());
    writer.save_prefix_store(path, personas);
    reference = Engine::open(model_path(), small_options()).generate(question);
    CHECK(reference.cached_prompt_tokens == 0);
  }
  EngineOptions with_store = small_options();
  with_store.prefix_store_path = path;
  Engine engine = Engine::open(model_path(), with_store);
  const Completion first = engine.generate(question);
  CHECK(first.cached_prompt_tokens > 0);
  CHECK(first.cached_prompt_tokens % 16 == 0);
  CHECK(first.cached_prompt_tokens < first.prompt_tokens);
  CHECK(first.tokens == reference.tokens);
  CHECK(first.text == reference.text);
  CHECK(first.logprobs == reference.logprobs);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad state file: a corrupt prefix store makes open() fail, naming the file and the problem") {
  const auto dir = test::temp_dir("ember-store");
  const std::string path = (dir / "store.emberkv").string();
  {
    Engine writer = Engine::open(model_path(), small_options());
    writer.save_prefix_store(path, {greedy_tokens(prompt_p(), 1)});
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x5a');
  }
  EngineOptions o = small_options();
  o.prefix_store_path = path;
  std::string message;
  CHECK(code_of([&] { (void)Engine::open(model_path(), o); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find(path) != std::string::npos);
  CHECK(message.find("checksum mismatch") != std::string::npos);
  o.prefix_store_path = (dir / "missing.emberkv").string();
  CHECK(code_of([&] { (void)Engine::open(model_path(), o); }) == ErrorCode::io);
  std::filesystem::remove_all(dir);
}

TEST_CASE("bad state file: another model, another KV type, garbage; the engine is untouched") {
  std::vector<std::uint8_t> bytes;
  {
    Engine a = Engine::open(model_path(), small_options());
    bytes = a.save_state(prompt_p());
  }
  std::string message;
  Engine other_model = Engine::open(test::synthetic_model_file(43, 256), small_options());
  CHECK(code_of([&] { (void)other_model.load_state(bytes); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find("another model") != std::string::npos);

  EngineOptions f32 = small_options();
  f32.kv_cache_type = KvCacheType::f32;
  Engine other_type = Engine::open(model_path(), f32);
  CHECK(code_of([&] { (void)other_type.load_state(bytes); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find("KV cache type") != std::string::npos);
  // int8 against f16, both ways.
  Engine int8_kv = Engine::open(model_path(), small_options(KvCacheType::int8));
  CHECK(code_of([&] { (void)int8_kv.load_state(bytes); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find("(int8)") != std::string::npos);
  const std::vector<std::uint8_t> int8_bytes = int8_kv.save_state(prompt_p());
  CHECK(int8_bytes.size() < bytes.size());  // a block of int8 K/V is ~half an f16 one
  CHECK(code_of([&] { (void)other_type.load_state(int8_bytes); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find("KV cache type") != std::string::npos);

  Engine engine = Engine::open(model_path(), small_options());
  const int free_before = engine.stats().kv_blocks_free;
  CHECK(code_of([&] { (void)engine.load_state({1, 2, 3}); }) == ErrorCode::invalid_argument);
  std::vector<std::uint8_t> flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x40;
  CHECK(code_of([&] { (void)engine.load_state(flipped); }, &message) == ErrorCode::invalid_argument);
  CHECK(message.find("checksum") != std::string::npos);
  CHECK(engine.stats().kv_blocks_free == free_before);
  CHECK(engine.generate(greedy_tokens(prompt_p(), 4)).cached_prompt_tokens == 0);
  CHECK(engine.load_state(bytes) == 2);  // the intact snapshot still loads: 41 ids, 2 blocks

  EngineOptions no_cache = small_options();
  no_cache.prefix_cache = false;
  Engine uncached = Engine::open(model_path(), no_cache);
  CHECK(code_of([&] { (void)uncached.load_state(bytes); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { (void)uncached.save_state(prompt_p()); }) == ErrorCode::invalid_argument);
}

TEST_CASE("save_state checks its tokens; state larger than the KV cache is refused") {
  Engine engine = Engine::open(model_path(), small_options());
  CHECK(code_of([&] { (void)engine.save_state({}); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { (void)engine.save_state({1, 512}); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { (void)engine.save_state(std::vector<std::int32_t>(300, 5)); }) == ErrorCode::context_overflow);
  std::vector<std::int32_t> long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt.push_back(1 + (i * 13) % 500);
  const std::vector<std::uint8_t> bytes = engine.save_state(long_prompt);  // 6 full blocks

  EngineOptions tiny = small_options();
  tiny.kv_cache_bytes = 4 * 4096;  // 4 blocks of 4 KiB (2 layers, 2 KV heads, head dim 16, f16)
  Engine small = Engine::open(model_path(), tiny);
  std::string message;
  CHECK(code_of([&] { (void)small.load_state(bytes); }, &message) == ErrorCode::out_of_memory);
  CHECK(message.find("holds 6 blocks, more than the 4") != std::string::npos);
  CHECK(code_of([&] { (void)small.save_state(long_prompt); }) == ErrorCode::out_of_memory);
}

}  // namespace
}  // namespace ember
