// ember-server: an OpenAI-compatible HTTP server over one ember Engine.
//
//   ember-server [--model PATH] [--host ADDR] [--port N] [--max-requests N] ...  (--help lists all)
//
// Limits: --max-prompt-tokens (longer prompts: 400 context_length_exceeded) and --max-requests
// (requests in flight, queued + running; beyond it: 429 rate_limit_exceeded with Retry-After)
// are ember::EngineOptions::max_prompt_tokens and max_requests. The front end (http_server.hpp,
// Boost.Beast on one I/O thread) enforces --max-body-bytes on every body, Content-Length or
// chunked (413 as soon as it is crossed), --header-timeout-ms and --body-timeout-ms, and
// --max-connections (beyond: 503 with Retry-After); idle and slow connections cost no thread.
// Batch window: an idle engine starts its next batch once --batch-min requests are queued or
// the first of them has waited --batch-wait-ms (default 1 and 0: at once). A larger window
// trades the first token's latency for fuller batches; the tests use it to batch for sure.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (both with "stream": true as
// server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus text). Every
// completion carries a Server-Timing header (a trailer for streams): parse, queue, prefill,
// decode, write.
// The engine steps itself on its background thread (EngineOptions::background_thread, with the
// batch window above), so the requests of concurrent clients are batched into the same engine
// steps; a worker thread only parses and submits, and the engine's callbacks answer. A client
// that leaves has its request cancelled before the next step (RequestHandle::cancel_soon, which
// never blocks the I/O thread).
// It binds 127.0.0.1 by default: there is no authentication, put a proxy in front before
// exposing it. Try it:
//
//   curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json'
//        -d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'
#include "../common/cli.hpp"
#include "../common/schema_dir.hpp"
#include "routes.hpp"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string model;
  std::vector<std::string> lora;  // adapters loaded at start (--lora), ids 0, 1, ...
  std::string schema_dir;         // documents for remote $refs (--schema-dir)
  std::string host = "127.0.0.1";
  int port = 8080;
  server::HttpLimits http;
  ember::EngineOptions engine;
};

Options parse_flags(int argc, char** argv) {
  Options o;
  ember_examples::EngineFlags engine_flags;
  ember::EngineOptions& engine = engine_flags.options;
  // A chat longer than the context is answered without its oldest turns rather than refused.
  engine.context_policy = ember::ContextPolicy::truncate;
  ember_examples::CommandLine cli(
      "ember-server",
      "An OpenAI-compatible HTTP server over one ember Engine: POST /v1/completions, POST "
      "/v1/chat/completions (both streaming with \"stream\": true), POST /v1/embeddings, POST /v1/rerank "
      "(and /rerank), POST /apply-template, GET /v1/models, GET /health, GET /metrics, GET /lora-adapters. "
      "There is no authentication: put a proxy in front before exposing it.");
  cli.option("--host", "ADDR", o.host, "the address to listen on")
      .option("--port", "N", o.port, "the port to listen on; 0 = any free port")
      .option("--http-threads", "N", o.http.workers,
              "worker threads that parse and submit requests (waiting connections need none)")
      .option("--max-body-bytes", "N", o.http.max_body_bytes,
              "request bodies at most, in bytes, Content-Length or chunked; larger: 413")
      .option("--max-connections", "N", o.http.max_connections,
              "open connections at most; beyond: 503 with Retry-After")
      .option("--header-timeout-ms", "MS",
              "a request head (or the next one on a kept-alive "
              "connection) not complete within MS ms closes the connection",
              std::to_string(o.http.header_timeout.count()),
              [&o](const std::string& v) {
                o.http.header_timeout =
                    std::chrono::milliseconds(ember_examples::CommandLine::parse<int>("--header-timeout-ms", v));
              })
      .option("--body-timeout-ms", "MS",
              "a request body not complete within MS ms after its head "
              "closes the connection",
              std::to_string(o.http.body_timeout.count()),
              [&o](const std::string& v) {
                o.http.body_timeout =
                    std::chrono::milliseconds(ember_examples::CommandLine::parse<int>("--body-timeout-ms", v));
              })
      .option("--max-prompt-tokens", "N", engine.max_prompt_tokens,
              "prompt tokens at most; longer prompts: 400 context_length_exceeded; 0 = only the "
              "context window")
      .option("--max-requests", "N", engine.max_requests,
              "requests in flight (queued + running) at most; beyond it: 429 "
              "rate_limit_exceeded; 0 = no limit")
      .option("--batch-min", "N", engine.batch_min_requests,
              "an idle engine starts its next batch once N requests are queued, or once the "
              "first of them has waited --batch-wait-ms")
      .option("--batch-wait-ms", "MS",
              "an idle engine starts its next batch once the first queued request has waited MS "
              "ms, or once --batch-min are queued; a larger window trades the first token's "
              "latency for fuller batches",
              std::to_string(engine.batch_max_wait.count()), [&engine](const std::string& v) {
                engine.batch_max_wait =
                    std::chrono::milliseconds(ember_examples::CommandLine::parse<int>("--batch-wait-ms", v));
              });
  cli.option("--lora", "PATH",
             "load a LoRA adapter (llama.cpp's GGUF format) at start; repeatable, ids 0, 1, ... in "
             "order. A request's \"lora\": [{\"id\", \"scale\"}] picks adapters (the others are off); "
             "without it every adapter runs at scale 1. GET /lora-adapters lists them",
             "none", [&o](const std::string& v) { o.lora.push_back(v); });
  cli.option("--schema-dir", "DIR", o.schema_dir,
             "JSON Schema documents for remote $refs of json_schema requests, found by their $id or "
             "file name (examples/common/schema_dir.hpp); nothing is fetched from a network. Without "
             "a document, what needs it is never generated (a relaxation naming its URI), or a 400 where "
             "every value needs it",
             "none");
  engine_flags.declare(cli);
  cli.parse(argc, argv);
  if (o.port < 0 || o.port > 65535) cli.fail("--port must be 0..65535 (0: any free port)");
  if (o.http.workers < 1 || o.http.workers > 1024) cli.fail("--http-threads must be 1..1024");
  if (o.http.max_body_bytes < 1) cli.fail("--max-body-bytes must be at least 1");
  if (o.http.max_connections < 1) cli.fail("--max-connections must be at least 1");
  if (o.http.header_timeout.count() < 1 || o.http.body_timeout.count() < 1)
    cli.fail("--header-timeout-ms and --body-timeout-ms must be at least 1");
  if (engine.batch_min_requests < 1) cli.fail("--batch-min must be at least 1");
  if (engine.batch_max_wait.count() < 0) cli.fail("--batch-wait-ms must be >= 0");
  if (engine.batch_min_requests > 1 && engine.batch_max_wait.count() == 0)
    cli.fail("--batch-min above 1 needs --batch-wait-ms, the longest the first request waits for the others");
  engine.background_thread = true;  // the engine steps itself; the batch window is its own
  o.engine = engine_flags.open_options(cli);
  if (!o.schema_dir.empty()) try {
      o.engine.schema_resolver = ember_examples::schema_dir_resolver(o.schema_dir);
    } catch (const std::exception& e) {
      cli.fail(std::string("--schema-dir: ") + e.what());
    }
  o.model = engine_flags.model_path;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_flags(argc, argv);
  // A client that disconnects must fail our write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);

  server::ServerState state;
  std::optional<ember::Engine> engine;
  try {
    engine.emplace(ember::Engine::open(options.model, options.engine));  // background_thread
    for (const std::string& path : options.lora) engine->load_adapter(path);
  } catch (const ember::Error& e) {
    std::fprintf(stderr, "error (%s): %s\n", ember::to_string(e.code()), e.what());
    return 1;
  }
  // Destroyed in this order after run(): the engine (its thread stops, its unfinished requests
  // end and their callbacks post to the stopped front end), then the front end.
  state.engine = &*engine;
  state.model_id = std::filesystem::path(options.model).stem().string();
  state.next_seed = std::random_device{}();
  try {  // the tool-call format of the model's chat family (generic without a template)
    state.tool_format = server::tool_format_of_rendering(engine->apply_chat_template({{"user", "x"}}));
  } catch (const ember::Error&) {
  }

  auto http = std::make_unique<server::HttpServer>(
      options.http, server::make_routes(state),
      [&state](const std::string& path, int status) { state.metrics.record_http(path, status); });
  state.http = &http->counters();
  std::string error;
  const int port = http->bind(options.host, options.port, error);
  if (port < 0) {
    std::fprintf(stderr, "error: cannot listen on %s:%d: %s\n", options.host.c_str(), options.port, error.c_str());
    return 1;
  }
  std::printf("ember-server: %s on http://%s:%d (context %d, tool calls %s, loaded in %.0f ms)\n",
              state.model_id.c_str(), options.host.c_str(), port, engine->info().context_length,
              server::to_string(state.tool_format), engine->load_ms());
  std::fflush(stdout);
  http->run();  // until SIGINT or SIGTERM
  engine.reset();
  http.reset();
  std::printf("ember-server: stopped\n");
  return 0;
}
