// See status_server.hpp. One io_context on one thread: two acceptors (unix, TCP) and a session
// per connection, as Boost.Asio's http server example, with Beast's parser and a deadline per
// connection (basic_stream) instead of a hand-written parser.
#include "launcher/status/status_server.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/status/job_page_html.hpp"
#include "launcher/status/status_access.hpp"
#include "launcher/watch/probe/socket_path.hpp"

namespace ddp::launcher {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Local = asio::local::stream_protocol;

constexpr std::size_t kHeaderLimit = 8 * 1024;

// A connection still reading its request: the server may close it to make room for a new one.
class Unanswered {
 public:
  explicit Unanswered(std::string peer) : peer(std::move(peer)) {}
  virtual void evict() = 0;

  const std::string peer;  // its address ("" on the unix socket)

 protected:
  ~Unanswered() = default;
};

struct StatusServerState : std::enable_shared_from_this<StatusServerState> {
  StatusServerState(StatusServerOptions o, std::function<std::string()> s)
      : options(std::move(o)), status(std::move(s)), unix_acceptor(io), tcp_acceptor(io) {}

  template <class Acceptor>
  void accept(Acceptor& acceptor);
  // At the cap, closes the oldest connection still reading its request from the address that
  // has the most of those; false when every open connection is being answered (each within its
  // deadlines).
  bool make_room();

  StatusServerOptions options;
  std::function<std::string()> status;
  // Server thread only (sessions outlive the thread until io goes, so both are declared before it):
  int open = 0;                    // connections now
  std::list<Unanswered*> reading;  // those still reading their request, oldest first (each leaves it as it goes)
  asio::io_context io;
  Local::acceptor unix_acceptor;
  tcp::acceptor tcp_acceptor;
};

namespace {

// One connection: one request, one answer, then close; the request within header_timeout, the
// answer within request_timeout.
template <class Protocol>
class Session final : public Unanswered, public std::enable_shared_from_this<Session<Protocol>> {
 public:
  Session(StatusServerState& server, typename Protocol::socket socket, std::string peer)
      : Unanswered(std::move(peer)),
        server_(server),
        stream_(std::move(socket)),
        buffer_(kHeaderLimit),
        wait_timer_(server.io) {
    ++server_.open;
    parser_.header_limit(kHeaderLimit);
    parser_.body_limit(0);
  }
  ~Session() {
    stop_reading();
    if (counted_) --server_.open;
  }

  void start() {
    place_ = server_.reading.insert(server_.reading.end(), this);
    reading_ = true;
    stream_.expires_after(server_.options.header_timeout);
    http::async_read(stream_, buffer_, parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  // Closed unanswered to make room: the pending read ends (operation_aborted), and the session
  // with it. Its descriptor is free at once, so it no longer counts.
  void evict() override {
    stop_reading();
    counted_ = false;
    --server_.open;
    stream_.close();
  }

  // The agent's loop ran the probe (`alive`), or the wait for it ended.
  void health(bool alive) {
    if (answered_) return;
    wait_timer_.cancel();
    if (alive) return answer(http::status::ok, "text/plain", "ok\n");
    answer(
        http::status::service_unavailable, "text/plain",
        fmt::format("the launcher's event loop did not answer within {} ms\n", server_.options.health_timeout.count()));
  }

 private:
  void on_read(beast::error_code ec) {
    stop_reading();
    // A timeout, a closed or evicted connection: nothing to answer. Anything else is not HTTP we serve.
    if (ec == beast::error::timeout || ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || !stream_.socket().is_open())
      return;
    stream_.expires_after(server_.options.request_timeout);
    if (ec) return answer(http::status::bad_request, "text/plain", "bad request: " + ec.message() + "\n");
    const auto& request = parser_.get();
    const RequestTarget target = parse_target(std::string_view(request.target().data(), request.target().size()));
    const std::string& path = target.path;
    if (path != "/" && path != "/status" && path != "/stack" && path != "/healthz") {
      return answer(http::status::not_found, "text/plain", "not found; try GET /, GET /status or GET /healthz\n");
    }
    if (request.method() != http::verb::get) return answer(http::status::method_not_allowed, "text/plain", "use GET\n");
    if (path == "/healthz") return probe_agent();
    // The unix socket is this user's own (the run's directory is 0700).
    const auto authorization = request[http::field::authorization];
    if (!std::is_same_v<Protocol, Local> &&
        !has_token(server_.options.token, target, std::string_view(authorization.data(), authorization.size()))) {
      return answer(http::status::unauthorized, "text/plain",
                    "this status port needs the job page's token: open the URL the launcher printed with it "
                    "(\"status: http://HOST:PORT/?token=...\"), or send \"Authorization: Bearer TOKEN\"\n");
    }
    if (path == "/") return answer(http::status::ok, "text/html; charset=utf-8", std::string(job_page_html()));
    if (path == "/status") return answer(http::status::ok, "application/json", server_.status());
    take_stack(target);
  }

  // /stack?rank=R: answered when the stack comes (within stack_timeout).
  void take_stack(const RequestTarget& target) {
    const auto rank = target.query.find("rank");
    int r = -1;
    if (rank != target.query.end() && !rank->second.empty() && rank->second.size() < 9 &&
        rank->second.find_first_not_of("0123456789") == std::string::npos)
      r = std::stoi(rank->second);
    if (!server_.options.stack) return answer(http::status::not_found, "text/plain", "no stacks here\n");
    if (r < 0) return answer(http::status::bad_request, "text/plain", "give the rank: GET /stack?rank=R\n");
    stream_.expires_after(server_.options.stack_timeout);
    wait_timer_.expires_after(server_.options.stack_timeout);
    wait_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->answer(http::status::gateway_timeout, "text/plain", "no stack came in time\n");
    });
    std::weak_ptr<StatusServerState> server = server_.weak_from_this();
    std::weak_ptr<Session> session = this->shared_from_this();
    server_.options.stack(r, [server, session](int status, std::string text) {
      if (const auto s = server.lock()) {
        asio::post(s->io, [session, status, text = std::move(text)]() mutable {
          if (const auto alive = session.lock()) {
            alive->wait_timer_.cancel();
            alive->answer(static_cast<http::status>(status), "text/plain; charset=utf-8", std::move(text));
          }
        });
      }
    });
  }

  void probe_agent() {
    if (!server_.options.post_to_agent) return answer(http::status::ok, "text/plain", "ok\n");
    wait_timer_.expires_after(server_.options.health_timeout);
    wait_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (!ec) self->health(false);
    });
    // Only weak references cross to the agent's thread: a probe that runs after the server has
    // gone finds nothing, and the session is never destroyed there.
    std::weak_ptr<StatusServerState> server = server_.weak_from_this();
    std::weak_ptr<Session> session = this->shared_from_this();
    server_.options.post_to_agent([server, session] {
      if (const auto s = server.lock()) {
        asio::post(s->io, [session] {
          if (const auto alive = session.lock()) alive->health(true);
        });
      }
    });
  }

  void answer(http::status status, const char* type, std::string body) {
    if (answered_) return;
    answered_ = true;
    response_.version(11);
    response_.result(status);
    response_.set(http::field::content_type, type);
    response_.set(http::field::cache_control, "no-store");
    // The page loads nothing from elsewhere and may be framed by no other page; its URL (with the
    // token) is sent to no other site.
    response_.set("X-Content-Type-Options", "nosniff");
    response_.set("Referrer-Policy", "no-referrer");
    response_.set("Content-Security-Policy",
                  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                  "img-src data:; frame-ancestors 'none'");
    response_.keep_alive(false);
    response_.body() = std::move(body);
    response_.prepare_payload();
    http::async_write(stream_, response_, [self = this->shared_from_this()](beast::error_code, std::size_t) {
      beast::error_code ignored;  // the peer may be gone already: nothing more to do for it
      self->stream_.socket().shutdown(Protocol::socket::shutdown_send, ignored);
    });
  }

  void stop_reading() {
    if (reading_) server_.reading.erase(place_);
    reading_ = false;
  }

  StatusServerState& server_;
  beast::basic_stream<Protocol> stream_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  asio::steady_timer wait_timer_;  // the wait for the agent's probe or a stack (holds the session)
  bool answered_ = false;
  bool counted_ = true;   // in server_.open (until evicted)
  bool reading_ = false;  // in server_.reading, at place_
  std::list<Unanswered*>::iterator place_;
};

// Who a connection comes from, as make_room() counts them.
std::string peer_of(tcp::socket& socket) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  return ec ? std::string("?") : peer.address().to_string();  // gone already: it fails its first read
}
std::string peer_of(Local::socket&) {
  return "";  // this user's own processes (the run's directory is 0700)
}

// Where TCP listens: the resolved host, or for "" dual-stack IPv6 first, then IPv4 (as the
// store, rendezvous/tcp_store_server.cpp).
std::vector<tcp::endpoint> tcp_candidates(asio::io_context& io, const std::string& host, int port) {
  const auto p = static_cast<std::uint16_t>(port);
  if (host.empty()) return {tcp::endpoint(tcp::v6(), p), tcp::endpoint(tcp::v4(), p)};
  tcp::resolver resolver(io);
  beast::error_code ec;
  const auto results = resolver.resolve(rendezvous::unbracket_host(host), std::to_string(port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  std::vector<tcp::endpoint> out;
  if (!ec) {
    for (const auto& r : results) out.push_back(r.endpoint());
  }
  if (out.empty()) {
    throw UsageError(
        fmt::format("--status_port: cannot resolve the address {} ({}); give --local_addr an address "
                    "of this machine",
                    host, ec ? ec.message() : "no address"));
  }
  return out;
}

int bind_tcp(tcp::acceptor& acceptor, asio::io_context& io, const std::string& host, int port) {
  beast::error_code ec;
  for (const auto& ep : tcp_candidates(io, host, port)) {
    ec = {};
    acceptor.open(ep.protocol(), ec);
    if (!ec && ep.protocol() == tcp::v6()) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return acceptor.local_endpoint().port();
    beast::error_code ignored;  // closing a socket that failed to bind: nothing to report
    acceptor.close(ignored);
  }
  throw UsageError(fmt::format(
      "--status_port={}: cannot listen on {}: {}; choose another port (0: a free one)", port,
      rendezvous::format_endpoint(host.empty() ? "::" : host, static_cast<std::uint16_t>(port)), ec.message()));
}

void bind_unix(Local::acceptor& acceptor, const std::string& path) {
  const SocketPath reachable(path);
  if (reachable.usable().empty()) throw Error("status socket: " + reachable.error());
  beast::error_code ec;
  acceptor.open(Local(), ec);
  if (!ec) acceptor.bind(Local::endpoint(reachable.usable()), ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error(fmt::format("cannot make the status socket {}: {}", path, ec.message()));
}

}  // namespace

template <class Acceptor>
void StatusServerState::accept(Acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](beast::error_code ec, typename Acceptor::protocol_type::socket socket) {
    if (ec == asio::error::operation_aborted) return;  // the server stops
    // At the cap, the new connection takes the place of one still silent or slow, from the
    // address that holds the most (a probe sends its request at once, so a stranger's crowd of
    // connections goes before it); only when all are being answered is it closed (the socket's
    // destructor), and those end within their deadlines.
    if (!ec && (open < options.max_connections || make_room())) {
      std::string peer = peer_of(socket);
      std::make_shared<Session<typename Acceptor::protocol_type>>(*this, std::move(socket), std::move(peer))->start();
    }
    // Another error (out of descriptors, say) concerns this connection only: keep accepting.
    accept(acceptor);
  });
}

bool StatusServerState::make_room() {
  if (reading.empty()) return false;
  std::map<std::string_view, int> per_peer;  // at most max_connections entries
  for (const Unanswered* c : reading) ++per_peer[c->peer];
  const auto crowd = std::max_element(per_peer.begin(), per_peer.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
  const auto oldest =
      std::find_if(reading.begin(), reading.end(), [&](const Unanswered* c) { return c->peer == crowd->first; });
  (*oldest)->evict();  // it leaves `reading`
  return true;
}

StatusServer::StatusServer(StatusServerOptions options, std::function<std::string()> status)
    : impl_(std::make_shared<StatusServerState>(std::move(options), std::move(status))) {
  StatusServerState& s = *impl_;
  if (s.options.tcp_port) tcp_port_ = bind_tcp(s.tcp_acceptor, s.io, s.options.tcp_host, *s.options.tcp_port);
  if (!s.options.socket_path.empty()) bind_unix(s.unix_acceptor, s.options.socket_path);
  if (s.unix_acceptor.is_open()) s.accept(s.unix_acceptor);
  if (s.tcp_acceptor.is_open()) s.accept(s.tcp_acceptor);
  if (s.options.start_on_dial) {
    std::vector<int> listening;
    if (s.unix_acceptor.is_open()) listening.push_back(s.unix_acceptor.native_handle());
    if (s.tcp_acceptor.is_open()) listening.push_back(s.tcp_acceptor.native_handle());
    // The watch goes first in the destructor, so `this` is alive whenever it calls back.
    dial_watch_ = DialWatch::start(*s.options.start_on_dial, listening, [this] { start_thread(); });
    if (dial_watch_) return;
  }
  start_thread();
}

void StatusServer::start_thread() {
  if (!thread_.joinable()) thread_ = std::thread([state = impl_.get()] { state->io.run(); });
}

StatusServer::~StatusServer() {
  dial_watch_.reset();
  impl_->io.stop();
  if (thread_.joinable()) thread_.join();
  if (!impl_->options.socket_path.empty() && impl_->unix_acceptor.is_open()) {
    ::unlink(impl_->options.socket_path.c_str());  // gone already (removed by hand): as good
  }
}

}  // namespace ddp::launcher
