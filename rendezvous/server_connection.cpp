// Per-connection reading, parsing and writing; see server_connection.hpp.
#include "rendezvous/server_connection.hpp"

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include "common/format_duration.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"

namespace ddp::rendezvous {

namespace asio = boost::asio;

namespace {
// Buffer capacity an idle connection may keep for its next replies; beyond it the buffer is freed.
constexpr std::size_t kKeptCapacity = 64 * 1024;
}  // namespace

ServerConnection::ServerConnection(TcpStoreServer& server, ClientId id, asio::ip::tcp::socket socket,
                                   const asio::ip::tcp::endpoint& peer)
    : server_(server),
      id_(id),
      socket_(std::move(socket)),
      peer_(peer),
      charge_(*server.budget_),
      deadline_(socket_.get_executor()) {
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
  arm_deadline(server_.options_.handshake_timeout);
  read_some();
}

void ServerConnection::arm_deadline(std::chrono::milliseconds after) {
  deadline_armed_ = true;
  const std::uint64_t generation = ++deadline_generation_;
  deadline_.expires_after(after);
  deadline_.async_wait([self = shared_from_this(), generation](const boost::system::error_code& ec) {
    if (ec || self->closed_ || generation != self->deadline_generation_) return;
    self->deadline_armed_ = false;
    self->server_.on_close(self->id_, self->deadline_reason());
  });
}

void ServerConnection::update_deadline() {
  if (closed_ || !handshaken_) return;  // the handshake deadline runs until the first request
  const bool owes = !parser_.idle() || writing_;
  if (owes == deadline_armed_) return;
  if (owes) return arm_deadline(server_.options_.request_timeout);
  deadline_armed_ = false;
  ++deadline_generation_;
}

std::string ServerConnection::deadline_reason() const {
  if (!handshaken_) return "no complete request within the handshake deadline";
  const std::string limit = format_seconds(server_.options_.request_timeout);
  if (!parser_.idle()) return "a request was started but not completed within the request deadline (" + limit + ")";
  return "replies were not read within the request deadline (" + limit + ", " + format_bytes(unsent()) + " unsent)";
}

void ServerConnection::read_some() {
  // Reads into the server's one buffer (the loop is one thread, and handle_input copies what it
  // keeps), so an idle connection holds no read buffer of its own.
  boost::system::error_code ec;
  const std::size_t n = socket_.read_some(asio::buffer(server_.read_buffer_), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) return wait_readable();
  if (ec == asio::error::eof) return server_.on_close(id_, "", true);
  if (ec) return server_.on_close(id_, ec.message());
  on_read(n);
}

void ServerConnection::wait_readable() {
  socket_.async_wait(asio::ip::tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (self->closed_) return;
    if (ec) return self->server_.on_close(self->id_, ec.message());
    self->read_some();
  });
}

void ServerConnection::on_read(std::size_t n) {
  auto self = shared_from_this();  // on_close below may drop the server's reference
  if (!handle_input(std::string_view(server_.read_buffer_.data(), n)) || paused_) return;
  // As Asio's own reads go: a short read emptied the socket, so the next bytes come with a
  // readiness event (one read() per request, no read() that finds nothing); after a full one,
  // another read in a later turn of the loop (one busy client neither starves the others nor
  // deepens the stack).
  if (n < server_.read_buffer_.size()) return wait_readable();
  asio::post(socket_.get_executor(), [self] {
    if (!self->closed_) self->read_some();
  });
}

bool ServerConnection::handle_input(std::string_view input) {
  std::vector<Outgoing>& outgoing = outgoing_;
  outgoing.clear();
  batching_ = true;
  try {
    while (unsent() <= server_.options_.max_unsent_bytes && parser_.parse(input, request_)) {
      charge_.buffer(0);  // the request's bytes are the state's now (handle checks their cost)
      if (!handshaken_) {
        handshaken_ = true;
        deadline_armed_ = false;
        ++deadline_generation_;
      }
      server_.handle(id_, std::move(request_), outgoing);
      server_.deliver(outgoing);
      outgoing.clear();
      if (closed_) return false;
    }
  } catch (const Error& e) {
    server_.deliver(outgoing);
    outgoing.clear();
    batching_ = false;
    flush();  // the replies before the bad request still go out, as they did one by one
    server_.on_close(id_, e.what());
    return false;
  }
  batching_ = false;
  // The last request's keys are not kept while the connection idles (a MULTI_GET's may be many).
  request_.keys.clear();
  request_.values.clear();
  if (!charge_.buffer(parser_.buffered_bytes(), server_.exempt(id_))) {
    flush();
    server_.on_close(id_, "a partial " + std::string(parser_.query()) + " request of " +
                              format_bytes(parser_.buffered_bytes()) + " would pass the store's memory budget (" +
                              server_.budget_->describe() + ")");
    return false;
  }
  // Over the cap: keep the rest of the input and stop reading until the replies drain (flush()
  // resumes). The parser holds any partial request itself, so only unparsed bytes wait here.
  paused_ = !input.empty();
  // assign() of nothing still costs a call per read; the common case only clears.
  if (paused_) {
    backlog_.assign(input);
  } else {
    backlog_.clear();
  }
  flush();
  return !closed_;
}

void ServerConnection::send(std::string_view bytes) {
  if (closed_) return;
  pending_.append(bytes);
  charge_.queued(bytes.size());
  if (!batching_) flush();
}

void ServerConnection::flush() {
  write_pending();
  update_deadline();
  server_.publish_memory_used();
  // Paused, but the kernel took every byte at once: no write completion will come to resume
  // reading, so resume from the loop (posted: flush may run inside handle_input).
  if (paused_ && !writing_ && !closed_ && !batching_) {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->resume(); });
  }
}

void ServerConnection::write_pending() {
  if (closed_ || writing_ || pending_.empty()) return;
  boost::system::error_code ec;
  const std::size_t n = socket_.write_some(asio::buffer(pending_), ec);
  if (ec && ec != asio::error::would_block) {
    auto self = shared_from_this();  // on_close drops the server's reference
    server_.on_close(id_, "write failed: " + ec.message());
    return;
  }
  const std::size_t sent = ec ? 0 : n;
  pending_.erase(0, sent);
  charge_.sent(sent);
  if (pending_.empty()) {
    // A large reply leaves a large buffer behind, which the budget no longer counts: free it.
    if (pending_.capacity() > kKeptCapacity) std::string().swap(pending_);
    return;
  }
  // The kernel's send buffer is full (a slow reader, a large value): finish asynchronously;
  // whatever is sent meanwhile collects in pending_ and follows.
  writing_ = true;
  in_flight_.swap(pending_);
  asio::async_write(socket_, asio::buffer(in_flight_),
                    [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
                      if (self->closed_) return;
                      if (wec) return self->server_.on_close(self->id_, "write failed: " + wec.message());
                      self->writing_ = false;
                      self->charge_.sent(self->in_flight_.size());
                      std::string().swap(self->in_flight_);  // freed, not kept (see write_pending)
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
  deadline_.cancel();
  charge_.release_all();
  // pending_ is freed now; in_flight_ only with the connection, as an aborted write may still
  // name its buffer until its handler has run.
  std::string().swap(pending_);
  std::string().swap(backlog_);
}

}  // namespace ddp::rendezvous
