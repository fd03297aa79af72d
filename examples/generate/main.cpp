// ember-generate: one prompt in, streamed text out, and where the time went.
//
//   ember-generate [--model PATH] [--prompt TEXT] [--raw] [--max-tokens N] ...  (--help lists all)
//
// The prompt is sent as a user message through the model's chat template; --raw sends it as
// plain text to be continued. --model defaults to $EMBER_MODEL, then the default model fetched
// by scripts/fetch-model.sh. --weight-cache keeps the prepared INT8 weights in DIR so that the
// next start skips their preparation (time it from outside: `time ember-generate --max-tokens 1
// --weight-cache DIR`); --progress draws the load progress on stderr.
#include <ember/ember.hpp>

#include "../common/cli.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  std::string prompt = "Write a short poem about the sea.";
  bool raw = false;
  ember_examples::EngineFlags engine_flags;
  ember::SamplingParams sampling;
  sampling.max_tokens = 128;

  ember_examples::CommandLine cli("ember-generate", "One prompt in, streamed text out, and where the time went.");
  cli.option("--prompt", "TEXT", prompt,
             "the prompt, sent as a user message through the "
             "model's chat template")
      .flag("--raw", raw, "send the prompt as plain text to be continued, without the template")
      .option("--max-tokens", "N", sampling.max_tokens, "generated tokens at most")
      .option("--temperature", "T", sampling.temperature, "sampling temperature; 0 = greedy")
      .option("--top-p", "P", sampling.top_p, "nucleus sampling mass; 1 = off")
      .option("--seed", "S", sampling.seed, "sampling seed: same seed, same output");
  engine_flags.declare(cli);
  cli.parse(argc, argv);
  const ember::EngineOptions options = engine_flags.open_options(cli);

  try {
    ember::Engine engine = ember::Engine::open(engine_flags.model_path, options);
    ember::Request request;
    if (raw)
      request.prompt = prompt;
    else
      request.messages = {{"user", prompt}};
    request.sampling = sampling;

    const ember::Completion c = engine.generate(request, [](const ember::Chunk& chunk) {
      std::fwrite(chunk.text.data(), 1, chunk.text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    const ember::Timings& t = c.timings;
    std::fprintf(stderr,
                 "\n\n[%s] prompt %d tokens, generated %d tokens\n"
                 "load %.0f ms | time to first token %.1f ms (prefill %.1f ms, %.0f tok/s) | "
                 "%.2f ms/token (%.1f tok/s) | total %.1f ms\n",
                 ember::to_string(c.finish_reason), c.prompt_tokens, c.generated_tokens, t.load_ms,
                 t.time_to_first_token_ms, t.prefill_ms,
                 t.prefill_ms > 0 ? c.prompt_tokens / t.prefill_ms * 1000.0 : 0.0, t.time_per_output_token_ms,
                 t.time_per_output_token_ms > 0 ? 1000.0 / t.time_per_output_token_ms : 0.0, t.total_ms);
    return c.finish_reason == ember::FinishReason::error ? 1 : 0;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
}
