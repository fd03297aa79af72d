// ember-chat: a terminal chat that keeps the conversation, streams each answer and shows where
// its time went.
//
//   ember-chat [--model PATH] [--system TEXT] [--max-tokens N] ...  (--help lists all)
//
// Type a line and press enter; `/reset` forgets the conversation, `/quit` (or end of input)
// leaves. Lines come from stdin, so a script can be piped in:
//
//   printf 'Hello!\nTell me more.\n/quit\n' | ember-chat
//
// Every turn sends the whole history through the model's chat template. The earlier turns are
// the same tokens as last time, so the engine's prefix cache skips most of their prefill: the
// "reused" figure after each answer shows how many prompt tokens came from the cache. When the
// conversation outgrows the context, the oldest turns after the system prompt are left out
// (--context-policy truncate, the default here) and a line says so.
#include <ember/ember.hpp>

#include "../common/cli.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string model;
  std::string system;  // empty: the chat template's own default system prompt, if any
  ember::EngineOptions engine;
  ember::SamplingParams sampling;
};

Options parse_flags(int argc, char** argv) {
  Options o;
  o.sampling.max_tokens = 256;
  ember_examples::EngineFlags engine_flags;
  // A conversation longer than the context goes on without its oldest turns.
  engine_flags.options.context_policy = ember::ContextPolicy::truncate;
  ember_examples::CommandLine cli(
      "ember-chat",
      "A terminal chat that keeps the conversation, streams each answer and shows where its time "
      "went. Type a line and press enter; /reset forgets the conversation, /quit (or end of "
      "input) leaves. Lines come from stdin, so a script can be piped in.");
  cli.option("--system", "TEXT", o.system, "the system prompt, kept across /reset", "the chat template's own, if any")
      .option("--max-tokens", "N", o.sampling.max_tokens, "generated tokens per answer at most")
      .option("--temperature", "T", o.sampling.temperature, "sampling temperature; 0 = greedy");
  engine_flags.declare(cli);
  cli.parse(argc, argv);
  o.engine = engine_flags.open_options(cli);
  o.model = engine_flags.model_path;
  return o;
}

// Streams one answer to stdout and returns its completion.
ember::Completion answer(ember::Engine& engine, const std::vector<ember::Message>& history,
                         const ember::SamplingParams& sampling) {
  std::fputs("assistant> ", stdout);
  std::fflush(stdout);
  ember::Completion c = engine.chat(history, sampling, [](const ember::Chunk& chunk) {
    std::fwrite(chunk.text.data(), 1, chunk.text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  return c;
}

void print_timing(const ember::Completion& c) {
  const ember::Timings& t = c.timings;
  // Tokens per second of the decode phase: the first token belongs to the prefill.
  const double decode_tps = t.time_per_output_token_ms > 0 ? 1000.0 / t.time_per_output_token_ms : 0.0;
  std::printf(
      "[%s] ttft %.2f ms | %.1f tok/s | %d generated | prompt %d tokens, %d reused "
      "from the prefix cache | total %.1f ms\n",
      ember::to_string(c.finish_reason), t.time_to_first_token_ms, decode_tps, c.generated_tokens, c.prompt_tokens,
      c.cached_prompt_tokens, t.total_ms);
  if (c.finish_reason == ember::FinishReason::error) std::fprintf(stderr, "error: %s\n", c.error.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_flags(argc, argv);
  try {
    ember::Engine engine = ember::Engine::open(options.model, options.engine);
    // The sampling flags checked once, up front, by the engine's own validation (a request with
    // nothing to generate runs no inference): a bad one is a usage error, not every turn's.
    ember::Request probe;
    probe.prompt = "hello";  // a raw prompt: the chat template's own errors come with the first turn
    probe.sampling = options.sampling;
    probe.sampling.max_tokens = std::min(probe.sampling.max_tokens, 0);
    try {
      engine.generate(probe);
    } catch (const ember::Error& e) {
      if (e.code() != ember::ErrorCode::invalid_argument) throw;
      std::fprintf(stderr, "ember-chat: %s (see --help)\n", e.what());
      return 2;
    }
    const ember::ModelInfo info = engine.info();
    std::printf(
        "ember-chat: %s (%d layers, context %d), loaded in %.0f ms. "
        "/reset clears the conversation, /quit leaves.\n",
        info.name.c_str(), info.layers, info.context_length, engine.load_ms());

    std::vector<ember::Message> history;
    if (!options.system.empty()) history.push_back({"system", options.system});
    const std::size_t kept_on_reset = history.size();

    std::string line;
    while (true) {
      std::fputs("you> ", stdout);
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();  // input typed on Windows
      if (line.empty()) continue;
      if (line == "/quit") break;
      if (line == "/reset") {
        history.resize(kept_on_reset);
        std::puts("(conversation cleared)");
        continue;
      }
      history.push_back({"user", line});
      try {
        const ember::Completion c = answer(engine, history, options.sampling);
        print_timing(c);
        if (c.dropped_messages > 0)
          std::printf("(the conversation outgrew the context: its %d oldest messages were left out)\n",
                      c.dropped_messages);
        history.push_back({"assistant", c.text});
      } catch (const ember::Error& e) {
        // The question does not fit the context window even alone (or a bad parameter): drop
        // it so the user can go on with a shorter one.
        history.pop_back();
        std::fprintf(stderr, "\n(error %s: %s)\n", ember::to_string(e.code()), e.what());
      }
    }
    std::puts("");
    return 0;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
}
