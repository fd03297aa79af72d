#include "routes.hpp"

#include "openai_api.hpp"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

namespace server {
namespace {

using nlohmann::json;

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

// Hands the chunks of one request from the engine's stepping thread to the HTTP thread that
// writes them (streaming) or waits for the completion (then only `last` is used).
struct StreamState {
  std::mutex mutex;
  std::condition_variable ready;
  std::string pending;                   // server-sent events not yet written
  std::optional<ember::Completion> last;  // set with the final chunk
  std::atomic<bool> client_gone{false};
  ember::RequestHandle handle;
};

// Waits for the final chunk. Never RequestHandle::wait(): on a host-driven engine it would step
// the engine on this thread, outside the EngineDriver's batch window.
ember::Completion wait_for_last(StreamState& stream) {
  std::unique_lock lock(stream.mutex);
  stream.ready.wait(lock, [&] { return stream.last.has_value(); });
  return *stream.last;
}

ember::Completion run_to_completion(ServerState& state, const ember::Request& request) {
  auto done = std::make_shared<StreamState>();
  state.driver->submit(request, [done](const ember::Chunk& chunk) {
    if (!chunk.completion) return true;
    std::lock_guard lock(done->mutex);
    done->last = *chunk.completion;
    done->ready.notify_all();
    return true;
  });
  return wait_for_last(*done);
}

void stream_response(ServerState& state, const ParsedRequest& parsed, const ResponseContext& ctx,
                     httplib::Response& res) {
  auto stream = std::make_shared<StreamState>();
  // Before submit: once submitted, the engine may already be appending token events.
  if (ctx.endpoint == Endpoint::chat_completions) stream->pending = sse_event(stream_role_chunk(ctx));
  // Runs on the engine's thread with its lock held: only queue the event, never block on I/O.
  auto on_chunk = [stream, ctx](const ember::Chunk& chunk) {
    std::string event;
    if (!chunk.text.empty()) event = sse_event(stream_chunk(ctx, std::string(chunk.text), nullptr));
    std::lock_guard lock(stream->mutex);
    stream->pending += event;
    if (chunk.completion) stream->last = *chunk.completion;  // also for a client that left
    stream->ready.notify_all();
    return !stream->client_gone;  // false stops generation for a client that left
  };
  stream->handle = state.driver->submit(parsed.request, on_chunk);  // throws on bad parameters

  const bool include_usage = parsed.include_usage;
  auto provider = [stream, ctx, include_usage](std::size_t, httplib::DataSink& sink) {
    std::unique_lock lock(stream->mutex);
    stream->ready.wait_for(lock, std::chrono::seconds(1),
                           [&] { return !stream->pending.empty() || stream->last; });
    std::string out = std::move(stream->pending);
    stream->pending.clear();
    const std::optional<ember::Completion> last = stream->last;
    lock.unlock();

    if (last) {
      out += sse_event(stream_chunk(ctx, "", &*last));
      if (include_usage) out += sse_event(stream_usage_chunk(ctx, *last));
      out += "data: [DONE]\n\n";
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      stream->client_gone = true;  // the releaser below cancels the request
      return false;
    }
    if (last) sink.done();
    return true;
  };
  // Runs when the response is destroyed, whether the stream completed or the client left.
  auto releaser = [stream, &state](bool success) {
    if (!success || stream->client_gone) {
      stream->client_gone = true;
      state.driver->cancel(stream->handle);
    }
    state.metrics.record_completion(wait_for_last(*stream));
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", provider, releaser);
}

void completion_route(ServerState& state, Endpoint endpoint, const httplib::Request& req,
                      httplib::Response& res) {
  try {
    const ParsedRequest parsed = parse_request(endpoint, req.body, state.next_seed++);
    const ResponseContext ctx{
        endpoint,
        (endpoint == Endpoint::chat_completions ? "chatcmpl-" : "cmpl-") +
            std::to_string(state.next_id++),
        state.model_id, unix_now()};
    if (parsed.stream) return stream_response(state, parsed, ctx, res);

    const ember::Completion c = run_to_completion(state, parsed.request);
    state.metrics.record_completion(c);
    if (c.finish_reason == ember::FinishReason::error) {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = "generation failed: " + c.error;
      return send_error(res, e);
    }
    send_json(res, 200, response_body(ctx, c));
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const ember::Error& e) {
    send_error(res, api_error(e, endpoint));
  }
}

// Gives every 4xx/5xx without a body (404, httplib's own 413 and 400) the OpenAI error shape.
httplib::Server::HandlerResponse fill_error_body(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
  ApiError e;
  e.status = res.status;
  if (res.status == 404) {
    e.message = "no route " + req.method + " " + req.path;
    e.code = "not_found";
  } else if (res.status == 413) {
    // httplib also caps form-encoded bodies (curl -d without a JSON content type) at 8 KiB.
    e.message = "the request body is larger than this server accepts (--max-body-bytes; bodies "
                "not sent as Content-Type: application/json are limited to 8 KiB)";
    e.code = "request_too_large";
  } else {
    e.message = "the request could not be handled (HTTP " + std::to_string(res.status) + ")";
    if (res.status >= 500) e.type = "server_error";
  }
  res.set_content(dump(error_body(e)), "application/json");
  return httplib::Server::HandlerResponse::Handled;
}

}  // namespace

void install_routes(httplib::Server& http, ServerState& state) {
  http.Post("/v1/completions", [&state](const httplib::Request& req, httplib::Response& res) {
    completion_route(state, Endpoint::completions, req, res);
  });
  http.Post("/v1/chat/completions", [&state](const httplib::Request& req, httplib::Response& res) {
    completion_route(state, Endpoint::chat_completions, req, res);
  });
  http.Get("/v1/models", [&state](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200,
              {{"object", "list"},
               {"data", json::array({{{"id", state.model_id},
                                      {"object", "model"},
                                      {"created", unix_now()},
                                      {"owned_by", "ember"}}})}});
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  http.Get("/metrics", [&state](const httplib::Request&, httplib::Response& res) {
    res.set_content(state.metrics.render(state.driver->stats()), "text/plain; version=0.0.4");
  });
  http.set_error_handler(httplib::Server::HandlerWithResponse(fill_error_body));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = "internal error";
    send_error(res, e);
  });
  // Counted after the response is written, so a stream counts once, when it ends.
  http.set_logger([&state](const httplib::Request& req, const httplib::Response& res) {
    state.metrics.record_http(req.path, res.status);
  });
}

}  // namespace server
