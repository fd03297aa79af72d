// ember-server: an OpenAI-compatible HTTP server over one ember Engine.
//
//   ember-server [--model PATH] [--host ADDR] [--port N] [--max-requests N] ...  (--help lists all)
//
// Limits: --max-prompt-tokens (longer prompts: 400 context_length_exceeded) and --max-requests
// (requests in flight, queued + running; beyond it: 429 rate_limit_exceeded, retry later) are
// ember::EngineOptions::max_prompt_tokens and max_requests; --max-body-bytes is httplib's (413).
// Batch window: an idle engine starts its next batch once --batch-min requests are queued or
// the first of them has waited --batch-wait-ms (default 1 and 0: at once). A larger window
// trades the first token's latency for fuller batches; the tests use it to batch for sure.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (both with "stream": true as
// server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus text).
// One thread (server::EngineDriver) steps the engine, so the requests of concurrent clients are
// batched into the same engine steps; each HTTP worker thread only submits and waits or streams.
// It binds 127.0.0.1 by default: there is no authentication, put a proxy in front before
// exposing it. Try it:
//
//   curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json'
//        -d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'
#include "../common/cli.hpp"
#include "routes.hpp"

#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

namespace {

struct Options {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int http_threads = 32;  // one per connected client: streaming holds a thread for its length
  std::size_t max_body_bytes = 1u << 20;
  server::BatchWindow batch;
  ember::EngineOptions engine;
};

Options parse_flags(int argc, char** argv) {
  Options o;
  ember_examples::EngineFlags engine_flags;
  ember::EngineOptions& engine = engine_flags.options;
  ember_examples::CommandLine cli(
      "ember-server",
      "An OpenAI-compatible HTTP server over one ember Engine: POST /v1/completions, POST "
      "/v1/chat/completions (both streaming with \"stream\": true), GET /v1/models, GET /health, "
      "GET /metrics. There is no authentication: put a proxy in front before exposing it.");
  cli.option("--host", "ADDR", o.host, "the address to listen on")
      .option("--port", "N", o.port, "the port to listen on; 0 = any free port")
      .option("--http-threads", "N", o.http_threads,
              "HTTP worker threads: one per connected client, as a stream holds one for its length")
      .option("--max-body-bytes", "N", o.max_body_bytes,
              "request bodies at most, in bytes; larger: 413")
      .option("--max-prompt-tokens", "N", engine.max_prompt_tokens,
              "prompt tokens at most; longer prompts: 400 context_length_exceeded; 0 = only the "
              "context window")
      .option("--max-requests", "N", engine.max_requests,
              "requests in flight (queued + running) at most; beyond it: 429 "
              "rate_limit_exceeded; 0 = no limit")
      .option("--batch-min", "N", o.batch.min_requests,
              "an idle engine starts its next batch once N requests are queued, or once the "
              "first of them has waited --batch-wait-ms")
      .option("--batch-wait-ms", "MS",
              "an idle engine starts its next batch once the first queued request has waited MS "
              "ms, or once --batch-min are queued; a larger window trades the first token's "
              "latency for fuller batches",
              std::to_string(o.batch.max_wait.count()), [&o](const std::string& v) {
                o.batch.max_wait = std::chrono::milliseconds(
                    ember_examples::CommandLine::parse<int>("--batch-wait-ms", v));
              });
  engine_flags.declare(cli);
  cli.parse(argc, argv);
  if (o.port < 0 || o.port > 65535) cli.fail("--port must be 0..65535 (0: any free port)");
  if (o.http_threads < 1) cli.fail("--http-threads must be at least 1");
  if (o.batch.min_requests < 1) cli.fail("--batch-min must be at least 1");
  if (o.batch.max_wait.count() < 0) cli.fail("--batch-wait-ms must be >= 0");
  o.engine = engine_flags.open_options(cli);
  o.model = engine_flags.model_path;
  return o;
}

// The running server, for the signal handler: stop() only shuts the listening socket down.
std::atomic<httplib::Server*> g_running{nullptr};

extern "C" void on_signal(int) {
  if (httplib::Server* s = g_running.load()) s->stop();
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_flags(argc, argv);
  // A client that disconnects must fail our write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);

  server::ServerState state;
  std::optional<ember::Engine> engine;
  try {
    engine.emplace(ember::Engine::open(options.model, options.engine));  // host-driven
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
  server::EngineDriver driver(*engine, options.batch);  // stops before the engine closes
  state.driver = &driver;
  state.model_id = std::filesystem::path(options.model).stem().string();
  state.next_seed = std::random_device{}();

  httplib::Server http;
  const int http_threads = options.http_threads;
  http.new_task_queue = [http_threads] { return new httplib::ThreadPool(http_threads); };
  http.set_payload_max_length(options.max_body_bytes);
  server::install_routes(http, state);

  const int port = options.port == 0 ? http.bind_to_any_port(options.host)
                                     : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port < 0) {
    std::fprintf(stderr, "error: cannot listen on %s:%d\n", options.host.c_str(), options.port);
    return 1;
  }
  g_running = &http;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::printf("ember-server: %s on http://%s:%d (context %d, loaded in %.0f ms)\n",
              state.model_id.c_str(), options.host.c_str(), port, engine->info().context_length,
              engine->load_ms());
  std::fflush(stdout);
  // Returns after stop(), once the workers are joined: no request is waited for after it.
  const bool ok = http.listen_after_bind();
  g_running = nullptr;
  std::printf("ember-server: stopped\n");
  return ok ? 0 : 1;
}
