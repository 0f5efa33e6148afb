// The loopback floor server; see floor_server.hpp.
#include "bench/floor_server.hpp"

#include <array>

#include <boost/asio/write.hpp>

namespace ddp::bench {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct FloorServer::Peer {
  explicit Peer(tcp::socket s) : socket(std::move(s)) {}
  tcp::socket socket;
  std::array<char, 4096> buffer{};
  std::size_t partial = 0;      // echo: bytes of an incomplete request
  std::shared_ptr<Peer> other;  // relay: the paired connection
  std::uint64_t received = 0;   // ping-pong: bytes read so far
  bool first = false;           // ping-pong: the first of its pair (starts with a SET)
};

FloorServer::FloorServer(asio::io_context& io, FloorServerOptions options)
    : options_(options), acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), zeros_(64 * 1024) {
  accept_next();
}

void FloorServer::accept_next() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      boost::system::error_code ignored;  // latency only, as in the store servers
      socket.set_option(tcp::no_delay(true), ignored);
      socket.non_blocking(true, ignored);
      auto peer = std::make_shared<Peer>(std::move(socket));
      if (!options_.relay) {
        read(peer);
      } else if (!unpaired_) {
        unpaired_ = peer;
      } else {
        peer->other = unpaired_;
        unpaired_->other = peer;
        unpaired_->first = true;
        read(unpaired_);
        read(peer);
        unpaired_.reset();
      }
    }
    accept_next();
  });
}

void FloorServer::read(const std::shared_ptr<Peer>& peer) {
  peer->socket.async_read_some(asio::buffer(peer->buffer),
                               [this, peer](const boost::system::error_code& ec, std::size_t n) {
                                 if (ec) {
                                   // The client went away (end of a run): drop the pair.
                                   if (peer->other) peer->other->other.reset();
                                   peer->other.reset();
                                   return;
                                 }
                                 const char* data = peer->buffer.data();
                                 tcp::socket* target = &peer->socket;
                                 if (options_.relay) {
                                   if (!peer->other) return;
                                   target = &peer->other->socket;
                                   if (const std::size_t m = options_.message_bytes; m > 0) {
                                     // One byte to the partner per SET completed in this read.
                                     const std::uint64_t before = peer->received / m;
                                     peer->received += n;
                                     std::size_t sets = 0;
                                     for (std::uint64_t k = before + 1; k <= peer->received / m; ++k) {
                                       sets += (k % 2 == 1) == peer->first ? 1 : 0;
                                     }
                                     n = std::min(sets, zeros_.size());
                                     data = zeros_.data();
                                   }
                                 } else {
                                   const std::size_t total = peer->partial + n;
                                   const std::size_t replies = total / options_.request_bytes;
                                   peer->partial = total % options_.request_bytes;
                                   n = std::min(replies * options_.reply_bytes, zeros_.size());
                                   data = zeros_.data();
                                 }
                                 // Like the load generator: one direct write, the event loop only for a short one.
                                 boost::system::error_code wec;
                                 const std::size_t sent = n == 0 ? 0 : target->write_some(asio::buffer(data, n), wec);
                                 if (wec && wec != asio::error::would_block) return;
                                 const std::size_t done = wec ? 0 : sent;
                                 if (done == n) return read(peer);
                                 asio::async_write(*target, asio::buffer(data + done, n - done),
                                                   [this, peer](const boost::system::error_code& e, std::size_t) {
                                                     if (!e) read(peer);
                                                   });
                               });
}

}  // namespace ddp::bench
