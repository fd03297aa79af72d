// Embedding sequences share the scheduler's steps with generation (runtime/scheduler.hpp): a
// chat request that is decoding and an embed call that arrives run in the same forward passes
// (EngineStats::mixed_steps counts them), and each gives bit for bit what it gives alone (batch
// invariance), also when an embedding's prompt is computed in chunks. On an encoder, embed calls
// from several threads share steps too. Synthetic models; label tsan (the threaded cases).
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>

#include "model_writer/synthetic_bert.hpp"

#include <atomic>
#include <thread>

namespace ember {
namespace {

std::string decoder_path() { return test::synthetic_model_file(43, 512); }

Engine open(const std::string& path, int max_batch_tokens = 512, bool background = false) {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.max_batch_tokens = max_batch_tokens;
  o.background_thread = background;
  return Engine::open(path, o);
}

Request chat_request(int max_tokens) {
  Request r;
  r.prompt = "the lighthouse keeper wrote in his ledger every night";
  r.sampling.temperature = 0;
  r.sampling.ignore_eos = true;
  r.sampling.max_tokens = max_tokens;
  return r;
}

// Texts of several lengths; the long one is many chunks at a small token budget.
std::vector<std::string> texts() {
  std::string long_text;
  for (int i = 0; i < 30; ++i) long_text += "harbour stone gull tide ";
  return {"river lamp", "a ledger of the north wind and the tide", long_text};
}

void check_equal(const std::vector<Embedding>& got, const std::vector<Embedding>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].tokens == want[i].tokens);
    CHECK(got[i].values == want[i].values);  // bit for bit
  }
}

}  // namespace

TEST_CASE("a chat decoding and an embed call arriving share steps, each giving what it gives alone") {
  for (const Pooling pooling : {Pooling::last, Pooling::mean, Pooling::none}) {
    CAPTURE(static_cast<int>(pooling));
    EmbedOptions options;
    options.pooling = pooling;
    // Alone: the chat on an engine of its own, the embeddings on an idle one (one step).
    std::vector<std::int32_t> chat_alone;
    std::vector<Embedding> embed_alone;
    {
      Engine engine = open(decoder_path());
      chat_alone = engine.generate(chat_request(40)).tokens;
      embed_alone = engine.embed(texts(), options);
      CHECK(engine.stats().mixed_steps == 0);
      CHECK(engine.stats().embedding_sequences == 3);
    }
    // Together, at a budget of 32 rows: the long text runs in chunks beside the chat's decodes.
    Engine engine = open(decoder_path(), 32);
    int streamed = 0;
    RequestHandle chat = engine.submit(chat_request(40), [&](const Chunk&) {
      ++streamed;
      return true;
    });
    for (int i = 0; i < 1000 && streamed < 2; ++i) engine.step(std::chrono::milliseconds(1));
    REQUIRE(chat.status() == RequestStatus::running);  // decoding when the embeddings arrive
    const std::uint64_t steps_before = engine.stats().steps;
    const std::vector<Embedding> together = engine.embed(texts(), options);
    const EngineStats stats = engine.stats();
    CHECK(stats.mixed_steps >= 1);
    CHECK(stats.mixed_steps >= stats.steps - steps_before - 1);  // the chat ran in every embedding step
    CHECK(stats.embedding_sequences == 3);
    check_equal(together, embed_alone);
    CHECK(chat.wait().tokens == chat_alone);
    CHECK(engine.stats().kv_blocks_free == engine.stats().kv_blocks_total);  // every block back
  }
}

TEST_CASE("embedding sequences neither publish KV blocks to the prefix cache nor reuse them") {
  Engine engine = open(decoder_path());
  std::vector<std::int32_t> tokens = test::random_tokens(100, engine.info().vocab, 7);
  engine.embed_tokens({tokens});
  Request r = chat_request(2);
  r.prompt_tokens = tokens;
  engine.generate(r);  // six full blocks an embedding's publishing would have cached
  CHECK(engine.stats().prefix_hit_blocks == 0);
  const std::vector<Embedding> again = engine.embed_tokens({tokens});  // the chat's blocks are cached now
  CHECK(engine.stats().prefix_hit_blocks == 0);
  CHECK(again.at(0).values == engine.embed_tokens({tokens}).at(0).values);
  CHECK(engine.stats().kv_blocks_free == engine.stats().kv_blocks_total);  // every block back
}

TEST_CASE("an embed call from another thread joins a host-stepped chat's steps") {
  std::vector<Embedding> embed_alone;
  std::vector<std::int32_t> chat_alone;
  {
    Engine engine = open(decoder_path());
    embed_alone = engine.embed(texts());
    chat_alone = engine.generate(chat_request(200)).tokens;
  }
  Engine engine = open(decoder_path(), 64);
  std::atomic<bool> decoding{false};
  RequestHandle chat = engine.submit(chat_request(200), [&](const Chunk&) {
    decoding = true;
    return true;
  });
  std::vector<Embedding> together;
  std::thread embedder([&] {
    while (!decoding) std::this_thread::yield();
    together = engine.embed(texts());
  });
  const Completion c = chat.wait();  // this thread steps the engine, letting the embed call in
  embedder.join();
  CHECK(c.tokens == chat_alone);
  check_equal(together, embed_alone);
  CHECK(engine.stats().mixed_steps >= 1);
}

TEST_CASE("on an encoder, embed calls from several threads share steps") {
  model::SyntheticBertSpec spec;
  spec.name = "ember-synthetic-bert";
  const std::string path = (test::temp_dir("ember-bert-shared") / "bert.gguf").string();
  model::write_synthetic_bert(spec, path);
  const std::vector<std::string> all = {"river lamp", "the north wind", "a gull over the harbour",
                                        "stone and tide and ledger"};
  std::vector<Embedding> alone;
  {
    Engine engine = open(path);
    for (const std::string& t : all) alone.push_back(engine.embed({t}).at(0));
  }
  // The background thread's batch window holds the first call until all four have arrived.
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.background_thread = true;
  o.batch_min_requests = static_cast<int>(all.size());
  o.batch_max_wait = std::chrono::seconds(20);
  Engine engine = Engine::open(path, o);
  std::vector<Embedding> got(all.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < all.size(); ++i) threads.emplace_back([&, i] { got[i] = engine.embed({all[i]}).at(0); });
  for (std::thread& t : threads) t.join();
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(got[i].values == alone[i].values);
    CHECK(got[i].tokens == alone[i].tokens);
  }
  CHECK(engine.stats().embedding_sequences == all.size());
  CHECK(engine.stats().steps == 1);  // four calls, one forward pass
}

TEST_CASE("an encoder's text longer than the step budget still runs whole, alone") {
  model::SyntheticBertSpec spec;
  spec.name = "ember-synthetic-bert";
  const std::string path = (test::temp_dir("ember-bert-budget") / "bert.gguf").string();
  model::write_synthetic_bert(spec, path);
  const std::string text = "harbour stone gull tide ledger lamp river north wind and the sea";
  Engine wide = open(path);
  Engine narrow = open(path, 4);
  const std::vector<Embedding> a = wide.embed({text, "lamp"});
  const std::vector<Embedding> b = narrow.embed({text, "lamp"});
  REQUIRE(a.at(0).tokens > 4);
  check_equal(b, a);
  CHECK(narrow.stats().steps == 2);  // each whole in its own step
}

}  // namespace ember
