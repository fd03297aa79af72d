// The front end's one I/O thread: every connection is a Session whose reads and writes are
// asynchronous operations on that thread, so waiting for bytes costs no thread. A Session moves
// through reading (head, then body, each under its own deadline), handling (the handler runs;
// a watching read notices a client that closes or resets its side) and writing (a whole
// response, or a chunked stream fed by Exchange::stream from any thread).
#include "http_server.hpp"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <deque>
#include <optional>

namespace server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

bool iequals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// A JSON string's contents for an error message. Control bytes are dropped, and bytes past ASCII
// written as \u00XX: a request path need not be UTF-8, and the body must stay valid JSON.
std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20) continue;
    if (byte >= 0x80) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", byte);
      out += escaped;
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string reason(int status) {
  const auto r = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return r.empty() ? std::string("Unknown") : std::string(r);
}

std::string head_of(int status, const std::string& content_type, const Headers& headers, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  if (!keep_alive) out += "Connection: close\r\n";
  return out;
}

std::string whole_response(const HttpResponse& r, bool keep_alive) {
  std::string out = head_of(r.status, r.content_type, r.headers, keep_alive);
  out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n\r\n";
  out += r.body;
  return out;
}

std::string chunk(const std::string& bytes) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return size + bytes + "\r\n";
}

}  // namespace

std::string HttpRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

std::string http_error_json(const std::string& message, const std::string& type, const std::string& code) {
  return "{\"error\":{\"message\":\"" + json_escape(message) + "\",\"type\":\"" + json_escape(type) +
         "\",\"param\":null,\"code\":" + (code.empty() ? std::string("null") : "\"" + json_escape(code) + "\"") + "}}";
}

struct HttpServer::Impl {
  HttpLimits limits;
  std::vector<Route> routes;
  std::function<void(const std::string&, int)> on_done;
  // Before io: sessions still queued in io's handlers are destroyed with it, and count down.
  HttpCounters counters;
  int open = 0;  // I/O thread only
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::signal_set signals{io};
  asio::steady_timer accept_pause{io};
  std::optional<asio::thread_pool> workers;

  void accept_next();
  void reject(tcp::socket socket);
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, tcp::socket socket) : server_(server), stream_(std::move(socket)) {
    ++server_.open;
    ++server_.counters.connections_open;
    ++server_.counters.connections_total;
  }
  ~Session() {
    --server_.open;
    --server_.counters.connections_open;
  }

  void start() { read_request(); }

  // ---- called on the I/O thread through Exchange ----
  void respond(HttpResponse r) {
    if (responded_ || gone_) return;
    responded_ = true;
    status_ = r.status;
    queue_write(whole_response(r, keep_alive_), /*final=*/true);
  }
  void begin_stream(HttpResponse head) {
    if (responded_ || gone_) return;
    responded_ = streaming_ = true;
    status_ = head.status;
    std::string out = head_of(head.status, head.content_type, head.headers, keep_alive_);
    out += "Transfer-Encoding: chunked\r\n\r\n";
    if (!head.body.empty()) out += chunk(head.body);
    queue_write(std::move(out), false);
  }
  void stream(std::string bytes) {
    if (!streaming_ || ended_ || gone_ || bytes.empty()) return;
    queue_write(chunk(bytes), false);
  }
  void end_stream(const Headers& trailers) {
    if (!streaming_ || ended_ || gone_) return;
    ended_ = true;
    std::string out = "0\r\n";
    for (const auto& [k, v] : trailers) out += k + ": " + v + "\r\n";
    out += "\r\n";
    queue_write(std::move(out), true);
  }
  void add_gone_callback(std::function<void()> f) {
    if (gone_) return f();
    if (!exchange_done_) gone_callbacks_.push_back(std::move(f));
  }
  bool gone() const { return gone_flag_.load(); }
  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  const HttpLimits& limits() const { return server_.limits; }

  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits().max_header_bytes));
    parser_->body_limit(limits().max_body_bytes);
    responded_ = streaming_ = ended_ = exchange_done_ = false;
    gone_callbacks_.clear();
    stream_.expires_after(limits().header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    if (ec) return on_read_error(ec, true);
    if (parser_->is_done()) return dispatch();
    stream_.expires_after(limits().body_timeout);
    const auto& head = parser_->get();
    auto expect = head.find(http::field::expect);
    if (expect != head.end() && beast::iequals(expect->value(), "100-continue")) {
      // curl waits a second for this before sending a body over 1 KiB.
      continue_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      asio::async_write(stream_, asio::buffer(*continue_),
                        [self = shared_from_this()](beast::error_code e, std::size_t) {
                          if (e) return;  // the read below fails too
                        });
    }
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code e, std::size_t) { self->on_body(e); });
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec, false);
    dispatch();
  }

  void on_read_error(beast::error_code ec, bool in_head) {
    auto& c = server_.counters;
    if (ec == beast::error::timeout) {
      ++(in_head ? c.header_timeouts : c.body_timeouts);
      return;  // tcp_stream closed the socket
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted) {
      return close();
    }
    keep_alive_ = false;
    HttpResponse r;
    if (ec == http::error::body_limit) {
      ++c.bodies_too_large;
      r.status = 413;
      r.body = http_error_json("the request body is larger than this server accepts (--max-body-bytes = " +
                                   std::to_string(limits().max_body_bytes) + ")",
                               "invalid_request_error", "request_too_large");
    } else if (ec == http::error::header_limit) {
      ++c.heads_too_large;
      r.status = 431;
      r.body =
          http_error_json("the request head is larger than " + std::to_string(limits().max_header_bytes) + " bytes",
                          "invalid_request_error", "request_header_too_large");
    } else {
      ++c.bad_requests;
      r.status = 400;
      r.body = http_error_json("malformed HTTP request: " + ec.message(), "invalid_request_error", "bad_request");
    }
    path_ = "other";
    if (const std::string target(parser_->get().target()); !target.empty()) {
      path_ = target.substr(0, target.find('?'));  // a head too large may have none yet
    }
    respond(std::move(r));  // then closes: nothing more of this request is read
  }

  void dispatch() {
    auto message = parser_->release();
    HttpRequest req;
    req.method = std::string(message.method_string());
    const std::string target(message.target());
    req.path = target.substr(0, target.find('?'));
    req.body = std::move(message.body());
    for (const auto& field : message)
      req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    req.received = Clock::now();
    keep_alive_ = message.keep_alive();
    stream_.expires_never();
    path_ = req.path;

    const Route* route = nullptr;
    bool path_known = false;
    for (const Route& r : server_.routes) {
      if (r.path != req.path) continue;
      path_known = true;
      if (r.method == req.method) route = &r;
    }
    auto exchange = make_exchange();
    start_watch();
    if (route == nullptr) {
      HttpResponse r;
      r.status = path_known ? 405 : 404;
      r.body = http_error_json("no route " + req.method + " " + req.path, "invalid_request_error",
                               path_known ? "method_not_allowed" : "not_found");
      path_ = "other";
      return respond(std::move(r));
    }
    if (route->inline_handler) return route->handler(req, exchange);
    asio::post(*server_.workers, [handler = route->handler, req = std::move(req), exchange]() {
      try {
        handler(req, exchange);
      } catch (...) {
        HttpResponse r;
        r.status = 500;
        r.body = http_error_json("internal error", "server_error", "");
        exchange->respond(std::move(r));
      }
    });
  }

  std::shared_ptr<Exchange> make_exchange();

  // A read while the handler runs: EOF or an error means the client left; bytes are a pipelined
  // next request, kept in buffer_ for the next parse, and the watch goes on (a client that sends
  // more and then leaves is still noticed) until buffer_ is full (its maximum size: prepare()
  // past it throws).
  void start_watch() {
    const std::size_t room = std::min<std::size_t>(4096, buffer_.max_size() - buffer_.size());
    if (room == 0) return;
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(room),
                                     [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                       self->watching_ = false;
                                       if (!ec) {
                                         self->buffer_.commit(n);
                                       } else if (ec != asio::error::operation_aborted) {
                                         return self->client_gone();
                                       }
                                       if (self->want_next_) {
                                         self->want_next_ = false;
                                         self->read_request();
                                       } else if (!ec && !self->exchange_done_) {
                                         self->start_watch();  // not beside close_after_drain's read
                                       }
                                     });
  }

  void client_gone() {
    if (gone_) return;
    gone_ = true;
    gone_flag_ = true;
    ++server_.counters.clients_gone;
    auto callbacks = std::move(gone_callbacks_);
    gone_callbacks_.clear();
    for (auto& f : callbacks) f();
    if (!exchange_done_ && server_.on_done) server_.on_done(path_, 499);  // nginx's "client closed"
    exchange_done_ = true;
    close();
  }

  void queue_write(std::string bytes, bool final) {
    outbox_.push_back(std::move(bytes));
    if (final) final_queued_ = true;
    if (!writing_) write_next();
  }

  void write_next() {
    if (gone_) return;
    if (outbox_.empty()) {
      writing_ = false;
      if (final_queued_) finish_exchange();
      return;
    }
    writing_ = true;
    current_.clear();
    for (auto& s : outbox_) current_ += s;
    outbox_.clear();
    stream_.expires_after(limits().write_timeout);
    asio::async_write(stream_, asio::buffer(current_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->stream_.expires_never();
      if (ec) return self->client_gone();
      self->write_next();
    });
  }

  void finish_exchange() {
    final_queued_ = false;
    exchange_done_ = true;
    if (server_.on_done) server_.on_done(path_, status_);
    if (!keep_alive_) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return close_after_drain();
    }
    if (watching_) {
      want_next_ = true;
      beast::error_code ignored;
      stream_.socket().cancel(ignored);  // the watch ends with operation_aborted, then reads
      return;
    }
    read_request();
  }

  // After a response that closes the connection: read (and drop) what the client still sends
  // for a moment, so that closing does not reset the connection before it read our answer.
  // At most 64 KiB and 1 s of it: a body over the limit is not read on.
  void close_after_drain() {
    if (!drain_) {
      drain_ = std::make_shared<std::array<char, 4096>>();
      stream_.expires_after(std::chrono::seconds(1));
    }
    stream_.async_read_some(asio::buffer(*drain_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > (64u << 10)) return self->close();
      self->close_after_drain();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  HttpServer::Impl& server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{8192};
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> outbox_;
  std::string current_, path_;
  std::shared_ptr<std::string> continue_;
  std::shared_ptr<std::array<char, 4096>> drain_;
  std::vector<std::function<void()>> gone_callbacks_;
  std::size_t drained_ = 0;
  int status_ = 0;
  bool keep_alive_ = true, responded_ = false, streaming_ = false, ended_ = false, writing_ = false,
       final_queued_ = false, watching_ = false, want_next_ = false, gone_ = false, exchange_done_ = false;
  std::atomic<bool> gone_flag_{false};
};

// Posts every call to the session's I/O thread; the session stays alive while an Exchange does.
class SessionExchange final : public Exchange {
 public:
  explicit SessionExchange(std::shared_ptr<Session> s) : session_(std::move(s)) {}
  void respond(HttpResponse r) override {
    asio::post(session_->executor(), [s = session_, r = std::move(r)]() mutable { s->respond(std::move(r)); });
  }
  void begin_stream(HttpResponse head) override {
    asio::post(session_->executor(), [s = session_, h = std::move(head)]() mutable { s->begin_stream(std::move(h)); });
  }
  void stream(std::string bytes) override {
    asio::post(session_->executor(), [s = session_, b = std::move(bytes)]() mutable { s->stream(std::move(b)); });
  }
  void end_stream(Headers trailers) override {
    asio::post(session_->executor(), [s = session_, t = std::move(trailers)] { s->end_stream(t); });
  }
  bool gone() const override { return session_->gone(); }
  void on_gone(std::function<void()> f) override {
    asio::post(session_->executor(),
               [s = session_, f = std::move(f)]() mutable { s->add_gone_callback(std::move(f)); });
  }

 private:
  std::shared_ptr<Session> session_;
};

std::shared_ptr<Exchange> Session::make_exchange() { return std::make_shared<SessionExchange>(shared_from_this()); }

}  // namespace

void HttpServer::Impl::reject(tcp::socket socket) {
  ++counters.rejected_connection_cap;
  HttpResponse r;
  r.status = 503;
  r.headers = {{"Retry-After", "1"}};
  r.body = http_error_json("the server has " + std::to_string(limits.max_connections) +
                               " connections open, its limit (--max-connections); retry later",
                           "server_error", "too_many_connections");
  auto s = std::make_shared<tcp::socket>(std::move(socket));
  auto bytes = std::make_shared<std::string>(whole_response(r, false));
  asio::async_write(*s, asio::buffer(*bytes), [s, bytes](beast::error_code, std::size_t) {
    beast::error_code ignored;
    s->shutdown(tcp::socket::shutdown_both, ignored);
    s->close(ignored);
  });
}

void HttpServer::Impl::accept_next() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // stopped
    if (ec) {
      // Out of file descriptors (EMFILE) and the like: pause instead of spinning on accept.
      accept_pause.expires_after(std::chrono::milliseconds(50));
      accept_pause.async_wait([this](beast::error_code e) {
        if (!e) accept_next();
      });
      return;
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (open >= limits.max_connections) {
      reject(std::move(socket));
    } else {
      std::make_shared<Session>(*this, std::move(socket))->start();
    }
    accept_next();
  });
}

HttpServer::HttpServer(HttpLimits limits, std::vector<Route> routes,
                       std::function<void(const std::string&, int)> on_exchange_done)
    : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->routes = std::move(routes);
  impl_->on_done = std::move(on_exchange_done);
  impl_->workers.emplace(static_cast<std::size_t>(std::max(1, limits.workers)));
}

HttpServer::~HttpServer() {
  if (impl_->workers) impl_->workers->join();
}

int HttpServer::bind(const std::string& host, int port, std::string& error) {
  try {
    // A name ("localhost") resolves to its first address; a numeric address is taken as it is.
    tcp::resolver resolver(impl_->io);
    const tcp::endpoint endpoint =
        resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service).begin()->endpoint();
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
    return impl_->acceptor.local_endpoint().port();
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
}

void HttpServer::run() {
  impl_->signals.add(SIGINT);
  impl_->signals.add(SIGTERM);
  impl_->signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) stop();
  });
  impl_->accept_next();
  impl_->io.run();
  impl_->workers->join();
}

void HttpServer::stop() {
  asio::post(impl_->io, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->signals.cancel(ignored);
    impl->io.stop();
  });
}

const HttpCounters& HttpServer::counters() const { return impl_->counters; }

}  // namespace server
