// ember-server's HTTP/1.1 front end: event-driven (Boost.Asio + Boost.Beast), so a connection
// that is idle, trickles its headers or reads its stream slowly costs a socket and a few KiB,
// never a thread. One I/O thread runs every socket; handlers that may block (JSON parsing,
// tokenizing, Engine::submit, which waits for the step in progress to let it in) run on a small
// worker pool and answer through an Exchange, whose methods never block.
//
// Limits, each answered before any more is read: a request head over `max_header_bytes` (431),
// a body over `max_body_bytes` whether sent with Content-Length or chunked (413 as soon as the
// limit is crossed), a head not complete within `header_timeout` or a body within
// `body_timeout` (the connection is closed), more than `max_connections` open connections (503
// with Retry-After, then closed), a write not drained within `write_timeout` (closed).
//
// Thread-safety: HttpServer's run() and stop() may be called from any thread; Exchange's
// methods from any thread, any number of times (only the first respond()/begin_stream() counts).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace server {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  std::size_t max_body_bytes = 1u << 20;            // larger bodies: 413
  std::size_t max_header_bytes = 16u << 10;         // request line + headers; larger: 431
  std::chrono::milliseconds header_timeout{10000};  // from the first byte wait to the end of the head
  std::chrono::milliseconds body_timeout{30000};    // from the end of the head to the end of the body
  std::chrono::milliseconds write_timeout{30000};   // one write (a response, a stream chunk)
  int max_connections = 4096;                       // open connections at most; beyond: 503
  int workers = 4;                                  // threads for handlers that may block
};

struct HttpRequest {
  std::string method, path, body;  // path without the query
  Headers headers;
  std::chrono::steady_clock::time_point received;     // when the whole request was read
  std::string header(const std::string& name) const;  // case-insensitive; "" when absent
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

// One request's answer. respond() sends a whole response; begin_stream() sends the head of a
// chunked one, stream() queues body bytes (never blocks: the I/O thread writes them in order),
// end_stream() the last chunk with optional trailers. gone() turns true once the client closed
// or reset its side, a write failed or timed out; on_gone's callback then runs once (on the I/O
// thread: it must not block).
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(HttpResponse response) = 0;
  virtual void begin_stream(HttpResponse head) = 0;  // head.body is sent as the first chunk
  virtual void stream(std::string bytes) = 0;
  virtual void end_stream(Headers trailers = {}) = 0;
  virtual bool gone() const = 0;
  virtual void on_gone(std::function<void()> callback) = 0;
};

struct Route {
  std::string method, path;
  // Runs on the I/O thread when `inline_handler` (it must answer at once and never block:
  // /health, /metrics), else on a worker thread.
  std::function<void(const HttpRequest&, std::shared_ptr<Exchange>)> handler;
  bool inline_handler = false;
};

struct HttpCounters {  // for /metrics
  std::atomic<std::uint64_t> connections_open{0}, connections_total{0}, rejected_connection_cap{0}, header_timeouts{0},
      body_timeouts{0}, bodies_too_large{0}, heads_too_large{0}, bad_requests{0}, clients_gone{0};
};

class HttpServer {
 public:
  // `on_exchange_done(path, status)` runs after each response was written (or the client left).
  HttpServer(HttpLimits limits, std::vector<Route> routes,
             std::function<void(const std::string& path, int status)> on_exchange_done);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds; returns the port (the chosen one for 0) or -1 with `error` set.
  int bind(const std::string& host, int port, std::string& error);
  void run();   // serves until stop(); joins the workers before returning
  void stop();  // async-signal-unsafe: call from a thread, not a signal handler
  const HttpCounters& counters() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The error body every failure of the front end gets (OpenAI's shape).
std::string http_error_json(const std::string& message, const std::string& type, const std::string& code);

}  // namespace server
