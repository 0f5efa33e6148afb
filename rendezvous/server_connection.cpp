// Per-connection reading, parsing and writing; see server_connection.hpp.
#include "rendezvous/server_connection.hpp"

#include <boost/asio/write.hpp>

#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

namespace ddp::rendezvous {

namespace asio = boost::asio;

ServerConnection::ServerConnection(TcpStoreServer& server, ClientId id, asio::ip::tcp::socket socket,
                                   const asio::ip::tcp::endpoint& peer)
    : server_(server), id_(id), socket_(std::move(socket)), peer_(peer), handshake_timer_(socket_.get_executor()) {
  boost::system::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);  // latency only; failure is harmless
  // Writes go straight to the socket (flush); Asio would set this for its own operations anyway.
  socket_.non_blocking(true, ec);
  if (ec) closed_ = true;  // not usable; start() hands it back to the server to forget
}

std::string ServerConnection::peer() const {
  return format_endpoint(peer_.address().to_string(), peer_.port());
}

void ServerConnection::start() {
  if (closed_) return server_.on_close(id_, "cannot make the socket non-blocking");
  handshake_timer_.expires_after(server_.options_.handshake_timeout);
  handshake_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    self->server_.on_close(self->id_, "no complete request within the handshake deadline");
  });
  read_some();
}

void ServerConnection::read_some() {
  socket_.async_read_some(asio::buffer(buffer_),
                          [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                            if (self->closed_) return;
                            if (ec == asio::error::eof) return self->server_.on_close(self->id_, "", true);
                            if (ec) return self->server_.on_close(self->id_, ec.message());
                            self->on_read(n);
                          });
}

void ServerConnection::on_read(std::size_t n) {
  auto self = shared_from_this();  // on_close below may drop the server's reference
  if (handle_input(std::string_view(buffer_.data(), n)) && !paused_) read_some();
}

bool ServerConnection::handle_input(std::string_view input) {
  std::vector<Outgoing> outgoing;
  batching_ = true;
  try {
    Request request;
    while (unsent() <= server_.options_.max_unsent_bytes && parser_.parse(input, request)) {
      if (!handshaken_) {
        handshaken_ = true;
        handshake_timer_.cancel();
      }
      server_.handle(*this, std::move(request), outgoing);
      server_.deliver(outgoing);
      outgoing.clear();
      if (closed_) return false;
    }
  } catch (const Error& e) {
    server_.deliver(outgoing);
    batching_ = false;
    flush();  // the replies before the bad request still go out, as they did one by one
    server_.on_close(id_, e.what());
    return false;
  }
  batching_ = false;
  // Over the cap: keep the rest of the input and stop reading until the replies drain (flush()
  // resumes). The parser holds any partial request itself, so only unparsed bytes wait here.
  paused_ = !input.empty();
  backlog_.assign(input);
  flush();
  return !closed_;
}

void ServerConnection::send(std::string_view bytes) {
  if (closed_) return;
  pending_.append(bytes);
  if (!batching_) flush();
}

void ServerConnection::flush() {
  if (closed_ || writing_ || pending_.empty()) return;
  boost::system::error_code ec;
  const std::size_t n = socket_.write_some(asio::buffer(pending_), ec);
  if (ec && ec != asio::error::would_block) {
    auto self = shared_from_this();  // on_close drops the server's reference
    server_.on_close(id_, "write failed: " + ec.message());
    return;
  }
  pending_.erase(0, ec ? 0 : n);
  if (pending_.empty()) return;
  // The kernel's send buffer is full (a slow reader, a large value): finish asynchronously;
  // whatever is sent meanwhile collects in pending_ and follows.
  writing_ = true;
  in_flight_.swap(pending_);
  asio::async_write(socket_, asio::buffer(in_flight_),
                    [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
                      if (self->closed_) return;
                      if (wec) return self->server_.on_close(self->id_, "write failed: " + wec.message());
                      self->writing_ = false;
                      self->in_flight_.clear();
                      self->flush();
                      self->resume();
                    });
}

void ServerConnection::resume() {
  if (closed_ || !paused_ || unsent() > server_.options_.max_unsent_bytes) return;
  const std::string input = std::exchange(backlog_, {});
  paused_ = false;
  if (handle_input(input) && !paused_) read_some();
}

void ServerConnection::close(bool peer_closed) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;  // the peer may already be gone; nothing left to report
  // After the peer's EOF close() alone sends our FIN; shutdown() would be one more system call.
  if (!peer_closed) socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  handshake_timer_.cancel();
}

}  // namespace ddp::rendezvous
