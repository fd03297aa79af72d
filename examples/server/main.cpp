// ember-server: an OpenAI-compatible HTTP server over one ember Engine.
//
//   ember-server [--model PATH] [--host ADDR] [--port N] [--threads N] [--http-threads N]
//                [--max-body-bytes N] [--max-prompt-tokens N] [--max-requests N]
//                [--batch-min N] [--batch-wait-ms MS]
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
#include "../common/default_model.hpp"
#include "routes.hpp"

#include <httplib.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "error: %s\nusage: ember-server [--model PATH] [--host ADDR] [--port N] "
               "[--threads N] [--http-threads N] [--max-body-bytes N] [--max-prompt-tokens N]\n"
               "       [--max-requests N] [--batch-min N] [--batch-wait-ms MS]\n",
               problem.c_str());
  std::exit(2);
}

struct Options {
  std::string model = ember_examples::default_model_path();
  std::string host = "127.0.0.1";
  int port = 8080;
  int http_threads = 32;  // one per connected client: streaming holds a thread for its length
  std::size_t max_body_bytes = 1u << 20;
  server::BatchWindow batch;
  ember::EngineOptions engine;
};

Options parse_flags(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage("missing value after " + flag);
        return argv[++i];
      };
      if (flag == "--model") o.model = value();
      else if (flag == "--host") o.host = value();
      else if (flag == "--port") o.port = std::stoi(value());
      else if (flag == "--threads") o.engine.threads = std::stoi(value());
      else if (flag == "--http-threads") o.http_threads = std::stoi(value());
      else if (flag == "--max-body-bytes") o.max_body_bytes = std::stoull(value());
      else if (flag == "--max-prompt-tokens") o.engine.max_prompt_tokens = std::stoi(value());
      else if (flag == "--max-requests") o.engine.max_requests = std::stoi(value());
      else if (flag == "--batch-min") o.batch.min_requests = std::stoi(value());
      else if (flag == "--batch-wait-ms") o.batch.max_wait = std::chrono::milliseconds(std::stoi(value()));
      else if (flag == "--help" || flag == "-h") usage("help requested");
      else usage("unknown flag " + flag);
    }
  } catch (const std::logic_error&) {  // std::stoi and friends on a malformed number
    usage("a numeric flag has a malformed value");
  }
  if (o.port < 0 || o.port > 65535) usage("--port must be 0..65535 (0: any free port)");
  if (o.http_threads < 1) usage("--http-threads must be at least 1");
  if (o.batch.min_requests < 1) usage("--batch-min must be at least 1");
  if (o.batch.max_wait.count() < 0) usage("--batch-wait-ms must be >= 0");
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
