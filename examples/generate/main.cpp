// ember-generate: one prompt in, streamed text out, and where the time went.
//
//   ember-generate [--model PATH] [--prompt TEXT] [--raw] [--max-tokens N] [--temperature T]
//                  [--top-p P] [--seed S] [--precision int8|fp32] [--threads N]
//                  [--weight-cache DIR] [--progress]
//
// The prompt is sent as a user message through the model's chat template; --raw sends it as
// plain text to be continued. --model defaults to $EMBER_MODEL, then the default model fetched
// by scripts/fetch-model.sh. --weight-cache keeps the prepared INT8 weights in DIR so that the
// next start skips their preparation (time it from outside: `time ember-generate --max-tokens 1
// --weight-cache DIR`); --progress draws the load progress on stderr.
#include <ember/ember.hpp>

#include "../common/default_model.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "error: %s\nusage: ember-generate [--model PATH] [--prompt TEXT] [--raw] "
               "[--max-tokens N] [--temperature T] [--top-p P] [--seed S] "
               "[--precision int8|fp32] [--threads N] [--weight-cache DIR] [--progress]\n",
               problem);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = ember_examples::default_model_path();
  std::string prompt = "Write a short poem about the sea.";
  bool raw = false;
  ember::EngineOptions options;
  ember::SamplingParams sampling;
  sampling.max_tokens = 128;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage(("missing value after " + flag).c_str());
        return argv[++i];
      };
      if (flag == "--model") model = value();
      else if (flag == "--prompt") prompt = value();
      else if (flag == "--raw") raw = true;
      else if (flag == "--max-tokens") sampling.max_tokens = std::stoi(value());
      else if (flag == "--temperature") sampling.temperature = std::stof(value());
      else if (flag == "--top-p") sampling.top_p = std::stof(value());
      else if (flag == "--seed") sampling.seed = std::stoull(value());
      else if (flag == "--threads") options.threads = std::stoi(value());
      else if (flag == "--weight-cache") options.weight_cache_dir = value();
      else if (flag == "--progress") {
        options.on_load_progress = [](ember::LoadPhase phase, float fraction) {
          std::fprintf(stderr, "\rloading %3.0f %% (%s)      ", 100.0f * fraction, ember::to_string(phase));
          if (fraction >= 1.0f) std::fprintf(stderr, "\n");
          return true;
        };
        options.log = [](ember::LogLevel, std::string_view message) {
          std::fprintf(stderr, "\n[ember] %.*s\n", static_cast<int>(message.size()), message.data());
        };
      }
      else if (flag == "--precision") {
        const std::string p = value();
        if (p == "int8") options.precision = ember::Precision::int8;
        else if (p == "fp32") options.precision = ember::Precision::fp32;
        else usage("--precision must be int8 or fp32");
      } else if (flag == "--help" || flag == "-h") usage("help requested");
      else usage(("unknown flag " + flag).c_str());
    }
  } catch (const std::logic_error&) {  // std::stoi and friends on a malformed number
    usage("a numeric flag has a malformed value");
  }

  try {
    ember::Engine engine = ember::Engine::open(model, options);
    ember::Request request;
    if (raw) request.prompt = prompt;
    else request.messages = {{"user", prompt}};
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
                 t.prefill_ms > 0 ? c.prompt_tokens / t.prefill_ms * 1000.0 : 0.0,
                 t.time_per_output_token_ms,
                 t.time_per_output_token_ms > 0 ? 1000.0 / t.time_per_output_token_ms : 0.0,
                 t.total_ms);
    return c.finish_reason == ember::FinishReason::error ? 1 : 0;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
}
