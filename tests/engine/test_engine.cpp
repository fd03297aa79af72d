// The public Engine API on synthetic models: generation, streaming, stop strings, limits and
// errors, and the invariances that batching and the prefix cache must keep.
#include "test_support.hpp"

#include <ember/ember.hpp>

#include <doctest/doctest.h>
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ember {
namespace {

std::string model_path() { return test::synthetic_model_file(42, 256); }

EngineOptions small_options() {
  EngineOptions o;
  o.threads = test::compute_threads(2);
  o.kv_cache_bytes = 4u << 20;
  return o;
}

Request greedy(const std::string& prompt, int max_tokens) { return test::greedy_request(prompt, max_tokens); }

TEST_CASE("generate: greedy is deterministic and streaming delivers exactly the text") {
  Engine engine = Engine::open(model_path(), small_options());
  const Completion a = engine.generate(greedy("the quick brown fox", 24));
  CHECK(a.finish_reason == FinishReason::length);
  CHECK(a.generated_tokens == 24);
  CHECK(a.tokens.size() == 24);
  CHECK(a.prompt_tokens > 0);
  std::string streamed;
  int chunks = 0;
  bool saw_last = false;
  double last_chunk_total_ms = 0;
  const Completion b = engine.generate(greedy("the quick brown fox", 24), [&](const Chunk& c) {
    streamed.append(c.text);
    ++chunks;
    if (c.completion != nullptr) {
      saw_last = true;
      last_chunk_total_ms = c.completion->timings.total_ms;
    }
    return true;
  });
  CHECK(b.tokens == a.tokens);
  CHECK(b.text == a.text);
  CHECK(streamed == b.text);
  CHECK(chunks == 25);  // one per token and the final one
  CHECK(saw_last);
  CHECK(b.timings.time_to_first_token_ms > 0);
  CHECK(b.timings.total_ms >= b.timings.time_to_first_token_ms);
  CHECK(last_chunk_total_ms >= b.timings.time_to_first_token_ms);  // the last chunk's too
  CHECK(last_chunk_total_ms <= b.timings.total_ms);
}

TEST_CASE("sampling: the same seed gives the same output, another seed another") {
  Engine engine = Engine::open(model_path(), small_options());
  Request r = greedy("once upon a time", 32);
  r.sampling.temperature = 8.0f;  // nearly uniform: different seeds must differ
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = 7;
  r.sampling.logprobs = true;
  const Completion a = engine.generate(r), b = engine.generate(r);
  CHECK(a.tokens == b.tokens);
  REQUIRE(a.logprobs.size() == a.tokens.size());
  for (float lp : a.logprobs) CHECK(lp <= 0.0f);
  r.sampling.seed = 8;
  CHECK(engine.generate(r).tokens != a.tokens);
}

TEST_CASE("stop strings end generation and are never emitted") {
  Engine engine = Engine::open(model_path(), small_options());
  const Completion full = engine.generate(greedy("hello world", 40));
  REQUIRE(full.text.size() > 12);
  const std::string stop = full.text.substr(full.text.size() / 2, 3);
  const std::size_t at = full.text.find(stop);
  Request r = greedy("hello world", 40);
  r.sampling.stop = {stop};
  std::string streamed;
  const Completion c = engine.generate(r, [&](const Chunk& ch) {
    streamed.append(ch.text);
    return true;
  });
  CHECK(c.finish_reason == FinishReason::stop);
  CHECK(c.text == full.text.substr(0, at));
  CHECK(streamed == c.text);
}

TEST_CASE("a callback returning false cancels; max_tokens 0 returns at once") {
  Engine engine = Engine::open(model_path(), small_options());
  int calls = 0;
  const Completion c =
      engine.generate(greedy("abc", 50), [&](const Chunk& ch) { return ch.completion != nullptr || ++calls < 3; });
  CHECK(c.finish_reason == FinishReason::cancelled);
  CHECK(c.generated_tokens == 3);
  const Completion none = engine.generate(greedy("abc", 0));
  CHECK(none.finish_reason == FinishReason::length);
  CHECK(none.generated_tokens == 0);
  CHECK(none.text.empty());
}

TEST_CASE("bad input is an ember::Error with the right code") {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::internal;
  };
  CHECK(code_of([] { Engine::open("/nonexistent/model.gguf"); }) == ErrorCode::io);
  EngineOptions bad = small_options();
  bad.kv_block_size = 0;
  CHECK(code_of([&] { Engine::open(model_path(), bad); }) == ErrorCode::invalid_argument);
  Engine engine = Engine::open(model_path(), small_options());
  CHECK(code_of([&] { engine.generate(greedy(std::string(2000, 'x'), 4)); }) == ErrorCode::context_overflow);
  CHECK(code_of([&] { engine.generate(greedy("", 4)); }) == ErrorCode::invalid_argument);
  Request r = greedy("x", 4);
  r.sampling.temperature = -1;
  CHECK(code_of([&] { engine.generate(r); }) == ErrorCode::invalid_argument);
  r = greedy("x", 4);
  r.prompt_tokens = {1, 999999};
  CHECK(code_of([&] { engine.generate(r); }) == ErrorCode::invalid_argument);
  CHECK(code_of([&] { engine.chat({}); }) == ErrorCode::invalid_argument);
}

TEST_CASE("a sequence reaching the context window ends with `context`") {
  EngineOptions o = small_options();
  o.context_length = 24;
  Engine engine = Engine::open(model_path(), o);
  const Completion c = engine.generate(greedy("hello", 100));
  CHECK(c.finish_reason == FinishReason::context);
  CHECK(c.prompt_tokens + c.generated_tokens == 24);
  CHECK(c.error.empty());  // the window, not the KV cache
}

TEST_CASE("context policy shift: a generation past the window keeps the start, drops half the rest, goes on") {
  EngineOptions o = small_options();
  o.context_length = 48;
  o.prefix_cache = false;  // the fresh prefill below must not reuse what the run computed
  Engine engine = Engine::open(model_path(), o);
  Request r = greedy("hello", 100);
  r.context_policy = ContextPolicy::shift;
  r.context_keep = 3;
  const Completion c = engine.generate(r);
  CHECK(c.finish_reason == FinishReason::length);
  CHECK(c.generated_tokens == 100);
  CHECK(c.context_shifts >= 2);
  // After the first shift the generation is what a fresh prefill of the kept tokens gives.
  const std::vector<std::int32_t> prompt = engine.tokenize("hello");
  std::vector<std::int32_t> window = prompt;
  window.insert(window.end(), c.tokens.begin(), c.tokens.end());
  window.resize(48);  // the window the first shift found full
  const int keep = 3, drop = (48 - keep) / 2;
  std::vector<std::int32_t> kept(window.begin(), window.begin() + keep);
  kept.insert(kept.end(), window.begin() + keep + drop, window.end());
  Request fresh = greedy("", 10);
  fresh.prompt_tokens = kept;
  const Completion f = engine.generate(fresh);
  const std::size_t first_after = 48 - prompt.size();
  REQUIRE(c.tokens.size() >= first_after + 10);
  CHECK(std::vector<std::int32_t>(c.tokens.begin() + first_after, c.tokens.begin() + first_after + 10) == f.tokens);
  // The error policy still ends at the window.
  r.context_policy = ContextPolicy::error;
  CHECK(engine.generate(r).finish_reason == FinishReason::context);
}

TEST_CASE("context policy truncate: a chat that outgrows the window drops its oldest turns") {
  EngineOptions o = small_options();
  o.context_length = 256;
  o.context_policy = ContextPolicy::truncate;
  Engine engine = Engine::open(model_path(), o);
  std::vector<Message> chat{{"system", "you are a lighthouse keeper"}};
  for (int turn = 0; turn < 40; ++turn) {
    chat.push_back({"user", "tell me about ship number " + std::to_string(turn)});
    chat.push_back({"assistant", "ship " + std::to_string(turn) + " passed the rocks at dawn"});
  }
  chat.push_back({"user", "and the last one?"});
  SamplingParams p;
  p.max_tokens = 16;
  p.temperature = 0;
  p.ignore_eos = true;
  const Completion c = engine.chat(chat, p);
  CHECK(c.dropped_messages > 0);
  CHECK(c.dropped_messages % 2 == 0);  // whole turns: a user message and its reply
  CHECK(c.prompt_tokens + 16 <= 256);
  CHECK(c.generated_tokens == 16);
  // The prompt is the system message and the newest turns that fit, rendered as a chat.
  std::vector<Message> kept{chat[0]};
  kept.insert(kept.end(), chat.begin() + 1 + c.dropped_messages, chat.end());
  CHECK(static_cast<int>(engine.tokenize(engine.apply_chat_template(kept), true).size()) == c.prompt_tokens);
  // The next turn keeps the same start (the cut moves in steps of several turns), so its
  // prompt extends this one and comes from the prefix cache up to the new turn.
  chat.push_back({"assistant", c.text});
  chat.push_back({"user", "and after that?"});
  const Completion next = engine.chat(chat, p);
  CHECK(next.dropped_messages == c.dropped_messages);
  CHECK(next.cached_prompt_tokens >= c.prompt_tokens - 16);  // all but the last, partial block
  // Per request, the error policy refuses the same chat.
  Request r;
  r.messages = chat;
  r.sampling = p;
  r.context_policy = ContextPolicy::error;
  CHECK_THROWS_AS(engine.generate(r), Error);
}

#if defined(__linux__)
// The nice value of each of this process's threads (/proc/self/task/*/stat, field 19).
std::vector<int> thread_nice_values() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::size_t comm_end = stat.rfind(')');
    if (comm_end == std::string::npos) continue;
    std::istringstream fields(stat.substr(comm_end + 2));  // from field 3 (state) on
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) out.push_back(std::stoi(field));
  }
  return out;
}

TEST_CASE("background_low_priority: the engine's thread and its compute team run at nice +10") {
  EngineOptions o = small_options();
  o.background_low_priority = true;
  CHECK_THROWS_AS(Engine::open(model_path(), o), Error);  // needs background_thread
  o.background_thread = true;
  const int own_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  Engine engine = Engine::open(model_path(), o);
  int stepping_nice = -100;
  const Completion c = engine.generate(greedy("a quiet background", 8), [&](const Chunk&) {
    stepping_nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    return true;
  });
  CHECK(c.generated_tokens == 8);
  CHECK(stepping_nice == std::min(own_nice + 10, 19));
  CHECK(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))) == own_nice);  // the caller's is kept
  // The stepping thread and every OpenMP thread it started for the step's kernels.
  const std::vector<int> nice = thread_nice_values();
  CHECK(std::count(nice.begin(), nice.end(), std::min(own_nice + 10, 19)) >= o.threads);
}
#endif

TEST_CASE("a callback that calls back into its own engine gets invalid_argument, not a deadlock") {
  for (bool background : {false, true}) {
    CAPTURE(background);
    EngineOptions o = small_options();
    o.background_thread = background;
    Engine engine = Engine::open(model_path(), o);
    Engine other = Engine::open(model_path(), small_options());
    std::string error;
    int other_requests = -1;
    const Completion c = engine.generate(greedy("call me back", 4), [&](const Chunk&) {
      try {
        engine.stats();
      } catch (const Error& e) {
        if (e.code() == ErrorCode::invalid_argument) error = e.what();
      }
      other_requests = static_cast<int>(other.stats().requests_submitted);  // another engine: fine
      return true;
    });
    CHECK(c.generated_tokens == 4);
    CHECK(error.find("called back into the same engine") != std::string::npos);
    CHECK(other_requests == 0);
    // Uncaught, the error stops the request and says why.
    const Completion d = engine.generate(greedy("call me back", 4), [&](const Chunk&) {
      engine.generate(greedy("nested", 2));
      return true;
    });
    CHECK(d.finish_reason == FinishReason::cancelled);
    CHECK(d.error.find("called back into the same engine") != std::string::npos);
    // Through another engine's callback: engine's callback runs other, whose callback calls engine.
    std::string nested_error;
    engine.generate(greedy("call me back", 2), [&](const Chunk&) {
      other.generate(greedy("inner", 2), [&](const Chunk&) {
        try {
          engine.stats();
        } catch (const Error& e) {
          nested_error = e.what();
        }
        return true;
      });
      return true;
    });
    CHECK(nested_error.find("called back into the same engine") != std::string::npos);
  }
}

TEST_CASE("a host thread that runs engine steps keeps its own OpenMP thread count") {
  // ember's regions and oneDNN's and Eigen's use EngineOptions::threads, set only for the calls
  // that need it: a host that uses OpenMP itself finds its setting as it left it.
  omp_set_num_threads(3);
  for (const Precision precision : {Precision::int8, Precision::fp32}) {
    CAPTURE(static_cast<int>(precision));
    EngineOptions o = small_options();  // threads: 2, or 1 under ThreadSanitizer; either is not 3
    o.precision = precision;
    Engine engine = Engine::open(model_path(), o);
    CHECK(omp_get_max_threads() == 3);
    CHECK(engine.generate(greedy("the quick brown fox", 4)).generated_tokens == 4);
    CHECK(omp_get_max_threads() == 3);
  }
}

TEST_CASE("chat renders the model's ChatML template") {
  Engine engine = Engine::open(model_path(), small_options());
  const std::string text = engine.apply_chat_template({{"user", "hi"}});
  CHECK(text.find("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n") != std::string::npos);
  SamplingParams p;
  p.max_tokens = 5;
  p.ignore_eos = true;
  CHECK(engine.chat({{"user", "hi"}}, p).generated_tokens == 5);
}

TEST_CASE("prefix cache: a shared prompt is reused and changes nothing") {
  const std::string shared(300, 'a');  // many full blocks
  EngineOptions off = small_options();
  off.prefix_cache = false;
  Engine cached = Engine::open(model_path(), small_options());
  Engine uncached = Engine::open(model_path(), off);
  const Completion first = cached.generate(greedy(shared.substr(0, 150) + " one", 16));
  CHECK(first.cached_prompt_tokens == 0);
  const Completion second = cached.generate(greedy(shared.substr(0, 150) + " two", 16));
  CHECK(second.cached_prompt_tokens >= 16);
  CHECK(second.cached_prompt_tokens < second.prompt_tokens);
  const Completion reference = uncached.generate(greedy(shared.substr(0, 150) + " two", 16));
  CHECK(reference.cached_prompt_tokens == 0);
  CHECK(second.tokens == reference.tokens);
}

TEST_CASE("concurrent requests are batched and give the same tokens as alone, even when preempted") {
  const std::vector<std::string> prompts{"alpha beta", "gamma delta epsilon", "zeta", "eta theta iota kappa"};
  std::vector<Completion> alone;
  {
    Engine engine = Engine::open(model_path(), small_options());
    for (const auto& p : prompts) alone.push_back(engine.generate(greedy(p, 40)));
  }
  for (std::size_t kv_bytes : {std::size_t{4} << 20, std::size_t{16} << 10}) {  // roomy, then a few blocks: preemption
    EngineOptions o = small_options();
    o.kv_cache_bytes = kv_bytes;
    Engine engine = Engine::open(model_path(), o);
    // All queued before any step, so that they share steps; then each waited on by its own thread.
    std::vector<RequestHandle> handles;
    for (const auto& p : prompts) handles.push_back(engine.submit(greedy(p, 40)));
    std::vector<Completion> together(prompts.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < prompts.size(); ++i) threads.emplace_back([&, i] { together[i] = handles[i].wait(); });
    for (auto& t : threads) t.join();
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      INFO("prompt ", i, " kv bytes ", kv_bytes);
      CHECK(together[i].tokens == alone[i].tokens);
      CHECK(together[i].finish_reason == FinishReason::length);
    }
    // At the end the four hold more blocks than the small pool has: some waited, recomputed.
    if (kv_bytes < (std::size_t{1} << 20)) CHECK(engine.stats().preemptions > 0);
  }
}

TEST_CASE("a sequence that outgrows the KV cache, not the window, ends with `context` and says why") {
  EngineOptions o = small_options();
  o.kv_cache_bytes = std::size_t{16} << 10;  // a few blocks, far fewer tokens than the context of 256
  std::vector<std::string> warnings;
  o.log = [&](LogLevel level, std::string_view line) {
    if (level == LogLevel::warning) warnings.emplace_back(line);
  };
  Engine engine = Engine::open(model_path(), o);
  REQUIRE(warnings.size() == 1);
  const auto holds = engine.stats().kv_blocks_total * 16;  // the default block of 16 tokens
  INFO(warnings[0]);
  CHECK(warnings[0].find("the KV cache holds " + std::to_string(holds) + " tokens, fewer than the context of 256") !=
        std::string::npos);
  const Completion c = engine.generate(greedy("hello", 1000));
  CHECK(c.finish_reason == FinishReason::context);
  CHECK(c.prompt_tokens + c.generated_tokens == static_cast<int>(holds) + 1);  // the last token needs no KV yet
  CHECK(c.error.find("raise EngineOptions::kv_cache_bytes") != std::string::npos);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST_CASE("exact response cache: a repeated deterministic request skips inference") {
  EngineOptions o = small_options();
  o.response_cache_bytes = 1u << 20;
  Engine engine = Engine::open(model_path(), o);
  Request r = greedy("cache this answer", 12);
  r.sampling.temperature = 0.9f;  // sampled, but seeded: still deterministic
  r.sampling.seed = 99;
  const Completion first = engine.generate(r);
  CHECK_FALSE(first.from_response_cache);
  std::string streamed;
  std::size_t streamed_tokens = 0;
  const Completion second = engine.generate(r, [&](const Chunk& c) {
    streamed.append(c.text);
    streamed_tokens += c.token_count;
    return true;
  });
  CHECK(second.from_response_cache);
  CHECK(second.tokens == first.tokens);
  CHECK(second.text == first.text);
  CHECK(streamed == first.text);
  CHECK(streamed_tokens == first.tokens.size());
  CHECK(engine.stats().response_cache_hits == 1);
  r.sampling.seed = 100;  // another parameter: a miss
  CHECK_FALSE(engine.generate(r).from_response_cache);
  // Off by default.
  Engine plain = Engine::open(model_path(), small_options());
  plain.generate(r);
  CHECK_FALSE(plain.generate(r).from_response_cache);
}

TEST_CASE("a callback that stops or throws on a cached answer or a stop string's chunk cancels its request") {
  EngineOptions o = small_options();
  o.response_cache_bytes = 1u << 20;
  Engine engine = Engine::open(model_path(), o);
  Engine uncached = Engine::open(model_path(), small_options());
  const Request cached = greedy("cache this answer", 12);
  REQUIRE(engine.generate(cached).finish_reason == FinishReason::length);
  const Completion full = uncached.generate(greedy("hello world", 40));
  REQUIRE(full.text.size() > 12);
  Request stopping = greedy("hello world", 40);
  stopping.sampling.stop = {full.text.substr(full.text.size() / 2, 3)};
  // The chunk that completes the stop string is the last with a token (its text may be empty).
  int token_chunks = 0;
  REQUIRE(uncached.generate(stopping, [&](const Chunk& c) { return token_chunks += c.token_count > 0, true; })
              .finish_reason == FinishReason::stop);
  for (const bool throwing : {false, true}) {
    CAPTURE(throwing);
    // Stops at the n-th chunk with a token, by returning false or by throwing.
    const auto stop_at = [throwing](int n) {
      return [throwing, n, seen = 0](const Chunk& c) mutable -> bool {
        if (c.token_count == 0 || ++seen != n) return true;
        if (throwing) throw std::runtime_error("host bug");
        return false;
      };
    };
    const Completion hit = engine.generate(cached, stop_at(1));
    CHECK(hit.from_response_cache);
    CHECK(hit.finish_reason == FinishReason::cancelled);
    CHECK(hit.error.empty() != throwing);
    const Completion stopped = engine.generate(stopping, stop_at(token_chunks));
    CHECK_FALSE(stopped.from_response_cache);
    CHECK(stopped.finish_reason == FinishReason::cancelled);
    CHECK(stopped.error.empty() != throwing);
  }
  // The cancelled stop was not kept as the request's answer: it is computed again, and ends at
  // its stop string.
  const Completion again = engine.generate(stopping);
  CHECK_FALSE(again.from_response_cache);
  CHECK(again.finish_reason == FinishReason::stop);
}

TEST_CASE("exact response cache: the context policy is part of the key") {
  EngineOptions o = small_options();
  o.context_length = 48;
  o.response_cache_bytes = 1u << 20;
  Engine engine = Engine::open(model_path(), o);
  Request r = greedy("hello", 100);
  r.context_policy = ContextPolicy::shift;
  r.context_keep = 3;
  const Completion shifted = engine.generate(r);
  REQUIRE(shifted.context_shifts > 0);
  // The same request with the error policy ends at the window, not with the shifted answer.
  r.context_policy = ContextPolicy::error;
  const Completion ended = engine.generate(r);
  CHECK_FALSE(ended.from_response_cache);
  CHECK(ended.finish_reason == FinishReason::context);
  CHECK(ended.context_shifts == 0);
  // Another number of kept tokens shifts differently.
  r.context_policy = ContextPolicy::shift;
  r.context_keep = 5;
  CHECK_FALSE(engine.generate(r).from_response_cache);
  r.context_keep = 3;
  CHECK(engine.generate(r).from_response_cache);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

TEST_CASE("EngineOptions::chat_template replaces the file's template; one that does not parse fails the open") {
  const std::vector<Message> chat = {{"system", "Be brief."}, {"user", "Hi"}};
  EngineOptions o = small_options();
  const std::string chatml = Engine::open(model_path(), o).apply_chat_template(chat);
  CHECK(chatml.find("<|im_start|>user\nHi<|im_end|>") != std::string::npos);  // the file's ChatML

  std::ifstream in(test::data_path("tokenizer/templates/gemma3.jinja"));
  REQUIRE(in.good());
  o.chat_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const std::string gemma = Engine::open(model_path(), o).apply_chat_template(chat);
  CHECK(gemma.find("<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n") != std::string::npos);
  CHECK(gemma.find("<|im_start|>user") == std::string::npos);  // (the synthetic BOS is <|im_start|>)

  // Any template renders (ember's Jinja engine); one that does not parse fails the open.
  o.chat_template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}";
  CHECK(Engine::open(model_path(), o).apply_chat_template(chat) == "[system] Be brief.[user] Hi");
  // One that refuses a system message alone still serves chats that have one (the system turn
  // rendered alone only tells which prompt tokens a context shift keeps).
  o.chat_template =
      "{% if messages[-1].role != 'user' %}{{ raise_exception('a user turn must come last') }}{% endif %}"
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}";
  Engine strict = Engine::open(model_path(), o);
  Request r;
  r.messages = chat;
  r.sampling.max_tokens = 2;
  CHECK(strict.generate(r).generated_tokens >= 0);
  r.messages = {{"system", "Be brief."}};
  CHECK_THROWS_AS(strict.generate(r), Error);
  o.chat_template = "{% for m in messages %}{{ m.content }}";
  try {
    Engine::open(model_path(), o);
    FAIL("a chat template that does not parse was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("template line 1") != std::string::npos);
  }
}

}  // namespace
}  // namespace ember
