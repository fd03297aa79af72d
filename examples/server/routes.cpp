#include "routes.hpp"

#include "embeddings_api.hpp"
#include "lora_endpoints.hpp"
#include "openai_api.hpp"
#include "rerank_api.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>

namespace server {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = dump(body);
  return r;
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse r = json_response(e.status, error_body(e));
  // A client told to retry learns when: the engine was full a moment ago.
  if (e.status == 429) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// Server-Timing (https://www.w3.org/TR/server-timing/): where this response's time went, in ms.
// parse: from the whole request read to its submission (worker hand-off, JSON, chat template
// and tokenizing); queue, prefill, decode: the engine's own timings; write: detokenizing, stop
// checks and building the response body.
std::string server_timing(double parse_ms, const ember::Completion& c, double write_ms) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "parse;dur=%.2f, queue;dur=%.2f, prefill;dur=%.2f, decode;dur=%.2f, write;dur=%.2f",
                parse_ms, c.timings.queue_ms, c.timings.prefill_ms, c.timings.decode_ms,
                c.timings.response_ms + write_ms);
  return buf;
}

HttpResponse generation_failed(const ember::Completion& c) {
  ApiError e;
  e.status = 500;
  e.type = "server_error";
  e.message = "generation failed: " + c.error;
  return error_response(e);
}

// What the engine's callbacks (on its stepping thread) share with the handler that submitted.
struct Pending {
  std::mutex mutex;
  bool submitted = false;  // the handle is set; stream events may go out
  std::string held;        // stream events produced before that
  // The request finished before that (the background thread can finish a short one before
  // submit() returns): the stream ends right after it begins, with these trailers.
  std::optional<Headers> ended;
};

void submit_whole(ServerState& state, const ParsedRequest& parsed, const ResponseContext& ctx,
                  const std::shared_ptr<Exchange>& ex, Clock::time_point received) {
  auto parse_ms = std::make_shared<std::atomic<double>>(0);
  // Runs on the engine's thread with its lock held: answer, never block. Returning false stops a
  // request whose client left (checked at every chunk, i.e. between steps).
  auto on_chunk = [&state, ctx, ex, parse_ms](const ember::Chunk& chunk) {
    if (!chunk.completion) return !ex->gone();
    const ember::Completion& c = *chunk.completion;
    state.metrics.record_completion(c);
    if (ex->gone()) return false;
    const auto t = Clock::now();
    HttpResponse r = c.finish_reason == ember::FinishReason::error ? generation_failed(c)
                                                                   : json_response(200, response_body(ctx, c));
    r.headers.emplace_back("Server-Timing", server_timing(*parse_ms, c, ms_since(t)));
    ex->respond(std::move(r));
    return true;
  };
  ember::RequestHandle handle = state.engine->submit(parsed.request, on_chunk);  // throws on bad parameters
  *parse_ms = ms_since(received);
  ex->on_gone([handle]() mutable { handle.cancel_soon(); });  // the I/O thread: never blocks
}

void submit_stream(ServerState& state, const ParsedRequest& parsed, const ResponseContext& ctx,
                   const std::shared_ptr<Exchange>& ex, Clock::time_point received) {
  auto pending = std::make_shared<Pending>();
  auto parse_ms = std::make_shared<std::atomic<double>>(0);
  const bool include_usage = parsed.include_usage;
  auto send = [pending, ex](std::string events) {  // under pending->mutex: keeps the order
    if (pending->submitted) {
      ex->stream(std::move(events));
    } else {
      pending->held += events;
    }
  };
  auto mapper = std::make_shared<StreamMapper>(ctx);  // text, tool_calls and logprobs deltas
  auto on_chunk = [&state, ctx, ex, pending, parse_ms, include_usage, send, mapper](const ember::Chunk& chunk) {
    std::string events;
    for (const json& j : mapper->on_chunk(chunk)) events += sse_event(j);
    std::lock_guard lock(pending->mutex);
    if (chunk.completion) {
      const ember::Completion& c = *chunk.completion;
      state.metrics.record_completion(c);
      const auto t = Clock::now();
      for (const json& j : mapper->finish(c)) events += sse_event(j);  // ends with the finish reason
      if (include_usage) events += sse_event(stream_usage_chunk(ctx, c));
      events += "data: [DONE]\n\n";
      send(std::move(events));
      Headers trailers{{"Server-Timing", server_timing(*parse_ms, c, ms_since(t))}};
      if (pending->submitted)
        ex->end_stream(std::move(trailers));
      else  // an end posted before the head would be dropped, and the client would wait forever
        pending->ended = std::move(trailers);
      return true;
    }
    if (!events.empty()) send(std::move(events));
    return !ex->gone();  // false stops generation for a client that left
  };
  ember::RequestHandle handle = state.engine->submit(parsed.request, on_chunk);  // throws on bad parameters
  *parse_ms = ms_since(received);

  HttpResponse head;
  head.content_type = "text/event-stream";
  head.headers = {{"Cache-Control", "no-cache"}, {"Trailer", "Server-Timing"}};
  if (ctx.endpoint == Endpoint::chat_completions) head.body = sse_event(stream_role_chunk(ctx));
  {
    std::lock_guard lock(pending->mutex);
    head.body += pending->held;
    pending->held.clear();
    pending->submitted = true;
    ex->begin_stream(std::move(head));  // before any later ex->stream(): posted in this order
    if (pending->ended) ex->end_stream(std::move(*pending->ended));
  }
  ex->on_gone([handle]() mutable { handle.cancel_soon(); });  // the I/O thread: never blocks
}

void completion_route(ServerState& state, Endpoint endpoint, const HttpRequest& req,
                      const std::shared_ptr<Exchange>& ex) {
  try {
    ParsedRequest parsed = parse_request(endpoint, req.body, state.next_seed++, state.tool_format);
    apply_default_lora(*state.engine, parsed);
    ResponseContext ctx;
    ctx.endpoint = endpoint;
    ctx.id = (endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-") + std::to_string(state.next_id++);
    ctx.model = state.model_id;
    ctx.created = unix_now();
    ctx.tools = parsed.tools;
    ctx.logprobs = parsed.request.sampling.logprobs;
    // Engine::detokenize takes no engine lock: safe from a stream callback.
    ctx.token_text = [engine = state.engine](std::int32_t id) { return engine->detokenize({id}); };
    if (parsed.stream) return submit_stream(state, parsed, ctx, ex, req.received);
    submit_whole(state, parsed, ctx, ex, req.received);
  } catch (const ApiError& e) {
    ex->respond(error_response(e));
  } catch (const ember::Error& e) {
    ex->respond(error_response(api_error(e, endpoint)));
  }
}

// POST /apply-template, in llama-server's shape: the body of a chat request (messages, tools,
// chat_template_kwargs, add_generation_prompt) in, {"prompt": the rendered text} out, so a user
// can check what the model will see.
void apply_template_route(ServerState& state, const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  using ordered = nlohmann::ordered_json;  // keys keep their order into the template, as in Python
  const auto bad_field = [](const std::string& param, const std::string& message) {
    ApiError e;
    e.param = param;
    e.message = message;
    return e;
  };
  try {
    const ordered body = ordered::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object() || !body.contains("messages") || !body["messages"].is_array()) {
      throw bad_field("messages", "the body must be a JSON object with a 'messages' array");
    }
    const auto text_of = [&](const char* key) { return body.contains(key) ? body[key].dump() : std::string(); };
    bool generation_prompt = true;
    if (body.contains("add_generation_prompt")) {
      if (!body["add_generation_prompt"].is_boolean())
        throw bad_field("add_generation_prompt", "'add_generation_prompt' must be a boolean");
      generation_prompt = body["add_generation_prompt"].get<bool>();
    }
    const std::string prompt = state.engine->apply_chat_template_json(
        body["messages"].dump(), text_of("tools"), text_of("chat_template_kwargs"), generation_prompt);
    ex->respond(json_response(200, {{"prompt", prompt}}));
  } catch (const ApiError& e) {
    ex->respond(error_response(e));
  } catch (const ember::Error& e) {
    ex->respond(error_response(api_error(e, Endpoint::chat_completions)));
  }
}

// POST /v1/embeddings: Engine::embed runs between the engine's steps, on this worker thread
// (an embedding pass is one forward pass, with no tokens to stream).
void embeddings_route(ServerState& state, const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  try {
    const EmbeddingsRequest r = parse_embeddings_request(req.body);
    const std::vector<ember::Embedding> e =
        r.texts.empty() ? state.engine->embed_tokens(r.tokens) : state.engine->embed(r.texts);
    ex->respond(json_response(200, embeddings_response(e, r.base64, state.model_id)));
  } catch (const ApiError& e) {
    ex->respond(error_response(e));
  } catch (const ember::Error& e) {
    ApiError a = api_error(e, Endpoint::completions);
    if (a.param == "prompt") a.param = "input";
    ex->respond(error_response(a));
  }
}

// POST /v1/rerank and /rerank (llama-server's shape): Engine::rerank, like embed, on this worker.
void rerank_route(ServerState& state, const HttpRequest& req, const std::shared_ptr<Exchange>& ex) {
  try {
    const RerankRequest r = parse_rerank_request(req.body);
    std::vector<int> tokens;
    const std::vector<float> scores = state.engine->rerank(r.query, r.documents, &tokens);
    ex->respond(json_response(200, rerank_response(r, scores, tokens, state.model_id)));
  } catch (const ApiError& e) {
    ex->respond(error_response(e));
  } catch (const ember::Error& e) {
    ApiError a = api_error(e, Endpoint::completions);
    if (a.param == "prompt") a.param = "documents";
    ex->respond(error_response(a));
  }
}

std::string front_end_metrics(const HttpCounters& c) {
  std::string out;
  auto add = [&out](const char* name, const char* type, const char* help, std::uint64_t v) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  add("ember_http_connections_open", "gauge", "Open HTTP connections.", c.connections_open);
  add("ember_http_connections_total", "counter", "Accepted HTTP connections.", c.connections_total);
  add("ember_http_connections_rejected_total", "counter",
      "Connections answered 503 because --max-connections were open.", c.rejected_connection_cap);
  add("ember_http_header_timeouts_total", "counter",
      "Connections closed because a request head was not "
      "complete within --header-timeout-ms (idle keep-alive and slowloris).",
      c.header_timeouts);
  add("ember_http_body_timeouts_total", "counter",
      "Connections closed because a body was not complete "
      "within --body-timeout-ms.",
      c.body_timeouts);
  add("ember_http_bodies_too_large_total", "counter", "Bodies refused with 413 (Content-Length or chunked).",
      c.bodies_too_large);
  add("ember_http_clients_gone_total", "counter", "Clients that left before their response was written.",
      c.clients_gone);
  return out;
}

}  // namespace

std::vector<Route> make_routes(ServerState& state) {
  std::vector<Route> routes;
  routes.push_back({"POST", "/v1/completions", [&state](const HttpRequest& req, std::shared_ptr<Exchange> ex) {
                      completion_route(state, Endpoint::completions, req, ex);
                    }});
  routes.push_back({"POST", "/v1/chat/completions", [&state](const HttpRequest& req, std::shared_ptr<Exchange> ex) {
                      completion_route(state, Endpoint::chat_completions, req, ex);
                    }});
  routes.push_back({"POST", "/v1/embeddings", [&state](const HttpRequest& req, std::shared_ptr<Exchange> ex) {
                      embeddings_route(state, req, ex);
                    }});
  for (const char* path : {"/v1/rerank", "/rerank"})
    routes.push_back({"POST", path, [&state](const HttpRequest& req, std::shared_ptr<Exchange> ex) {
                        rerank_route(state, req, ex);
                      }});
  add_lora_routes(state, routes);
  routes.push_back({"POST", "/apply-template", [&state](const HttpRequest& req, std::shared_ptr<Exchange> ex) {
                      apply_template_route(state, req, ex);
                    }});
  routes.push_back(
      {"GET", "/v1/models",
       [&state](const HttpRequest&, std::shared_ptr<Exchange> ex) {
         ex->respond(json_response(
             200,
             {{"object", "list"},
              {"data",
               json::array(
                   {{{"id", state.model_id}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "ember"}}})}}));
       },
       true});
  routes.push_back({"GET", "/health",
                    [](const HttpRequest&, std::shared_ptr<Exchange> ex) {
                      ex->respond(json_response(200, {{"status", "ok"}}));
                    },
                    true});
  // Engine::stats() takes the engine's lock (it waits for the step in progress): a worker's job.
  routes.push_back({"GET", "/metrics", [&state](const HttpRequest&, std::shared_ptr<Exchange> ex) {
                      HttpResponse r;
                      r.content_type = "text/plain; version=0.0.4";
                      r.body = state.metrics.render(state.engine->stats());
                      if (state.http) r.body += front_end_metrics(*state.http);
                      ex->respond(std::move(r));
                    }});
  return routes;
}

}  // namespace server
