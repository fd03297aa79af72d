// ember-npc: eight characters answer the player inside a game loop that never blocks.
//
//   ember-npc [--model PATH] [--player TEXT] [--frame-ms MS] [--step-tokens N] ...  (--help lists all)
//
// The game owns the thread: each frame it gives the engine a fixed time budget with
// Engine::step(budget) and goes on rendering. The eight replies are submitted at once with
// Engine::submit; their text arrives through streaming callbacks during those steps. All eight
// prompts start with the same long world lore, so after the first character the prefix cache
// serves the lore's KV and only each character's own lines are prefilled.
//
// step() stops a step inside its forward pass when the frame's budget runs out and continues it
// the next frame; --step-tokens bounds the rows of one engine step, so the replies get tokens
// often while long prompts prefill.
#include "lore.hpp"

#include <ember/ember.hpp>

#include "../common/cli.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Character {
  const char* name;
  const char* persona;
};

const Character kCharacters[] = {
    {"Mayor Oswin Tall", "the anxious, talkative mayor who counts every silver mark"},
    {"Captain Brannoc", "the gruff captain of the night watch, suspicious of strangers"},
    {"Mother Ilse", "the calm keeper of the chapel of the Quiet Flame, who guards the Heartcoal"},
    {"Greta Hollis", "the cheerful owner of the Lantern Inn, who loves gossip and good ale"},
    {"Tomas the smith", "the proud smith of the ember forge, a man of few words"},
    {"Wren", "the quick twelve-year-old ferry girl who hears every rumour first"},
    {"Old Fennick", "the old fisherman below the Falls who tells impossible stories"},
    {"Sabine Dray", "the polite merchant from Calder who hides why she is really here"},
};
constexpr int kCharacterCount = static_cast<int>(sizeof(kCharacters) / sizeof(kCharacters[0]));

struct Options {
  std::string model;
  std::string player = "Strange lights burn on Hollow Crag again tonight. What should I do?";
  double frame_ms = 16;
  int frames_max = 100000;
  int quiet_frames = 0;  // 0: a line every frame; N: a summary line every N frames
  ember::EngineOptions engine;
  ember::SamplingParams sampling;
};

Options parse_flags(int argc, char** argv) {
  Options o;
  o.sampling.max_tokens = 48;
  o.sampling.temperature = 0.7f;
  ember_examples::EngineFlags engine_flags;
  engine_flags.options.max_batch_tokens = 128;
  ember_examples::CommandLine cli(
      "ember-npc",
      "Eight characters answer the player inside a game loop that never blocks: each frame gives "
      "the engine a fixed time budget, and the replies stream in during those steps.");
  cli.option("--player", "TEXT", o.player, "what the player says to every character")
      .option("--frame-ms", "MS", o.frame_ms, "the engine's time budget per frame, in ms")
      .option("--frames-max", "N", o.frames_max, "frames at most before the game moves on")
      .option("--quiet-frames", "N", o.quiet_frames,
              "print a summary line every N frames instead of a line per frame; 0 = every frame")
      .option("--max-tokens", "N", o.sampling.max_tokens, "generated tokens per reply at most")
      .option("--temperature", "T", o.sampling.temperature, "sampling temperature; 0 = greedy")
      .option("--step-tokens", "N", engine_flags.options.max_batch_tokens,
              "token budget of one engine step (a prompt chunk and the decodes): a step spans as "
              "many frames as it needs, so smaller steps give the replies tokens more often while "
              "a long prompt prefills, at some cost in throughput");
  engine_flags.declare(cli);
  cli.parse(argc, argv);
  // !(x > 0 && x <= limit) also refuses NaN, which every comparison fails.
  if (!(o.frame_ms > 0 && o.frame_ms <= 60'000) || o.frames_max <= 0 || o.quiet_frames < 0)
    cli.fail("--frame-ms must be in (0, 60000], --frames-max positive, --quiet-frames not negative");
  o.engine = engine_flags.open_options(cli);
  o.model = engine_flags.model_path;
  return o;
}

// One character's conversation: the shared lore first (identical bytes for everyone, so its
// tokens are a common prefix), then who this character is, then the player's line.
ember::Request character_request(const Character& who, const std::string& player_line,
                                 const ember::SamplingParams& sampling, int index) {
  ember::Request r;
  r.messages = {
      {"system", std::string(npc::kWorldLore) + "\n\nYou are " + who.name + ", " + who.persona + "."},
      {"user", player_line},
  };
  r.sampling = sampling;
  r.sampling.seed = 1000 + static_cast<std::uint64_t>(index);  // each voice its own draw
  r.sampling.stop = {"\n\n"};
  return r;
}

struct Npc {
  std::string reply;  // filled by the stream callback during engine.step()
  ember::RequestHandle handle;
  ember::Completion completion;
  bool done = false;
};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_flags(argc, argv);
  try {
    ember::Engine engine = ember::Engine::open(options.model, options.engine);
    std::printf("ember-npc: %s loaded in %.0f ms; world lore %zu tokens, shared by %d characters\n",
                engine.info().name.c_str(), engine.load_ms(), engine.tokenize(npc::kWorldLore).size(), kCharacterCount);
    std::printf("player: %s\n\n", options.player.c_str());

    // The player speaks: every character's reply is queued at once; nothing runs yet.
    std::vector<Npc> npcs(kCharacterCount);
    for (int i = 0; i < kCharacterCount; ++i) {
      std::string* sink = &npcs[static_cast<std::size_t>(i)].reply;
      npcs[static_cast<std::size_t>(i)].handle = engine.submit(
          character_request(kCharacters[i], options.player, options.sampling, i), [sink](const ember::Chunk& chunk) {
            sink->append(chunk.text);  // runs on this thread, inside engine.step()
            return true;
          });
    }

    const auto budget = std::chrono::microseconds(static_cast<long long>(options.frame_ms * 1000));
    const Clock::time_point start = Clock::now();
    int frame = 0, finished = 0, window_tokens = 0;
    double worst_frame_ms = 0, window_worst_ms = 0;
    std::vector<double> frame_ms;  // the engine's share of every frame, for the p99
    while (finished < kCharacterCount && frame < options.frames_max) {
      const Clock::time_point frame_start = Clock::now();
      const ember::StepResult step = engine.step(budget);  // the engine's share of this frame
      const double step_ms = ms_since(frame_start);

      for (Npc& npc : npcs) {
        if (npc.done || npc.handle.status() != ember::RequestStatus::finished) continue;
        npc.completion = npc.handle.wait();  // already finished: returns at once
        npc.done = true;
        ++finished;
      }
      ++frame;
      frame_ms.push_back(step_ms);
      worst_frame_ms = std::max(worst_frame_ms, step_ms);
      window_worst_ms = std::max(window_worst_ms, step_ms);
      window_tokens += step.tokens;
      const ember::EngineStats s = engine.stats();
      if (options.quiet_frames == 0) {
        std::printf("frame %5d  engine %6.2f ms  tokens %4d  active %d  done %d/%d\n", frame, step_ms, step.tokens,
                    s.running + s.queued, finished, kCharacterCount);
      } else if (frame % options.quiet_frames == 0) {
        std::printf("frames %5d-%-5d  worst engine %6.2f ms  tokens %5d  active %d  done %d/%d\n",
                    frame - options.quiet_frames + 1, frame, window_worst_ms, window_tokens, s.running + s.queued,
                    finished, kCharacterCount);
        window_tokens = 0;
        window_worst_ms = 0;
      }
      // The rest of the frame belongs to the game (here: waiting for the next vsync).
      std::this_thread::sleep_until(frame_start + budget);
    }
    const double total_ms = ms_since(start);
    std::sort(frame_ms.begin(), frame_ms.end());
    const double p99_ms = frame_ms.empty() ? 0 : frame_ms[(frame_ms.size() - 1) * 99 / 100];

    std::printf("\n");
    for (int i = 0; i < kCharacterCount; ++i) {
      Npc& npc = npcs[static_cast<std::size_t>(i)];
      if (!npc.done) npc.handle.cancel();  // out of frames: the game moves on without it
      const ember::Completion& c = npc.completion;
      std::printf("%s: %s\n", kCharacters[i].name, npc.reply.c_str());
      std::printf("    [%s] ttft %.1f ms | %d tokens | prompt %d, %d from the prefix cache\n",
                  npc.done ? ember::to_string(c.finish_reason) : "unfinished", c.timings.time_to_first_token_ms,
                  c.generated_tokens, c.prompt_tokens, c.cached_prompt_tokens);
    }
    const ember::EngineStats s = engine.stats();
    const double reuse = s.prompt_tokens > 0 ? double(s.prompt_tokens_reused) / s.prompt_tokens : 0;
    std::printf(
        "\n%d/%d replies in %.0f ms over %d frames (budget %.1f ms, engine step p99 %.2f ms, "
        "worst %.2f ms)\n",
        finished, kCharacterCount, total_ms, frame, options.frame_ms, p99_ms, worst_frame_ms);
    std::printf("prefix cache: %llu of %llu prompt tokens reused (%.1f%%); %llu tokens generated\n",
                static_cast<unsigned long long>(s.prompt_tokens_reused),
                static_cast<unsigned long long>(s.prompt_tokens), 100.0 * reuse,
                static_cast<unsigned long long>(s.generated_tokens));
    return finished == kCharacterCount ? 0 : 3;
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
}
